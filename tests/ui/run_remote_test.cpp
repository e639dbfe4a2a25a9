// Remote runs through a real OpenSSH server on 127.0.0.1 at a high port, started and stopped
// by this test with throw-away keys (host key, user key, a wrong key) in a temporary folder:
// a small schedule runs remotely on our own pipestudio-cli and is stored; cancel ends the
// remote process; a wrong key is "authentication refused", a closed port "cannot reach", a
// wrong remote path "not found", a remote crash keeps the partial timeline. Skips with a
// message where sshd cannot start (no openssh-server, not allowed to run it).
#include <pwd.h>
#include <unistd.h>

#include <QFile>
#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include "loopback_sshd.h"
#include "pipestudio/sessions/session_store.h"
#include "remote/run_controller.h"
#include "run_test_util.h"
#include "skip_in_ci.h"

using namespace ps::ui;
using namespace runtest;
namespace sessions = ps::sessions;

class RunRemoteTest : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir dir_;
  LoopbackSshd sshd_;
  int port_ = 0;
  QString skipReason_;

  QString path(const QString& name) const { return dir_.filePath(name); }

  static QString userName() { return LoopbackSshd::userName(); }

  RunRequest remoteRequest(const QString& key) const {
    RunRequest r = modelRequest(QStringLiteral("mlp"), QStringLiteral("layers=2,hidden=8"),
                                {.iterations = 2, .timeoutSeconds = 30});
    RemoteHost h;
    h.name = QStringLiteral("loopback");
    h.host = QStringLiteral("127.0.0.1");
    h.user = userName();
    h.port = port_;
    h.identityFile = key;
    h.cliPath = QStringLiteral(PIPESTUDIO_CLI);
    h.sshOptions = sshd_.sshOptions();
    r.remote = h;
    r.connectTimeoutSeconds = 5;
    return r;
  }

  bool startSshd(QString& why) {
    if (!sshd_.start(dir_.path(), QStringLiteral("127.0.0.1"), why)) return false;
    port_ = sshd_.port();
    return true;
  }

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    if (!startSshd(skipReason_))
      qWarning("loopback sshd unavailable: %s", qPrintable(skipReason_));
    else
      skipReason_.clear();
  }

  void init() {
    if (!skipReason_.isEmpty())
      PS_SKIP_UNLESS_CI(QStringLiteral("cannot start a loopback sshd: ") + skipReason_);
  }

  void cleanupTestCase() { sshd_.stop(); }

  void remoteRunIsStored() {
    RunController c;
    QSignalSpy done(&c, &RunController::runFinished);
    QSignalSpy progress(&c, &RunController::progressChanged);
    const RunRequest r = remoteRequest(path(QStringLiteral("user_key")));
    QVERIFY(c.start(r, QString::fromLatin1(kTinyPipe), QStringLiteral("tiny")));
    const RunOutcome o = waitForOutcome(c, done, 120000);
    QVERIFY2(o.status == ps::core::RunState::Succeeded, qPrintable(o.message + "\n" + o.stderrText));
    QVERIFY(o.command.startsWith(QStringLiteral("ssh -o BatchMode=yes")));
    QCOMPARE(o.cliVersion, QStringLiteral(PIPESTUDIO_VERSION));
    QCOMPARE(o.timeline.ops.size(), size_t(12));
    QVERIFY(o.timeline.complete);
    QCOMPARE(o.losses.size(), size_t(2));
    QVERIFY(!progress.isEmpty());

    const auto stored = storeTinyRun(path(QStringLiteral("remote-%1.session").arg(::getpid())), o);
    const auto& run = stored.run;
    QVERIFY2(run, stored.error.c_str());
    QCOMPARE(run->summary.status, ps::core::RunState::Succeeded);
    QCOMPARE(run->summary.opCount, 12);
    QVERIFY2(QString::fromStdString(run->summary.label).contains(QStringLiteral("loopback")),
             run->summary.label.c_str());
    QVERIFY2(QString::fromStdString(run->configJson).contains(QStringLiteral("@127.0.0.1")),
             run->configJson.c_str());
    auto t = stored.store->loadTimeline(stored.runId);
    QVERIFY(t);
    QCOMPARE(t->ops.size(), size_t(12));
  }

  void cancelEndsTheRemoteProcess() {
    RunController c;
    c.setCancelGraceMs(120000);  // only the remote CLI's cancel on EOF can end it in time
    QSignalSpy done(&c, &RunController::runFinished);
    QSignalSpy progress(&c, &RunController::progressChanged);
    RunRequest r = remoteRequest(path(QStringLiteral("user_key")));
    r.model = QStringLiteral("gpt");
    r.modelParameters = QStringLiteral("layers=2,hidden=64,heads=2,seq=16,vocab=64");
    const int marker = 900000 + ::getpid() % 99999;  // finds the remote process in /proc
    r.iterations = marker;
    QVERIFY(c.start(r, QString::fromLatin1(kTinyPipe), QStringLiteral("tiny")));
    QVERIFY(waitUntil([&] { return !progress.isEmpty() && progress.last().at(0).toInt() >= 1; }, 120000));
    const QStringList needles{QStringLiteral("pipestudio-cli"), QStringLiteral("--iterations"),
                              QString::number(marker)};
    // The remote CLI (a child of sshd, not of us) and the local ssh client.
    QList<qint64> remote;
    for (qint64 pid : processesWith(needles)) {
      QFile f(QStringLiteral("/proc/%1/cmdline").arg(pid));
      f.open(QIODevice::ReadOnly);
      if (!f.readAll().startsWith("ssh")) remote << pid;
    }
    QVERIFY2(!remote.isEmpty(), "the remote pipestudio-cli is not running");
    const qint64 sshPid = c.processId();
    c.cancel();
    const RunOutcome o = waitForOutcome(c, done, 60000);
    QVERIFY2(o.status == ps::core::RunState::Cancelled, qPrintable(o.message));
    QVERIFY(o.finished);  // the remote CLI reported its own cancel through the channel
    QCOMPARE(QString::fromStdString(o.finished->status), QStringLiteral("cancelled"));
    QVERIFY(processGone(sshPid));
    QVERIFY2(waitUntil([&] { return processesWith(needles).isEmpty(); }, 10000),
             "the remote run is still running");
  }

  void killingTheSshClientEndsTheRemoteRun() {
    // The GUI dies (or the connection drops): the remote CLI sees EOF and cancels.
    RunRequest r = remoteRequest(path(QStringLiteral("user_key")));
    r.model = QStringLiteral("gpt");
    r.modelParameters = QStringLiteral("layers=2,hidden=64,heads=2,seq=16,vocab=64");
    const int marker = 800000 + ::getpid() % 99999;
    r.iterations = marker;
    const ProcessCommand cmd = buildRunCommand(r);
    QProcess ssh;
    ssh.start(cmd.program, cmd.arguments);
    QVERIFY(ssh.waitForStarted(5000));
    ssh.write(scheduleStdin(QString::fromLatin1(kTinyPipe)));
    QByteArray out;
    QVERIFY(waitUntil(
        [&] {
          ssh.waitForReadyRead(100);
          out += ssh.readAllStandardOutput();
          return out.contains("\"progress\"");
        },
        120000));
    const QStringList needles{QStringLiteral("pipestudio-cli"), QStringLiteral("--iterations"),
                              QString::number(marker)};
    QVERIFY(!processesWith(needles).isEmpty());
    ssh.kill();
    ssh.waitForFinished(5000);
    QVERIFY2(waitUntil([&] { return processesWith(needles).isEmpty(); }, 15000),
             "the remote run outlived its ssh client");
  }

  void wrongKeyIsAuthenticationRefused() {
    RunController c;
    QSignalSpy done(&c, &RunController::runFinished);
    QVERIFY(c.start(remoteRequest(path(QStringLiteral("wrong_key"))), QString::fromLatin1(kTinyPipe),
                    QStringLiteral("tiny")));
    const RunOutcome o = waitForOutcome(c, done, 60000);
    QVERIFY(o.status == ps::core::RunState::Failed);
    QVERIFY2(
        o.message.startsWith(
            QStringLiteral("authentication refused by %1@127.0.0.1 on port %2").arg(userName()).arg(port_)),
        qPrintable(o.message));
    QVERIFY(o.message.contains(QStringLiteral("Permission denied")));
    QVERIFY(o.timeline.ops.empty());
  }

  void closedPortIsUnreachable() {
    RunController c;
    QSignalSpy done(&c, &RunController::runFinished);
    RunRequest r = remoteRequest(path(QStringLiteral("user_key")));
    r.remote->port = 1;  // nothing listens there
    QVERIFY(c.start(r, QString::fromLatin1(kTinyPipe), QStringLiteral("tiny")));
    const RunOutcome o = waitForOutcome(c, done, 60000);
    QVERIFY(o.status == ps::core::RunState::Failed);
    QVERIFY2(o.message.startsWith(QStringLiteral("cannot reach 127.0.0.1 on port 1")), qPrintable(o.message));
    QVERIFY(o.message.contains(QStringLiteral("Connection refused")));
  }

  void missingRemoteBinary() {
    RunController c;
    QSignalSpy done(&c, &RunController::runFinished);
    RunRequest r = remoteRequest(path(QStringLiteral("user_key")));
    r.remote->cliPath = path(QStringLiteral("not installed/pipestudio-cli"));
    QVERIFY(c.start(r, QString::fromLatin1(kTinyPipe), QStringLiteral("tiny")));
    const RunOutcome o = waitForOutcome(c, done, 60000);
    QVERIFY(o.status == ps::core::RunState::Failed);
    QVERIFY2(o.message.startsWith(
                 QStringLiteral("pipestudio-cli not found on loopback at '%1'").arg(r.remote->cliPath)),
             qPrintable(o.message));
  }

  void remoteCrashKeepsThePartialTimeline() {
    const QString cli = writeScript(
        dir_.path(), QStringLiteral("remote crash cli"),
        QStringLiteral("if [ \"$1\" = --version ]; then echo '%1'; exit 0; fi\n"
                       "while IFS= read -r line; do [ \"$line\" = '#%end-of-schedule' ] && break; done\n"
                       "echo '{\"type\":\"started\",\"protocol_version\":1,\"devices\":2}'\n"
                       "echo "
                       "'{\"type\":\"op\",\"iteration\":0,\"device\":0,\"step\":0,\"kind\":\"F\",\"stage\":0,"
                       "\"microbatch\":0,\"start_ms\":0,\"end_ms\":1}'\n"
                       "echo "
                       "'{\"type\":\"op\",\"iteration\":0,\"device\":1,\"step\":0,\"kind\":\"F\",\"stage\":1,"
                       "\"microbatch\":0,\"start_ms\":1,\"end_ms\":2}'\n"
                       "echo 'remote worker: out of memory' >&2\n"
                       "exit 1\n")
            .arg(ourVersionLine()));
    RunController c;
    QSignalSpy done(&c, &RunController::runFinished);
    RunRequest r = remoteRequest(path(QStringLiteral("user_key")));
    r.remote->cliPath = cli;  // a path with spaces, quoted for the remote shell
    QVERIFY(c.start(r, QString::fromLatin1(kTinyPipe), QStringLiteral("tiny")));
    const RunOutcome o = waitForOutcome(c, done, 60000);
    QVERIFY(o.status == ps::core::RunState::Failed);
    QCOMPARE(o.timeline.ops.size(), size_t(2));
    QVERIFY(o.stderrText.contains(QStringLiteral("remote worker: out of memory")));
    QVERIFY2(o.message.contains(QStringLiteral("exit code 1")), qPrintable(o.message));
    const auto stored = storeTinyRun(path(QStringLiteral("remote-crash-%1.session").arg(::getpid())), o);
    const auto& run = stored.run;
    QVERIFY2(run, stored.error.c_str());
    QCOMPARE(run->summary.status, ps::core::RunState::Failed);
    QCOMPARE(run->summary.opCount, 2);
  }
};

QTEST_MAIN(RunRemoteTest)
#include "run_remote_test.moc"
