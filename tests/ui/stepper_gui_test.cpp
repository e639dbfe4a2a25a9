// Step-through in the GUI (offscreen): the Debug actions step in Stepper::events order, breakpoints
// stop playback, the State dock's content at chosen times on a hand-built run, the memory
// chart's playhead and the diagnostics follow, and a failed run opens where it stopped.
#include <QAction>
#include <QDockWidget>
#include <QLineSeries>
#include <QListWidget>
#include <QMouseEvent>
#include <QPushButton>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTreeWidget>
#include <QtTest>
#include <cmath>

#include "debugger/state_panel.h"
#include "debugger/stepper_controller.h"
#include "document/schedule_document.h"
#include "panels/diagnostics_panel.h"
#include "panels/memory_chart.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/planning/generators.h"
#include "shell/main_window.h"
#include "timeline/timeline_view.h"
#include "ui_fixtures.h"

using namespace ps::core;
using namespace ps::ui;

namespace {

using ps::test::oneFOneB;
using ps::test::op;

// A measured run of 1F1B on 2 devices, 2 micro-batches, by hand (ms):
//   device 0: F0@s0 0-2, F1@s0 2-4, B0@s0 9-12, B1@s0 13.5-16
//   device 1: F0@s1 3-5, B0@s1 5-8, F1@s1 8-10, B1@s1 10-13
// transfers: F0 0→1 2-3, F1 0→1 4-5, B0 1→0 8-9, B1 1→0 13-13.5.
Timeline handRun() {
  Timeline t;
  t.source = TimelineSource::Measured;
  t.label = "hand";
  t.devices = 2;
  auto add = [&](int d, int step, Op o, double s, double e) { t.ops.push_back({d, step, o, false, s, e}); };
  add(0, 0, op(OpKind::F, 0, 0), 0, 2);
  add(0, 1, op(OpKind::F, 0, 1), 2, 4);
  add(0, 2, op(OpKind::B, 0, 0), 9, 12);
  add(0, 3, op(OpKind::B, 0, 1), 13.5, 16);
  add(1, 0, op(OpKind::F, 1, 0), 3, 5);
  add(1, 1, op(OpKind::B, 1, 0), 5, 8);
  add(1, 2, op(OpKind::F, 1, 1), 8, 10);
  add(1, 3, op(OpKind::B, 1, 1), 10, 13);
  auto tr = [&](int a, int b, Op p, Op c, double s, double e) {
    t.transfers.push_back({a, b, p, c, 1 << 20, s, e});
  };
  tr(0, 1, op(OpKind::F, 0, 0), op(OpKind::F, 1, 0), 2, 3);
  tr(0, 1, op(OpKind::F, 0, 1), op(OpKind::F, 1, 1), 4, 5);
  tr(1, 0, op(OpKind::B, 1, 0), op(OpKind::B, 0, 0), 8, 9);
  tr(1, 0, op(OpKind::B, 1, 1), op(OpKind::B, 0, 1), 13, 13.5);
  t.memory = {{{0, 100 << 20}, {2, 200 << 20}, {4, 300 << 20}, {12, 200 << 20}, {16, 100 << 20}},
              {{0, 100 << 20}, {5, 200 << 20}, {8, 100 << 20}}};
  t.metrics = computeMetrics(t);
  return t;
}

bool anyRowContains(const QStringList& rows, const QString& needle) {
  for (const QString& r : rows)
    if (r.contains(needle)) return true;
  return false;
}

}  // namespace

class StepperGuiTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { ps::test::useTestSettings(); }

  void nextAndPreviousFollowStepperEvents() {
    MainWindow w;
    ps::test::load(w, oneFOneB(3, 4), defaultCostProfile(3), QSize(1400, 900));
    StepperController* sc = w.stepperController();
    // An independent Stepper over the same simulated timeline gives the expected order.
    const Analysis& a = w.document()->analysis();
    auto ref = Stepper::make(a.timeline, a.schedule);
    QVERIFY(ref.ok());
    const auto& events = ref->events();
    QCOMPARE(events.size(), 2 * a.timeline.ops.size());
    sc->startAction()->trigger();
    QCOMPARE(sc->position(), size_t{0});
    QVERIFY(!sc->previousAction()->isEnabled());
    for (size_t i = 0; i < events.size(); ++i) {
      sc->nextAction()->trigger();
      QCOMPARE(sc->position(), i + 1);
      QCOMPARE(sc->time(), events[i].time);
      // The status bar names the event just applied.
      const TimelineOp& o = a.timeline.ops[events[i].op];
      const QString name = QString::fromStdString(a.schedule.opName(o.op));
      const QString verb =
          events[i].kind == StepEventKind::Start ? QStringLiteral("starts") : QStringLiteral("ends");
      QVERIFY2(w.statusText().contains(QStringLiteral("device %1 %2 %3").arg(o.device).arg(verb, name)),
               qPrintable(w.statusText()));
      // The playhead is drawn at the event's time.
      QVERIFY(w.timeline()->playhead().has_value());
      QCOMPARE(*w.timeline()->playhead(), events[i].time);
    }
    QVERIFY(!sc->nextAction()->isEnabled());
    QVERIFY(!w.timeline()->stepMarks().dimFuture);  // at the end nothing is in the future
    sc->previousAction()->trigger();
    QVERIFY(w.timeline()->stepMarks().dimFuture);  // while stepping, what is to come is veiled
    sc->nextAction()->trigger();
    for (size_t i = events.size(); i > 0; --i) {
      sc->previousAction()->trigger();
      QCOMPARE(sc->position(), i - 1);
    }
    // End and start.
    sc->endAction()->trigger();
    QCOMPARE(sc->position(), events.size());
    sc->startAction()->trigger();
    QCOMPARE(sc->position(), size_t{0});
  }

  void noPlayheadUntilTheUserSteps() {
    MainWindow w;
    ps::test::load(w, oneFOneB(3, 4), defaultCostProfile(3), QSize(1400, 900));
    QApplication::processEvents();
    StepperController* sc = w.stepperController();
    // A designer who never steps pays nothing: no playhead, no cursor.
    QVERIFY(!sc->engaged());
    QVERIFY(!w.timeline()->playhead().has_value());
    QVERIFY(!w.memoryChart()->playheadTime().has_value());
    sc->nextAction()->trigger();
    QVERIFY(sc->engaged());
    QCOMPARE(sc->position(), size_t{1});
    QVERIFY(w.timeline()->playhead().has_value());
    // An edit keeps the playhead (rebuilt on the new simulation).
    w.document()->load(oneFOneB(3, 5), defaultCostProfile(3));
    QApplication::processEvents();
    QVERIFY(w.timeline()->playhead().has_value());
    QCOMPARE(sc->stepper()->size(), 2 * w.document()->analysis().timeline.ops.size());
  }

  void runToSelectedOpStopsAtItsStart() {
    MainWindow w;
    ps::test::load(w, oneFOneB(3, 4), defaultCostProfile(3), QSize(1400, 900));
    StepperController* sc = w.stepperController();
    QVERIFY(w.selectOpByName(QStringLiteral("B2@s1")));
    sc->runToSelectedAction()->trigger();
    const Stepper* s = sc->stepper();
    QVERIFY(s);
    const StepEvent& e = s->events()[sc->position() - 1];
    QCOMPARE(e.kind, StepEventKind::Start);
    QCOMPARE(s->timeline().ops[e.op].op, op(OpKind::B, 1, 2));
    // The op runs at the playhead, and the State dock says so.
    const auto rows = StatePanel::rows(w.statePanel()->deviceItem(1));
    QVERIFY2(anyRowContains(rows, QStringLiteral("running: B2@s1")), qPrintable(rows.join('\n')));
  }

  void breakpointsStopPlayback() {
    MainWindow w;
    ps::test::load(w, oneFOneB(3, 4), defaultCostProfile(3), QSize(1400, 900));
    StepperController* sc = w.stepperController();
    const Stepper* s = sc->stepper();
    QVERIFY(s);
    // F9 on the selected op: "when device 2 starts B1@s2".
    QVERIFY(w.selectOpByName(QStringLiteral("B1@s2")));
    sc->toggleBreakpointAction()->trigger();
    QCOMPARE(sc->breakpoints().size(), size_t{1});
    QCOMPARE(w.timeline()->stepMarks().breakpoints.size(), size_t{1});
    // The event where playback must stop, found by hand.
    size_t want = 0;
    for (size_t i = 0; i < s->events().size(); ++i) {
      const auto& e = s->events()[i];
      const TimelineOp& o = s->timeline().ops[e.op];
      if (e.kind == StepEventKind::Start && o.device == 2 && o.op == op(OpKind::B, 2, 1)) {
        want = i + 1;
        break;
      }
    }
    QVERIFY(want > 0);
    sc->goToStart();
    sc->setSpeed(1);  // 1 ms per second: 100 ms of wall time per tick is 0.1 ms of timeline
    sc->playAction()->trigger();
    QVERIFY(sc->isPlaying());
    int ticks = 0;
    while (sc->isPlaying() && ticks < 100000) {
      const double before = sc->time();
      sc->advance(100);
      ++ticks;
      if (sc->isPlaying()) {
        QVERIFY(sc->time() >= before);
        QVERIFY(sc->position() < want);  // never plays past the breakpoint
      }
    }
    QVERIFY(!sc->isPlaying());
    QCOMPARE(sc->position(), want);
    QCOMPARE(sc->time(), s->timeAt(want));
    QVERIFY(ticks > 10);  // it played, it did not jump
    QVERIFY(w.statusText().contains(QStringLiteral("Breakpoint")));

    // A breakpoint added in the list on the end of F3 on any device: run to it from here.
    Breakpoint end;
    end.kind = OpKind::F;
    end.microbatch = 3;
    end.on = StepEventKind::End;
    auto* panel = w.findChild<BreakpointsPanel*>();
    QVERIFY(panel);
    panel->setDraft(end);
    QPushButton* add = nullptr;
    for (auto* b : panel->findChildren<QPushButton*>())
      if (b->text().remove(QLatin1Char('&')) == QStringLiteral("Add")) add = b;
    QVERIFY(add);
    add->click();
    QCOMPARE(sc->breakpoints().size(), size_t{2});
    QCOMPARE(panel->list()->count(), 2);
    QVERIFY(panel->list()->item(1)->text().contains(QStringLiteral("when any device ends F3")));
    QVERIFY(sc->runToBreakpoint());
    const StepEvent& e = s->events()[sc->position() - 1];
    QCOMPARE(e.kind, StepEventKind::End);
    QCOMPARE(s->timeline().ops[e.op].op.microbatch, 3);
    QCOMPARE(s->timeline().ops[e.op].op.kind, OpKind::F);
    // Back to the previous breakpoint hit.
    QVERIFY(sc->runBackToBreakpoint());
    QVERIFY(sc->position() <= want);
    // Toggling again removes the one on B1@s2; without breakpoints playback reaches the end.
    sc->toggleBreakpoint(2, op(OpKind::B, 2, 1));
    sc->removeBreakpoint(0);
    QVERIFY(sc->breakpoints().empty());
    sc->goToStart();
    sc->play();
    sc->advance(1e9);
    QVERIFY(!sc->isPlaying());
    QCOMPARE(sc->position(), s->size());
  }

  void stateDockAtChosenTimes() {
    MainWindow w;
    ps::test::load(w, oneFOneB(2, 2), defaultCostProfile(2), QSize(1400, 900));
    w.setMeasuredOverlay(handRun(), QStringLiteral("hand"));
    StepperController* sc = w.stepperController();
    QVERIFY(sc->stepsMeasured());
    QCOMPARE(sc->position(), size_t{0});  // a complete run opens at its start
    StatePanel* sp = w.statePanel();

    // t = 2.5: device 0 runs F1@s0; device 1 waits for F0@s0's activation, in the air.
    sc->seekTime(2.5);
    QVERIFY(sp->headerText().contains(QStringLiteral("t = 2.50 ms")));
    QStringList d0 = StatePanel::rows(sp->deviceItem(0));
    QStringList d1 = StatePanel::rows(sp->deviceItem(1));
    QVERIFY2(anyRowContains(d0, QStringLiteral("running: F1@s0")), qPrintable(d0.join('\n')));
    QVERIFY2(anyRowContains(d0, QStringLiteral("in flight: 2 micro-batch(es): 0, 1")),
             qPrintable(d0.join('\n')));
    QVERIFY2(anyRowContains(d1, QStringLiteral("next: F0@s1")), qPrintable(d1.join('\n')));
    QVERIFY2(anyRowContains(d1, QStringLiteral("in flight: none")), qPrintable(d1.join('\n')));
    QTreeWidgetItem* next1 = sp->deviceItem(1)->child(0);
    QVERIFY(next1->text(0) == QStringLiteral("next"));
    const QStringList waits1 = StatePanel::rows(next1);
    QVERIFY2(
        anyRowContains(waits1, QStringLiteral("waits for: F0@s0 on device 0: in-transit (arrives 3.00 ms)")),
        qPrintable(waits1.join('\n')));
    // Waiting for an activation in the air is the pipeline's normal wait, not "blocked".
    QVERIFY2(sp->deviceItem(1)->text(1).startsWith(QStringLiteral("waiting")),
             qPrintable(sp->deviceItem(1)->text(1)));
    QVERIFY(!sp->deviceItem(1)->font(1).bold());
    QVERIFY(StatePanel::rows(sp->transfersItem())
                .join('\n')
                .contains(QStringLiteral("F0@s0 → F0@s1: device 0 → 1, 2.00 → 3.00 ms")));
    // Measured memory at the playhead, and the plan's at the same progress.
    QVERIFY(anyRowContains(d0, QStringLiteral("memory: 200 MiB measured")));
    // The timeline marks device 1's waiting op (not red) and the running one.
    const auto& marks = w.timeline()->stepMarks();
    QCOMPARE(marks.running.size(), size_t{1});
    QCOMPARE(marks.running[0].second, op(OpKind::F, 0, 1));
    QVERIFY(marks.blocked.empty());
    QCOMPARE(marks.waiting.size(), size_t{1});
    QCOMPARE(marks.waiting[0].first, 1);
    QCOMPARE(marks.waiting[0].second, op(OpKind::F, 1, 0));

    // t = 6: device 0 is blocked on B0@s1, still running on device 1; both hold micro-batch 0.
    sc->seekTime(6);
    d0 = StatePanel::rows(sp->deviceItem(0));
    d1 = StatePanel::rows(sp->deviceItem(1));
    QVERIFY2(anyRowContains(d1, QStringLiteral("running: B0@s1  (5.00 ms → 8.00 ms)")),
             qPrintable(d1.join('\n')));
    QVERIFY2(anyRowContains(d0, QStringLiteral("next: B0@s0")), qPrintable(d0.join('\n')));
    QVERIFY(sp->deviceItem(0)->text(1).startsWith(QStringLiteral("waiting")));
    QVERIFY(sp->deviceItem(0)->text(1).contains(QStringLiteral("2 / 4 ops done")));
    const QStringList waits0 = StatePanel::rows(sp->deviceItem(0)->child(0));
    QVERIFY2(anyRowContains(waits0, QStringLiteral("waits for: B0@s1 on device 1: running")),
             qPrintable(waits0.join('\n')));
    QVERIFY2(anyRowContains(d0, QStringLiteral("in flight: 2 micro-batch(es): 0, 1")),
             qPrintable(d0.join('\n')));
    QVERIFY2(anyRowContains(d1, QStringLiteral("in flight: 1 micro-batch(es): 0")),
             qPrintable(d1.join('\n')));
    QVERIFY(StatePanel::rows(sp->transfersItem()).isEmpty());

    // Clicking the op it waits for selects it on the timeline.
    QTreeWidgetItem* wait = sp->deviceItem(0)->child(0)->child(0);
    Q_EMIT sp->tree()->itemClicked(wait, 1);
    QVERIFY(w.timeline()->selectedOp().has_value());
    QCOMPARE(*w.timeline()->selectedOp(), op(OpKind::B, 1, 0));

    // Another run laid over the plan opens at its own start, not at this one's playhead.
    w.setMeasuredOverlay(handRun(), QStringLiteral("hand, again"));
    QCOMPARE(sc->position(), size_t{0});

    // At the end both devices are finished.
    sc->goToEnd();
    QVERIFY(sp->deviceItem(0)->text(1).startsWith(QStringLiteral("finished")));
    QVERIFY(sp->deviceItem(1)->text(1).startsWith(QStringLiteral("finished")));
  }

  void memoryCursorFollowsThePlayhead() {
    MainWindow w;
    ps::test::load(w, oneFOneB(2, 4), defaultCostProfile(2), QSize(1400, 900));
    StepperController* sc = w.stepperController();
    MemoryChart* chart = w.memoryChart();
    sc->seekTime(3.25);
    QVERIFY(chart->playheadTime().has_value());
    QCOMPARE(*chart->playheadTime(), 3.25);
    QVERIFY(chart->playheadSeries()->isVisible());
    QCOMPARE(chart->playheadSeries()->at(0).x(), 3.25);
    sc->next();
    QCOMPARE(chart->playheadSeries()->at(0).x(), sc->time());
    // Reloading the document rebuilds the chart; the playhead stays on it.
    w.document()->load(oneFOneB(2, 4), defaultCostProfile(2));
    QApplication::processEvents();
    QVERIFY(chart->playheadSeries() && chart->playheadSeries()->isVisible());
    QCOMPARE(chart->playheadSeries()->at(0).x(), sc->toAxis(sc->time()));

    // Measured run scaled onto the plan: the chart and the timeline use the plan's axis.
    w.setOverlayScaled(true);
    Timeline m = w.document()->analysis().timeline;
    m.source = TimelineSource::Measured;
    for (auto& o : m.ops) {
      o.start *= 2;
      o.end *= 2;
    }
    m.transfers.clear();
    m.metrics = computeMetrics(m);
    w.setMeasuredOverlay(m, QStringLiteral("twice as slow"));
    sc->seekTime(4.0);  // measured ms
    const double axis = w.measuredOverlay()->comparison()->align(4.0);
    QVERIFY(std::abs(axis - 2.0) < 1e-9);
    QCOMPARE(*w.timeline()->playhead(), axis);
    QCOMPARE(chart->playheadSeries()->at(0).x(), axis);
  }

  void rulerClickSeeks() {
    MainWindow w;
    ps::test::load(w, oneFOneB(2, 4), defaultCostProfile(2), QSize(1400, 900));
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    TimelineView* view = w.timeline();
    StepperController* sc = w.stepperController();
    const double x = view->rows().labelWidth + view->axis().toX(5.0);
    const QPoint p(static_cast<int>(std::round(x)), static_cast<int>(view->rows().rulerHeight / 2));
    QTest::mouseClick(view->viewport(), Qt::LeftButton, Qt::NoModifier, p);
    const double t = view->axis().toTime(p.x() - view->rows().labelWidth);
    QVERIFY2(std::abs(sc->time() - t) < 1e-9, qPrintable(QString::number(sc->time())));
    QCOMPARE(sc->position(), sc->stepper()->positionAt(t));
  }

  void failedRunOpensWhereItStopped() {
    MainWindow w;
    ps::test::load(w, oneFOneB(2, 2), defaultCostProfile(2), QSize(1400, 900));
    // The run failed in B0@s1 on device 1: what ran before it is recorded, nothing after.
    Timeline t = handRun();
    std::erase_if(t.ops, [](const TimelineOp& o) { return o.start >= 5; });
    std::erase_if(t.transfers, [](const Transfer& x) { return x.start >= 5; });
    t.memory = {{{0, 100 << 20}, {2, 200 << 20}, {4, 300 << 20}}, {{0, 100 << 20}, {5, 200 << 20}}};
    t.complete = false;
    Diagnostic fail = makeError("engine.op-failed", "B0@s1 failed on device 1: CUDA out of memory");
    fail.related.push_back({1, 1});
    Diagnostic slow = makeWarning("engine.slow", "F1@s0 took twice its planned time");
    slow.related.push_back({0, 1});
    t.diagnostics = {fail, slow};
    t.metrics = computeMetrics(t);
    w.setMeasuredOverlay(t, QStringLiteral("failed run"));

    StepperController* sc = w.stepperController();
    const Stepper* s = sc->stepper();
    QVERIFY(s);
    QVERIFY(!s->timeline().complete);
    QCOMPARE(sc->position(), s->stopPosition());
    QCOMPARE(sc->time(), 5.0);  // F0@s1's end, the last thing that happened
    // Blocked: device 0's B0@s0 waits for B0@s1, which never ran.
    const auto& marks = w.timeline()->stepMarks();
    QCOMPARE(marks.blocked.size(), size_t{1});
    QCOMPARE(marks.blocked[0].first, 0);
    QCOMPARE(marks.blocked[0].second, op(OpKind::B, 0, 0));
    QVERIFY(w.timeline()->selectedOp().has_value());
    QCOMPARE(*w.timeline()->selectedOp(), op(OpKind::B, 0, 0));
    StatePanel* sp = w.statePanel();
    QVERIFY2(sp->headerText().contains(QStringLiteral("Stopped here")), qPrintable(sp->headerText()));
    QVERIFY(sp->headerText().contains(QStringLiteral("CUDA out of memory")));
    QVERIFY(sp->deviceItem(0)->text(1).startsWith(QStringLiteral("blocked")));
    const QStringList waits = StatePanel::rows(sp->deviceItem(0)->child(0));
    QVERIFY2(anyRowContains(waits, QStringLiteral("waits for: B0@s1 on device 1: never-ran")),
             qPrintable(waits.join('\n')));
    auto* dock = w.findChild<QDockWidget*>(QStringLiteral("dock.state"));
    QVERIFY(dock && !dock->isHidden());
    QVERIFY(w.statusText().contains(QStringLiteral("stopped")));

    // The diagnostics dock heads with the run's failure.
    DiagnosticsPanel* dp = w.diagnostics();
    QVERIFY(dp->fullText(0).contains(QStringLiteral("stopped at 5.00 ms")));
    QVERIFY(dp->fullText(1).contains(QStringLiteral("CUDA out of memory")));
    QVERIFY(dp->fullText(2).contains(QStringLiteral("twice its planned time")));
    // F1@s0 ran 2-4 ms: past at the stop, current at 3 ms, later at 1 ms.
    QCOMPARE(dp->markOf(2), DiagnosticsPanel::PlayheadMark::None);
    QCOMPARE(dp->markOf(1), DiagnosticsPanel::PlayheadMark::None);  // B0@s1 never ran
    sc->seekTime(3);
    QCOMPARE(dp->markOf(2), DiagnosticsPanel::PlayheadMark::Current);
    QVERIFY(dp->topLevelItem(2)->font(0).bold());
    sc->seekTime(1);
    QCOMPARE(dp->markOf(2), DiagnosticsPanel::PlayheadMark::Later);
    QVERIFY(!dp->topLevelItem(2)->font(0).bold());

    // Clearing the overlay returns to the plain designer: no step mode, and the failure
    // leaves the dock.
    w.clearMeasuredOverlay();
    QVERIFY(!sc->stepsMeasured());
    QVERIFY(!sc->engaged());
    QVERIFY(!w.timeline()->playhead().has_value());
    QVERIFY(w.timeline()->stepMarks().blocked.empty());
    QVERIFY(!dp->fullText(0).contains(QStringLiteral("stopped")));
  }

  void aNewRunNeverInheritsTheLastOnesPlayhead() {
    MainWindow w;
    ps::test::load(w, oneFOneB(2, 2), defaultCostProfile(2), QSize(1400, 900));
    StepperController* sc = w.stepperController();
    StatePanel* sp = w.statePanel();
    // A long run, cancelled: it opens where it stopped (13 x 60 = 780 ms).
    Timeline longRun = handRun();
    for (auto& o : longRun.ops) o.start *= 60, o.end *= 60;
    for (auto& t : longRun.transfers) t.start *= 60, t.end *= 60;
    for (auto& curve : longRun.memory)
      for (auto& m : curve) m.time *= 60;
    std::erase_if(longRun.ops, [](const TimelineOp& o) { return o.start >= 800; });
    longRun.complete = false;
    longRun.diagnostics = {makeError("run.cancelled", "cancelled on This machine after 7 ops")};
    longRun.metrics = computeMetrics(longRun);
    w.setMeasuredOverlay(longRun, QStringLiteral("run on This machine"));
    QCOMPARE(sc->time(), 780.0);
    QVERIFY(sp->headerText().contains(QStringLiteral("t = 780.00 ms")));

    // The next, much shorter run: its first ops arrive live. The playhead is on it, at its start.
    Timeline partial = handRun();
    std::erase_if(partial.ops, [](const TimelineOp& o) { return o.start >= 5; });
    partial.complete = false;
    partial.metrics = computeMetrics(partial);
    w.setMeasuredOverlay(partial, QStringLiteral("run on This machine"), true);
    const Stepper* s = sc->stepper();
    QVERIFY(s);
    QVERIFY2(sc->time() <= s->timeAt(s->size()), qPrintable(QString::number(sc->time())));
    QCOMPARE(sc->position(), size_t{0});
    QVERIFY2(!sp->headerText().contains(QStringLiteral("780")), qPrintable(sp->headerText()));
    QVERIFY(*w.timeline()->playhead() <=
            w.measuredOverlay()->comparison()->align(s->timeAt(s->size())) + 1e-9);
    // While it runs, the user's playhead stays as more ops arrive, and when it ends.
    sc->seekTime(3);
    w.setMeasuredOverlay(partial, QStringLiteral("run on This machine"), true);
    QCOMPARE(sc->time(), 3.0);
    w.setMeasuredOverlay(handRun(), QStringLiteral("run on This machine"));
    QCOMPARE(sc->time(), 3.0);
    QVERIFY(sp->headerText().contains(QStringLiteral("t = 3.00 ms")));
  }

  void aCancelledRunIsNotAFailure() {
    MainWindow w;
    ps::test::load(w, oneFOneB(2, 2), defaultCostProfile(2), QSize(1400, 900));
    Timeline t = handRun();
    std::erase_if(t.ops, [](const TimelineOp& o) { return o.start >= 5; });
    std::erase_if(t.transfers, [](const Transfer& x) { return x.start >= 5; });
    t.complete = false;
    t.diagnostics = {makeError("run.cancelled", "cancelled on This machine after 4 ops")};
    t.metrics = computeMetrics(t);
    w.setMeasuredOverlay(t, QStringLiteral("run on This machine"));
    StepperController* sc = w.stepperController();
    QVERIFY(sc->isCancelled());
    QCOMPARE(sc->time(), 5.0);
    StatePanel* sp = w.statePanel();
    QVERIFY2(sp->headerText().contains(QStringLiteral("Cancelled here")), qPrintable(sp->headerText()));
    QVERIFY(!sp->headerText().contains(QStringLiteral("Stopped here")));
    QVERIFY2(sp->deviceItem(0)->text(1).startsWith(QStringLiteral("stopped (cancelled)")),
             qPrintable(sp->deviceItem(0)->text(1)));
    QVERIFY(!sp->deviceItem(0)->font(1).bold());
    const QStringList waits = StatePanel::rows(sp->deviceItem(0)->child(0));
    QVERIFY2(anyRowContains(waits, QStringLiteral("not run (cancelled before it)")),
             qPrintable(waits.join('\n')));
    QVERIFY(w.timeline()->stepMarks().blocked.empty());
    QVERIFY2(w.statusText().startsWith(QStringLiteral("Run cancelled at 5.00 ms")),
             qPrintable(w.statusText()));
    QVERIFY(!w.statusText().contains(QStringLiteral("did not finish")));
    QVERIFY2(w.diagnostics()->fullText(0).contains(QStringLiteral("was cancelled at 5.00 ms")),
             qPrintable(w.diagnostics()->fullText(0)));
  }

  void warmUpIsWaitingNotBlocked() {
    MainWindow w;
    ps::test::load(w, oneFOneB(4, 8), defaultCostProfile(4), QSize(1400, 900));
    StepperController* sc = w.stepperController();
    sc->startAction()->trigger();
    StatePanel* sp = w.statePanel();
    // At t = 0 devices 1-3 wait for their first activation: the pipeline filling.
    for (int d = 1; d < 4; ++d) {
      QVERIFY2(sp->deviceItem(d)->text(1).startsWith(QStringLiteral("waiting")),
               qPrintable(sp->deviceItem(d)->text(1)));
      QVERIFY(!sp->deviceItem(d)->font(1).bold());
    }
    QVERIFY(w.timeline()->stepMarks().blocked.empty());
    QCOMPARE(w.timeline()->stepMarks().waiting.size(), size_t{3});
  }

  void memoryOfADeviceThatHasNotStarted() {
    // A measured run without a plan's memory: device 1 records nothing before its first op.
    Timeline t = handRun();
    t.memory[1] = {};
    auto s = Stepper::make(t, oneFOneB(2, 2));
    QVERIFY(s.ok());
    StatePanel sp;
    sp.setState(s->stateAt(1.0), *s, true);
    QVERIFY2(
        anyRowContains(StatePanel::rows(sp.deviceItem(1)), QStringLiteral("memory: none yet (not started)")),
        qPrintable(sp.text()));
    sp.setState(s->stateAt(4.0), *s, true);
    QVERIFY2(anyRowContains(StatePanel::rows(sp.deviceItem(1)), QStringLiteral("memory: not recorded")),
             qPrintable(sp.text()));
  }

  void openingAnotherScheduleLeavesStepMode() {
    MainWindow w;
    ps::test::load(w, oneFOneB(2, 2), defaultCostProfile(2), QSize(1400, 900));
    w.setMeasuredOverlay(handRun(), QStringLiteral("hand"));
    StepperController* sc = w.stepperController();
    QVERIFY(sc->engaged());
    // File > Open of a 4-device schedule: the overlay is not a run of it, and debugging stops.
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("four.pipe"));
    {
      QFile f(path);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(QByteArray::fromStdString(printDsl(oneFOneB(4, 8))));
    }
    QVERIFY(w.openFile(path, true));
    QApplication::processEvents();
    QVERIFY(!w.measuredOverlay()->active());
    QVERIFY(!sc->engaged());
    QVERIFY(!w.timeline()->playhead().has_value());
    QVERIFY(w.timeline()->stepMarks().blocked.empty());
    QVERIFY(w.timeline()->stepMarks().waiting.empty());
    QVERIFY2(w.statePanel()->headerText().startsWith(QStringLiteral("Step through")),
             qPrintable(w.statePanel()->headerText()));
  }
};

QTEST_MAIN(StepperGuiTest)
#include "stepper_gui_test.moc"
