// RunController on this machine: a real run of our pipestudio-cli streamed into a measured
// timeline and stored in a session; cancel of a long run (the processes are gone afterwards,
// with one process and with one per device); the version check (a fake CLI of another
// protocol is refused, naming both versions, before anything runs); a missing binary; a crash
// mid-run (fake CLI: a few events, a cut-off line, stderr, exit 1) keeps the partial timeline
// and is stored as failed with its stderr.
#include "remote/run_controller.h"

#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include "document/schedule_document.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/sessions/recording.h"
#include "pipestudio/sessions/session_store.h"
#include "run_test_util.h"

using namespace ps::ui;
using namespace runtest;
namespace sessions = ps::sessions;

class RunControllerTest : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir dir_;

  RunRequest localRequest(const QString& cli) const {
    RunRequest r = modelRequest(QStringLiteral("mlp"), QStringLiteral("layers=2,hidden=8"),
                                {.iterations = 2, .timeoutSeconds = 30});
    r.localCli = cli;
    return r;
  }

  QString crashingCli() const {
    return writeScript(
        dir_.path(), QStringLiteral("crashing-cli"),
        QStringLiteral(
            "if [ \"$1\" = --version ]; then echo '%1'; exit 0; fi\n"
            "while IFS= read -r line; do [ \"$line\" = '#%end-of-schedule' ] && break; done\n"
            "echo '{\"type\":\"started\",\"protocol_version\":1,\"schedule\":\"tiny\",\"devices\":2}'\n"
            "echo '{\"type\":\"progress\",\"iteration\":0,\"iterations\":3,\"warmup\":false}'\n"
            "echo "
            "'{\"type\":\"op\",\"iteration\":0,\"device\":0,\"step\":0,\"kind\":\"F\",\"stage\":0,"
            "\"microbatch\":0,\"start_ms\":0,\"end_ms\":1}'\n"
            "echo "
            "'{\"type\":\"op\",\"iteration\":0,\"device\":0,\"step\":1,\"kind\":\"F\",\"stage\":0,"
            "\"microbatch\":1,\"start_ms\":1,\"end_ms\":2}'\n"
            "echo "
            "'{\"type\":\"op\",\"iteration\":0,\"device\":1,\"step\":0,\"kind\":\"F\",\"stage\":1,"
            "\"microbatch\":0,\"start_ms\":1.5,\"end_ms\":2.5}'\n"
            "printf '{\"type\":\"op\",\"iteration\":0,\"dev'\n"
            "echo 'worker 1: Segmentation fault (core dumped)' >&2\n"
            "exit 1\n")
            .arg(ourVersionLine()));
  }

 private Q_SLOTS:
  void initTestCase() { QVERIFY(dir_.isValid()); }

  void localRunStreamsAndIsStored() {
    RunController c;
    c.setRedrawIntervalMs(20);
    QSignalSpy done(&c, &RunController::runFinished);
    QSignalSpy progress(&c, &RunController::progressChanged);
    QSignalSpy updates(&c, &RunController::timelineUpdated);
    QVERIFY(c.start(localRequest(QStringLiteral(PIPESTUDIO_CLI)), QString::fromLatin1(kTinyPipe),
                    QStringLiteral("tiny")));
    QVERIFY(!c.start(localRequest(QStringLiteral(PIPESTUDIO_CLI)), {}, {}));  // one run at a time
    const RunOutcome o = waitForOutcome(c, done, 120000);
    QCOMPARE(done.size(), 1);
    QVERIFY2(o.status == ps::core::RunState::Succeeded, qPrintable(o.message + "\n" + o.stderrText));
    QCOMPARE(o.cliVersion, QStringLiteral(PIPESTUDIO_VERSION));
    QVERIFY(o.started);
    QCOMPARE(o.started->protocolVersion, ps::core::kRunEventProtocolVersion);
    QCOMPARE(o.timeline.devices, 2);
    QCOMPARE(o.timeline.ops.size(), size_t(12));  // the last measured iteration
    QVERIFY(o.timeline.complete);
    QCOMPARE(o.losses.size(), size_t(2));
    QVERIFY(o.streamWarnings.empty());
    QVERIFY(progress.size() >= 2);  // iterations 0 and 1
    QCOMPARE(progress.last().at(0).toInt(), 1);
    QCOMPARE(progress.last().at(1).toInt(), 2);
    QVERIFY(!updates.isEmpty());
    QVERIFY(!c.isActive());

    const QString session = dir_.filePath(QStringLiteral("local-%1.session").arg(::getpid()));
    // Stored with its prediction: the schedule simulated with the document's profile.
    const auto schedule = ps::core::parseDsl(kTinyPipe);
    QVERIFY(schedule);
    const ps::core::CostProfile profile = defaultCostProfile(2);
    auto stored = storeRunInSession(session, o, QStringLiteral("tiny"), QString::fromLatin1(kTinyPipe),
                                    &*schedule, &profile);
    QVERIFY2(stored, stored ? "" : stored.error().message.c_str());
    QVERIFY(stored->predictedRunId);
    auto store = sessions::SessionStore::open(session.toStdString());
    QVERIFY(store);
    auto link = sessions::predictionFor(*store, stored->runId);
    QVERIFY(link);
    QCOMPARE(link->predictedRunId, *stored->predictedRunId);
    auto predicted = store->loadTimeline(*stored->predictedRunId);
    QVERIFY(predicted);
    QCOMPARE(predicted->source, ps::core::TimelineSource::Simulated);
    QCOMPARE(predicted->ops.size(), size_t(12));
    auto run0 = store->run(stored->runId);
    QVERIFY(run0);
    const auto& run = run0->summary;
    QCOMPARE(run.id, stored->runId);
    QCOMPARE(run.status, ps::core::RunState::Succeeded);
    QCOMPARE(run.opCount, 12);
    QCOMPARE(run.model, std::string("mlp:layers=2,hidden=8"));
    auto t = store->loadTimeline(run.id);
    QVERIFY(t);
    QCOMPARE(t->ops.size(), size_t(12));
    QCOMPARE(t->source, ps::core::TimelineSource::Measured);
    auto sched = store->latestSchedule("tiny");
    QVERIFY(sched);
    QCOMPARE(sched->pipeText, std::string(kTinyPipe));
  }

  // The bundled example declares its own ALLREDUCE kind; its ops come back under the
  // schedule's kind index, not as unknown-kind warnings.
  void userDeclaredKindsComeBack() {
    QFile f(QStringLiteral(PIPESTUDIO_RESOURCES_DIR "/examples/example.pipe"));
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QString text = QString::fromUtf8(f.readAll());
    const auto schedule = ps::core::parseDsl(text.toStdString());
    QVERIFY(schedule);
    RunController c;
    QSignalSpy done(&c, &RunController::runFinished);
    RunRequest r = localRequest(QStringLiteral(PIPESTUDIO_CLI));
    r.iterations = 1;
    r.modelParameters = QStringLiteral("layers=8,hidden=16");
    QVERIFY(c.start(r, text, QStringLiteral("example")));
    const RunOutcome o = waitForOutcome(c, done, 120000);
    QVERIFY2(o.status == ps::core::RunState::Succeeded, qPrintable(o.message + "\n" + o.stderrText));
    QVERIFY2(o.streamWarnings.empty(), ps::core::formatDiagnostics(o.streamWarnings).c_str());
    QCOMPARE(o.timeline.ops.size(), schedule->opCount());
    int user = 0;
    for (const auto& op : o.timeline.ops)
      if (ps::core::isUserKind(op.op.kind)) {
        ++user;
        QCOMPARE(schedule->kindName(op.op.kind), std::string("ALLREDUCE"));
      }
    QCOMPARE(user, 4);
  }

  void cancelStopsALocalRun_data() {
    QTest::addColumn<int>("processes");
    QTest::newRow("one process") << 1;
    QTest::newRow("one per device") << 2;
  }
  void cancelStopsALocalRun() {
    QFETCH(int, processes);
    RunController c;
    // No SIGTERM fallback within the test's wait: only the CLI's own cancel on EOF can end it.
    c.setCancelGraceMs(120000);
    QSignalSpy done(&c, &RunController::runFinished);
    QSignalSpy progress(&c, &RunController::progressChanged);
    RunRequest r = localRequest(QStringLiteral(PIPESTUDIO_CLI));
    r.model = QStringLiteral("gpt");
    r.modelParameters = QStringLiteral("layers=2,hidden=64,heads=2,seq=16,vocab=64");
    r.iterations = 1000000;  // hours: only cancel ends it
    r.processes = processes;
    QVERIFY(c.start(r, QString::fromLatin1(kTinyPipe), QStringLiteral("tiny")));
    // Wait until it really runs (a second iteration began), then cancel.
    QVERIFY(waitUntil([&] { return !progress.isEmpty() && progress.last().at(0).toInt() >= 1; }, 120000));
    const qint64 pid = c.processId();
    QVERIFY(pid > 0);
    c.cancel();
    const RunOutcome o = waitForOutcome(c, done, 60000);
    QCOMPARE(done.size(), 1);
    QVERIFY2(o.status == ps::core::RunState::Cancelled, qPrintable(o.message));
    QVERIFY(o.finished);
    QCOMPARE(QString::fromStdString(o.finished->status), QStringLiteral("cancelled"));
    QVERIFY(processGone(pid));
    // No rank is left behind either.
    QVERIFY(waitUntil(
        [&] {
          return processesWith({QStringLiteral("pipestudio-cli"), QStringLiteral("1000000")}).isEmpty();
        },
        10000));
    QVERIFY(!o.timeline.complete);

    const auto stored =
        storeTinyRun(dir_.filePath(QStringLiteral("cancel-%1-%2.session").arg(::getpid()).arg(processes)), o);
    const auto& run = stored.run;
    QVERIFY2(run, stored.error.c_str());
    QCOMPARE(run->summary.status, ps::core::RunState::Cancelled);
    QVERIFY2(QString::fromStdString(run->summary.error).contains(QStringLiteral("cancelled")),
             run->summary.error.c_str());
  }

  void cancelFallsBackToTerminateWhenStdinIsIgnored() {
    // A child that never reads stdin (a hung CLI): after the grace period it is terminated.
    const QString cli =
        writeScript(dir_.path(), QStringLiteral("deaf-cli"),
                    QStringLiteral("if [ \"$1\" = --version ]; then echo '%1'; exit 0; fi\n"
                                   "echo '{\"type\":\"started\",\"protocol_version\":1,\"devices\":1}'\n"
                                   "exec sleep 600\n")
                        .arg(ourVersionLine()));
    RunController c;
    c.setCancelGraceMs(300);
    QSignalSpy done(&c, &RunController::runFinished);
    QVERIFY(c.start(localRequest(cli), QString::fromLatin1(kTinyPipe), QStringLiteral("tiny")));
    QVERIFY(waitUntil([&] { return c.reader().started().has_value(); }, 30000));
    const qint64 pid = c.processId();
    QElapsedTimer t;
    t.start();
    c.cancel();
    const RunOutcome o = waitForOutcome(c, done, 20000);
    QVERIFY2(o.status == ps::core::RunState::Cancelled, qPrintable(o.message));
    QVERIFY(o.crashed);  // ended by SIGTERM
    QVERIFY(t.elapsed() >= 250);
    QVERIFY(processGone(pid));
  }

  void versionMismatchIsRefusedNamingBoth() {
    const QString log = dir_.filePath(QStringLiteral("calls.log"));
    const QString cli = writeScript(
        dir_.path(), QStringLiteral("other-cli"),
        QStringLiteral(
            "echo \"$@\" >> '%1'\n"
            "if [ \"$1\" = --version ]; then echo 'pipestudio-cli 7.3.0 (run-event protocol 2)'; exit 0; fi\n"
            "exit 0\n")
            .arg(log));
    RunController c;
    QSignalSpy done(&c, &RunController::runFinished);
    QVERIFY(c.start(localRequest(cli), QString::fromLatin1(kTinyPipe), QStringLiteral("tiny")));
    const RunOutcome o = waitForOutcome(c, done, 30000);
    QVERIFY(o.status == ps::core::RunState::Failed);
    QVERIFY2(o.message.contains(QStringLiteral("7.3.0")) &&
                 o.message.contains(QStringLiteral("run-event protocol 2")),
             qPrintable(o.message));
    QVERIFY2(o.message.contains(QStringLiteral(PIPESTUDIO_VERSION)) &&
                 o.message.contains(QStringLiteral("run-event protocol 1")),
             qPrintable(o.message));
    QFile f(log);
    QVERIFY(f.open(QIODevice::ReadOnly));
    QCOMPARE(f.readAll(), QByteArray("--version\n"));  // the run itself never started
    QVERIFY(o.timeline.ops.empty());
  }

  void missingBinaryIsAClearError() {
    RunController c;
    QSignalSpy done(&c, &RunController::runFinished);
    QVERIFY(c.start(localRequest(dir_.filePath(QStringLiteral("no such dir/pipestudio-cli"))),
                    QString::fromLatin1(kTinyPipe), QStringLiteral("tiny")));
    const RunOutcome o = waitForOutcome(c, done, 30000);
    QVERIFY(o.status == ps::core::RunState::Failed);
    QVERIFY2(o.message.startsWith(QStringLiteral("cannot start pipestudio-cli at '")) &&
                 o.message.contains(QStringLiteral("no such dir/pipestudio-cli")),
             qPrintable(o.message));
    QVERIFY(!c.isActive());
  }

  void crashMidRunKeepsThePartialTimelineAndStderr() {
    RunController c;
    QSignalSpy done(&c, &RunController::runFinished);
    QVERIFY(c.start(localRequest(crashingCli()), QString::fromLatin1(kTinyPipe), QStringLiteral("tiny")));
    const RunOutcome o = waitForOutcome(c, done, 30000);
    QVERIFY(o.status == ps::core::RunState::Failed);
    QCOMPARE(o.exitCode, 1);
    QVERIFY2(o.message.contains(QStringLiteral("exit code 1 before the run finished")),
             qPrintable(o.message));
    QVERIFY2(o.message.contains(QStringLiteral("Segmentation fault")), qPrintable(o.message));
    QVERIFY(o.stderrText.contains(QStringLiteral("worker 1: Segmentation fault")));
    QCOMPARE(o.timeline.ops.size(), size_t(3));
    QVERIFY(!o.timeline.complete);
    QCOMPARE(o.streamWarnings.size(), size_t(1));
    QCOMPARE(o.streamWarnings.front().code, std::string("run-events.truncated"));
    QCOMPARE(o.streamWarnings.front().location.line, 6);

    const auto stored = storeTinyRun(dir_.filePath(QStringLiteral("crash-%1.session").arg(::getpid())), o);
    const auto& run = stored.run;
    QVERIFY2(run, stored.error.c_str());
    QCOMPARE(run->summary.status, ps::core::RunState::Failed);
    QCOMPARE(run->summary.opCount, 3);
    QVERIFY2(
        QString::fromStdString(run->summary.error).contains(QStringLiteral("worker 1: Segmentation fault")),
        run->summary.error.c_str());
    // The whole stderr is kept with the run.
    QVERIFY2(QString::fromStdString(run->configJson)
                 .contains(QStringLiteral("worker 1: Segmentation fault (core dumped)")),
             run->configJson.c_str());
    auto t = stored.store->loadTimeline(stored.runId);
    QVERIFY(t);
    QCOMPARE(t->ops.size(), size_t(3));
  }
};

QTEST_MAIN(RunControllerTest)
#include "run_controller_test.moc"
