// The measured overlay (offscreen): the second lane's geometry, traces laid over the plan,
// deviation colours, scaled alignment, runs from the session dock, and malformed traces.
#include <QFile>
#include <QInputDialog>
#include <QMessageBox>
#include <QProgressDialog>
#include <QPushButton>
#include <QStandardPaths>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTimer>
#include <QtTest>

#include "debugger/deviation_panel.h"
#include "docks/session_dock.h"
#include "document/schedule_document.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/planning/generators.h"
#include "pipestudio/core/planning/schedule_edits.h"
#include "shell/main_window.h"
#include "timeline/timeline_view.h"
#include "ui_fixtures.h"

using namespace ps::core;
using namespace ps::ui;

namespace {

const QString kTraces = QStringLiteral(PIPESTUDIO_TEST_DATA_DIR "/traces/");

using ps::test::measuredCopy;
using ps::test::oneFOneB;

}  // namespace

class OverlayTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { ps::test::useTestSettings(); }

  void secondLaneGeometry() {
    RowLayout plain;
    plain.rowHeight = 30;
    RowLayout ov = plain;
    ov.overlayHeight = 20;
    ov.overlayGap = 4;
    QVERIFY(!plain.hasOverlay());
    QVERIFY(ov.hasOverlay());
    // Without an overlay the rows are where they always were.
    QCOMPARE(plain.rowTop(2), plain.rulerHeight + plain.rowGap + 2 * (30 + plain.rowGap));
    // With one, each row grows by the gap and the measured lane.
    QCOMPARE(ov.rowSpan(), 30.0 + 4 + 20);
    QCOMPARE(ov.rowTop(2), ov.rulerHeight + ov.rowGap + 2 * (54 + ov.rowGap));
    QCOMPARE(ov.overlayTop(1), ov.rowTop(1) + 34);
    QCOMPARE(ov.overlayBottom(1), ov.overlayTop(1) + 20);
    QVERIFY(ov.overlayBottom(1) < ov.rowTop(2));
    QCOMPARE(ov.rowBottom(1), ov.rowTop(1) + 30);  // the planned lane keeps its height
    // Hit rows: a point in device 1's measured lane belongs to device 1.
    QCOMPARE(ov.rowAt(ov.overlayTop(1) + 10, 3), 1);
    QCOMPARE(ov.rowAt(ov.overlayBottom(2) - 1, 3), 2);
    QCOMPARE(ov.contentHeight(3), ov.rowTop(3));
  }

  void overlayIndexAlignsAndFlags() {
    // Hand-built comparison: measured time m is drawn at (m - 10) * 0.5.
    Timeline m;
    m.devices = 3;
    auto add = [&](int d, Op op, double s, double e) { m.ops.push_back({d, -1, op, false, s, e}); };
    add(0, {OpKind::F, 0, 0}, 10, 14);      // 0
    add(0, {OpKind::F, 0, 1}, 14, 30);      // 1: long; the SEND below runs inside it
    add(0, {OpKind::SendF, 0, 0}, 20, 21);  // 2: unmatched
    add(1, {OpKind::F, 1, 0}, 16, 20);      // 3
    add(2, {OpKind::F, 2, 0}, 20, 24);      // 4: device 2 is beyond the 2 rows asked for
    Comparison c;
    c.measuredOrigin = 10;
    c.scale = 0.5;
    OpMatch a;
    a.measured = 0;
    a.deviation = 1.0;
    OpMatch b;
    b.measured = 1;
    b.deviation = 4.0;
    c.matches = {a, b};
    CriticalStep cs;
    cs.op = 1;
    c.criticalPath.steps = {cs};
    const OverlayIndex ov = OverlayIndex::build(c, m, 2);
    QCOMPARE(ov.devices(), 2);
    QCOMPARE(ov.size(), size_t(4));
    QCOMPARE(ov.dropped(), size_t(1));
    QCOMPARE(ov.row(0).size(), size_t(3));
    QCOMPARE(ov.row(0)[0].start, 0.0);
    QCOMPARE(ov.row(0)[0].end, 2.0);
    QCOMPARE(ov.row(0)[1].end, 10.0);
    QCOMPARE(ov.row(0)[2].op.kind, OpKind::SendF);
    QCOMPARE(ov.row(0)[2].start, 5.0);
    QCOMPARE(ov.endTime(), 10.0);
    QVERIFY(!ov.info(0, 0).critical);
    QVERIFY(ov.info(0, 1).critical);
    QCOMPARE(deviationBand(ov.info(0, 1).deviation), DeviationBand::Bad);
    QVERIFY(!ov.info(0, 2).matched);
    QCOMPARE(deviationBand(ov.info(0, 2).deviation), DeviationBand::Unknown);
    // Visible in [6, 7]: the range starts at the first block whose running maximum end reaches
    // 6 (the long op, 2 to 10) and ends after the last block starting by 7; it is a superset
    // (the SEND, 5 to 5.5, lies between them) that the painter clips.
    auto [f, l] = ov.visibleRange(0, 6, 7);
    QCOMPARE(f, size_t(1));
    QCOMPARE(l, size_t(3));
    // After the long op's end nothing of row 0 is visible.
    auto [f2, l2] = ov.visibleRange(0, 10.5, 12);
    QCOMPARE(f2, l2);
    QCOMPARE(ov.hitTest(0, 6.5), std::optional<size_t>(1));
    QCOMPARE(ov.hitTest(0, 5.2), std::optional<size_t>(1));  // inside both; first found wins
    QVERIFY(!ov.hitTest(1, 0.5).has_value());
    QCOMPARE(ov.hitTest(1, 3.5), std::optional<size_t>(0));
  }

  void deviationBands() {
    QCOMPARE(deviationBand(1.0), DeviationBand::Good);
    QCOMPARE(deviationBand(0.5), DeviationBand::Good);  // faster than planned
    QCOMPARE(deviationBand(1.1), DeviationBand::Good);
    QCOMPARE(deviationBand(1.3), DeviationBand::Warn);
    QCOMPARE(deviationBand(1.5), DeviationBand::Bad);
    QCOMPARE(deviationBand(2.0), DeviationBand::Bad);
    QCOMPARE(deviationBand(std::nullopt), DeviationBand::Unknown);
  }

  void traceFilesSetTheOverlay() {
    MainWindow w;
    w.resize(1400, 900);
    QVERIFY(w.openFile(kTraces + QStringLiteral("synthetic_1f1b_d2_m2.pipe"), true));
    TimelineView* v = w.timeline();
    const double plannedRowHeight = v->rows().rowHeight;
    QSignalSpy spy(w.measuredOverlay(), &MeasuredOverlay::changed);
    QVERIFY(w.openTraces({kTraces + QStringLiteral("synthetic_1f1b_d2_m2_rank0.pt.trace.json"),
                          kTraces + QStringLiteral("synthetic_1f1b_d2_m2_rank1.pt.trace.json")},
                         true));
    QVERIFY(w.measuredOverlay()->active());
    QVERIFY(spy.count() >= 1);
    // Each rank file has F0 F1 B0 B1 (GPU-side ranges taken) and four SEND/RECV actions that
    // only have host-side ranges: 8 measured blocks per device, the 4 communication ones
    // not in the plan.
    const OverlayIndex& ov = v->overlayBlocks();
    QCOMPARE(ov.devices(), 2);
    QCOMPARE(ov.row(0).size(), size_t(8));
    QCOMPARE(ov.row(1).size(), size_t(8));
    for (int d = 0; d < 2; ++d) {
      int unmatched = 0;
      for (size_t i = 0; i < ov.row(d).size(); ++i)
        if (!ov.info(d, i).matched) {
          ++unmatched;
          QCOMPARE(deviationBand(ov.info(d, i).deviation), DeviationBand::Unknown);
        }
      QCOMPARE(unmatched, 4);
    }
    QCOMPARE(ov.dropped(), size_t(0));
    const Comparison* c = w.measuredOverlay()->comparison();
    QVERIFY(c);
    QCOMPARE(c->matches.size(), size_t(8));
    QVERIFY(c->unmatchedPlanned.empty());
    QCOMPARE(c->unmatchedMeasured.size(), size_t(8));
    // Rank 1's backward took 3 ms against a planned F+... far less: those blocks are red.
    for (size_t i = 0; i < ov.row(1).size(); ++i)
      if (ov.row(1)[i].op.kind == OpKind::B)
        QCOMPARE(deviationBand(ov.info(1, i).deviation), DeviationBand::Bad);
    // The row grew a second lane; the deviation table has overall + kinds + devices.
    QVERIFY(v->rows().hasOverlay());
    QVERIFY(v->rows().rowSpan() > v->rows().rowHeight);
    QVERIFY(v->rows().rowHeight <= plannedRowHeight);
    QTableWidget* t = w.deviation()->table();
    QCOMPARE(t->rowCount(), int(1 + c->byKind.size() + c->byDevice.size()));
    QCOMPARE(t->item(0, 1)->text(), QStringLiteral("8"));
    QVERIFY(w.statusText().contains(QStringLiteral("Measured overlay")));
    // The critical path ends on the op that ends last (rank 0's B1 at 11.4 ms after start).
    QVERIFY(!c->criticalPath.steps.empty());
    bool lastCritical = false;
    for (size_t i = 0; i < ov.row(0).size(); ++i)
      if (ov.row(0)[i].op == Op{OpKind::B, 0, 1}) lastCritical = ov.info(0, i).critical;
    QVERIFY(lastCritical);

    // Painting with the overlay works and the screenshot shows measured colours.
    const QImage img = v->renderImage(QSize(1000, 400));
    QVERIFY(!img.isNull());
    bool sawRed = false;
    const QColor red = TimelineView::deviationColor(DeviationBand::Bad);
    for (int y = 0; y < img.height() && !sawRed; y += 2)
      for (int x = 0; x < img.width(); x += 2)
        if (img.pixelColor(x, y) == red) {
          sawRed = true;
          break;
        }
    QVERIFY(sawRed);

    // Clearing returns to the plain designer.
    w.clearMeasuredOverlay();
    QVERIFY(!w.measuredOverlay()->active());
    QVERIFY(!v->rows().hasOverlay());
    QCOMPARE(v->rows().rowHeight, plannedRowHeight);
    QCOMPARE(w.deviation()->table()->rowCount(), 0);
  }

  void twiceAsLongIsRed() {
    MainWindow w;
    ps::test::load(w, oneFOneB(2, 2), defaultCostProfile(2), QSize(1200, 800));
    TimelineView* v = w.timeline();
    const Timeline planned = w.document()->analysis().timeline;
    Timeline m = measuredCopy(planned, 1.0);
    const Op slow{OpKind::F, 0, 1};
    for (auto& o : m.ops)
      if (o.device == 0 && o.op == slow) o.end = o.start + 2 * o.duration();
    w.measuredOverlay()->set(m);
    const OverlayIndex& ov = v->overlayBlocks();
    int red = 0, green = 0;
    for (int d = 0; d < ov.devices(); ++d)
      for (size_t i = 0; i < ov.row(d).size(); ++i) {
        const auto band = deviationBand(ov.info(d, i).deviation);
        if (ov.row(d)[i].op == slow && d == 0) {
          QVERIFY(ov.info(d, i).deviation.has_value());
          QCOMPARE(*ov.info(d, i).deviation, 2.0);
          QCOMPARE(band, DeviationBand::Bad);
          ++red;
        } else {
          QCOMPARE(band, DeviationBand::Good);
          ++green;
        }
      }
    QCOMPARE(red, 1);
    QCOMPARE(green, int(planned.ops.size()) - 1);
    QCOMPARE(TimelineView::deviationColor(DeviationBand::Bad), QColor(0xe5, 0x39, 0x35));
  }

  void scaledAlignmentMatchesMakespans() {
    MainWindow w;
    ps::test::load(w, oneFOneB(4, 8), defaultCostProfile(4), QSize(1200, 800));
    TimelineView* v = w.timeline();
    const Timeline planned = w.document()->analysis().timeline;
    const double plannedMakespan = planned.metrics.makespan;
    QVERIFY(plannedMakespan > 0);
    w.measuredOverlay()->set(measuredCopy(planned, 2.0));
    // Absolute: measured blocks end at twice the planned makespan.
    QCOMPARE(w.measuredOverlay()->alignment(), Alignment::Absolute);
    QVERIFY(std::abs(v->overlayBlocks().endTime() - 2 * plannedMakespan) < 1e-6);
    w.setOverlayScaled(true);
    QCOMPARE(w.measuredOverlay()->alignment(), Alignment::Scaled);
    QVERIFY(std::abs(v->overlayBlocks().endTime() - plannedMakespan) < 1e-6);
    // Every block sits exactly over its planned twin once scaled.
    const OverlayIndex& ov = v->overlayBlocks();
    for (int d = 0; d < ov.devices(); ++d)
      for (const Block& b : ov.row(d)) {
        const auto ref = w.document()->find(b.op);
        QVERIFY(ref.has_value());
        const Block* pb = v->blocks().block(ref->device, ref->step);
        QVERIFY(pb);
        QVERIFY(std::abs(pb->start - b.start) < 1e-6);
        QVERIFY(std::abs(pb->end - b.end) < 1e-6);
      }
    // Deviation is of durations as measured, not scaled: every op is 2x.
    QCOMPARE(deviationBand(ov.info(0, 0).deviation), DeviationBand::Bad);
  }

  // The overlay is a model the shell owns: any view of it follows a set, an edit's
  // recomparison and a clear; an edit recompares before the views rebuild and keeps their zoom.
  void viewsFollowTheOverlayModel() {
    MainWindow w;
    ps::test::load(w, oneFOneB(2, 4), defaultCostProfile(2), QSize(1200, 800));
    MeasuredOverlay* model = w.measuredOverlay();
    QVERIFY(model);
    QCOMPARE(w.timeline()->measuredOverlay(), model);
    TimelineView second(w.document(), model);  // a second view of the same overlay
    second.resize(900, 400);
    const Timeline planned = w.document()->analysis().timeline;
    QSignalSpy spy(model, &MeasuredOverlay::changed);

    model->set(measuredCopy(planned, 2.0), {}, QStringLiteral("run 7"));
    QCOMPARE(spy.count(), 1);
    QCOMPARE(spy.at(0).at(0).value<MeasuredOverlay::Change>(), MeasuredOverlay::Change::Replaced);
    QCOMPARE(w.overlaySource(), QStringLiteral("run 7"));
    QCOMPARE(second.overlayBlocks().size(), planned.ops.size());
    QCOMPARE(w.timeline()->overlayBlocks().size(), planned.ops.size());
    QVERIFY(second.rows().hasOverlay());
    QVERIFY(w.deviation()->headline().contains(QStringLiteral("(+100.0 %)")));

    // Layers twice as slow: each planned op now lasts as long as it was measured; the
    // comparison the views and the Deviation dock draw from follows, and the zoom stays.
    second.zoomIn();
    const double zoomed = second.axis().pixelsPerMs();
    const double before = model->comparison()->plannedMakespan;
    CostProfile slower = w.document()->profile();
    for (LayerCost& l : slower.layers) {
      l.forwardMs *= 2;
      l.backwardInputMs *= 2;
      l.backwardWeightMs *= 2;
    }
    w.document()->setProfile(slower, QStringLiteral("slower"));
    QCOMPARE(spy.count(), 2);
    QCOMPARE(spy.at(1).at(0).value<MeasuredOverlay::Change>(), MeasuredOverlay::Change::Recompared);
    QVERIFY(model->comparison()->plannedMakespan > 1.5 * before);
    QCOMPARE(model->comparison()->plannedMakespan, w.document()->analysis().timeline.metrics.makespan);
    QCOMPARE(second.axis().pixelsPerMs(), zoomed);
    QVERIFY(!w.deviation()->headline().contains(QStringLiteral("(+100.0 %)")));
    for (int d = 0; d < second.overlayBlocks().devices(); ++d)
      for (size_t i = 0; i < second.overlayBlocks().row(d).size(); ++i)
        QCOMPARE(second.overlayBlocks().info(d, i).deviation.value_or(0), 1.0);

    model->clear();
    QCOMPARE(spy.count(), 3);
    QVERIFY(!model->active());
    QCOMPARE(second.overlayBlocks().size(), size_t(0));
    QVERIFY(!second.rows().hasOverlay());
    QVERIFY(w.overlaySource().isEmpty());
    QVERIFY(w.deviation()->headline().startsWith(QStringLiteral("No measured overlay")));
    model->clear();  // nothing to clear: no signal
    QCOMPARE(spy.count(), 3);
  }

  void runFromSessionDockSetsOverlay() {
    MainWindow w;
    ps::test::load(w, oneFOneB(2, 4), defaultCostProfile(2), QSize(1200, 800));
    const Timeline planned = w.document()->analysis().timeline;
    Q_EMIT w.sessionDock()->openRunRequested(7, measuredCopy(planned, 1.25), QString(), QString());
    QVERIFY(w.measuredOverlay()->active());
    QCOMPARE(w.timeline()->overlayBlocks().size(), planned.ops.size());
    QVERIFY(w.statusText().contains(QStringLiteral("Run 7")));
    QVERIFY(w.deviation()->headline().contains(QStringLiteral("+25.0 %")));
  }

  void deviationOfAStalledPlanHasNoPlannedMakespan() {
    // The run measured the valid 1F1B; the document is the same schedule with F2 moved after
    // B1 on device 1: its simulation stalls.
    const Schedule good = oneFOneB(4, 8);
    MainWindow w;
    ps::test::load(w, good, defaultCostProfile(good), QSize(1400, 900));
    const Timeline run = measuredCopy(w.document()->analysis().timeline, 1.1);
    Schedule stalled = good;
    {
      const auto& row = stalled.devices[1];
      int f2 = -1, b1 = -1;
      for (int i = 0; i < static_cast<int>(row.size()); ++i) {
        if (row[static_cast<size_t>(i)].first == ps::test::op(OpKind::F, 1, 2)) f2 = i;
        if (row[static_cast<size_t>(i)].first == ps::test::op(OpKind::B, 1, 1)) b1 = i;
      }
      QVERIFY(f2 >= 0 && b1 > f2);
      stalled = moveStep(stalled, 1, f2, b1).value();
    }
    w.document()->load(stalled, defaultCostProfile(stalled));
    QVERIFY(!simulationProgress(w.document()->analysis()).finished);
    w.setMeasuredOverlay(run, QStringLiteral("run 3"));
    const QString head = w.deviation()->headline();
    QVERIFY2(head.contains(QStringLiteral("planned not available (stalled at")), qPrintable(head));
    QVERIFY2(head.contains(QStringLiteral("the stalled plan never reached")), qPrintable(head));
    QVERIFY2(head.contains(QStringLiteral(" 0 not in the plan")), qPrintable(head));
    // Every measured op is one of the plan's: matched or never reached.
    const Comparison* c = w.measuredOverlay()->comparison();
    QVERIFY(c && !c->unmatchedMeasured.empty());
    QVERIFY(
        head.contains(QStringLiteral("%1 measured op(s) the stalled plan").arg(c->unmatchedMeasured.size())));
    // The plan is the uniform default model, and the dock says so.
    QVERIFY2(head.contains(QStringLiteral("uniform default cost model")), qPrintable(head));
    QVERIFY2(w.statusText().contains(QStringLiteral("the plan has none")), qPrintable(w.statusText()));

    // A plan that runs to its end with a profile of its own: its makespan, no default-model note.
    CostProfile own = defaultCostProfile(good);
    own.name = "measured-gpt";
    for (auto& l : own.layers) l.forwardMs *= 1.3;
    w.document()->load(good, own);
    w.setMeasuredOverlay(run, QStringLiteral("run 3"));
    const QString head2 = w.deviation()->headline();
    QVERIFY2(head2.contains(QStringLiteral("Makespan: planned ")) &&
                 !head2.contains(QStringLiteral("not available")),
             qPrintable(head2));
    QVERIFY(!head2.contains(QStringLiteral("default cost model")));
    QVERIFY(head2.contains(QStringLiteral("measured-gpt")));
  }

  void malformedTraceShowsErrorAndKeepsDocument() {
    MainWindow w;
    w.resize(1200, 800);
    QVERIFY(w.openFile(kTraces + QStringLiteral("synthetic_1f1b_d2_m2.pipe"), true));
    const std::string before = printDsl(w.document()->schedule());
    const int undo = w.document()->undoStack()->count();
    // Not quiet: a message box comes up (after the import, which runs while the event loop
    // does); close it and remember what it said.
    QString boxText;
    QTimer poll;
    connect(&poll, &QTimer::timeout, [&] {
      for (QWidget* tw : QApplication::topLevelWidgets())
        if (auto* mb = qobject_cast<QMessageBox*>(tw); mb && mb->isVisible()) {
          boxText = mb->text();
          mb->accept();
          poll.stop();
        }
    });
    poll.start(20);
    QVERIFY(!w.openTraces({kTraces + QStringLiteral("synthetic_malformed_rank0.json")}));
    QVERIFY(boxText.contains(QStringLiteral("synthetic_malformed_rank0.json")));
    QVERIFY(w.statusText().startsWith(QStringLiteral("Cannot read measured trace")));
    QVERIFY(!w.measuredOverlay()->active());
    QCOMPARE(printDsl(w.document()->schedule()), before);
    QCOMPARE(w.document()->undoStack()->count(), undo);
    QVERIFY(!w.document()->isModified());
    // A missing file is an error too, and a good overlay survives a later bad one.
    QVERIFY(w.openTraces({kTraces + QStringLiteral("synthetic_1f1b_d2_m2_rank0.pt.trace.json"),
                          kTraces + QStringLiteral("synthetic_1f1b_d2_m2_rank1.pt.trace.json")},
                         true));
    QVERIFY(!w.openTraces({kTraces + QStringLiteral("no_such_trace.json")}, true));
    QVERIFY(w.measuredOverlay()->active());
    QCOMPARE(w.timeline()->overlayBlocks().size(), size_t(16));
  }
  void traceFoldersAndGzipSetTheOverlay() {
    // torchtitan's layout: profiling/traces/iteration_<N>/rank<R>_trace.json.gz, two steps.
    const QString root =
        QStringLiteral(PIPESTUDIO_TEST_DATA_DIR "/traces/torch-2.11.0/1f1b_d2_m4_torchtitan");
    MainWindow w;
    w.resize(1200, 800);
    QVERIFY(w.openFile(root + QStringLiteral("/plan.pipe"), true));
    // Not quiet: a dialog asks which step, offering the newest; take the older one.
    QStringList items;
    QString offered;
    QTimer poll;
    connect(&poll, &QTimer::timeout, [&] {
      for (QWidget* tw : QApplication::topLevelWidgets())
        if (auto* d = qobject_cast<QInputDialog*>(tw); d && d->isVisible()) {
          items = d->comboBoxItems();
          offered = d->textValue();
          d->setTextValue(QStringLiteral("iteration_10"));
          d->accept();
        }
    });
    poll.start(20);
    QVERIFY(w.openTraces({root}));
    poll.stop();
    QCOMPARE(items, QStringList({QStringLiteral("iteration_10"), QStringLiteral("iteration_20")}));
    QCOMPARE(offered, QStringLiteral("iteration_20"));
    QCOMPARE(w.overlaySource(), QStringLiteral("iteration_10: rank0_trace.json.gz, rank1_trace.json.gz"));
    // Every planned action has its measured block; `extra` measured ones are not in the plan
    // (plan.pipe has compute only: no REDUCE_GRAD, no SEND/RECV).
    const auto everyActionMatched = [&](size_t extra) {
      const OverlayIndex& ov = w.timeline()->overlayBlocks();
      if (ov.devices() != 2) return false;
      size_t matched = 0, unmatched = 0;
      for (int d = 0; d < 2; ++d)
        for (size_t i = 0; i < ov.row(d).size(); ++i) ++(ov.info(d, i).matched ? matched : unmatched);
      const bool ok = matched == w.document()->schedule().opCount() && unmatched == extra;
      if (!ok)
        qWarning() << "matched" << matched << "unmatched" << unmatched << "planned"
                   << w.document()->schedule().opCount();
      return ok;
    };
    QVERIFY(everyActionMatched(2));
    // Quiet with a step: no dialog; the default (no step) is the newest.
    QVERIFY(w.openTraces({root}, true, 20));
    QCOMPARE(w.overlaySource(), QStringLiteral("iteration_20: rank0_trace.json.gz, rank1_trace.json.gz"));
    QVERIFY(w.openTraces({root + QStringLiteral("/profiling/traces")}, true));
    QCOMPARE(w.overlaySource(), QStringLiteral("iteration_20: rank0_trace.json.gz, rank1_trace.json.gz"));
    QVERIFY(everyActionMatched(2));
    // A step that is not there names those that are; the overlay stays.
    QVERIFY(!w.openTraces({root}, true, 15));
    QVERIFY2(w.statusText().contains(QStringLiteral("iteration_15")), qPrintable(w.statusText()));
    QCOMPARE(w.overlaySource(), QStringLiteral("iteration_20: rank0_trace.json.gz, rank1_trace.json.gz"));
    // Files given one by one, gzipped (Megatron-LM's names).
    const QString meg =
        QStringLiteral(PIPESTUDIO_TEST_DATA_DIR "/traces/torch-2.11.0/interleaved-1f1b_d2_v2_m4_megatron");
    QVERIFY(w.openFile(meg + QStringLiteral("/plan.pipe"), true));
    QVERIFY(w.openTraces({meg + QStringLiteral("/torch_profile/rank-0.json.gz"),
                          meg + QStringLiteral("/torch_profile/rank-1.json.gz")},
                         true));
    QCOMPARE(w.overlaySource(), QStringLiteral("rank-0.json.gz, rank-1.json.gz"));
    QVERIFY(everyActionMatched(60));
  }
  void longImportShowsProgressAndCancels() {
    // 150 MiB of events after one pipeline action; the progress dialog comes up at once (it
    // waits 0.4 s by default), and its Cancel stops the import: no message box, no overlay.
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString path = dir.filePath(QStringLiteral("rank0.json"));
    {
      QFile f(path);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(
          R"({"traceEvents": [{"ph": "X", "cat": "user_annotation", "name": "PP:0F0", "pid": 1, "tid": 1, "ts": 0, "dur": 5})");
      const QByteArray event =
          R"(, {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 1, "args": {"Input Dims": [[4096, 4096], [4096, 4096]]}})"
          "\n";
      QByteArray block;
      for (int i = 0; i < 10000; ++i) block += event;
      while (f.size() < (qint64{150} << 20)) f.write(block);
      f.write("]}\n");
    }
    MainWindow w;
    w.resize(1200, 800);
    w.setTraceProgressDelay(0);
    QVERIFY(w.openFile(kTraces + QStringLiteral("synthetic_1f1b_d2_m2.pipe"), true));
    bool sawDialog = false;
    bool sawBox = false;
    bool reentered = true;
    QTimer poll;
    connect(&poll, &QTimer::timeout, [&] {
      for (QProgressDialog* d : w.findChildren<QProgressDialog*>())
        if (d->isVisible()) {
          // One import at a time: another one asked for meanwhile is refused.
          if (!sawDialog) reentered = w.openTraces({path}, true);
          sawDialog = true;
          if (auto* button = d->findChild<QPushButton*>()) button->click();
        }
      for (QWidget* tw : QApplication::topLevelWidgets())
        if (auto* mb = qobject_cast<QMessageBox*>(tw); mb && mb->isVisible()) {
          sawBox = true;
          mb->accept();
        }
    });
    poll.start(20);
    QVERIFY(!w.openTraces({path}));
    QVERIFY(sawDialog);
    QVERIFY(!reentered);
    QVERIFY(!sawBox);
    QVERIFY(w.statusText().contains(QStringLiteral("Cancelled")));
    QVERIFY(!w.measuredOverlay()->active());
    // The same file read to its end imports (quiet: no dialog).
    poll.stop();
    QVERIFY(w.openTraces({path}, true));
    QVERIFY(w.measuredOverlay()->active());
  }
};

QTEST_MAIN(OverlayTest)
#include "overlay_test.moc"
