// One run, two recorders: the GUI's Run dialog files a real run of pipestudio-cli from the run's
// event stream (storeRunInSession), while that same CLI process files it itself (`run --session
// --profile`, from the engine's report). Both go through sessions::planMeasuredRun, so the two
// session files hold the same rows: schedule, profile, the measured and the predicted run, their
// configuration, ops, transfers and memory samples. Only what says when or by whom a row was
// written may differ (created_ms, ended_ms, writer_pid, writer_host). And `compare` reads the
// partition back from either.
#include <sqlite3.h>

#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "document/schedule_document.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/sessions/measured_run.h"
#include "pipestudio/sessions/session_store.h"
#include "remote/run_controller.h"
#include "run_test_util.h"

using namespace ps::ui;
using namespace runtest;

namespace {

// Every row of `table` as "column=value" lines, in rowid order, without the columns that say when
// or by whom it was written.
std::vector<std::string> rowsOf(const QString& db, const char* table) {
  static const std::set<std::string> kWhenAndWho{"created_ms", "ended_ms", "writer_pid", "writer_host"};
  std::vector<std::string> out;
  sqlite3* h = nullptr;
  if (sqlite3_open_v2(db.toUtf8().constData(), &h, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(h);
    return {"cannot open " + db.toStdString()};
  }
  sqlite3_stmt* q = nullptr;
  const std::string sql = std::string("SELECT * FROM ") + table + " ORDER BY rowid";
  if (sqlite3_prepare_v2(h, sql.c_str(), -1, &q, nullptr) != SQLITE_OK) {
    out.push_back(std::string("cannot read ") + table + ": " + sqlite3_errmsg(h));
  } else {
    while (sqlite3_step(q) == SQLITE_ROW) {
      std::string row;
      for (int c = 0; c < sqlite3_column_count(q); ++c) {
        const std::string name = sqlite3_column_name(q, c);
        if (kWhenAndWho.count(name) != 0) continue;
        const unsigned char* text = sqlite3_column_text(q, c);
        row += name + "=" + (text ? reinterpret_cast<const char*>(text) : "NULL") + "\n";
      }
      out.push_back(row);
    }
  }
  sqlite3_finalize(q);
  sqlite3_close(h);
  return out;
}

}  // namespace

class RunRecordTest : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir dir_;

 private Q_SLOTS:
  void initTestCase() { QVERIFY(dir_.isValid()); }

  void guiAndCliRecordTheSameRunAlike() {
    const QString cliSession = dir_.filePath(QStringLiteral("cli.session"));
    const QString guiSession = dir_.filePath(QStringLiteral("gui.session"));
    const QString profilePath = dir_.filePath(QStringLiteral("tiny-profile.json"));
    // The design's cost profile: what the GUI document predicts with, given to the CLI as --profile.
    ps::core::CostProfile designProfile = defaultCostProfile(2);
    designProfile.name = "tiny-design";
    {
      QFile f(profilePath);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(QByteArray::fromStdString(ps::core::costProfileToJson(designProfile)));
    }
    // The CLI the Run dialog starts records the run itself as well; its own messages go to a file,
    // so the stderr the GUI captures is the run's (empty), as it would be without --session.
    const QString cli = writeScript(
        dir_.path(), QStringLiteral("recording-cli"),
        QStringLiteral("if [ \"$1\" = run ]; then exec '%1' \"$@\" --session '%2' --profile '%3' 2>'%4'; fi\n"
                       "exec '%1' \"$@\"\n")
            .arg(QStringLiteral(PIPESTUDIO_CLI), cliSession, profilePath,
                 dir_.filePath(QStringLiteral("cli.err"))));

    RunRequest r = modelRequest(QStringLiteral("mlp"), QStringLiteral("layers=2,hidden=8"),
                                {.iterations = 2, .warmup = 1, .checkGradients = true, .timeoutSeconds = 30});
    r.localCli = cli;
    RunController c;
    QSignalSpy done(&c, &RunController::runFinished);
    QVERIFY(c.start(r, QString::fromLatin1(kTinyPipe), QStringLiteral("tiny")));
    const RunOutcome o = waitForOutcome(c, done, 120000);
    QFile err(dir_.filePath(QStringLiteral("cli.err")));
    const QString cliErr = err.open(QIODevice::ReadOnly) ? QString::fromUtf8(err.readAll()) : QString();
    QVERIFY2(o.status == ps::core::RunState::Succeeded, qPrintable(o.message + "\n" + o.stderrText + cliErr));
    QVERIFY2(cliErr.contains(QStringLiteral("session ")), qPrintable(cliErr));  // the CLI filed it

    auto schedule = ps::core::parseDsl(kTinyPipe);
    QVERIFY(schedule);
    auto stored = storeRunInSession(guiSession, o, QStringLiteral("tiny"), QString::fromLatin1(kTinyPipe),
                                    &*schedule, &designProfile);
    QVERIFY2(stored, stored ? "" : stored.error().message.c_str());
    QVERIFY(stored->predictedRunId);

    for (const char* table : {"schedules", "profiles", "runs", "run_ops", "transfers", "memory_samples"}) {
      const auto fromCli = rowsOf(cliSession, table), fromGui = rowsOf(guiSession, table);
      QVERIFY2(!fromCli.empty(), table);
      QCOMPARE(fromGui.size(), fromCli.size());
      for (size_t i = 0; i < fromCli.size(); ++i) {
        // The lines that differ, not the whole row (a row of configuration and metrics is long).
        const QStringList a = QString::fromStdString(fromCli[i]).split(QLatin1Char('\n'));
        const QStringList b = QString::fromStdString(fromGui[i]).split(QLatin1Char('\n'));
        QString diff;
        for (qsizetype k = 0; k < std::max(a.size(), b.size()); ++k)
          if (a.value(k) != b.value(k))
            diff += QStringLiteral("CLI %1\nGUI %2\n").arg(a.value(k), b.value(k));
        QVERIFY2(
            diff.isEmpty(),
            qPrintable(QStringLiteral("%1 row %2 differs:\n%3").arg(QLatin1String(table)).arg(i).arg(diff)));
      }
    }

    // compare reads the run's partition from either recording (the measured run's configuration).
    const QString plan = dir_.filePath(QStringLiteral("tiny.pipe"));
    {
      QFile f(plan);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(kTinyPipe);
    }
    for (const QString& session : {cliSession, guiSession}) {
      auto store = ps::sessions::SessionStore::open(session.toStdString());
      QVERIFY(store);
      auto run = store->run(stored->runId);
      QVERIFY(run);
      const auto config = ps::sessions::runConfigFromJson(run->configJson);
      QCOMPARE(config.partition, (std::vector<int>{1, 1}));
      QVERIFY(config.gradientCheck && config.gradientCheck->passed);
      QCOMPARE(config.losses.size(), size_t(3));  // the warm-up iteration's too
      QProcess compare;
      compare.start(QStringLiteral(PIPESTUDIO_CLI),
                    {QStringLiteral("compare"), plan, QStringLiteral("%1:%2").arg(session).arg(stored->runId),
                     QStringLiteral("--profile"), profilePath});
      QVERIFY(compare.waitForFinished(60000));
      const QString text = QString::fromUtf8(compare.readAllStandardOutput());
      QVERIFY2(compare.exitCode() == 0, qPrintable(text + compare.readAllStandardError()));
      QVERIFY2(text.contains(QStringLiteral("partition 1,1")), qPrintable(text));
    }
  }
};

QTEST_MAIN(RunRecordTest)
#include "run_record_test.moc"
