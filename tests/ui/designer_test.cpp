// The designer end to end (offscreen): dragging ops, undo, diagnostics and outlines, file
// round trips, the memory chart against the simulator, and the template dialog.
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>
#include <functional>

#include "document/schedule_document.h"
#include "drag_util.h"
#include "panels/diagnostics_panel.h"
#include "panels/memory_chart.h"
#include "panels/properties_panel.h"
#include "panels/summary_panel.h"
#include "pipestudio/core/planning/generators.h"
#include "shell/main_window.h"
#include "shell/template_dialog.h"
#include "skip_in_ci.h"
#include "timeline/timeline_view.h"
#include "ui_fixtures.h"

using namespace ps::core;
using namespace ps::ui;

namespace {

using ps::test::dragBlock;
using ps::test::oneFOneB;
using ps::test::stepOf;

}  // namespace

class DesignerTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { ps::test::useTestSettings(); }

  void init() {
    const Schedule s = oneFOneB();
    window_ = ps::test::shownWindow(s, defaultCostProfile(s.pipeline.stages));
    QVERIFY(window_);
  }
  void cleanup() { ps::test::closeQuietly(window_); }

  void draggingAnOpChangesOrderAndSummaryAndUndoRestores() {
    ScheduleDocument* doc = window_->document();
    TimelineView* view = window_->timeline();
    const Schedule before = doc->schedule();
    const double makespanBefore = doc->analysis().makespan();
    const QString summaryBefore = window_->summary()->currentValue(QStringLiteral("Makespan"));
    QVERIFY(summaryBefore.startsWith(QString::number(makespanBefore, 'f', 2)));

    // Device 0 delays the last micro-batch's forward past the next backward: the tail of the
    // pipeline (F7 through every stage, then B7 back) starts later.
    const Op f7{OpKind::F, 0, 7};
    const Op b4{OpKind::B, 0, 4};
    const Op b5{OpKind::B, 0, 5};
    const int from = stepOf(before, 0, f7);
    QVERIFY(from >= 0);
    QCOMPARE(stepOf(before, 0, b4), from + 1);
    auto c = view->blockCenter(OpRef{0, from});
    auto cb4 = view->blockCenter(OpRef{0, stepOf(before, 0, b4)});
    auto cb5 = view->blockCenter(OpRef{0, stepOf(before, 0, b5)});
    QVERIFY(c && cb4 && cb5);
    double previewMakespan = -1;
    dragBlock(view, *c, QPoint((cb4->x() + cb5->x()) / 2, c->y()), [&] {
      // Mid-drag: the candidate is re-simulated and the summary shows it; the document is untouched.
      QVERIFY(view->previewAnalysis() != nullptr);
      previewMakespan = view->previewAnalysis()->makespan();
      QVERIFY(doc->schedule() == before);
      QVERIFY(window_->summary()
                  ->currentValue(QStringLiteral("Makespan"))
                  .startsWith(QString::number(previewMakespan, 'f', 2)));
    });
    QVERIFY(view->previewAnalysis() == nullptr);

    const Schedule& after = doc->schedule();
    QCOMPARE(stepOf(after, 0, f7), stepOf(after, 0, b4) + 1);
    QVERIFY2(doc->analysis().valid(), formatDiagnostics(doc->analysis().diagnostics).c_str());
    const double makespanAfter = doc->analysis().makespan();
    QCOMPARE(makespanAfter, previewMakespan);
    QVERIFY2(makespanAfter > makespanBefore + 1e-6, "delaying the last forward delays the pipeline's tail");
    const QString summaryAfter = window_->summary()->currentValue(QStringLiteral("Makespan"));
    QVERIFY(summaryAfter != summaryBefore);
    QVERIFY(summaryAfter.startsWith(QString::number(makespanAfter, 'f', 2)));
    QVERIFY(window_->statusText().contains(QStringLiteral("→")));
    QCOMPARE(doc->undoStack()->count(), 1);

    doc->undoStack()->undo();
    QVERIFY(doc->schedule() == before);
    QCOMPARE(window_->summary()->currentValue(QStringLiteral("Makespan")), summaryBefore);
    doc->undoStack()->redo();
    QCOMPARE(stepOf(doc->schedule(), 0, f7), stepOf(doc->schedule(), 0, b4) + 1);
  }

  void dragThatBreaksADependencyShowsDiagnosticAndRedOutline() {
    ScheduleDocument* doc = window_->document();
    TimelineView* view = window_->timeline();
    QVERIFY(doc->analysis().valid());
    QCOMPARE(window_->diagnostics()->errorCount(), 0);
    // B0 on the last device needs F0 of its stage, which runs first: drag B0 before it.
    const int d = 3;
    const Op b0{OpKind::B, 3, 0};
    const int from = stepOf(doc->schedule(), d, b0);
    QVERIFY(from > 0);
    auto c = view->blockCenter(OpRef{d, from});
    auto first = view->blockCenter(OpRef{d, 0});
    QVERIFY(c && first);
    dragBlock(view, *c, QPoint(view->rows().labelWidth + 1, c->y()));
    QCOMPARE(doc->schedule().devices[size_t(d)][0].first, b0);
    QVERIFY(!doc->analysis().valid());
    QVERIFY(window_->diagnostics()->errorCount() > 0);
    QVERIFY(window_->diagnostics()->topLevelItemCount() > 0);
    bool outlined = false;
    for (int i = 0; i < int(doc->schedule().devices[size_t(d)].size()); ++i)
      outlined = outlined || view->isOutlinedInvalid(OpRef{d, i});
    QVERIFY2(outlined, "an op of the broken order is outlined");
    QVERIFY(window_->validityText().contains(QStringLiteral("error")));
    // Clicking the diagnostic selects an op.
    QTreeWidgetItem* item = window_->diagnostics()->topLevelItem(0);
    Q_EMIT window_->diagnostics()->itemClicked(item, 0);
    QVERIFY(view->selection().has_value());
    doc->undoStack()->undo();
    QVERIFY(doc->analysis().valid());
  }

  void dropOnAnotherDeviceIsRefusedWithReason() {
    ScheduleDocument* doc = window_->document();
    TimelineView* view = window_->timeline();
    const Schedule before = doc->schedule();
    auto c = view->blockCenter(OpRef{0, 1});
    auto other = view->blockCenter(OpRef{2, 3});
    QVERIFY(c && other);
    dragBlock(view, *c, QPoint(c->x(), other->y()));
    QVERIFY(doc->schedule() == before);
    QCOMPARE(doc->undoStack()->count(), 0);
    QVERIFY2(window_->statusText().contains(QStringLiteral("refused")) ||
                 window_->statusText().contains(QStringLiteral("placed")),
             qPrintable(window_->statusText()));
  }

  void arrowKeysMoveTheSelection() {
    ScheduleDocument* doc = window_->document();
    TimelineView* view = window_->timeline();
    const Op op = doc->schedule().devices[0][1].first;
    view->selectRef(OpRef{0, 1});
    view->setFocus();
    QTest::keyClick(view, Qt::Key_Right);
    QCOMPARE(doc->schedule().devices[0][2].first, op);
    QCOMPARE(view->selection()->step, 2);  // the selection follows the op
    QTest::keyClick(view, Qt::Key_Left);
    QCOMPARE(doc->schedule().devices[0][1].first, op);
    QCOMPARE(doc->undoStack()->count(), 2);
  }

  void openingAndSavingRoundTripsPipeAndCsv() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    ScheduleDocument* doc = window_->document();
    QVERIFY(doc->moveStep(0, 3, 4));  // something that is not what a generator would print
    const Schedule edited = doc->schedule();
    const QString pipe = dir.filePath(QStringLiteral("edited.pipe"));
    QVERIFY(window_->saveTo(pipe));
    QVERIFY(!doc->isModified());
    QVERIFY(window_->openFile(pipe, true));
    QVERIFY(doc->schedule() == edited);
    QCOMPARE(doc->filePath(), QFileInfo(pipe).absoluteFilePath());

    const QString csv = dir.filePath(QStringLiteral("edited.csv"));
    QVERIFY(window_->saveTo(csv));
    QVERIFY(window_->openFile(csv, true));
    const Schedule& back = doc->schedule();
    QCOMPARE(back.devices.size(), edited.devices.size());
    for (size_t d = 0; d < edited.devices.size(); ++d) QVERIFY(back.devices[d] == edited.devices[d]);
    QCOMPARE(back.pipeline.stageToDevice, edited.pipeline.stageToDevice);
  }

  void memoryChartSeriesMatchSimulatorCurve() {
    ScheduleDocument* doc = window_->document();
    const Timeline& t = doc->analysis().timeline;
    MemoryChart* chart = window_->memoryChart();
    QCOMPARE(chart->deviceSeries().size(), qsizetype(t.memory.size()));
    QVERIFY(!t.memory.empty());
    constexpr double kGiB = double(1LL << 30);
    for (size_t d = 0; d < t.memory.size(); ++d) {
      const QList<QPointF> pts = chart->deviceSeries()[qsizetype(d)]->points();
      const auto& curve = t.memory[d];
      QVERIFY(!curve.empty());
      // Every simulator sample appears as a point at its time with its value, and between
      // samples the chart holds the previous value (a step curve).
      for (size_t i = 0; i < curve.size(); ++i) {
        const double y = double(curve[i].bytes) / kGiB;
        const bool found = std::any_of(pts.begin(), pts.end(), [&](const QPointF& p) {
          return std::abs(p.x() - curve[i].time) < 1e-9 && std::abs(p.y() - y) < 1e-12;
        });
        QVERIFY2(found, qPrintable(QStringLiteral("device %1 sample %2").arg(d).arg(i)));
      }
      for (qsizetype k = 1; k < pts.size(); ++k) QVERIFY(pts[k].x() >= pts[k - 1].x());
      double peak = 0;
      for (const auto& p : pts) peak = std::max(peak, p.y());
      QVERIFY(std::abs(peak - double(t.metrics.devices[d].peakMemoryBytes) / kGiB) < 1e-9);
    }
    QVERIFY(chart->capacitySeries() != nullptr);
    QCOMPARE(chart->capacitySeries()->at(0).y(), double(doc->profile().deviceMemoryBytes) / kGiB);
  }

  void templateDialogProducesEachBuiltinKind() {
    for (ScheduleKind k : allScheduleKinds()) {
      TemplateDialog dlg;
      dlg.setDevices(4);
      dlg.setMicrobatches(8);
      dlg.setChunks(0);
      dlg.setKind(k);
      GeneratorOptions o;
      o.devices = 4;
      o.microbatches = 8;
      auto expected = generateSchedule(k, o);
      const QString name = QString::fromUtf8(scheduleKindName(k).data());
      QVERIFY2(expected.ok(), qPrintable(name));
      QVERIFY2(dlg.schedule().has_value(), qPrintable(name + QStringLiteral(": ") + dlg.errorText()));
      QVERIFY2(*dlg.schedule() == *expected, qPrintable(name));
    }
  }

  void memoryCursorFollowsTheTimelineHover() {
    TimelineView* view = window_->timeline();
    MemoryChart* chart = window_->memoryChart();
    auto c = view->blockCenter(OpRef{1, 2});
    QVERIFY(c.has_value());
    QMouseEvent move(QEvent::MouseMove, *c, view->viewport()->mapToGlobal(*c), Qt::NoButton, Qt::NoButton,
                     Qt::NoModifier);
    QApplication::sendEvent(view->viewport(), &move);
    QLineSeries* cursor = nullptr;
    for (QAbstractSeries* s : chart->chart()->series())
      if (s != chart->capacitySeries() && !chart->deviceSeries().contains(static_cast<QLineSeries*>(s)))
        cursor = static_cast<QLineSeries*>(s);
    QVERIFY(cursor != nullptr);
    QVERIFY(cursor->isVisible());
    const double t = view->axis().toTime(c->x() - view->rows().labelWidth);
    QVERIFY(std::abs(cursor->at(0).x() - t) < 1e-6);
    QEvent leave(QEvent::Leave);
    QApplication::sendEvent(view, &leave);
    QVERIFY(!cursor->isVisible());
  }

  void exportsWriteEachFormat() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString trace = dir.filePath(QStringLiteral("t.json"));
    QVERIFY(window_->exportFile(trace));
    QFile f(trace);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QByteArray json = f.readAll();
    QVERIFY(json.contains("traceEvents"));
    QVERIFY(json.contains("\"0F1\""));  // F1 of stage 0 as a PyTorch-style action name
    const QString png = dir.filePath(QStringLiteral("t.png"));
    QVERIFY(window_->exportFile(png));
    QImage img(png);
    QVERIFY(!img.isNull());
    QVERIFY(img.width() >= 1000);
    // The timeline is drawn: the forward blue appears somewhere in the image.
    bool blue = false;
    for (int y = 0; y < img.height() && !blue; y += 2)
      for (int x = 0; x < img.width() && !blue; x += 2)
        blue = img.pixelColor(x, y) == QColor(0x3b, 0x7d, 0xd8);
    QVERIFY(blue);
    const QString svg = dir.filePath(QStringLiteral("t.svg"));
    QVERIFY(window_->exportFile(svg));
    QVERIFY(QFileInfo(svg).size() > 1000);
  }

  void aBundledProfileReplacesTheCostModelAndUndoes() {
    ScheduleDocument* doc = window_->document();
    const double before = doc->analysis().makespan();
    QFile f(resourcesDir() + QStringLiteral("/profiles/llama2-7b.json"));
    if (!f.exists()) PS_SKIP_UNLESS_CI(QStringLiteral("no bundled llama2-7b profile"));
    QVERIFY(f.open(QIODevice::ReadOnly));
    auto p = parseCostProfile(f.readAll().toStdString(), "llama2-7b.json");
    QVERIFY(p.ok());
    doc->setProfile(*p, QStringLiteral("Use llama2-7b"));
    QCOMPARE(doc->profile().name, std::string("llama2-7b"));
    QVERIFY(doc->analysis().makespan() > before * 2);  // 4 stages of 8 transformer blocks each
    QCOMPARE(window_->properties()->costTable()->rowCount(), int(p->layers.size()));
    doc->undoStack()->undo();
    QCOMPARE(doc->analysis().makespan(), before);
  }

  void splitAndRecomputeFromTheDocumentAreUndoable() {
    ScheduleDocument* doc = window_->document();
    const Schedule before = doc->schedule();
    const int b = stepOf(before, 1, Op{OpKind::B, 1, 0});
    QVERIFY(doc->splitBackward(OpRef{1, b}));
    QCOMPARE(doc->schedule().devices[1][size_t(b)].first.kind, OpKind::I);
    QVERIFY(doc->analysis().valid());
    QVERIFY(doc->toggleRecompute(2));
    QVERIFY(doc->analysis().valid());
    doc->undoStack()->undo();
    doc->undoStack()->undo();
    QVERIFY(doc->schedule() == before);
  }

 private:
  std::unique_ptr<MainWindow> window_;
};

QTEST_MAIN(DesignerTest)
#include "designer_test.moc"
