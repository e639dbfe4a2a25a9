// The Run dialog's Cluster target: beside "This machine" and the ssh hosts, kept in the
// settings as host-file text, turned into `run --hosts FILE` by the controller, and "Copy
// launch command" puts the torchrun / Slurm commands of the same run on the clipboard.
#include <QApplication>
#include <QClipboard>
#include <QComboBox>
#include <QPushButton>
#include <QSettings>
#include <QTemporaryDir>
#include <QtTest>

#include "pipestudio/core/io/cluster.h"
#include "remote/run_dialog.h"

using namespace ps::ui;

class RunDialogClusterTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void clusterTargetIsKeptAndRunsWithHosts() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    QSettings s(dir.filePath(QStringLiteral("s.ini")), QSettings::IniFormat);
    auto hosts = ps::core::parseHostFile(
        "gpu1 ranks=2 key=/keys/id\nalice@gpu2:2222 ranks=2 cli=\"/opt/ps tools/pipestudio-cli\"\n", "h");
    QVERIFY(hosts);
    {
      RunDialog d(nullptr, &s);
      auto* target = d.findChild<QComboBox*>(QStringLiteral("target"));
      QVERIFY(target);
      QCOMPARE(target->count(), 2);  // this machine, cluster (empty)
      QVERIFY(!d.copyLaunchButton()->isEnabled());
      d.addHost(RemoteHost{
          QStringLiteral("one"), QStringLiteral("h1"), {}, 22, {}, QStringLiteral("pipestudio-cli"), {}});
      d.setSchedule(QStringLiteral("four"), QStringLiteral("devices 4\n"), 4);
      d.setCluster(*hosts);
      QCOMPARE(target->count(), 3);
      QCOMPARE(target->currentIndex(), d.clusterTargetIndex());
      QCOMPARE(target->currentText(), QStringLiteral("Cluster (2 hosts, 4 ranks)"));
      QVERIFY(d.copyLaunchButton()->isEnabled());
      const RunRequest r = d.request();
      QCOMPARE(r.cluster.size(), size_t(2));
      QVERIFY(!r.remote);
      QCOMPARE(r.processes, 1);
      QVERIFY2(d.commandPreview().contains(QStringLiteral(" --hosts ")), qPrintable(d.commandPreview()));
      QVERIFY(!d.commandPreview().contains(QStringLiteral("--nproc")));

      const QString torchrun = d.copyLaunchCommand(ps::core::LaunchKind::Torchrun);
      QCOMPARE(QApplication::clipboard()->text(), torchrun);
      QVERIFY2(torchrun.contains(
                   QStringLiteral("torchrun --nnodes 2 --nproc_per_node 2 --node_rank 1 --master_addr gpu1 "
                                  "--master_port 29500 --no_python '/opt/ps tools/pipestudio-cli' run "
                                  "/tmp/pipestudio-run/schedule.pipe --model")),
               qPrintable(torchrun));
      const QString slurm = d.copyLaunchCommand(ps::core::LaunchKind::Slurm);
      QVERIFY(slurm.contains(QStringLiteral("#SBATCH --nodes=2")));
      QCOMPARE(QApplication::clipboard()->text(), slurm);
      d.close();  // saves the choices
    }
    // A new dialog finds the cluster and the choice of it.
    RunDialog d2(nullptr, &s);
    QCOMPARE(d2.cluster().size(), size_t(2));
    QCOMPARE(d2.cluster()[1].cli, std::string("/opt/ps tools/pipestudio-cli"));
    QCOMPARE(d2.cluster()[1].port, 2222);
    QVERIFY(!d2.request().cluster.empty());

    // Selecting "This machine" runs locally again.
    auto* target = d2.findChild<QComboBox*>(QStringLiteral("target"));
    target->setCurrentIndex(0);
    QVERIFY(d2.request().cluster.empty());
    QVERIFY(!d2.copyLaunchButton()->isEnabled());
    QVERIFY(d2.copyLaunchCommand(ps::core::LaunchKind::Torchrun).isEmpty());
  }
};

QTEST_MAIN(RunDialogClusterTest)
#include "run_dialog_cluster_test.moc"
