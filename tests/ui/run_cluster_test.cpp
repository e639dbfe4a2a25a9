// Cluster runs (`run --hosts`, the Run dialog's Cluster target) for real: two OpenSSH servers
// on 127.0.0.1 and 127.0.0.2 (LoopbackSshd, throw-away keys) stand for two hosts of two ranks
// each; the ranks meet through c10d Gloo. A 2 x 2 run with the gradient check, a cancel from
// the GUI that ends every rank, one host's ranks killed mid-run and one host's sshd stopped
// before the run (both fail fast, name the host, leave no rank and record the failed run), and
// the --print-launch commands. Skips the ssh parts where sshd cannot start here.
#include <signal.h>
#include <unistd.h>

#include <QFile>
#include <QProcess>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include "../fixtures/torchrun_shim.h"
#include "loopback_sshd.h"
#include "pipestudio/core/io/cluster.h"
#include "pipestudio/core/io/run_events.h"
#include "pipestudio/sessions/session_store.h"
#include "remote/run_controller.h"
#include "remote/run_dialog.h"
#include "run_test_util.h"
#include "skip_in_ci.h"

using namespace ps::ui;
using namespace runtest;
namespace sessions = ps::sessions;

namespace {

// Four devices, GPipe order: every device's forwards, then its backwards.
const char* kFourPipe =
    "name \"four\"\n"
    "devices 4\n"
    "stages 4\n"
    "microbatches 2\n"
    "placement linear\n"
    "device 0: F0 F1 B0 B1\n"
    "device 1: F0 F1 B0 B1\n"
    "device 2: F0 F1 B0 B1\n"
    "device 3: F0 F1 B0 B1\n";

const char* kModel = "gpt:layers=4,hidden=16,heads=2,seq=4,vocab=16";

struct CliResult {
  int exitCode = -1;
  bool finished = false;
  QByteArray out, err;
  qint64 ms = 0;
};

// Processes whose environment has RANK=<rank> among those with `needles` in their command line.
QList<qint64> rankProcesses(const QStringList& needles, const QSet<int>& ranks) {
  QList<qint64> out;
  for (qint64 pid : processesWith(needles)) {
    QFile env(QStringLiteral("/proc/%1/environ").arg(pid));
    if (!env.open(QIODevice::ReadOnly)) continue;
    for (const QByteArray& kv : env.readAll().split('\0'))
      if (kv.startsWith("RANK=") && ranks.contains(kv.mid(5).toInt())) out << pid;
  }
  return out;
}

// The remote rank processes (children of sshd), not the local ssh clients or the launcher.
QList<qint64> remoteRanks(const QStringList& needles) {
  return rankProcesses(needles, {0, 1, 2, 3});
}

}  // namespace

