// The Run dialog's Cluster target: beside "This machine" and the ssh hosts, kept in the
// settings as host-file text, turned into `run --hosts FILE` by the controller, and "Copy
// launch command" puts the torchrun / Slurm commands of the same run on the clipboard.
#include <QApplication>
#include <QClipboard>
#include <QComboBox>
#include <QDialog>
#include <QDialogButtonBox>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSettings>
#include <QTemporaryDir>
#include <QTimer>
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

  // A saved list that does not parse (edited by hand, another version) is neither dropped nor
  // overwritten: the entry says so, its errors are in the tooltip, Edit… opens on the saved text.
  void unreadableSavedClusterIsKeptAndOfferedForEditing() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    QSettings s(dir.filePath(QStringLiteral("s.ini")), QSettings::IniFormat);
    const QString saved = QStringLiteral("gpu1 ranks=two\ngpu2 ranks=2\n");
    s.setValue(QStringLiteral("runCluster/hosts"), saved);
    {
      RunDialog d(nullptr, &s);
      auto* target = d.findChild<QComboBox*>(QStringLiteral("target"));
      QVERIFY(target);
      const int cluster = d.clusterTargetIndex();
      QCOMPARE(target->itemText(cluster), QStringLiteral("Cluster (saved list unreadable: Edit… to fix)"));
      const QString tip = target->itemData(cluster, Qt::ToolTipRole).toString();
      QVERIFY2(tip.contains(QStringLiteral("line 1, column")), qPrintable(tip));
      QVERIFY(d.cluster().empty());
      target->setCurrentIndex(cluster);
      // Edit… opens on the saved text with its errors shown; Cancel keeps it.
      QString shown, errors;
      QTimer::singleShot(0, [&] {
        auto* dlg = qobject_cast<QDialog*>(QApplication::activeModalWidget());
        if (!dlg) return;
        if (auto* e = dlg->findChild<QPlainTextEdit*>(QStringLiteral("clusterHosts")))
          shown = e->toPlainText();
        if (auto* l = dlg->findChild<QLabel*>(QStringLiteral("clusterHostErrors"))) errors = l->text();
        dlg->reject();
      });
      QPushButton* edit = nullptr;
      for (auto* b : d.findChildren<QPushButton*>())
        if (b->text() == QStringLiteral("&Edit…")) edit = b;
      QVERIFY(edit);
      QVERIFY(edit->isEnabled());
      edit->click();
      QCOMPARE(shown, saved);
      QVERIFY2(errors.startsWith(QStringLiteral("line 1, column")), qPrintable(errors));
      d.close();  // saves the choices
    }
    QCOMPARE(s.value(QStringLiteral("runCluster/hosts")).toString(), saved);
    // Saving a list replaces it.
    RunDialog d2(nullptr, &s);
    auto hosts = ps::core::parseHostFile("gpu1 ranks=2\n", "h");
    QVERIFY(hosts);
    d2.setCluster(*hosts);
    auto* target = d2.findChild<QComboBox*>(QStringLiteral("target"));
    QCOMPARE(target->currentText(), QStringLiteral("Cluster (1 hosts, 2 ranks)"));
    QCOMPARE(s.value(QStringLiteral("runCluster/hosts")).toString().trimmed(),
             QStringLiteral("gpu1 ranks=2"));
  }
};

QTEST_MAIN(RunDialogClusterTest)
#include "run_dialog_cluster_test.moc"
