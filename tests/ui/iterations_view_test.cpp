// The designer shows K iterations when asked (offscreen): the timeline is the core's
// K-iteration run with each device's optimizer steps, the boundary is marked at each device's
// iteration end as the core reports it, the Summary states the steady-state iteration time and
// the boundary, and dragging is refused (with a status message) while K > 1.
#include <QComboBox>
#include <QImage>
#include <QMouseEvent>
#include <QSettings>
#include <QSpinBox>
#include <QStandardPaths>
#include <QWidgetAction>
#include <QtTest>
#include <map>
#include <tuple>

#include "document/schedule_document.h"
#include "panels/summary_panel.h"
#include "pipestudio/core/analysis/iterations.h"
#include "pipestudio/core/planning/generators.h"
#include "shell/main_window.h"
#include "timeline/timeline_view.h"
#include "ui_fixtures.h"

using namespace ps::core;
using namespace ps::ui;

namespace {

bool isCompute(OpKind k) {
  return k == OpKind::F || k == OpKind::B || k == OpKind::I || k == OpKind::W;
}

struct Counts {
  int compute = 0;
  int optimizer = 0;
};

Counts countBlocks(const TimelineView* v, const Schedule& shown) {
  Counts c;
  const BlockIndex& bi = v->blocks();
  for (int d = 0; d < bi.devices(); ++d)
    for (const Block& b : bi.row(d)) {
      if (isCompute(b.op.kind)) ++c.compute;
      const UserKind* u = shown.userKind(b.op.kind);
      if (u && u->name.rfind(std::string(kOptimizerStepKind), 0) == 0) ++c.optimizer;
    }
  return c;
}

}  // namespace

class IterationsViewTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { ps::test::useTestSettings(true); }

  void showsThreeOverlappedIterationsOfZbH1() {
    MainWindow w;
    w.resize(1400, 900);
    Schedule s = ps::test::generated(ScheduleKind::ZBH1, 4, 8);
    auto profile = uniformCostProfile("F=1,I=1,W=1,act=1000", s.pipeline.stages);
    QVERIFY(profile.ok());
    ScheduleDocument* doc = w.document();
    doc->load(s, *profile);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    TimelineView* view = w.timeline();

    const Counts one = countBlocks(view, doc->schedule());
    QCOMPARE(one.compute, 4 * 8 * 3);  // F, I, W of 8 micro-batches on 4 stages
    QCOMPARE(one.optimizer, 0);
    QVERIFY(!view->iterationsShown());
    QVERIFY(view->iterationMarks().empty());

    // Asked for through View › Iterations.
    auto* action = w.findChild<QWidgetAction*>(QStringLiteral("action.iterations"));
    QVERIFY(action && action->defaultWidget());
    auto* count = action->defaultWidget()->findChild<QSpinBox*>(QStringLiteral("iterations.count"));
    auto* boundary = action->defaultWidget()->findChild<QComboBox*>(QStringLiteral("iterations.boundary"));
    QVERIFY(count && boundary);
    QCOMPARE(count->minimum(), 1);
    QCOMPARE(count->maximum(), 16);
    boundary->setCurrentIndex(boundary->findText(QStringLiteral("overlap")));
    count->setValue(3);
    QCOMPARE(doc->iterations(), 3);
    QCOMPARE(doc->iterationBoundary(), IterationBoundary::Overlap);
    QVERIFY(view->iterationsShown());

    // The same run, from the core directly.
    auto model = makeSimulationModel(s, *profile);
    QVERIFY(model.ok());
    IterationOptions o;
    o.iterations = 3;
    o.boundary = IterationBoundary::Overlap;
    auto core = simulateIterations(s, *model, o);
    QVERIFY(core.ok());
    QVERIFY(core->complete);
    QCOMPARE(core->steadyStateMs, 27.0);

    const Schedule& shown = doc->analysis().iterations->unrolled;
    const Counts three = countBlocks(view, shown);
    QCOMPARE(three.compute, 3 * one.compute);
    QCOMPARE(three.optimizer, 3 * 4);  // one step per device and iteration
    // Every block sits where the core's K-iteration timeline puts it.
    std::map<std::tuple<int, int>, std::pair<double, double>> coreTimes;
    for (const auto& op : core->timeline.ops) coreTimes[{op.device, op.step}] = {op.start, op.end};
    for (int d = 0; d < 4; ++d)
      for (const Block& b : view->blocks().row(d)) {
        auto it = coreTimes.find({d, b.step});
        QVERIFY(it != coreTimes.end());
        QCOMPARE(b.start, it->second.first);
        QCOMPARE(b.end, it->second.second);
      }

    // Boundary marks: each device's optimizer-step ends, three per device, the last iteration's
    // latest end being the core's end of iteration 3.
    std::map<std::pair<int, int>, double> stepEnds;  // (device, iteration) -> end
    for (const auto& op : core->timeline.ops) {
      const UserKind* u = core->unrolled.userKind(op.op.kind);
      if (u && u->name.rfind(std::string(kOptimizerStepKind), 0) == 0)
        stepEnds[{op.device, op.op.microbatch}] = op.end;
    }
    QCOMPARE(stepEnds.size(), size_t(12));
    const auto& marks = view->iterationMarks();
    QCOMPARE(marks.size(), size_t(12));
    for (const IterationMark& m : marks) {
      auto it = stepEnds.find({m.device, m.iteration});
      QVERIFY(it != stepEnds.end());
      QCOMPARE(m.end, it->second);
    }
    for (int k = 0; k < 3; ++k) {
      double latest = 0;
      for (const IterationMark& m : marks)
        if (m.iteration == k) latest = std::max(latest, m.end);
      QCOMPARE(latest, core->iterationEnds[size_t(k)]);
    }

    // The Summary states the steady-state time and the boundary.
    SummaryPanel* summary = w.summary();
    QCOMPARE(summary->currentValue(QStringLiteral("Steady-state iteration")), QStringLiteral("27.00 ms"));
    QCOMPARE(summary->currentValue(QStringLiteral("Boundary")), QStringLiteral("overlap"));
    QCOMPARE(summary->currentValue(QStringLiteral("Iterations")), QStringLiteral("3 × overlap"));

    // Painting the K iterations with their marks works at any size.
    QImage img = view->renderImage(QSize(900, 300));
    QVERIFY(!img.isNull());

    // Dragging with K > 1 is refused and says why; the schedule stays as it was.
    const int commands = doc->undoStack()->count();
    auto center = view->blockCenter(OpRef{1, 3});
    QVERIFY(center);
    QTest::mousePress(view->viewport(), Qt::LeftButton, {}, *center);
    QTest::mouseMove(view->viewport(), *center + QPoint(60, 0));
    QTest::mouseRelease(view->viewport(), Qt::LeftButton, {}, *center + QPoint(60, 0));
    QCOMPARE(doc->undoStack()->count(), commands);
    QVERIFY2(w.statusText().contains(QStringLiteral("Iterations to 1")), qPrintable(w.statusText()));

    // Sync boundary: the Summary follows the core's figure.
    boundary->setCurrentIndex(boundary->findText(QStringLiteral("sync")));
    QCOMPARE(doc->iterationBoundary(), IterationBoundary::Sync);
    o.boundary = IterationBoundary::Sync;
    auto sync = simulateIterations(s, *model, o);
    QVERIFY(sync.ok());
    QCOMPARE(summary->currentValue(QStringLiteral("Boundary")), QStringLiteral("sync"));
    QCOMPARE(summary->currentValue(QStringLiteral("Steady-state iteration")),
             QString::number(sync->steadyStateMs, 'f', 2) + QStringLiteral(" ms"));

    // Set elsewhere (command line): the controls follow the document.
    doc->setIterations(4, IterationBoundary::Overlap);
    QCOMPARE(count->value(), 4);
    QCOMPARE(boundary->currentText(), QStringLiteral("overlap"));

    // Back to one iteration: the plain, editable timeline again.
    count->setValue(1);
    QVERIFY(!view->iterationsShown());
    QCOMPARE(countBlocks(view, doc->schedule()).compute, one.compute);
    QVERIFY(view->iterationMarks().empty());
    QVERIFY(summary->currentValue(QStringLiteral("Steady-state iteration")).isEmpty());
  }
};

QTEST_MAIN(IterationsViewTest)
#include "iterations_view_test.moc"
