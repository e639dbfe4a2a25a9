// The Session dock (offscreen): lists built from a session written with the store API,
// double-click opening a version, Compare against the simulator, and bad files shown as
// errors instead of crashing.
#include "docks/session_dock.h"

#include <QFile>
#include <QFileInfo>
#include <QPushButton>
#include <QSignalSpy>
#include <QStandardItemModel>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTreeView>
#include <QtTest>

#include "docks/session_controller.h"
#include "document/schedule_document.h"
#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/planning/generators.h"
#include "pipestudio/sessions/recording.h"
#include "pipestudio/sessions/session_store.h"
#include "shell/main_window.h"
#include "skip_in_ci.h"

using namespace ps::core;
using namespace ps::ui;
namespace sessions = ps::sessions;

namespace {

Schedule generated(ScheduleKind kind, int devices, int mb) {
  GeneratorOptions o;
  o.devices = devices;
  o.microbatches = mb;
  return generateSchedule(kind, o).value();
}

Timeline simulated(const Schedule& s, const CostProfile& p) {
  auto model = makeSimulationModel(s, p);
  if (!model) qFatal("model: %s", formatDiagnostics(model.errors()).c_str());
  auto t = simulate(s, *model);
  if (!t) qFatal("simulate: %s", formatDiagnostics(t.errors()).c_str());
  return std::move(t).value();
}

// A profile unlike the dock's defaults, so a comparison that used the wrong one would show.
CostProfile recordedProfile(int stages) {
  auto p = uniformCostProfile("F=2,I=1.5,W=0.5", stages).value();
  p.name = "slow-forward";
  return p;
}

// Clicks the cell's centre twice, as a user would to open it.
void doubleClickRow(QTreeView* view, int row) {
  view->scrollTo(view->model()->index(row, 1));
  const QRect r = view->visualRect(view->model()->index(row, 1));
  QTest::mouseClick(view->viewport(), Qt::LeftButton, Qt::NoModifier, r.center());
  QTest::mouseDClick(view->viewport(), Qt::LeftButton, Qt::NoModifier, r.center());
}

int rowOfId(QStandardItemModel* m, qint64 id) {
  for (int r = 0; r < m->rowCount(); ++r)
    if (m->item(r, 0)->data(Qt::UserRole).toLongLong() == id) return r;
  return -1;
}

}  // namespace

class SessionDockTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

  void init() {
    QVERIFY(dir_.isValid());
    path_ = dir_.filePath(QStringLiteral("test_%1.session").arg(counter_++));
    gpipe_ = generated(ScheduleKind::GPipe, 4, 8);
    gpipe_.name = "pipeline";
    onef1b_ = generated(ScheduleKind::OneFOneB, 4, 8);
    onef1b_.name = "pipeline";
    gpipeText_ = printDsl(gpipe_);
    onef1bText_ = printDsl(onef1b_);

    auto store = sessions::SessionStore::open(path_.toStdString());
    QVERIFY2(store.ok(), formatDiagnostics(store.errors()).c_str());
    auto v1 = store->addSchedule("pipeline", gpipeText_);
    QVERIFY(v1.ok());
    v1_ = *v1;
    auto v2 = store->addSchedule("pipeline", onef1bText_, v1_);
    QVERIFY(v2.ok());
    v2_ = *v2;
    // A simulated run of version 1 with its profile: recordRun files it against the newest
    // version whose text matches, i.e. a new version only when the text differs.
    profile_ = recordedProfile(4);
    sessions::RunRecordingRequest req;
    req.scheduleName = "pipeline";
    req.pipeText = gpipeText_;
    req.profileName = profile_.name;
    req.profileJson = costProfileToJson(profile_);
    req.run.label = "gpipe run";
    runTimeline_ = simulated(gpipe_, profile_);
    auto rec = sessions::recordRun(*store, req, runTimeline_);
    QVERIFY2(rec.ok(), formatDiagnostics(rec.errors()).c_str());
    run_ = rec->runId;
    runSchedule_ = rec->scheduleId;
  }

  // Issue 30 (16): two runs side by side on the Runs tab, and op by op when they are runs of
  // one schedule version.
  void runsCompareSideBySide() {
    qint64 second = 0;
    {
      auto store = sessions::SessionStore::open(path_.toStdString());
      QVERIFY(store.ok());
      // A second run of the same version, 1.5x slower forwards.
      Timeline slower = runTimeline_;
      for (auto& o : slower.ops)
        if (o.op.kind == OpKind::F) o.end = o.start + (o.end - o.start) * 1.5;
      slower.metrics = computeMetrics(slower);
      sessions::RunRecordingRequest req;
      req.scheduleName = "pipeline";
      req.pipeText = gpipeText_;
      req.run.label = "slower run";
      auto rec = sessions::recordRun(*store, req, slower);
      QVERIFY2(rec.ok(), formatDiagnostics(rec.errors()).c_str());
      second = rec->runId;
      QCOMPARE(rec->scheduleId, runSchedule_);
    }
    SessionDock dock;
    QVERIFY(dock.openSession(path_));
    QVERIFY(!dock.runCompareButton()->isEnabled());
    dock.runsView()->selectAll();
    QVERIFY(dock.runCompareButton()->isEnabled());
    dock.runCompareButton()->click();
    const QString text = dock.runCompareText();
    QVERIFY2(text.contains(QStringLiteral("run %1 gpipe run").arg(run_)), qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("run %1 slower run").arg(second)), qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("run %1 − run %2: makespan").arg(second).arg(run_)),
             qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("F 1.50×")), qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("B 1.00×")), qPrintable(text));
    QStringList perKind;
    const auto runs = dock.compareRuns({run_, second}, &perKind);
    QCOMPARE(runs.size(), size_t{2});
    QVERIFY(runs[0].ok && runs[1].ok);
    QCOMPARE(runs[1].ops, runs[0].ops);
    QCOMPARE(runs[0].label, QStringLiteral("gpipe run"));
  }

  // The session is the shell's (SessionController): the dock shows what it opens and closes,
  // re-reads the file when a writer says it stored something, and the dialogs' place to store
  // is the open session only while it may be written.
  void theDockFollowsTheShellsSession() {
    MainWindow w;
    SessionController* session = w.session();
    QVERIFY(session);
    QCOMPARE(w.sessionDock()->session(), session);
    QString error;
    QVERIFY2(session->open(path_, false, &error), qPrintable(error));
    QVERIFY(w.sessionDock()->hasSession());
    QCOMPARE(w.sessionDock()->sessionPath(), QFileInfo(path_).absoluteFilePath());
    QCOMPARE(session->writablePath(), QFileInfo(path_).absoluteFilePath());
    QCOMPARE(w.sessionDock()->runsModel()->rowCount(), 1);
    {
      // Another writer (a run dialog's store) adds a run; the dock shows it once told.
      auto store = sessions::SessionStore::open(path_.toStdString());
      QVERIFY(store.ok());
      sessions::RunRecordingRequest req;
      req.scheduleName = "pipeline";
      req.pipeText = gpipeText_;
      req.run.label = "second run";
      QVERIFY(sessions::recordRun(*store, req, runTimeline_).ok());
    }
    QCOMPARE(w.sessionDock()->runsModel()->rowCount(), 1);
    QSignalSpy written(session, &SessionController::written);
    session->notifyWritten();
    QCOMPARE(written.count(), 1);
    QCOMPARE(w.sessionDock()->runsModel()->rowCount(), 2);
    // Read-only: shown, but no place to store.
    QVERIFY2(session->open(path_, true, &error), qPrintable(error));
    QVERIFY(w.sessionDock()->isReadOnly());
    QVERIFY(session->writablePath().isEmpty());
    QCOMPARE(w.sessionDock()->runsModel()->rowCount(), 2);
    // A file that is not there: nothing open, the dock empty, the reason given.
    QVERIFY(!session->open(dir_.filePath(QStringLiteral("missing.session")), false, &error));
    QVERIFY(error.contains(QStringLiteral("no such file")));
    QVERIFY(!w.sessionDock()->hasSession());
    QCOMPARE(w.sessionDock()->runsModel()->rowCount(), 0);
    QVERIFY(session->writablePath().isEmpty());
  }

  void listsShowVersionsRunsAndProfiles() {
    SessionDock dock;
    QVERIFY2(dock.openSession(path_), qPrintable(dock.errorText()));
    QVERIFY(dock.errorText().isEmpty());
    QStandardItemModel* s = dock.schedulesModel();
    QVERIFY(s->rowCount() >= 2);
    const int r1 = rowOfId(s, v1_), r2 = rowOfId(s, v2_);
    QVERIFY(r1 >= 0 && r2 >= 0);
    QCOMPARE(s->item(r1, SessionDock::ScheduleName)->text(), QStringLiteral("pipeline"));
    QCOMPARE(s->item(r1, SessionDock::ScheduleParent)->text(), QString());
    QCOMPARE(s->item(r2, SessionDock::ScheduleParent)->text(), QString::number(v1_));
    QVERIFY(!s->item(r2, SessionDock::ScheduleCreated)->text().isEmpty());

    QStandardItemModel* runs = dock.runsModel();
    QCOMPARE(runs->rowCount(), 1);
    QCOMPARE(runs->item(0, SessionDock::RunLabel)->text(), QStringLiteral("gpipe run"));
    QCOMPARE(runs->item(0, SessionDock::RunStatusColumn)->text(), QStringLiteral("succeeded"));
    QCOMPARE(runs->item(0, SessionDock::RunMakespan)->text().toDouble(), runTimeline_.metrics.makespan);
    QVERIFY(
        runs->item(0, SessionDock::RunSchedule)->text().contains(QStringLiteral("v%1").arg(runSchedule_)));

    QStandardItemModel* p = dock.profilesModel();
    QCOMPARE(p->rowCount(), 1);
    QCOMPARE(p->item(0, SessionDock::ProfileName)->text(), QStringLiteral("slow-forward"));
    QCOMPARE(p->item(0, SessionDock::ProfileSourceColumn)->text(), QStringLiteral("manual"));
  }

  void doubleClickOpensTheVersionText() {
    SessionDock dock;
    dock.resize(600, 500);
    dock.show();
    QVERIFY(QTest::qWaitForWindowExposed(&dock));
    QVERIFY(dock.openSession(path_));
    QSignalSpy spy(&dock, &SessionDock::openScheduleRequested);
    doubleClickRow(dock.schedulesView(), rowOfId(dock.schedulesModel(), v2_));
    QCOMPARE(spy.count(), 1);
    QCOMPARE(spy.at(0).at(0).toString(), QString::fromStdString(onef1bText_));
    QCOMPARE(spy.at(0).at(1).toString(), QStringLiteral("pipeline"));
    QCOMPARE(spy.at(0).at(2).toLongLong(), v2_);
    QCOMPARE(dock.currentVersion().value_or(-1), v2_);
  }

  void openingARunEmitsItsTimeline() {
    SessionDock dock;
    QVERIFY(dock.openSession(path_));
    QSignalSpy spy(&dock, &SessionDock::openRunRequested);
    dock.openRun(run_);
    QCOMPARE(spy.count(), 1);
    const auto t = spy.at(0).at(1).value<Timeline>();
    QCOMPARE(t.ops.size(), runTimeline_.ops.size());
    QCOMPARE(t.metrics.makespan, runTimeline_.metrics.makespan);
    QCOMPARE(spy.at(0).at(2).toString(), QString::fromStdString(gpipeText_));
  }

  void compareSimulatesBothVersions() {
    SessionDock dock;
    // Version 2 has no run, so it uses the designer's model; the run's version (a third
    // version: its text differs from the newest) uses the profile recorded with the run.
    QVERIFY(runSchedule_ > v2_);
    const CostProfile current = defaultCostProfile(4);
    dock.setFallbackProfile(current);
    QVERIFY(dock.openSession(path_));
    QTreeView* view = dock.schedulesView();
    for (qint64 id : {v2_, runSchedule_})
      view->selectionModel()->select(dock.schedulesModel()->index(rowOfId(dock.schedulesModel(), id), 0),
                                     QItemSelectionModel::Select | QItemSelectionModel::Rows);
    dock.compareSelected();
    const auto& c = dock.lastComparison();
    QCOMPARE(c.size(), size_t(2));
    QVERIFY2(c[0].ok && c[1].ok, qPrintable(c[0].error + c[1].error));
    const Timeline t1 = simulated(gpipe_, profile_);
    const Timeline t2 = simulated(onef1b_, current);
    QCOMPARE(c[0].versionId, v2_);
    QCOMPARE(c[0].makespan, t2.metrics.makespan);
    QCOMPARE(c[0].bubbleRatio, t2.metrics.bubbleRatio);
    QCOMPARE(c[1].versionId, runSchedule_);
    QCOMPARE(c[1].profileName, QStringLiteral("slow-forward"));
    QCOMPARE(c[1].makespan, t1.metrics.makespan);
    QCOMPARE(c[1].bubbleRatio, t1.metrics.bubbleRatio);
    // Different costs, so the two makespans differ and both appear in the text.
    QVERIFY(t1.metrics.makespan != t2.metrics.makespan);
    QVERIFY(dock.compareText().contains(QString::number(t1.metrics.makespan, 'f', 2)));
    QVERIFY(dock.compareText().contains(QString::number(t2.metrics.makespan, 'f', 2)));
  }

  void saveVersionAddsAChildOfTheOpenedVersion() {
    SessionDock dock;
    QVERIFY(dock.openSession(path_));
    dock.openScheduleVersion(v2_);
    const int before = dock.schedulesModel()->rowCount();
    QVERIFY(dock.saveVersion(QStringLiteral("pipeline"), QString::fromStdString(gpipeText_)));
    QCOMPARE(dock.schedulesModel()->rowCount(), before + 1);
    const qint64 id = dock.currentVersion().value();
    const int r = rowOfId(dock.schedulesModel(), id);
    QVERIFY(r >= 0);
    QCOMPARE(dock.schedulesModel()->item(r, SessionDock::ScheduleParent)->text(), QString::number(v2_));
  }

  void corruptFileShowsAnErrorAndKeepsTheFile() {
    const QString bad = dir_.filePath(QStringLiteral("corrupt.session"));
    QByteArray bytes("SQLite format 3");
    bytes.append('\0');
    bytes.append(QByteArray(4096, '\x5a'));
    {
      QFile f(bad);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(bytes);
    }
    SessionDock dock;
    QVERIFY(!dock.openSession(bad));
    QVERIFY(!dock.hasSession());
    QVERIFY(!dock.errorText().isEmpty());
    QCOMPARE(dock.schedulesModel()->rowCount(), 0);
    dock.refresh();  // nothing open: must not crash
    dock.compareSelected();
    QFile f(bad);
    QVERIFY(f.open(QIODevice::ReadOnly));
    QCOMPARE(f.readAll(), bytes);  // never overwritten

    QVERIFY(!dock.openSession(dir_.filePath(QStringLiteral("missing.session"))));
    QVERIFY(dock.errorText().contains(QStringLiteral("no such file")));
    QVERIFY(!QFileInfo::exists(dir_.filePath(QStringLiteral("missing.session"))));
  }

  void newerFileOpensReadOnlyWithTheStoresMessage() {
    // PRAGMA user_version lives at byte 60 of the header (big-endian); the store closed the
    // file, so everything is in the main file.
    QFile f(path_);
    QVERIFY(f.open(QIODevice::ReadWrite));
    QVERIFY(f.seek(60));
    const quint32 v = quint32(sessions::kSchemaVersion + 1);
    const char be[4] = {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
    QCOMPARE(f.write(be, 4), qint64(4));
    f.close();

    SessionDock dock;
    QVERIFY2(dock.openSession(path_), qPrintable(dock.errorText()));
    QVERIFY(dock.isReadOnly());
    QVERIFY(dock.messageText().contains(QStringLiteral("read-only")));
    QVERIFY(dock.schedulesModel()->rowCount() >= 2);
    QVERIFY(!dock.saveVersion(QStringLiteral("pipeline"), QString::fromStdString(gpipeText_)));
    QVERIFY(!dock.errorText().isEmpty());
  }

  void mainWindowOpensVersionsAndRunsAndSavesNewVersions() {
    MainWindow w;
    QVERIFY(w.openSession(path_));
    QVERIFY(w.windowTitle().contains(QFileInfo(path_).fileName()));
    SessionDock* dock = w.sessionDock();
    // Opening version 1 (GPipe) loads it into the designer.
    dock->openScheduleVersion(v1_);
    QCOMPARE(printDsl(w.document()->schedule()), gpipeText_);
    // Opening the run loads its version with the run's profile and reports the stored makespan.
    dock->openRun(run_);
    QCOMPARE(printDsl(w.document()->schedule()), gpipeText_);
    QCOMPARE(w.document()->profile().name, std::string("slow-forward"));
    QCOMPARE(w.document()->analysis().makespan(), runTimeline_.metrics.makespan);
    QVERIFY2(w.statusText().contains(QString::number(runTimeline_.metrics.makespan, 'f', 2)),
             qPrintable(w.statusText()));
    // Save with a session open stores the edited schedule as a child of the opened version.
    QVERIFY(w.document()->splitBackward(OpRef{0, int(w.document()->schedule().devices[0].size()) - 1}) ||
            w.document()->moveStep(3, 1, 0));
    QVERIFY(w.document()->isModified());
    const int before = dock->schedulesModel()->rowCount();
    QVERIFY(w.save());
    QVERIFY(!w.document()->isModified());
    QCOMPARE(dock->schedulesModel()->rowCount(), before + 1);
    auto store = sessions::SessionStore::open(path_.toStdString(), {sessions::OpenMode::ReadOnly});
    QVERIFY(store.ok());
    auto v = store->schedule(dock->currentVersion().value());
    QVERIFY(v.ok());
    QCOMPARE(v->pipeText, printDsl(w.document()->schedule()));
    QCOMPARE(v->info.parentId.value_or(-1), runSchedule_);
  }

  void bundledExampleSessionOpensReadOnly() {
    const QString example = QStringLiteral(PIPESTUDIO_RESOURCES_DIR "/examples/example.session");
    if (!QFileInfo(example).isFile()) PS_SKIP_UNLESS_CI(QStringLiteral("no bundled example session"));
    const QByteArray before = [&] {
      QFile f(example);
      return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
    }();
    {
      SessionDock dock;
      QVERIFY2(dock.openSession(example, true), qPrintable(dock.errorText()));
      QVERIFY(dock.isReadOnly());
      // make_example_session.sh: three versions of "pipeline", "interleaved" and "deadlock";
      // six runs (1F1B twice), the deadlock one failed.
      QCOMPARE(dock.schedulesModel()->rowCount(), 5);
      QCOMPARE(dock.runsModel()->rowCount(), 6);
      int failed = 0;
      for (int r = 0; r < dock.runsModel()->rowCount(); ++r)
        failed += dock.runsModel()->item(r, SessionDock::RunStatusColumn)->text() == QStringLiteral("failed");
      QCOMPARE(failed, 1);
      QVERIFY(!dock.saveVersion(QStringLiteral("pipeline"), QStringLiteral("devices 1")));
    }
    QFile f(example);
    QVERIFY(f.open(QIODevice::ReadOnly));
    QVERIFY(f.readAll() == before);  // the bundled file is left as it was
  }

 private:
  QTemporaryDir dir_;
  int counter_ = 0;
  QString path_;
  Schedule gpipe_, onef1b_;
  std::string gpipeText_, onef1bText_;
  CostProfile profile_;
  Timeline runTimeline_;
  qint64 v1_ = 0, v2_ = 0, run_ = 0, runSchedule_ = 0;
};

QTEST_MAIN(SessionDockTest)
#include "session_dock_test.moc"