class RunClusterTest : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir dir_;
  LoopbackSshd a_, b_;
  QString skipReason_;

  QString path(const QString& name) const { return dir_.filePath(name); }

  std::vector<ps::core::ClusterHost> hosts() const {
    std::vector<ps::core::ClusterHost> out;
    for (const LoopbackSshd* s : {&a_, &b_}) {
      ps::core::ClusterHost h;
      h.host = s->address().toStdString();
      h.user = LoopbackSshd::userName().toStdString();
      h.port = s->port() > 0 ? s->port() : 22;  // no sshd: only the printed commands use it
      h.ranks = 2;
      h.key = s->userKey().toStdString();
      h.cli = PIPESTUDIO_CLI;
      for (const QString& o : s->sshOptions()) h.sshOptions.push_back(o.toStdString());
      out.push_back(h);
    }
    return out;
  }

  QString writeFiles() {
    QFile h(path(QStringLiteral("hosts.txt")));
    if (!h.open(QIODevice::WriteOnly | QIODevice::Truncate)) qFatal("cannot write hosts.txt");
    h.write("# two loopback hosts, two ranks each\n");
    h.write(QByteArray::fromStdString(ps::core::formatHostFile(hosts())));
    h.close();
    QFile s(path(QStringLiteral("four.pipe")));
    if (!s.open(QIODevice::WriteOnly | QIODevice::Truncate)) qFatal("cannot write four.pipe");
    s.write(kFourPipe);
    return path(QStringLiteral("hosts.txt"));
  }

  QStringList runArgs(const QStringList& extra, const QString& model = QLatin1String(kModel)) {
    const QString hostsFile = writeFiles();
    return QStringList{QStringLiteral("run"),
                       path(QStringLiteral("four.pipe")),
                       QStringLiteral("--hosts"),
                       hostsFile,
                       QStringLiteral("--model"),
                       model,
                       QStringLiteral("--threads"),
                       QStringLiteral("1"),
                       QStringLiteral("--connect-timeout"),
                       QStringLiteral("10"),
                       QStringLiteral("--timeout"),
                       QStringLiteral("20")} +
           extra;
  }

  static CliResult cli(const QStringList& args, int timeoutMs) {
    CliResult r;
    QProcess p;
    QElapsedTimer t;
    t.start();
    p.start(QStringLiteral(PIPESTUDIO_CLI), args);
    r.finished = p.waitForFinished(timeoutMs);
    if (!r.finished) {
      p.kill();
      p.waitForFinished(3000);
    }
    r.ms = t.elapsed();
    r.exitCode = p.exitCode();
    r.out = p.readAllStandardOutput();
    r.err = p.readAllStandardError();
    return r;
  }

  RunRequest clusterRequest() const {
    RunRequest r =
        modelRequest(QStringLiteral("gpt"), QStringLiteral("layers=4,hidden=16,heads=2,seq=4,vocab=16"),
                     {.iterations = 1, .timeoutSeconds = 20});
    r.cluster = hosts();
    r.localCli = QStringLiteral(PIPESTUDIO_CLI);
    r.connectTimeoutSeconds = 10;
    return r;
  }

  static std::optional<sessions::RunSummary> measuredRun(const QString& session) {
    auto store = sessions::SessionStore::open(session.toStdString());
    if (!store) return std::nullopt;
    auto runs = store->listRuns();
    if (!runs) return std::nullopt;
    for (const auto& r : *runs)
      if (r.target == "gloo") return r;
    return std::nullopt;
  }

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    QString why;
    if (!a_.start(dir_.path(), QStringLiteral("127.0.0.1"), why) ||
        !b_.start(dir_.path(), QStringLiteral("127.0.0.2"), why))
      skipReason_ = why;
    if (!skipReason_.isEmpty()) qWarning("loopback sshd unavailable: %s", qPrintable(skipReason_));
  }

  void cleanupTestCase() {
    a_.stop();
    b_.stop();
  }

  void printLaunchGivesTorchrunAndSlurmCommands() {
    // No ssh needed: the commands are printed, not run.
    CliResult r = cli(runArgs({QStringLiteral("--check-gradients"), QStringLiteral("--print-launch"),
                               QStringLiteral("torchrun")}),
                      60000);
    QVERIFY2(r.finished && r.exitCode == 0, r.err.constData());
    const QString text = QString::fromUtf8(r.out);
    QVERIFY2(text.contains(QStringLiteral("/tmp/pipestudio-run/four.pipe on every host")), qPrintable(text));
    QStringList commands;
    for (const QString& line : text.split(QLatin1Char('\n')))
      if (line.startsWith(QStringLiteral("torchrun "))) commands << line;
    QCOMPARE(commands.size(), 3);  // static rendezvous per node, then the c10d one
    auto flag = [](const QStringList& words, const QString& name) {
      const qsizetype i = words.indexOf(name);
      return i >= 0 && i + 1 < words.size() ? words[i + 1] : QString();
    };
    for (int node = 0; node < 3; ++node) {
      const QStringList w = commands[node].split(QLatin1Char(' '), Qt::SkipEmptyParts);
      QCOMPARE(flag(w, QStringLiteral("--nnodes")), QStringLiteral("2"));
      QCOMPARE(flag(w, QStringLiteral("--nproc_per_node")), QStringLiteral("2"));
      // --no_python: the rest is the program and its arguments, as the ranks get them.
      const qsizetype np = w.indexOf(QStringLiteral("--no_python"));
      QVERIFY(np > 0);
      QCOMPARE(w.mid(np + 1, 3), (QStringList{QStringLiteral(PIPESTUDIO_CLI), QStringLiteral("run"),
                                              QStringLiteral("/tmp/pipestudio-run/four.pipe")}));
      QCOMPARE(flag(w, QStringLiteral("--model")), QLatin1String(kModel));
      QVERIFY(w.contains(QStringLiteral("--check-gradients")));
      QVERIFY(!w.contains(QStringLiteral("--hosts")) && !w.contains(QStringLiteral("--print-launch")));
      if (node < 2) {
        QCOMPARE(flag(w, QStringLiteral("--node_rank")), QString::number(node));
        QCOMPARE(flag(w, QStringLiteral("--master_addr")), QStringLiteral("127.0.0.1"));
        bool ok = false;
        QVERIFY(flag(w, QStringLiteral("--master_port")).toInt(&ok) > 0 && ok);
      } else {
        QCOMPARE(flag(w, QStringLiteral("--rdzv_backend")), QStringLiteral("c10d"));
        QVERIFY(QRegularExpression(QStringLiteral("^127\\.0\\.0\\.1:\\d+$"))
                    .match(flag(w, QStringLiteral("--rdzv_endpoint")))
                    .hasMatch());
      }
    }

    r = cli(runArgs({QStringLiteral("--print-launch"), QStringLiteral("slurm")}), 60000);
    QVERIFY2(r.finished && r.exitCode == 0, r.err.constData());
    const QString slurm = QString::fromUtf8(r.out);
    QVERIFY2(slurm.contains(QStringLiteral("#SBATCH --nodes=2\n")), qPrintable(slurm));
    QVERIFY(slurm.contains(QStringLiteral("#SBATCH --ntasks-per-node=2\n")));
    QVERIFY(slurm.contains(QStringLiteral("#SBATCH --nodelist=127.0.0.1,127.0.0.2\n")));
    QVERIFY(
        QRegularExpression(QStringLiteral("^export MASTER_PORT=\\d+$"), QRegularExpression::MultilineOption)
            .match(slurm)
            .hasMatch());
    QVERIFY(slurm.contains(QStringLiteral("srun --kill-on-bad-exit=1 ") + QStringLiteral(PIPESTUDIO_CLI) +
                           QStringLiteral(" run /tmp/pipestudio-run/four.pipe")));
    QVERIFY(slurm.contains(QStringLiteral("srun --nodes=2 --ntasks-per-node=2 ")));

    // The GUI's "Copy launch command" prints the same kind of text from the same function.
    RunRequest req = clusterRequest();
    const QString gui = clusterLaunchCommands(req, ps::core::LaunchKind::Torchrun);
    QVERIFY2(gui.contains(QStringLiteral(
                 "torchrun --nnodes 2 --nproc_per_node 2 --node_rank 1 --master_addr 127.0.0.1")),
             qPrintable(gui));
    QVERIFY(!gui.contains(QStringLiteral("--events")) && !gui.contains(QStringLiteral("--cancel-on-eof")));
  }

  void printedTorchrunCommandsRunUnderTorchrun() {
    // The static-rendezvous commands, one per "node", run as printed by the real torchrun
    // (both nodes on this machine): its agent hosts the store, the ranks join it.
    const QString torchrun = QStandardPaths::findExecutable(QStringLiteral("torchrun"));
    if (torchrun.isEmpty()) PS_SKIP_UNLESS_CI(QStringLiteral("torchrun is not installed"));
    QFile script(torchrun);
    QVERIFY(script.open(QIODevice::ReadOnly));
    const QByteArray shebang = script.readLine().trimmed();
    if (!shebang.startsWith("#!")) PS_SKIP_UNLESS_CI(QStringLiteral("torchrun is not a Python script"));
    // The wrapper of tests/fixtures/torchrun_shim.h, with torchrun's own interpreter.
    const QString shimDir = path(QStringLiteral("torchrun-shim"));
    QDir().mkpath(shimDir);
    QFile shim(QDir(shimDir).filePath(QStringLiteral("torchrun")));
    QVERIFY(shim.open(QIODevice::WriteOnly | QIODevice::Truncate));
    shim.write(shebang + "\n" + ps::test::kTorchrunShimBody);
    shim.close();
    shim.setPermissions(QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ExeOwner);

    // A schedule of its own name: the commands expect it at /tmp/pipestudio-run/NAME.
    const QString name = QStringLiteral("four-%1.pipe").arg(::getpid());
    writeFiles();
    QFile::remove(path(name));
    QVERIFY(QFile::copy(path(QStringLiteral("four.pipe")), path(name)));
    QProcess portProc;
    portProc.start(QStringLiteral(PIPESTUDIO_CLI), {QStringLiteral("free-port")});
    QVERIFY(portProc.waitForFinished(10000));
    const QString port = QString::fromUtf8(portProc.readAllStandardOutput()).trimmed();
    QVERIFY(port.toInt() > 0);
    QProcess print;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("MASTER_PORT"), port);
    print.setProcessEnvironment(env);
    print.start(
        QStringLiteral(PIPESTUDIO_CLI),
        {QStringLiteral("run"), path(name), QStringLiteral("--hosts"), path(QStringLiteral("hosts.txt")),
         QStringLiteral("--model"), QLatin1String(kModel), QStringLiteral("--threads"), QStringLiteral("1"),
         QStringLiteral("--check-gradients"), QStringLiteral("--print-launch"), QStringLiteral("torchrun")});
    QVERIFY(print.waitForFinished(30000));
    QCOMPARE(print.exitCode(), 0);
    QStringList nodes;
    for (const QString& line : QString::fromUtf8(print.readAllStandardOutput()).split(QLatin1Char('\n')))
      if (line.startsWith(QStringLiteral("torchrun ")) && line.contains(QStringLiteral("--node_rank")))
        nodes << line;
    QCOMPARE(nodes.size(), 2);
    QVERIFY(nodes[0].contains(QStringLiteral("--master_port %1 ").arg(port)));
    const QString staged = QStringLiteral("/tmp/pipestudio-run/") + name;
    QDir().mkpath(QStringLiteral("/tmp/pipestudio-run"));
    QFile::remove(staged);
    QVERIFY(QFile::copy(path(name), staged));
    env.remove(QStringLiteral("MASTER_PORT"));
    env.insert(QStringLiteral("PATH"), shimDir + QLatin1Char(':') + env.value(QStringLiteral("PATH")));
    std::vector<std::unique_ptr<QProcess>> procs;
    for (const QString& line : nodes) {
      procs.push_back(std::make_unique<QProcess>());
      procs.back()->setProcessEnvironment(env);
      procs.back()->start(QStringLiteral("sh"), {QStringLiteral("-c"), line});
    }
    bool ok = true;
    for (auto& p : procs) ok = p->waitForFinished(60000) && ok;
    for (auto& p : procs)
      if (p->state() != QProcess::NotRunning) {
        p->kill();
        p->waitForFinished(3000);
      }
    QFile::remove(staged);
    QDir().rmdir(QStringLiteral("/tmp/pipestudio-run"));  // only when nothing else is in it
    QVERIFY(ok);
    const QString out0 = QString::fromUtf8(procs[0]->readAllStandardOutput());
    const QString err0 = QString::fromUtf8(procs[0]->readAllStandardError());
    QVERIFY2(procs[0]->exitCode() == 0 && procs[1]->exitCode() == 0,
             qPrintable(err0.right(2000) + QString::fromUtf8(procs[1]->readAllStandardError()).right(2000)));
    QVERIFY2(out0.contains(QStringLiteral("finished (4 devices")), qPrintable(out0 + err0.right(2000)));
    QVERIFY(out0.contains(QStringLiteral("gradient check: passed")));
  }

  void twoHostsTwoRanksCheckGradients() {
    if (!skipReason_.isEmpty())
      PS_SKIP_UNLESS_CI(QStringLiteral("cannot start loopback sshds: ") + skipReason_);
    const QString session = path(QStringLiteral("ok.session"));
    CliResult r = cli(runArgs({QStringLiteral("--check-gradients"), QStringLiteral("--events"),
                               QStringLiteral("jsonl"), QStringLiteral("--session"), session}),
                      60000);
    QVERIFY2(r.finished && r.exitCode == 0, r.err.constData());
    ps::core::RunEventReader reader;
    reader.feed(std::string_view(r.out.constData(), static_cast<size_t>(r.out.size())));
    reader.end();
    QVERIFY(reader.started());
    QCOMPARE(reader.started()->worldSize, 4);
    QVERIFY(reader.finished());
    QCOMPARE(QString::fromStdString(reader.finished()->status), QStringLiteral("finished"));
    QVERIFY(reader.finished()->gradientCheck);
    QVERIFY(reader.finished()->gradientCheck->passed);
    // The stream carries every device's ops, from both hosts, each once.
    QVERIFY2(reader.warnings().empty(),
             reader.warnings().empty() ? "" : reader.warnings().front().message.c_str());
    const auto tl = reader.timeline();
    QCOMPARE(tl.ops.size(), size_t(16));
    QSet<int> devices;
    for (const auto& op : tl.ops) devices << op.device;
    QCOMPARE(devices, (QSet<int>{0, 1, 2, 3}));
    const QString err = QString::fromUtf8(r.err);
    QVERIFY2(err.contains(QStringLiteral("starting 4 ranks on 2 hosts")), qPrintable(err));
    QVERIFY(err.contains(QStringLiteral("gradient check: passed")));
    // The schedule is named as the user named it, not as it was staged.
    QVERIFY2(err.contains(path(QStringLiteral("four.pipe")) + QStringLiteral(": finished (4 devices")),
             qPrintable(err));
    // The staged folders are removed from both hosts.
    const auto staged =
        QRegularExpression(
            QStringLiteral(
                "staged in (/\\S*pipestudio-cluster\\.\\w+) on \\S+, (/\\S*pipestudio-cluster\\.\\w+) on "))
            .match(err);
    QVERIFY2(staged.hasMatch(), qPrintable(err));
    QVERIFY(!QFileInfo::exists(staged.captured(1)));
    QVERIFY(!QFileInfo::exists(staged.captured(2)));
    const auto run = measuredRun(session);
    QVERIFY(run);
    QCOMPARE(run->status, ps::core::RunState::Succeeded);
    QCOMPARE(run->opCount, 16);
    QCOMPARE(run->devices, 4);
  }

  void inputsBatchIsStagedOnEveryHost() {
    if (!skipReason_.isEmpty())
      PS_SKIP_UNLESS_CI(QStringLiteral("cannot start loopback sshds: ") + skipReason_);
    // --inputs BATCH.pt (read by every rank) goes with the schedule to every host.
    const QString batch = QStringLiteral(PIPESTUDIO_TEST_DATA_DIR "/inputs/mlp_inputs.pt");
    if (!QFileInfo::exists(batch)) PS_SKIP_UNLESS_CI(QStringLiteral("no --inputs test batch in this tree"));
    CliResult r = cli(runArgs({QStringLiteral("--inputs"), batch, QStringLiteral("--check-gradients")},
                              QStringLiteral("mlp:layers=4,hidden=16")),
                      60000);
    const QString out = QString::fromUtf8(r.out + r.err);
    QVERIFY2(r.finished && r.exitCode == 0, qPrintable(out));
    // Staged under its own name, which the ranks' messages show, not the temporary folder.
    QVERIFY2(out.contains(QStringLiteral("data: mlp_inputs.pt: samples 0..3 of 12")), qPrintable(out));
    QVERIFY2(!out.contains(QStringLiteral("/inputs.pt")), qPrintable(out));
    QVERIFY(out.contains(QStringLiteral("gradient check: passed")));
  }

  void runDialogRunsOnTheClusterAndStoresIt() {
    if (!skipReason_.isEmpty())
      PS_SKIP_UNLESS_CI(QStringLiteral("cannot start loopback sshds: ") + skipReason_);
    QSettings settings(path(QStringLiteral("gui.ini")), QSettings::IniFormat);
    RunDialog d(nullptr, &settings);
    QString session = path(QStringLiteral("gui.session"));
    d.setSessionChooser([&]() -> QString { return session; });
    d.setLocalCli(QStringLiteral(PIPESTUDIO_CLI));
    d.setSchedule(QStringLiteral("four"), QString::fromLatin1(kFourPipe), 4);
    d.setCluster(hosts());
    RunRequest r = d.request();
    QCOMPARE(r.cluster.size(), size_t(2));
    r.model = QStringLiteral("gpt");
    r.modelParameters = QStringLiteral("layers=4,hidden=16,heads=2,seq=4,vocab=16");
    r.iterations = 2;
    r.warmup = 0;
    r.checkGradients = true;
    r.timeoutSeconds = 20;
    d.setRequest(r);
    d.resize(980, 640);
    d.show();
    QSignalSpy stored(&d, &RunDialog::runStored);
    d.runButton()->click();
    QVERIFY(stored.wait(60000));
    QVERIFY2(d.statusText().startsWith(QStringLiteral("finished on cluster (2 hosts, 4 ranks)")),
             qPrintable(d.statusText()));
    QVERIFY(d.statusText().contains(QStringLiteral("gradient check passed")));
    QVERIFY2(d.logText().contains(QStringLiteral("starting 4 ranks on 2 hosts")), qPrintable(d.logText()));
    QCOMPARE(d.progressBar()->value(), d.progressBar()->maximum());
    auto store = sessions::SessionStore::open(session.toStdString());
    QVERIFY(store);
    auto run = store->run(stored.first().at(1).toLongLong());
    QVERIFY(run);
    QCOMPARE(run->summary.status, ps::core::RunState::Succeeded);
    QCOMPARE(run->summary.opCount, 16);
    QCOMPARE(run->summary.devices, 4);
    QVERIFY(QString::fromStdString(run->configJson).contains(QStringLiteral("127.0.0.2")));
    if (qEnvironmentVariableIsSet("PS_RUN_CLUSTER_SHOT"))
      d.grab().save(qEnvironmentVariable("PS_RUN_CLUSTER_SHOT"));
  }

  void cancelFromTheGuiEndsEveryRank() {
    if (!skipReason_.isEmpty())
      PS_SKIP_UNLESS_CI(QStringLiteral("cannot start loopback sshds: ") + skipReason_);
    RunController c;
    c.setCancelGraceMs(30000);  // only the launcher's own cancel can end it in time
    QSignalSpy done(&c, &RunController::runFinished);
    QSignalSpy progress(&c, &RunController::progressChanged);
    RunRequest r = clusterRequest();
    const int marker = 700000 + ::getpid() % 99999;
    r.iterations = marker;
    QVERIFY(c.start(r, QString::fromLatin1(kFourPipe), QStringLiteral("four")));
    QVERIFY(c.request().targetName().startsWith(QStringLiteral("cluster (2 hosts, 4 ranks)")));
    QVERIFY(waitUntil([&] { return !progress.isEmpty() && progress.last().at(0).toInt() >= 1; }, 60000));
    const QStringList needles{QStringLiteral("--iterations"), QString::number(marker)};
    QCOMPARE(remoteRanks(needles).size(), 4);
    // Every device's ops arrive while the run goes on, from both hosts.
    QVERIFY2(waitUntil(
                 [&] {
                   QSet<int> devices;
                   for (const auto& op : c.reader().timeline().ops) devices << op.device;
                   return devices == QSet<int>{0, 1, 2, 3};
                 },
                 30000),
             "not every device's ops came live");
    c.cancel();
    const RunOutcome o = waitForOutcome(c, done, 30000);
    QVERIFY2(o.status == ps::core::RunState::Cancelled, qPrintable(o.message + "\n" + o.stderrText));
    QVERIFY(o.finished);
    QCOMPARE(QString::fromStdString(o.finished->status), QStringLiteral("cancelled"));
    QVERIFY2(waitUntil([&] { return processesWith(needles).isEmpty(); }, 10000),
             "a rank outlived the cancel");
    QVERIFY(QString::fromStdString(ps::core::formatHostFile(o.request.cluster))
                .contains(QStringLiteral("127.0.0.2")));
  }

  void killedHostFailsFastAndKeepsThePartialRun() {
    if (!skipReason_.isEmpty())
      PS_SKIP_UNLESS_CI(QStringLiteral("cannot start loopback sshds: ") + skipReason_);
    const QString session = path(QStringLiteral("killed.session"));
    const int marker = 600000 + ::getpid() % 99999;
    QProcess p;
    // Iterations of some 300 ms, and the kill once device 0 has measured an op of the second
    // one: that iteration cannot finish without host 127.0.0.2, so the run fails inside it
    // with a partial timeline (a kill at an iteration's very start would leave it empty).
    p.start(QStringLiteral(PIPESTUDIO_CLI),
            // Four ranks of the larger model load libtorch over two sshds: on a busy 2-core
            // machine (the rest of the suite beside it) their meeting can take more than the
            // 10 s the other runs allow.
            runArgs({QStringLiteral("--iterations"), QString::number(marker),
                     QStringLiteral("--microbatch-size"), QStringLiteral("32"), QStringLiteral("--events"),
                     QStringLiteral("jsonl"), QStringLiteral("--session"), session,
                     QStringLiteral("--connect-timeout"), QStringLiteral("60")},
                    QStringLiteral("gpt:layers=4,hidden=128,heads=2,seq=64,vocab=64")));
    QByteArray out;
    ps::core::RunEventReader live;
    const bool measuring = waitUntil(
        [&] {
          p.waitForReadyRead(20);
          const QByteArray more = p.readAllStandardOutput();
          out += more;
          live.feed(std::string_view(more.constData(), static_cast<size_t>(more.size())));
          return p.state() == QProcess::NotRunning ||
                 (live.timelineIteration() >= 1 && !live.timeline().ops.empty());
        },
        120000);
    if (!measuring || p.state() == QProcess::NotRunning) {
      p.kill();
      p.waitForFinished(5000);
      QFAIL(qPrintable(QStringLiteral("the run measured no op of its second iteration (%1): %2\n%3")
                           .arg(measuring ? QStringLiteral("it ended") : QStringLiteral("120 s"))
                           .arg(QString::fromUtf8(p.readAllStandardError().right(3000)))
                           .arg(QString::fromUtf8(out.right(1000)))));
    }
    const QStringList needles{QStringLiteral("--iterations"), QString::number(marker)};
    const QList<qint64> hostB = rankProcesses(needles, {2, 3});
    QCOMPARE(hostB.size(), 2);
    QElapsedTimer t;
    t.start();
    for (qint64 pid : hostB) ::kill(static_cast<pid_t>(pid), SIGKILL);
    QVERIFY2(p.waitForFinished(15000), "the run did not fail within 15 s of losing a host");
    const qint64 failedAfter = t.elapsed();
    out += p.readAllStandardOutput();
    const QString err = QString::fromUtf8(p.readAllStandardError());
    QCOMPARE(p.exitCode(), 1);
    QVERIFY2(err.contains(QStringLiteral("on host 127.0.0.2:%1").arg(b_.port())), qPrintable(err));
    QVERIFY2(waitUntil([&] { return processesWith(needles).isEmpty(); }, 10000), "a rank is still running");
    qInfo("failed %lld ms after host 127.0.0.2's ranks were killed", failedAfter);
    ps::core::RunEventReader reader;
    reader.feed(std::string_view(out.constData(), static_cast<size_t>(out.size())));
    reader.end();
    QVERIFY(reader.finished());
    QCOMPARE(QString::fromStdString(reader.finished()->status), QStringLiteral("failed"));
    bool named = false;
    for (const auto& e : reader.errors())
      named = named || QString::fromStdString(e.message).contains(QStringLiteral("127.0.0.2"));
    QVERIFY2(named, out.right(2000).constData());
    const auto run = measuredRun(session);
    QVERIFY(run);
    QCOMPARE(run->status, ps::core::RunState::Failed);
    QVERIFY(run->opCount > 0);  // the partial timeline
    QVERIFY2(QString::fromStdString(run->error).contains(QStringLiteral("127.0.0.2")) ||
                 QString::fromStdString(run->error).contains(QStringLiteral("rank 2")) ||
                 QString::fromStdString(run->error).contains(QStringLiteral("rank 3")),
             run->error.c_str());
  }

  void killedLauncherLeavesNoStagedFolders() {
    if (!skipReason_.isEmpty())
      PS_SKIP_UNLESS_CI(QStringLiteral("cannot start loopback sshds: ") + skipReason_);
    // The launcher SIGKILLed mid-run: its ssh clients die with it, and each host's janitor
    // removes the staged folder once its channel closes.
    const int marker = 650000 + ::getpid() % 99999;
    QProcess p;
    p.start(QStringLiteral(PIPESTUDIO_CLI),
            runArgs({QStringLiteral("--iterations"), QString::number(marker)}));
    QString err;
    QRegularExpressionMatch staged;
    QVERIFY2(waitUntil(
                 [&] {
                   p.waitForReadyRead(20);
                   err += QString::fromUtf8(p.readAllStandardError());
                   staged = QRegularExpression(
                                QStringLiteral("staged in (/\\S*pipestudio-cluster\\.\\w+) on \\S+, "
                                               "(/\\S*pipestudio-cluster\\.\\w+) on "))
                                .match(err);
                   return staged.hasMatch() && err.contains(QStringLiteral("starting 4 ranks"));
                 },
                 60000),
             qPrintable(err));
    const QStringList needles{QStringLiteral("--iterations"), QString::number(marker)};
    QVERIFY(waitUntil([&] { return remoteRanks(needles).size() == 4; }, 30000));
    QVERIFY(QFileInfo::exists(staged.captured(1)) && QFileInfo::exists(staged.captured(2)));
    ::kill(static_cast<pid_t>(p.processId()), SIGKILL);
    p.waitForFinished(5000);
    QVERIFY2(
        waitUntil(
            [&] { return !QFileInfo::exists(staged.captured(1)) && !QFileInfo::exists(staged.captured(2)); },
            15000),
        qPrintable(QStringLiteral("staged folders left: ") + staged.captured(1) + QStringLiteral(", ") +
                   staged.captured(2)));
    QVERIFY2(waitUntil([&] { return processesWith(needles).isEmpty(); }, 10000), "a rank is still running");
  }

  void torchScriptModelRunsOnTwoHosts() {
    if (!skipReason_.isEmpty())
      PS_SKIP_UNLESS_CI(QStringLiteral("cannot start loopback sshds: ") + skipReason_);
    // Each host stages the model in a folder of its own: the ranks compare its bytes, not its
    // path, so the run starts (it was refused with "model differs" when they compared paths).
    const QString model = QStringLiteral(PIPESTUDIO_TEST_DATA_DIR "/torchscript/sequential.pt");
    CliResult r = cli(
        runArgs({QStringLiteral("--check-gradients")}, QStringLiteral("torchscript:path=") + model), 60000);
    const QString out = QString::fromUtf8(r.out + r.err);
    QVERIFY2(r.finished && r.exitCode == 0, qPrintable(out));
    QVERIFY(out.contains(QStringLiteral("gradient check: passed")));
    QVERIFY2(!out.contains(QStringLiteral("differs")), qPrintable(out));
  }

  void refusedKeyAndMissingCliNameTheHost() {
    if (!skipReason_.isEmpty())
      PS_SKIP_UNLESS_CI(QStringLiteral("cannot start loopback sshds: ") + skipReason_);
    RunRequest r = clusterRequest();
    r.cluster[1].key = a_.path(QStringLiteral("wrong_key")).toStdString();
    RunController c;
    QSignalSpy done(&c, &RunController::runFinished);
    QVERIFY(c.start(r, QString::fromLatin1(kFourPipe), QStringLiteral("four")));
    RunOutcome o = waitForOutcome(c, done, 30000);
    QVERIFY(o.status == ps::core::RunState::Failed);
    QVERIFY2(o.message.contains(QStringLiteral("authentication refused by %1@127.0.0.2 on port %2")
                                    .arg(LoopbackSshd::userName())
                                    .arg(b_.port())),
             qPrintable(o.message));
    QVERIFY(o.timeline.ops.empty());

    r = clusterRequest();
    r.cluster[1].cli = path(QStringLiteral("not installed/pipestudio-cli")).toStdString();
    done.clear();
    QVERIFY(c.start(r, QString::fromLatin1(kFourPipe), QStringLiteral("four")));
    o = waitForOutcome(c, done, 30000);
    QVERIFY(o.status == ps::core::RunState::Failed);
    QVERIFY2(o.message.contains(QStringLiteral("pipestudio-cli not found on 127.0.0.2:%1").arg(b_.port())),
             qPrintable(o.message));
  }

  void stoppedSshdFailsFastNamingTheHost() {
    if (!skipReason_.isEmpty())
      PS_SKIP_UNLESS_CI(QStringLiteral("cannot start loopback sshds: ") + skipReason_);
    const int bPort = b_.port();
    b_.stop();
    const QString session = path(QStringLiteral("down.session"));
    const int marker = 500000 + ::getpid() % 99999;
    CliResult r = cli(runArgs({QStringLiteral("--iterations"), QString::number(marker),
                               QStringLiteral("--session"), session}),
                      30000);
    QVERIFY(r.finished);
    QCOMPARE(r.exitCode, 1);
    QVERIFY2(r.ms < 10000, qPrintable(QString::number(r.ms)));
    const QString err = QString::fromUtf8(r.err);
    QVERIFY2(err.contains(path(QStringLiteral("hosts.txt")) +
                          QStringLiteral(":3:1: error: cannot reach 127.0.0.2 on port %1").arg(bPort)),
             qPrintable(err));
    QVERIFY(processesWith({QStringLiteral("--iterations"), QString::number(marker)}).isEmpty());
    const auto run = measuredRun(session);
    QVERIFY(run);
    QCOMPARE(run->status, ps::core::RunState::Failed);
    QVERIFY(QString::fromStdString(run->error).contains(QStringLiteral("127.0.0.2")));

    // The GUI says the same.
    RunController c;
    QSignalSpy done(&c, &RunController::runFinished);
    QVERIFY(c.start(clusterRequest(), QString::fromLatin1(kFourPipe), QStringLiteral("four")));
    const RunOutcome o = waitForOutcome(c, done, 30000);
    QVERIFY(o.status == ps::core::RunState::Failed);
    QVERIFY2(o.message.contains(QStringLiteral("cannot reach 127.0.0.2 on port %1").arg(bPort)),
             qPrintable(o.message));
  }
};

QTEST_MAIN(RunClusterTest)
#include "run_cluster_test.moc"
