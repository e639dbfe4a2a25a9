// ProcessRunner, the one child-process runner of the Run and Profile Model dialogs: stdin
// reaches the child; stderr is passed on and its kept tail stays bounded; stop() closes stdin,
// then terminates, then kills a child that ignores SIGTERM, with the given timings; a program
// that cannot start is reported as such.
#include "remote/process_runner.h"

#include <QElapsedTimer>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include "run_test_util.h"

using namespace ps::ui;

class ProcessRunnerTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;

  static ProcessCommand sh(const QString& script) {
    return {QStringLiteral("/bin/sh"), {QStringLiteral("-c"), script}};
  }

 private Q_SLOTS:
  void initTestCase() { QVERIFY(dir_.isValid()); }

  void stdinIsDeliveredAndStdoutComesBack() {
    ProcessRunner r;
    QByteArray out;
    connect(&r, &ProcessRunner::stdoutReceived, this, [&](const QByteArray& b) { out += b; });
    QSignalSpy done(&r, &ProcessRunner::finished);
    QVERIFY(r.start(sh(QStringLiteral("tr a-z A-Z"))));
    QVERIFY(!r.start(sh(QStringLiteral("true"))));  // one child at a time
    r.write("hello runner\n");
    r.closeStdin();  // tr ends at EOF
    QVERIFY(done.wait(10000));
    QCOMPARE(out, QByteArray("HELLO RUNNER\n"));
    QCOMPARE(done.first().at(0).toInt(), 0);
    QCOMPARE(done.first().at(1).toBool(), false);
    QVERIFY(!r.isRunning());
    QCOMPARE(r.processId(), qint64(0));
  }

  void stderrTailIsBoundedAndKeepsTheEnd() {
    ProcessRunner r;
    r.setStderrLimit(1000);
    qsizetype passedOn = 0;
    connect(&r, &ProcessRunner::stderrReceived, this, [&](const QString& t) { passedOn += t.size(); });
    QSignalSpy done(&r, &ProcessRunner::finished);
    // 2000 lines of 50 characters, then the line that says why it died.
    QVERIFY(r.start(
        sh(QStringLiteral("i=0; while [ $i -lt 2000 ]; do "
                          "echo 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' >&2; i=$((i+1)); done; "
                          "echo 'the last words' >&2; exit 3"))));
    QVERIFY(done.wait(20000));
    QCOMPARE(done.first().at(0).toInt(), 3);
    QVERIFY(passedOn > 100000);  // everything was passed on as it came
    QVERIFY2(r.stderrTail().size() <= 1000, qPrintable(QString::number(r.stderrTail().size())));
    QVERIFY(r.stderrTail().endsWith(QStringLiteral("the last words\n")));
    QCOMPARE(lastLines(r.stderrTail(), 1), QStringLiteral("the last words"));
    // A new start begins a new tail.
    QVERIFY(r.start(sh(QStringLiteral("echo fresh >&2"))));
    QVERIFY(done.wait(10000));
    QCOMPARE(r.stderrTail(), QStringLiteral("fresh\n"));
  }

  // The child ignores SIGTERM (inherited by the exec'd sleep): closing stdin does nothing,
  // SIGTERM after the grace does nothing, SIGKILL after the terminate period ends it.
  void childIgnoringTermIsKilledAfterTheGrace() {
    const QString pidFile = dir_.filePath(QStringLiteral("pid"));
    ProcessRunner r;
    QSignalSpy done(&r, &ProcessRunner::finished);
    QVERIFY(r.start(sh(QStringLiteral("trap '' TERM; echo $$ > '%1'; exec sleep 60").arg(pidFile))));
    QTRY_VERIFY_WITH_TIMEOUT(QFile(pidFile).size() > 0, 5000);
    const qint64 pid = r.processId();
    QVERIFY(pid > 0);
    QElapsedTimer t;
    t.start();
    r.stop(300, 400);
    QTest::qWait(500);  // past the grace: SIGTERM was sent and ignored
    QVERIFY(done.isEmpty());
    QVERIFY(!runtest::processGone(pid));
    QVERIFY(done.wait(10000));
    QVERIFY2(t.elapsed() >= 650, qPrintable(QString::number(t.elapsed())));  // grace + terminate period
    QCOMPARE(done.first().at(1).toBool(), true);                             // ended by a signal
    QTRY_VERIFY_WITH_TIMEOUT(runtest::processGone(pid), 5000);
  }

  // Without a grace SIGTERM goes at once: a child that honours it ends before any kill.
  void stopWithoutGraceTerminatesAtOnce() {
    ProcessRunner r;
    QSignalSpy done(&r, &ProcessRunner::finished);
    QVERIFY(r.start(sh(QStringLiteral("exec sleep 60"))));
    QTRY_VERIFY_WITH_TIMEOUT(r.processId() > 0, 5000);
    QElapsedTimer t;
    t.start();
    r.stop(0, 60000);
    QVERIFY(done.wait(10000));
    QVERIFY(t.elapsed() < 5000);
    QCOMPARE(done.first().at(1).toBool(), true);
  }

  // A child that ends at the end of its input needs no signal: closing stdin is the cancel.
  void stopEndsAChildReadingStdinWithoutSignals() {
    ProcessRunner r;
    QSignalSpy done(&r, &ProcessRunner::finished);
    QVERIFY(r.start(sh(QStringLiteral("cat >/dev/null; exit 7"))));
    QTRY_VERIFY_WITH_TIMEOUT(r.processId() > 0, 5000);
    r.stop(60000, 60000);
    QVERIFY(done.wait(10000));
    QCOMPARE(done.first().at(0).toInt(), 7);
    QCOMPARE(done.first().at(1).toBool(), false);
  }

  void missingProgramIsReported() {
    ProcessRunner r;
    QSignalSpy failed(&r, &ProcessRunner::failedToStart);
    QSignalSpy done(&r, &ProcessRunner::finished);
    QVERIFY(r.start({dir_.filePath(QStringLiteral("no such program")), {}}));
    QTRY_VERIFY_WITH_TIMEOUT(!failed.isEmpty(), 5000);
    QVERIFY(done.isEmpty());
    QVERIFY(!r.isRunning());
    QCOMPARE(r.program(), dir_.filePath(QStringLiteral("no such program")));
  }

  void destroyingTheRunnerKillsTheChild() {
    qint64 pid = 0;
    {
      ProcessRunner r;
      QVERIFY(r.start(sh(QStringLiteral("trap '' TERM; exec sleep 60"))));
      QTRY_VERIFY_WITH_TIMEOUT(r.processId() > 0, 5000);
      pid = r.processId();
    }
    QTRY_VERIFY_WITH_TIMEOUT(runtest::processGone(pid), 5000);
  }

  void displayQuotesForTheShell() {
    const ProcessCommand c{QStringLiteral("/opt/my tools/cli"),
                           {QStringLiteral("run"), QStringLiteral("it's")}};
    QCOMPARE(c.display(), QStringLiteral("'/opt/my tools/cli' run 'it'\\''s'"));
  }
};

QTEST_MAIN(ProcessRunnerTest)
#include "process_runner_test.moc"
