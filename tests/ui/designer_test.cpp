// The designer end to end (offscreen): dragging ops, undo, diagnostics and outlines, file
// round trips, the memory chart against the simulator, and the template dialog.
#include <QDockWidget>
#include <QLineEdit>
#include <QScrollBar>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QToolButton>
#include <QTreeWidget>
#include <QtTest>
#include <functional>

#include "debugger/state_panel.h"
#include "debugger/stepper_controller.h"
#include "docks/search_dock.h"
#include "docks/session_dock.h"
#include "document/schedule_document.h"
#include "drag_util.h"
#include "panels/diagnostics_panel.h"
#include "panels/memory_chart.h"
#include "panels/op_details_panel.h"
#include "panels/properties_panel.h"
#include "panels/summary_panel.h"
#include "pipestudio/core/planning/generators.h"
#include "remote/profile_dialog.h"
#include "remote/run_dialog.h"
#include "shell/main_window.h"
#include "shell/template_dialog.h"
#include "skip_in_ci.h"
#include "timeline/legend_bar.h"
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

  // Issue 30 (12): in a compute_comms CSV the arrows move an op among the compute ops and carry
  // its own SEND/RECV; one step past its RECV would make B0 wait for a receive posted after it.
  void arrowKeysCarryTransfersInACsv() {
    QVERIFY(window_->openFile(
        QStringLiteral(PIPESTUDIO_TEST_DATA_DIR "/pytorch/1F1B_pp2_mb2_spr1_compute_comms.csv"), true));
    ScheduleDocument* doc = window_->document();
    TimelineView* view = window_->timeline();
    QVERIFY(doc->analysis().valid());
    const Schedule before = doc->schedule();
    const Op b0{OpKind::B, 0, 0};
    view->selectOp(b0);
    view->setFocus();
    QTest::keyClick(view, Qt::Key_Left);
    QCOMPARE(doc->undoStack()->count(), 1);
    // Rank 0 was UNSHARD F0 SEND_F0 F1 SEND_F1 RECV_B0 B0 ...: B0 and its RECV go before F1.
    const auto& row = doc->schedule().devices[0];
    auto at = [&](const Op& o) { return stepOf(doc->schedule(), 0, o); };
    const Op recvB0{OpKind::RecvB, 0, 0}, f1{OpKind::F, 0, 1}, sendF1{OpKind::SendF, 0, 1};
    QCOMPARE(at(recvB0) + 1, at(b0));
    QCOMPARE(at(b0) + 1, at(f1));
    QCOMPARE(at(f1) + 1, at(sendF1));
    QVERIFY(row.size() == 11);
    QVERIFY2(doc->analysis().valid(), formatDiagnostics(doc->analysis().diagnostics).c_str());
    QCOMPARE(*view->selectedOp(), b0);  // the selection follows the op
    QTest::keyClick(view, Qt::Key_Right);
    QVERIFY(doc->schedule() == before);  // back where it was
  }

  // Issue 30 (13): keyboard only. The first arrow selects an op to start from, the focused
  // timeline shows a frame, and every button of the dialogs and docks has a mnemonic.
  void theKeyboardAloneGetsStarted() {
    ScheduleDocument* doc = window_->document();
    TimelineView* view = window_->timeline();
    view->selectOp(std::nullopt, false);
    window_->activateWindow();
    view->setFocus();
    QTRY_VERIFY(view->hasFocus());
    QTest::keyClick(view, Qt::Key_Right);
    QVERIFY(view->selectedOp().has_value());
    QCOMPARE(view->selection()->device, 0);
    QCOMPARE(view->selection()->step, 0);
    QCOMPARE(doc->undoStack()->count(), 0);  // selecting is not an edit
    QTest::keyClick(view, Qt::Key_Right, Qt::ControlModifier);
    QCOMPARE(view->selection()->step, 1);
    QTest::keyClick(view, Qt::Key_End);
    QCOMPARE(view->selection()->step, static_cast<int>(doc->schedule().devices[0].size()) - 1);
    QTest::keyClick(view, Qt::Key_Home);
    QCOMPARE(view->selection()->step, 0);
    const double before = view->axis().pixelsPerMs();
    QTest::keyClick(view, Qt::Key_Return);
    QVERIFY(view->axis().pixelsPerMs() > before);

    // The focus frame: the viewport's left edge in the selection colour while focused only.
    const QColor frame = view->theme().highlight;
    auto edge = [&] {
      return view->viewport()->grab().toImage().pixelColor(1, view->viewport()->height() / 2);
    };
    QCOMPARE(edge(), frame);
    window_->summary()->setFocusPolicy(Qt::StrongFocus);
    window_->summary()->setFocus();
    QTRY_VERIFY(!view->hasFocus());
    QVERIFY(edge() != frame);

    // Mnemonics on every button with text.
    TemplateDialog templ(window_.get());
    QList<QWidget*> roots{&templ,
                          window_->searchDock(),
                          window_->sessionDock(),
                          window_->statePanel()->parentWidget(),
                          RunDialog::showFor(window_.get()),
                          ProfileDialog::showFor(window_.get())};
    for (QWidget* root : roots)
      for (QAbstractButton* b : root->findChildren<QAbstractButton*>()) {
        if (b->text().isEmpty() || qobject_cast<QToolButton*>(b)) continue;
        QVERIFY2(b->text().contains(QLatin1Char('&')),
                 qPrintable(root->metaObject()->className() + QStringLiteral(": ") + b->text()));
      }
    for (QWidget* d : {static_cast<QWidget*>(RunDialog::showFor(window_.get())),
                       static_cast<QWidget*>(ProfileDialog::showFor(window_.get()))})
      d->close();
  }

  // Issue 30 (17): a .pipe program is exported as the program while it is unedited; once
  // edited, the explicit form is written and the note says so.
  void aProgramIsKeptUnlessEdited() {
    QTemporaryDir dir;
    QFile src(resourcesDir() + QStringLiteral("/schedules/1f1b.pipe"));
    QVERIFY(src.open(QIODevice::ReadOnly));
    const QByteArray program = src.readAll();
    QVERIFY(isPipeProgram(QString::fromUtf8(program)));
    const QString path = dir.filePath(QStringLiteral("prog.pipe"));
    {
      QFile f(path);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(program);
    }
    QVERIFY(window_->openFile(path, true));
    ScheduleDocument* doc = window_->document();
    QVERIFY(doc->isProgram());
    auto read = [](const QString& p) {
      QFile f(p);
      return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
    };
    const QString same = dir.filePath(QStringLiteral("same.pipe"));
    QVERIFY(window_->exportFile(same));
    QCOMPARE(read(same), program);
    QCOMPARE(window_->lastExportNote(), QStringLiteral("the program as written"));
    QVERIFY(doc->moveOp(0, 3, -1));
    const QString flat = dir.filePath(QStringLiteral("flat.pipe"));
    QVERIFY(window_->exportFile(flat));
    const QByteArray text = read(flat);
    QVERIFY(text != program);
    QVERIFY(text.contains("device 0:"));
    QVERIFY(!isPipeProgram(QString::fromUtf8(text)));
    QVERIFY2(window_->lastExportNote().contains(QStringLiteral("explicit form")),
             qPrintable(window_->lastExportNote()));
    QVERIFY(window_->lastExportNote().contains(QStringLiteral("edited")));
    doc->undoStack()->undo();  // unedited again: the program once more
    QVERIFY(window_->exportFile(flat));
    QCOMPARE(read(flat), program);
    // An explicit file is not a program.
    QVERIFY(!isPipeProgram(QStringLiteral("devices 2 # {not a brace}\ndevice 0: F0 B0\ndevice 1: F0 B0\n")));
  }

  // Issue 30 (18): the template preview has a legend and shows every device's row whole.
  void theTemplatePreviewHasALegendAndFits() {
    TemplateDialog dlg(window_.get());
    dlg.resize(820, 460);
    dlg.show();
    QVERIFY(QTest::qWaitForWindowExposed(&dlg));
    for (int devices : {4, 8, 16}) {
      dlg.setKind(ScheduleKind::OneFOneB);
      dlg.setDevices(devices);
      dlg.setMicrobatches(2 * devices);
      QApplication::processEvents();
      TimelineView* p = dlg.preview();
      QVERIFY(dlg.legend()->isVisible());
      QVERIFY(dlg.legend()->labels().contains(QStringLiteral("Forward")));
      QVERIFY(dlg.legend()->labels().contains(QStringLiteral("Backward")));
      QVERIFY2(p->verticalScrollBar()->maximum() == 0,
               qPrintable(QStringLiteral("%1 devices: %2 px of rows in %3")
                              .arg(devices)
                              .arg(p->rows().contentHeight(devices))
                              .arg(p->viewport()->height())));
      QCOMPARE(p->horizontalScrollBar()->maximum(), 0);  // fitted
    }
  }

  // Issue 30 (20): the Op dock keeps the selected op's times, wait, critical-path step and its
  // flow (inputs, the last to arrive marked; the ops waiting for it), a click away.
  void theOpDockDetailsTheSelection() {
    OpDetailsPanel* d = window_->opDetails();
    QVERIFY(d);
    QVERIFY(d->headerText().startsWith(QStringLiteral("Select an op")));
    const Op b3{OpKind::B, 1, 3};
    window_->timeline()->selectOp(b3);
    QVERIFY2(d->headerText().contains(QStringLiteral("B3@s1")), qPrintable(d->headerText()));
    const QString text = d->text();
    for (const char* want :
         {"planned: ", "waited: ", "critical path: ", "memory after: ", "inputs: 2 op(s)",
          "  F3@s1: device 1", "  B3@s2: device 2", "waited on by: 1 op(s)", "  B3@s0: device 0"})
      QVERIFY2(text.contains(QString::fromUtf8(want)), qPrintable(want + QStringLiteral("\n") + text));
    QVERIFY2(text.contains(QStringLiteral("the last to arrive")), qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("sent in")), qPrintable(text));  // B3@s2's gradient crossed a link
    // The dock came to the front, and an input is a click away on the timeline.
    auto* dock = window_->findChild<QDockWidget*>(QStringLiteral("dock.op"));
    QVERIFY(dock && !dock->visibleRegion().isNull());
    QTreeWidgetItem* inputs = d->tree()->findItems(QStringLiteral("inputs"), Qt::MatchExactly).value(0);
    QVERIFY(inputs && inputs->childCount() == 2);
    Q_EMIT d->tree()->itemClicked(inputs->child(1), 1);
    QVERIFY(window_->timeline()->selectedOp() != b3);
    QVERIFY(d->headerText().contains(
        QString::fromStdString(window_->document()->schedule().opName(*window_->timeline()->selectedOp()))));
  }

  // Issue 30 (14, 20): the Op dock's values wrap at their column's width in a narrow dock,
  // never cut at its edge; text() and the tooltips keep each value whole.
  void theOpDockWrapsInANarrowDock() {
    OpDetailsPanel panel(window_->document(), window_->measuredOverlay(), window_->timeline());
    window_->timeline()->selectOp(Op{OpKind::B, 1, 3});
    panel.refresh();
    panel.resize(600, 500);
    panel.show();
    QApplication::processEvents();
    const QString whole = panel.text();
    panel.resize(200, 500);
    QApplication::processEvents();
    QTreeWidget* tree = panel.tree();
    const int room = tree->viewport()->width() - tree->columnWidth(0);
    bool wrapped = false;
    std::function<void(const QTreeWidgetItem*)> visit = [&](const QTreeWidgetItem* it) {
      const QFontMetrics fm(it->font(1));
      for (const QString& line : it->text(1).split(QLatin1Char('\n')))
        QVERIFY2(fm.horizontalAdvance(line) <= room,
                 qPrintable(
                     QStringLiteral("%1 (%2 px in %3)").arg(line).arg(fm.horizontalAdvance(line)).arg(room)));
      wrapped |= it->text(1).contains(QLatin1Char('\n'));
      if (!it->text(1).isEmpty()) QVERIFY(!it->toolTip(1).contains(QLatin1Char('\n')));
      for (int i = 0; i < it->childCount(); ++i) visit(it->child(i));
    };
    for (int i = 0; i < tree->topLevelItemCount(); ++i) visit(tree->topLevelItem(i));
    QVERIFY(wrapped);
    QCOMPARE(panel.text(), whole);
    window_->timeline()->selectOp(std::nullopt);
  }

  // Polish: in a narrow window the op search goes above the legend, which keeps the width
  // (beside it the legend wrapped onto four lines at 1024 x 700); with room, side by side.
  void theFindBoxMakesRoomForTheLegend() {
    auto* find = window_->findChild<QLineEdit*>(QStringLiteral("findOps"));
    auto* legend = window_->findChild<LegendBar*>();
    QVERIFY(find && legend);
    QWidget* central = window_->centralWidget();
    for (const QSize size : {QSize(1024, 700), QSize(2400, 1000)}) {
      window_->resize(size);
      for (QDockWidget* d : window_->findChildren<QDockWidget*>()) d->setVisible(size.width() < 2000);
      QApplication::processEvents();
      const QRect f(find->mapTo(central, QPoint(0, 0)), find->size());
      const QRect l(legend->mapTo(central, QPoint(0, 0)), legend->size());
      if (central->width() < 720) {
        QVERIFY2(f.bottom() < l.top(), qPrintable(QStringLiteral("%1 wide").arg(central->width())));
        QVERIFY(l.width() >= central->width() - 8);
      } else {
        QVERIFY2(f.left() > l.right(), qPrintable(QStringLiteral("%1 wide").arg(central->width())));
      }
      QVERIFY((central->width() < 720) == (size.width() < 2000));  // both cases seen
    }
  }

  // Issue 30 (21): Shift+drag measures a span; its length is shown and Esc clears it.
  void shiftDragMeasuresASpan() {
    TimelineView* view = window_->timeline();
    const double x0 = view->rows().labelWidth + view->axis().toX(2.0);
    const double x1 = view->rows().labelWidth + view->axis().toX(7.0);
    const int y = static_cast<int>(view->rows().rowTop(1) + 3);
    QTest::mousePress(view->viewport(), Qt::LeftButton, Qt::ShiftModifier, QPoint(int(std::round(x0)), y));
    QMouseEvent move(QEvent::MouseMove, QPointF(std::round(x1), y),
                     view->viewport()->mapToGlobal(QPointF(x1, y)), Qt::NoButton, Qt::LeftButton,
                     Qt::ShiftModifier);
    QApplication::sendEvent(view->viewport(), &move);
    QTest::mouseRelease(view->viewport(), Qt::LeftButton, Qt::ShiftModifier, QPoint(int(std::round(x1)), y));
    QVERIFY(view->measuredSpan().has_value());
    const double perPx = 1 / view->axis().pixelsPerMs();
    QVERIFY2(std::abs(view->measuredSpan()->length() - 5.0) <= 2 * perPx,
             qPrintable(QString::number(view->measuredSpan()->length())));
    QVERIFY2(window_->statusText().startsWith(QStringLiteral("Span ")), qPrintable(window_->statusText()));
    QCOMPARE(window_->document()->undoStack()->count(), 0);  // nothing was dragged
    QVERIFY(!window_->stepperController()->engaged());       // nor the playhead moved
    QTest::keyClick(view, Qt::Key_Escape);
    QVERIFY(!view->measuredSpan().has_value());
  }

  // Issue 30 (22): W / S zoom, A / D pan, as in Perfetto.
  void wasdZoomsAndPans() {
    TimelineView* view = window_->timeline();
    view->setFocus();
    const double scale = view->axis().pixelsPerMs();
    QTest::keyClick(view, Qt::Key_W);
    QVERIFY(std::abs(view->axis().pixelsPerMs() - scale * kKeyZoomFactor) < 1e-9);
    QTest::keyClick(view, Qt::Key_W);
    const int before = view->horizontalScrollBar()->value();
    QTest::keyClick(view, Qt::Key_D);
    QVERIFY(view->horizontalScrollBar()->value() > before);
    QTest::keyClick(view, Qt::Key_A);
    QCOMPARE(view->horizontalScrollBar()->value(), before);
    QTest::keyClick(view, Qt::Key_S);
    QTest::keyClick(view, Qt::Key_S);
    QVERIFY(std::abs(view->axis().pixelsPerMs() - scale) < 1e-9);
    QCOMPARE(window_->document()->undoStack()->count(), 0);
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
    if (!cursor) QFAIL("the memory chart has no cursor series");
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

  // Issue 30 (8): an exported picture shows the schedule with its legend, not the debugging
  // session (playhead, ops waiting or blocked at it).
  void theExportedPictureHasALegendAndNoPlayhead() {
    TimelineView* view = window_->timeline();
    StepperController* sc = window_->stepperController();
    for (int i = 0; i < 9; ++i) sc->next();
    QVERIFY(view->playhead().has_value());
    QVERIFY(!view->stepMarks().waiting.empty() || !view->stepMarks().blocked.empty());
    auto count = [](const QImage& img, const QColor& c) {
      int n = 0;
      for (int y = 0; y < img.height(); ++y)
        for (int x = 0; x < img.width(); ++x) n += img.pixelColor(x, y) == c;
      return n;
    };
    const QColor playhead = view->theme().playhead;
    // The window's rendering has the playhead: the colour is there to be found.
    QVERIFY(count(view->renderImage(QSize(1200, 400)), playhead) > 50);
    QTemporaryDir dir;
    const QString png = dir.filePath(QStringLiteral("t.png"));
    QVERIFY(window_->exportFile(png));
    const QImage img(png);
    QVERIFY(!img.isNull());
    QCOMPARE(count(img, playhead), 0);
    // The legend is above the timeline: its forward swatch lies above the ruler.
    QVERIFY(img.height() > view->fullSize(2000).height());
    const int legendHeight = img.height() - view->fullSize(2000).height();
    bool swatch = false;
    for (int y = 0; y < legendHeight && !swatch; ++y)
      for (int x = 0; x < 60 && !swatch; ++x)
        swatch = img.pixelColor(x, y) == view->theme().kindColor(OpKind::F);
    QVERIFY(swatch);
    // The SVG likewise: no playhead colour in it.
    const QString svg = dir.filePath(QStringLiteral("t.svg"));
    QVERIFY(window_->exportFile(svg));
    QFile f(svg);
    QVERIFY(f.open(QIODevice::ReadOnly));
    QVERIFY(!f.readAll().toLower().contains(playhead.name().toLatin1()));
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
