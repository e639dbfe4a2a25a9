// The Search dock (offscreen): a small search run through the dock fills a sorted table and
// the best-makespan chart; the shown makespan is what the simulator gives for the candidate;
// Open as Design is one undo step that undo reverses exactly; Cancel and closing the window
// stop a long search promptly; bad inputs are reported in the dock.
#include "docks/search_dock.h"

#include <QChartView>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QElapsedTimer>
#include <QFile>
#include <QLineEdit>
#include <QLineSeries>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>
#include <memory>

#include "document/schedule_document.h"
#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/planning/generators.h"
#include "shell/main_window.h"

using namespace ps::core;
using namespace ps::ui;

namespace {

// Eight layers whose forward times differ, so splits and placements matter.
CostProfile unevenProfile(int layers) {
  CostProfile p = defaultCostProfile(layers);
  p.name = "uneven";
  for (int i = 0; i < layers; ++i) p.layers[static_cast<size_t>(i)].forwardMs = 1.0 + 0.25 * (i % 3);
  return p;
}

Schedule oneFOneB(int devices, int mb) {
  GeneratorOptions o;
  o.devices = devices;
  o.microbatches = mb;
  Schedule s = generateSchedule(ScheduleKind::OneFOneB, o).value();
  s.name = "1f1b";
  return s;
}

double simulatedMakespan(const Schedule& s, const CostProfile& p) {
  auto model = makeSimulationModel(s, p, s.partition);
  if (!model) qFatal("model: %s", formatDiagnostics(model.errors()).c_str());
  auto t = simulate(s, *model);
  if (!t) qFatal("simulate: %s", formatDiagnostics(t.errors()).c_str());
  return t->metrics.makespan;
}

// Every row opens except local-improvement variants other than the best, whose schedules the
// search does not keep (CandidateSummary::schedule is null for them).
bool rowMustOpen(const SearchDock* dock, int row) {
  const CandidateSummary& c = dock->result()->top[static_cast<size_t>(row)];
  const CandidateSummary& best = dock->result()->bestSummary;
  if (c.schedule || (c.name == best.name && std::abs(c.makespan - best.makespan) < 1e-9)) return true;
  return c.family != "list+local";
}

// Every row opens to the makespan it shows in the simulator, unless it is one whose schedule
// the search need not keep (rowMustOpen); `openable` counts the rows that open.
void checkRowsOpen(SearchDock* dock, int& openable) {
  QTableWidget* t = dock->table();
  for (int r = 0; r < t->rowCount(); ++r) {
    auto sched = dock->candidateSchedule(r);
    if (!sched) {
      QVERIFY2(!rowMustOpen(dock, r), dock->result()->top[static_cast<size_t>(r)].name.c_str());
      continue;
    }
    ++openable;
    const double m = t->item(r, SearchDock::ColMakespan)->data(Qt::UserRole).toDouble();
    QVERIFY(std::abs(simulatedMakespan(*sched, unevenProfile(8)) - m) < 1e-6);
  }
}

bool waitFinished(SearchDock* dock, QSignalSpy& spy, int ms) {
  if (!dock->isRunning()) return true;
  return spy.wait(ms) || !dock->isRunning();
}

void setInputs(SearchDock* dock, int devices, int mb, double seconds) {
  dock->devicesBox()->setValue(devices);
  dock->microbatchesBox()->setValue(mb);
  dock->timeLimitBox()->setValue(seconds);
  dock->seedBox()->setValue(7);
}

}  // namespace

class SearchDockTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

  void init() {
    window_ = std::make_unique<MainWindow>();
    window_->document()->load(oneFOneB(4, 8), unevenProfile(8));
    dock_ = window_->searchDock();
    QVERIFY(dock_);
  }
  void cleanup() { window_.reset(); }

  void searchFillsSortedTableAndChart() {
    setInputs(dock_, 4, 8, 1.0);
    QSignalSpy done(dock_, &SearchDock::searchFinished);
    QVERIFY(dock_->start());
    QVERIFY(dock_->isRunning());
    QVERIFY(!dock_->startButton()->isEnabled());
    QVERIFY(dock_->cancelButton()->isEnabled());
    QVERIFY(waitFinished(dock_, done, 60000));
    QCOMPARE(done.count(), 1);
    QCOMPARE(done.first().at(0).toBool(), true);
    QVERIFY2(dock_->errorText().isEmpty(), qPrintable(dock_->errorText()));
    QVERIFY(dock_->result());
    QVERIFY(dock_->startButton()->isEnabled());
    QVERIFY(!dock_->cancelButton()->isEnabled());

    QTableWidget* t = dock_->table();
    QVERIFY(t->rowCount() > 0);
    QCOMPARE(t->rowCount(), static_cast<int>(dock_->result()->top.size()));
    double prev = 0;
    for (int r = 0; r < t->rowCount(); ++r) {
      QCOMPARE(t->item(r, SearchDock::ColRank)->text(), QString::number(r + 1));
      const double m = t->item(r, SearchDock::ColMakespan)->data(Qt::UserRole).toDouble();
      QVERIFY(m > 0);
      QVERIFY2(m >= prev - 1e-9, "candidates are sorted by makespan, best first");
      prev = m;
    }
    // The best shown is what the simulator gives for that candidate, and the search's best.
    const double shown = t->item(0, SearchDock::ColMakespan)->data(Qt::UserRole).toDouble();
    auto best = dock_->candidateSchedule(0);
    QVERIFY(best);
    QVERIFY(std::abs(simulatedMakespan(*best, unevenProfile(8)) - shown) < 1e-6);
    QVERIFY(std::abs(dock_->result()->bestSummary.makespan - shown) < 1e-9);
    QCOMPARE(t->item(0, SearchDock::ColMakespan)->text(), QString::number(shown, 'f', 2));
    // Never worse than the document's 1F1B on the same profile (a built-in the search tries).
    QVERIFY(shown <= simulatedMakespan(window_->document()->schedule(), unevenProfile(8)) + 1e-9);

    // The chart holds the best makespan over time: first point at the first feasible
    // candidate, last at the best, times non-decreasing.
    QLineSeries* s = dock_->bestSeries();
    QVERIFY(s->count() >= 2);
    const auto pts = s->points();
    for (int i = 1; i < pts.size(); ++i) {
      QVERIFY(pts[i].x() >= pts[i - 1].x());
      QVERIFY(pts[i].y() <= pts[i - 1].y() + 1e-9);
    }
    QVERIFY(std::abs(pts.back().y() - shown) < 1e-9);
    QCOMPARE(dock_->progressBar()->value(), dock_->progressBar()->maximum());

    // Rows other than the best open too (built-ins regenerated, list-scheduled candidates
    // rebuilt from their knobs), each only when it simulates to the makespan it shows.
    int openable = 0;
    checkRowsOpen(dock_, openable);
    if (QTest::currentTestFailed()) return;
    QVERIFY(openable >= 1);
    QVERIFY(dock_->statusText().contains(QStringLiteral("Best")));
  }

  void openAsDesignIsOneUndoStep() {
    // A profile file different from the document's: the design takes it along, undo brings
    // the document's back.
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    CostProfile fileProfile = unevenProfile(8);
    fileProfile.name = "from-file";
    for (auto& l : fileProfile.layers) l.backwardInputMs = 1.5;
    const QString path = dir.filePath(QStringLiteral("prof_%1.json").arg(QCoreApplication::applicationPid()));
    {
      QFile f(path);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(QByteArray::fromStdString(costProfileToJson(fileProfile)));
    }
    QVERIFY(dock_->setProfileFile(path));
    QVERIFY(!dock_->usesDocumentProfile());
    QVERIFY(dock_->profileLabel().contains(QFileInfo(path).fileName()));

    setInputs(dock_, 4, 8, 0.8);
    QSignalSpy done(dock_, &SearchDock::searchFinished);
    QVERIFY(dock_->start());
    QVERIFY(waitFinished(dock_, done, 60000));
    QVERIFY(dock_->result());
    QVERIFY(dock_->table()->rowCount() > 0);

    ScheduleDocument* doc = window_->document();
    const Schedule before = doc->schedule();
    const std::string profileBefore = costProfileToJson(doc->profile());
    const std::string dslBefore = printDsl(before);
    const double makespanBefore = doc->analysis().makespan();
    const int commandsBefore = doc->undoStack()->count();

    QVERIFY2(dock_->openAsDesign(0), qPrintable(dock_->errorText()));
    QCOMPARE(doc->undoStack()->count(), commandsBefore + 1);
    auto cand = dock_->candidateSchedule(0);
    QVERIFY(cand);
    QCOMPARE(doc->schedule().devices, cand->devices);
    QCOMPARE(doc->schedule().pipeline, cand->pipeline);
    QCOMPARE(doc->schedule().partition, cand->partition);
    QCOMPARE(costProfileToJson(doc->profile()), costProfileToJson(fileProfile));
    QVERIFY(doc->analysis().valid());
    // The document simulates the design to the makespan the table showed.
    const double shown = dock_->table()->item(0, SearchDock::ColMakespan)->data(Qt::UserRole).toDouble();
    QVERIFY(std::abs(doc->analysis().makespan() - shown) < 1e-6);

    QVERIFY(dock_->infoText().contains(QStringLiteral("Undo restores")));
    doc->undoStack()->undo();
    // The hint about undoing is gone once undone.
    QVERIFY2(!dock_->infoText().contains(QStringLiteral("Undo restores")), qPrintable(dock_->infoText()));
    QVERIFY(doc->schedule() == before);
    QCOMPARE(printDsl(doc->schedule()), dslBefore);
    QCOMPARE(costProfileToJson(doc->profile()), profileBefore);
    QVERIFY(std::abs(doc->analysis().makespan() - makespanBefore) < 1e-12);

    doc->undoStack()->redo();
    QCOMPARE(doc->schedule().devices, cand->devices);
    QVERIFY(std::abs(doc->analysis().makespan() - shown) < 1e-6);

    // A lower-ranked candidate opens to its own makespan, again one undo step.
    const int last = dock_->table()->rowCount() - 1;
    int row = last;
    while (row > 0 && !dock_->candidateSchedule(row)) --row;
    QVERIFY(row > 0);
    const int commands = doc->undoStack()->index();
    QVERIFY(dock_->openAsDesign(row));
    QCOMPARE(doc->undoStack()->index(), commands + 1);
    const double rowMakespan =
        dock_->table()->item(row, SearchDock::ColMakespan)->data(Qt::UserRole).toDouble();
    QVERIFY(std::abs(doc->analysis().makespan() - rowMakespan) < 1e-6);
    doc->undoStack()->undo();
    QCOMPARE(doc->schedule().devices, cand->devices);

    // Back to the document's profile.
    dock_->useDocumentProfile();
    QVERIFY(dock_->usesDocumentProfile());
    QVERIFY(dock_->profileLabel().startsWith(QStringLiteral("document")));
  }

  void aNewDocumentClearsTheCandidates() {
    setInputs(dock_, 4, 8, 0.5);
    QSignalSpy done(dock_, &SearchDock::searchFinished);
    QVERIFY(dock_->start());
    QVERIFY(waitFinished(dock_, done, 60000));
    QVERIFY(dock_->table()->rowCount() > 0);
    // File > New: 2 devices, the default profile. The 4-device candidates must not stay on offer.
    const Schedule fresh = oneFOneB(2, 4);
    window_->document()->load(fresh, defaultCostProfile(fresh));
    QCOMPARE(dock_->table()->rowCount(), 0);
    QVERIFY(!dock_->result());
    QVERIFY(!dock_->openButton()->isEnabled());
    QVERIFY(dock_->bestSeries()->count() == 0);
    QVERIFY2(dock_->infoText().contains(QStringLiteral("cleared")), qPrintable(dock_->infoText()));
    QVERIFY(!dock_->openAsDesign(0));
    QVERIFY(window_->document()->schedule() == fresh);
    QCOMPARE(dock_->devicesBox()->value(), 2);  // the inputs follow the new document
  }

  void memoryBoundCandidatesOpenToo() {
    // A limit under what keeping every activation needs: candidates recompute (per stage or
    // per micro-batch), and the rows still open to the makespan they show.
    window_->document()->load(oneFOneB(4, 8), unevenProfile(8));
    setInputs(dock_, 4, 8, 1.0);
    dock_->memoryEdit()->setText(QStringLiteral("6"));
    QSignalSpy done(dock_, &SearchDock::searchFinished);
    QVERIFY(dock_->start());
    QVERIFY(waitFinished(dock_, done, 60000));
    QVERIFY2(dock_->errorText().isEmpty(), qPrintable(dock_->errorText()));
    QTableWidget* t = dock_->table();
    QVERIFY(t->rowCount() > 0);
    for (int r = 0; r < t->rowCount(); ++r)
      QVERIFY(dock_->result()->top[static_cast<size_t>(r)].peakMemoryBytes <= 6LL << 30);
    int openable = 0;
    checkRowsOpen(dock_, openable);
    if (QTest::currentTestFailed()) return;
    QVERIFY(openable >= 1);
  }

  // Starts a search far too large to finish on its own and waits until it is past the
  // built-ins (always run in full) and into the exploration, which stops at its next candidate.
  void startLongSearch(QSignalSpy* done) {
    window_->document()->load(oneFOneB(8, 128), unevenProfile(32));
    setInputs(dock_, 8, 128, 300);
    dock_->maxChunksBox()->setValue(4);
    QVERIFY(done->isValid());
    QVERIFY(dock_->start());
    QElapsedTimer warm;
    warm.start();
    while (warm.elapsed() < 60000 && dock_->isRunning() &&
           !dock_->progressBar()->format().contains(QStringLiteral("list scheduler")))
      QTest::qWait(20);
    QVERIFY2(dock_->isRunning(), "a 300 s search is still running");
    QVERIFY(dock_->progressBar()->format().contains(QStringLiteral("list scheduler")));
    qInfo("exploring after %lld ms", static_cast<long long>(warm.elapsed()));
  }

  void cancelStopsPromptlyWithBestSoFar() {
    QSignalSpy done(dock_, &SearchDock::searchFinished);
    startLongSearch(&done);
    if (QTest::currentTestFailed()) return;
    QElapsedTimer t;
    t.start();
    dock_->cancel();
    QVERIFY(waitFinished(dock_, done, 10000));
    const qint64 ms = t.elapsed();
    QVERIFY2(ms < 3000, qPrintable(QStringLiteral("cancel took %1 ms").arg(ms)));
    qInfo("cancelled in %lld ms", static_cast<long long>(ms));
    QVERIFY(dock_->result());
    QVERIFY(dock_->result()->cancelled);
    QVERIFY(dock_->table()->rowCount() > 0);  // the best so far
    QVERIFY(dock_->statusText().contains(QStringLiteral("Cancelled")));
  }

  void closingTheWindowWhileSearchingJoins() {
    QSignalSpy done(dock_, &SearchDock::searchFinished);
    startLongSearch(&done);
    if (QTest::currentTestFailed()) return;
    QElapsedTimer t;
    t.start();
    window_->close();
    window_.reset();  // cancels and joins the worker
    QVERIFY2(t.elapsed() < 3000, qPrintable(QStringLiteral("closing took %1 ms").arg(t.elapsed())));
    QTest::qWait(50);  // queued deliveries for the deleted dock are dropped
  }

  void badProfileFileIsReported() {
    QTemporaryDir dir;
    const QString bad = dir.filePath(QStringLiteral("bad_%1.json").arg(QCoreApplication::applicationPid()));
    {
      QFile f(bad);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write("{ \"layers\": [ { \"forward_ms\": ");
    }
    const QString label = dock_->profileLabel();
    QVERIFY(!dock_->setProfileFile(bad));
    QVERIFY(!dock_->errorText().isEmpty());
    QVERIFY(dock_->statusText().contains(QStringLiteral("cost profile")));
    QVERIFY(dock_->usesDocumentProfile());
    QCOMPARE(dock_->profileLabel(), label);

    QVERIFY(!dock_->setProfileFile(dir.filePath(QStringLiteral("missing.json"))));
    QVERIFY(dock_->errorText().contains(QStringLiteral("Cannot read")));
  }

  void badInputsAndNothingFittingAreReported() {
    dock_->memoryEdit()->setText(QStringLiteral("lots"));
    QVERIFY(!dock_->start());
    QVERIFY(dock_->errorText().contains(QStringLiteral("Memory limit")));
    QVERIFY(!dock_->isRunning());

    // 1 MiB per device: not even full recompute fits.
    dock_->memoryEdit()->setText(QStringLiteral("0.001"));
    setInputs(dock_, 4, 8, 1.0);
    QSignalSpy done(dock_, &SearchDock::searchFinished);
    QVERIFY(dock_->start());
    QVERIFY(waitFinished(dock_, done, 60000));
    QCOMPARE(done.count(), 1);
    QCOMPARE(done.first().at(0).toBool(), false);
    QVERIFY(dock_->errorText().contains(QStringLiteral("fits")));
    QCOMPARE(dock_->table()->rowCount(), 0);
    QVERIFY(!dock_->result());
    QVERIFY(!dock_->openAsDesign(0));

    // More devices than layers: the search's own message.
    dock_->memoryEdit()->clear();
    setInputs(dock_, 16, 8, 1.0);
    QSignalSpy done2(dock_, &SearchDock::searchFinished);
    QVERIFY(dock_->start());
    QVERIFY(waitFinished(dock_, done2, 60000));
    QVERIFY(dock_->errorText().contains(QStringLiteral("devices")));
  }

  void memoryLimitParsing() {
    std::optional<std::int64_t> v;
    QVERIFY(parseGibibytes(QString(), v));
    QVERIFY(!v);
    QVERIFY(parseGibibytes(QStringLiteral(" 1.5 GiB"), v));
    QCOMPARE(*v, static_cast<std::int64_t>(1.5 * 1024 * 1024 * 1024));
    QVERIFY(parseGibibytes(QStringLiteral("80"), v));
    QCOMPARE(*v, 80LL << 30);
    QVERIFY(!parseGibibytes(QStringLiteral("-1"), v));
    QVERIFY(!parseGibibytes(QStringLiteral("12 GB"), v));
  }

  void toolsMenuRaisesTheDock() {
    QAction* found = nullptr;
    for (QAction* a : window_->findChildren<QAction*>())
      if (a->text().contains(QStringLiteral("Search Schedules"))) found = a;
    if (!found) QFAIL("no Search Schedules action");
    dock_->hide();
    found->trigger();
    QVERIFY(dock_->isVisibleTo(window_.get()));
    // And the View menu toggles it.
    QVERIFY(dock_->toggleViewAction());
    bool inView = false;
    for (QAction* a : window_->findChildren<QAction*>())
      if (a == dock_->toggleViewAction()) inView = true;
    QVERIFY(inView || !dock_->toggleViewAction()->associatedObjects().isEmpty());
  }

  // The objective selector: steady state (overlap boundary) is searched, said in the header and
  // the message, and rows of equal time are ordered by peak memory (issue: equal makespans
  // used to open the memory-hungriest).
  void steadyStateObjectiveAndMemoryTieBreak() {
    QComboBox* obj = dock_->objectiveBox();
    QVERIFY(obj);
    QCOMPARE(obj->currentData().toString(), QStringLiteral("makespan"));
    obj->setCurrentIndex(obj->findData(QStringLiteral("steady-state")));
    setInputs(dock_, 4, 8, 2.0);
    QSignalSpy done(dock_, &SearchDock::searchFinished);
    QVERIFY(dock_->start());
    QVERIFY(waitFinished(dock_, done, 60000));
    QVERIFY2(dock_->errorText().isEmpty(), qPrintable(dock_->errorText()));
    QVERIFY(dock_->result());
    const SearchResult& r = *dock_->result();
    QCOMPARE(r.objective, SearchObjective::SteadyState);
    QTableWidget* t = dock_->table();
    QCOMPARE(t->horizontalHeaderItem(SearchDock::ColMakespan)->text(), QStringLiteral("Steady ms"));
    QVERIFY(t->rowCount() > 1);
    for (int row = 0; row < t->rowCount(); ++row) {
      const CandidateSummary& c = r.top[static_cast<size_t>(row)];
      QVERIFY(c.steadyStateMs > 0);
      QCOMPARE(t->item(row, SearchDock::ColMakespan)->data(Qt::UserRole).toDouble(), c.steadyStateMs);
      if (row > 0) {
        const CandidateSummary& p = r.top[static_cast<size_t>(row) - 1];
        QVERIFY(p.objective <= c.objective + 1e-9);
        if (std::abs(p.objective - c.objective) <= 1e-9) QVERIFY(p.peakMemoryBytes <= c.peakMemoryBytes);
      }
    }
    QVERIFY2(dock_->infoText().contains(QStringLiteral("steady-state")), qPrintable(dock_->infoText()));
  }

  void renamedCandidatesStillOpenFromTheirRecipe() {
    // The dock rebuilds a candidate from its recipe, never from its display name: with every
    // name changed and no schedule kept, every row still opens, to the makespan it shows.
    setInputs(dock_, 4, 8, 1.0);
    dock_->memoryEdit()->setText(QStringLiteral("6"));
    QSignalSpy done(dock_, &SearchDock::searchFinished);
    QVERIFY(dock_->start());
    QVERIFY(waitFinished(dock_, done, 60000));
    QVERIFY(dock_->result());
    SearchResult r = *dock_->result();
    QVERIFY(!r.top.empty());
    for (size_t i = 0; i < r.top.size(); ++i) {
      r.top[i].name = "candidate number " + std::to_string(i);
      r.top[i].schedule = nullptr;
    }
    r.bestSummary.name = "renamed best";
    dock_->showResult(r, dock_->searchedProfile());
    QTableWidget* t = dock_->table();
    QCOMPARE(t->rowCount(), static_cast<int>(r.top.size()));
    for (int row = 0; row < t->rowCount(); ++row) {
      auto sched = dock_->candidateSchedule(row);
      QVERIFY2(sched, r.top[static_cast<size_t>(row)].name.c_str());
      const double m = t->item(row, SearchDock::ColMakespan)->data(Qt::UserRole).toDouble();
      QVERIFY(std::abs(simulatedMakespan(*sched, unevenProfile(8)) - m) < 1e-6);
    }
    const int last = t->rowCount() - 1;
    QVERIFY2(dock_->openAsDesign(last), qPrintable(dock_->errorText()));
    QCOMPARE(window_->document()->schedule().devices, dock_->candidateSchedule(last)->devices);
  }

 private:
  std::unique_ptr<MainWindow> window_;
  SearchDock* dock_ = nullptr;
};

QTEST_MAIN(SearchDockTest)
#include "search_dock_test.moc"
