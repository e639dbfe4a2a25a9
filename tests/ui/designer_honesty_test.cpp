// The designer never misleads (offscreen): a stalled design has no figures to be "better", a
// live run is not a failed one, the unsaved marker follows the undo stack, the window fits
// 1024x700, an overlay of another schedule goes away, step mode ends, template previews share
// one model, bundled sessions stay untouched, Ctrl+Y redoes, and one formatter for times and
// bytes.
#include <QAction>
#include <QCheckBox>
#include <QCryptographicHash>
#include <QDir>
#include <QDockWidget>
#include <QFile>
#include <QHeaderView>
#include <QLabel>
#include <QLineSeries>
#include <QMenu>
#include <QMenuBar>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardItemModel>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTemporaryDir>
#include <QTextBrowser>
#include <QToolBar>
#include <QToolButton>
#include <QtTest>
#include <functional>

#include "debugger/state_panel.h"
#include "debugger/stepper_controller.h"
#include "docks/session_dock.h"
#include "document/metrics_text.h"
#include "document/schedule_document.h"
#include "drag_util.h"
#include "panels/diagnostics_panel.h"
#include "panels/memory_chart.h"
#include "panels/summary_panel.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/planning/generators.h"
#include "pipestudio/sessions/session_store.h"
#include "remote/run_dialog.h"
#include "shell/help_dialog.h"
#include "shell/main_window.h"
#include "shell/template_dialog.h"
#include "timeline/legend_bar.h"
#include "timeline/timeline_geometry.h"
#include "timeline/timeline_view.h"
#include "ui_fixtures.h"
#include "widgets/elided_label.h"
#include "widgets/indicators.h"
#include "widgets/units_text.h"

using namespace ps::core;
using namespace ps::ui;

namespace {

Schedule generate(ScheduleKind k, int devices, int mb, int chunks = 0) {
  return ps::test::generated(k, devices, mb, chunks);
}

using ps::test::dragBlock;
using ps::test::stepOf;

QString allText(const QTreeWidget* t) {
  QStringList out;
  std::function<void(const QTreeWidgetItem*)> walk = [&](const QTreeWidgetItem* it) {
    QStringList cols;
    for (int c = 0; c < it->columnCount(); ++c)
      cols << QString(it->text(c)).replace(QLatin1Char('\n'), QLatin1Char(' '));
    out << cols.join(QLatin1Char('|'));
    for (int i = 0; i < it->childCount(); ++i) walk(it->child(i));
  };
  for (int i = 0; i < t->topLevelItemCount(); ++i) walk(t->topLevelItem(i));
  return out.join(QLatin1Char('\n'));
}

bool isGreen(const QTreeWidget* t, const QString& metric) {
  const auto items = t->findItems(metric, Qt::MatchExactly | Qt::MatchRecursive, 0);
  return !items.isEmpty() && items.front()->foreground(3).color() == QColor(0x2e, 0x9d, 0x4e);
}

// A measured timeline of `plan` cut after its first `keep` ops (by start): what a run shows
// while it runs, or where a failed one stopped.
Timeline partialRun(const Timeline& plan, double until) {
  Timeline t = plan;
  t.source = TimelineSource::Measured;
  t.ops.clear();
  for (const auto& o : plan.ops)
    if (o.end <= until) t.ops.push_back(o);
  t.transfers.clear();
  t.complete = false;
  t.diagnostics = {makeError("run.incomplete", "the run-event stream ended before the run finished")};
  t.metrics = computeMetrics(t);
  return t;
}

}  // namespace

class DesignerHonestyTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { ps::test::useTestSettings(true); }

  void init() {
    const Schedule s = generate(ScheduleKind::OneFOneB, 4, 8);
    window_ = ps::test::shownWindow(s, defaultCostProfile(s));
    QVERIFY(window_);
  }
  void cleanup() { ps::test::closeQuietly(window_); }

  // (1) Moving F2 on device 1 past B1 deadlocks 1F1B: the partial simulation ends early, and
  // its figures must not read as a shorter makespan anywhere.
  void aStalledDesignIsNeverAnImprovement() {
    ScheduleDocument* doc = window_->document();
    TimelineView* view = window_->timeline();
    const Schedule before = doc->schedule();
    const Op f2{OpKind::F, 1, 2};
    const Op b1{OpKind::B, 1, 1};
    const int from = stepOf(before, 1, f2);
    const int b1At = stepOf(before, 1, b1);
    QVERIFY(from >= 0 && b1At > from);
    auto c = view->blockCenter(OpRef{1, from});
    auto cb1 = view->blockCenter(OpRef{1, b1At});
    auto next = view->blockCenter(OpRef{1, b1At + 1});
    QVERIFY(c && cb1 && next);
    bool sawPreview = false;
    dragBlock(view, *c, QPoint((cb1->x() + next->x()) / 2, c->y()), [&] {
      const Analysis* p = view->previewAnalysis();
      QVERIFY(p != nullptr);
      QVERIFY2(!p->timeline.complete, "the candidate deadlocks");
      sawPreview = true;
      QCOMPARE(window_->summary()->currentValue(QStringLiteral("Makespan")), QStringLiteral("n/a"));
      QVERIFY(!isGreen(window_->summary(), QStringLiteral("Makespan")));
      QVERIFY2(window_->statusText().contains(QStringLiteral("not available (stalled at")),
               qPrintable(window_->statusText()));
    });
    QVERIFY(sawPreview);
    const Analysis& a = doc->analysis();
    QVERIFY(!a.timeline.complete);
    QVERIFY(a.makespan() < doc->savedMetrics().makespan);  // the trap: a partial run is shorter
    const SimulationProgress p = simulationProgress(a);
    QVERIFY(!p.finished);
    QVERIFY(p.done < p.total);
    QCOMPARE(window_->summary()->currentValue(QStringLiteral("Makespan")), QStringLiteral("n/a"));
    QCOMPARE(window_->summary()->changeValue(QStringLiteral("Makespan")), QStringLiteral("—"));
    for (const char* m : {"Makespan", "Bubble ratio", "Efficiency", "Peak memory", "Lower bound"})
      QVERIFY2(!isGreen(window_->summary(), QString::fromLatin1(m)), m);
    const QString summary = allText(window_->summary());
    QVERIFY2(summary.contains(QStringLiteral("stalled at")) &&
                 summary.contains(QStringLiteral("%1 of %2 ops done").arg(p.done).arg(p.total)),
             qPrintable(summary));
    QVERIFY2(window_->statusText().contains(QStringLiteral("not available (stalled at")),
             qPrintable(window_->statusText()));
    QVERIFY2(window_->validityText().contains(QStringLiteral("makespan n/a, stalled at")),
             qPrintable(window_->validityText()));
    // Undo: figures again, unchanged against the saved ones.
    doc->undoStack()->undo();
    QVERIFY(doc->analysis().timeline.complete);
    QVERIFY(window_->summary()->currentValue(QStringLiteral("Makespan")).endsWith(QStringLiteral(" ms")));
  }

  // Issue 30 (7): a change is compared only like with like. Figures simulated with another
  // cost model are not a baseline, and a schedule with errors now (over memory) is never
  // "better", whatever its bubble.
  void aChangeIsComparedOnlyLikeWithLike() {
    ScheduleDocument* doc = window_->document();
    SummaryPanel* sum = window_->summary();
    CostProfile faster = doc->profile();
    faster.name = "faster";
    for (auto& l : faster.layers) l.forwardMs *= 0.5, l.backwardInputMs *= 0.5, l.backwardWeightMs *= 0.5;
    doc->setProfile(faster, QStringLiteral("faster layers"));
    QVERIFY(doc->analysis().makespan() < doc->savedMetrics().makespan);
    for (const char* m : {"Makespan", "Bubble ratio", "Efficiency", "Peak memory", "Lower bound"}) {
      QCOMPARE(sum->changeValue(QString::fromLatin1(m)), QStringLiteral("—"));
      QVERIFY2(!isGreen(sum, QString::fromLatin1(m)), m);
    }
    QVERIFY2(sum->notes().join(QLatin1Char(' ')).contains(QStringLiteral("another cost model (default)")),
             qPrintable(sum->notes().join(QLatin1Char(' '))));
    doc->undoStack()->undo();  // the saved model again: figures compare
    QCOMPARE(sum->changeValue(QStringLiteral("Makespan")), QStringLiteral("="));
    QVERIFY(sum->notes().isEmpty());

    // Same model: ZB-H2 has a smaller bubble than 1F1B but more activations in flight. With a
    // memory limit between the two peaks it is over memory: its lower bubble is not green.
    const Schedule zb = generate(ScheduleKind::ZBH2, 4, 8);
    auto peak = [](const Analysis& a) {
      std::int64_t p = 0;
      for (const auto& d : a.timeline.metrics.devices) p = std::max(p, d.peakMemoryBytes);
      return p;
    };
    const Analysis zbA = doc->analyze(zb);
    QVERIFY(zbA.timeline.metrics.bubbleRatio < doc->analysis().timeline.metrics.bubbleRatio);
    QVERIFY(peak(zbA) > peak(doc->analysis()));
    CostProfile limited = doc->profile();
    limited.deviceMemoryBytes = (peak(zbA) + peak(doc->analysis())) / 2;
    doc->load(doc->schedule(), limited);  // the baseline: 1F1B, valid under the limit
    QVERIFY(doc->analysis().valid());
    doc->replaceSchedule(zb, QStringLiteral("ZB-H2"));
    QVERIFY(!doc->analysis().valid());
    QVERIFY(sum->changeValue(QStringLiteral("Bubble ratio")).startsWith(QLatin1Char('-')));
    QVERIFY(!isGreen(sum, QStringLiteral("Bubble ratio")));
    QVERIFY(!isGreen(sum, QStringLiteral("Efficiency")));
    QVERIFY(!isGreen(sum, QStringLiteral("Makespan")));
    QVERIFY2(sum->notes().join(QLatin1Char(' ')).contains(QStringLiteral("no change counts as better")),
             qPrintable(sum->notes().join(QLatin1Char(' '))));
  }

  // Issue 30 (14): a finding is never cut at the dock's edge: it wraps onto more lines, the
  // whole of it in the tooltip; the Summary's columns fit its width, Change elided with a
  // tooltip rather than cut.
  void findingsWrapAndTheSummaryFits() {
    ScheduleDocument* doc = window_->document();
    const int f2 = stepOf(doc->schedule(), 1, Op{OpKind::F, 1, 2});
    const int b1 = stepOf(doc->schedule(), 1, Op{OpKind::B, 1, 1});
    QVERIFY(doc->moveStep(1, f2, b1));  // a deadlock: long findings
    DiagnosticsPanel panel;
    DiagnosticsPanel* dp = &panel;
    dp->setDiagnostics(doc->analysis().diagnostics);
    dp->show();
    for (int width : {260, 420}) {
      dp->resize(width, 300);
      QApplication::processEvents();
      bool wrapped = false;
      for (int i = 0; i < dp->topLevelItemCount(); ++i) {
        const QTreeWidgetItem* it = dp->topLevelItem(i);
        const QFontMetrics fm(it->font(0));
        for (const QString& line : it->text(0).split(QLatin1Char('\n')))
          QVERIFY2(fm.horizontalAdvance(line) <= dp->viewport()->width(), qPrintable(line));
        wrapped |= it->text(0).contains(QLatin1Char('\n'));
        QCOMPARE(QString(it->text(0)).replace(QLatin1Char('\n'), QString()).remove(QLatin1Char(' ')),
                 dp->fullText(i).remove(QLatin1Char(' ')));
      }
      QVERIFY(wrapped);
      QVERIFY(dp->header()->length() <= dp->viewport()->width());
    }
    doc->undoStack()->undo();
    SummaryPanel summary;
    SummaryPanel* sum = &summary;
    sum->setMetrics(doc->analysis().timeline.metrics, doc->savedMetrics());
    sum->show();
    for (int width : {290, 240}) {  // the Summary dock's width at 1024 x 700, and narrower
      sum->resize(width, 400);
      QApplication::processEvents();
      // The change column has room for a figure; the metric names give way (elided).
      const int change = sum->fontMetrics().horizontalAdvance(QStringLiteral("+0.00 ms"));
      QVERIFY2(sum->header()->sectionPosition(3) + change <= sum->viewport()->width(),
               qPrintable(QStringLiteral("%1 + %2 in %3")
                              .arg(sum->header()->sectionPosition(3))
                              .arg(change)
                              .arg(sum->viewport()->width())));
    }
    const auto items = sum->findItems(QStringLiteral("Makespan"), Qt::MatchExactly, 0);
    QVERIFY(!items.isEmpty());
    QCOMPARE(items.front()->toolTip(3), items.front()->text(3));
  }

  // Files the GUI reads whole go through core's reader: a folder, or a file past the input limit
  // (PIPESTUDIO_MAX_INPUT_BYTES, docs/limits.md), is refused with the reason before it is read.
  void aFolderOrAnOversizedFileIsRefusedWithTheReason() {
    QTemporaryDir dir;
    auto folder = readScheduleFile(dir.path());
    QVERIFY(!folder);
    QCOMPARE(folder.error().code, std::string("io.not-a-file"));
    const QString path = dir.filePath(QStringLiteral("big.pipe"));
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("devices 2\nmicrobatches 2\nschedule 1f1b\n" + QByteArray(4096, '#') + "\n");
    f.close();
    qputenv("PIPESTUDIO_MAX_INPUT_BYTES", "1K");
    auto big = readScheduleFile(path);
    qunsetenv("PIPESTUDIO_MAX_INPUT_BYTES");
    QVERIFY(!big);
    QCOMPARE(big.error().code, std::string("io.too-large"));
    QVERIFY2(big.error().message.find("PIPESTUDIO_MAX_INPUT_BYTES") != std::string::npos,
             big.error().message.c_str());
    QVERIFY(!window_->openFile(path + QStringLiteral(".missing"), true));
  }

  // (1) A deadlocked compute_comms CSV: no "0.00 ms", no "bubble 0 %".
  void aDeadlockedCsvHasNoFigures() {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("dead.csv"));
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    // Rank 0's backward waits for rank 1's gradient before rank 0 posts the send of its
    // activation, which rank 1 needs to make that gradient: a cycle. (A receive is only posted,
    // as in PyTorch's runtime; it is the consuming compute action that waits.)
    f.write("0F0,0RECV_B0,0B0,0SEND_F0\n1RECV_F0,1F0,1B0,1SEND_B0\n");
    f.close();
    QVERIFY(window_->openFile(path, true));
    const Analysis& a = window_->document()->analysis();
    QVERIFY2(!a.timeline.complete, formatDiagnostics(a.diagnostics).c_str());
    QCOMPARE(window_->summary()->currentValue(QStringLiteral("Makespan")), QStringLiteral("n/a"));
    QCOMPARE(window_->summary()->currentValue(QStringLiteral("Bubble ratio")), QStringLiteral("n/a"));
    QVERIFY(window_->validityText().contains(QStringLiteral("makespan n/a")));
  }

  // (2) While a run is going, its partial timeline is progress, not a failure.
  void aLiveRunIsNotReportedAsFailed() {
    const Timeline& plan = window_->document()->analysis().timeline;
    const Timeline live = partialRun(plan, plan.metrics.makespan / 2);
    QVERIFY(!live.ops.empty() && live.ops.size() < plan.ops.size());
    window_->setMeasuredOverlay(live, QStringLiteral("run on this machine"), /*live=*/true);
    QTest::qWait(10);
    StatePanel* state = window_->statePanel();
    QVERIFY2(!state->headerText().contains(QStringLiteral("Stopped here")), qPrintable(state->headerText()));
    QVERIFY2(!state->text().contains(QStringLiteral("never-ran")), qPrintable(state->text()));
    QVERIFY2(!state->text().contains(QStringLiteral("blocked")), qPrintable(state->text()));
    QVERIFY2(!window_->statusText().contains(QStringLiteral("did not finish")),
             qPrintable(window_->statusText()));
    QVERIFY2(window_->statusText().contains(QStringLiteral("in progress")),
             qPrintable(window_->statusText()));
    QVERIFY(!allText(window_->diagnostics()).contains(QStringLiteral("The run stopped")));
    // The same timeline after the run ended is a failed run.
    window_->setMeasuredOverlay(live, QStringLiteral("run on this machine"), /*live=*/false);
    QTest::qWait(10);
    QVERIFY2(window_->statusText().contains(QStringLiteral("did not finish")),
             qPrintable(window_->statusText()));
    QVERIFY(state->headerText().contains(QStringLiteral("Stopped here")));
  }

  // (3) "*" after an edit, none after undoing back to the saved state, "*" again on redo.
  void theUnsavedMarkerFollowsTheUndoStack() {
    ScheduleDocument* doc = window_->document();
    QVERIFY(window_->windowTitle().contains(QStringLiteral("[*]")));
    QVERIFY(!window_->isWindowModified());
    const int at = stepOf(doc->schedule(), 0, Op{OpKind::F, 0, 7});
    QVERIFY(doc->moveStep(0, at, at + 1));
    QVERIFY(window_->isWindowModified());
    doc->undoStack()->undo();
    QVERIFY(!window_->isWindowModified());
    doc->undoStack()->redo();
    QVERIFY(window_->isWindowModified());
    QTemporaryDir dir;
    QVERIFY(window_->saveTo(dir.filePath(QStringLiteral("s.pipe"))));
    QVERIFY(!window_->isWindowModified());
    doc->undoStack()->undo();
    QVERIFY(window_->isWindowModified());
  }

  // (4) The window fits 1024x700 with the default docks.
  void theWindowFits1024x700() {
    MainWindow w;
    w.openDefault();
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    w.resize(1024, 700);
    QTest::qWait(50);
    QString parts;  // what asks for the width, when it does not fit
    for (QDockWidget* d : w.findChildren<QDockWidget*>())
      if (d->isVisible())
        parts += QStringLiteral(" %1=%2x%3")
                     .arg(d->objectName())
                     .arg(d->minimumSizeHint().width())
                     .arg(d->minimumSizeHint().height());
    for (QToolBar* t : w.findChildren<QToolBar*>())
      parts += QStringLiteral(" %1=%2").arg(t->objectName()).arg(t->minimumSizeHint().width());
    parts += QStringLiteral(" central=%1x%2")
                 .arg(w.centralWidget()->minimumSizeHint().width())
                 .arg(w.centralWidget()->minimumSizeHint().height());
    QVERIFY2(w.minimumSizeHint().width() <= 1024,
             qPrintable(QStringLiteral("minimum width %1:").arg(w.minimumSizeHint().width()) + parts));
    QVERIFY2(w.minimumSizeHint().height() <= 700,
             qPrintable(QStringLiteral("minimum height %1:").arg(w.minimumSizeHint().height()) + parts));
    QVERIFY2(w.width() <= 1024 && w.height() <= 700,
             qPrintable(QStringLiteral("%1x%2").arg(w.width()).arg(w.height())));
    // The toolbars show all their buttons (nothing pushed into the overflow).
    for (QToolBar* tb : w.findChildren<QToolBar*>()) {
      if (!tb->isVisible()) continue;
      for (QAction* a : tb->actions()) {
        if (a->isSeparator() || !a->isVisible()) continue;
        QWidget* wa = tb->widgetForAction(a);
        QVERIFY2(wa && wa->isVisible(),
                 qPrintable(tb->objectName() + QStringLiteral(": ") + a->iconText() + parts +
                            QStringLiteral(" hint %1 at %2").arg(tb->sizeHint().width()).arg(tb->width())));
      }
    }
    w.document()->undoStack()->setClean();
  }

  // Polish: a long undo text does not widen the toolbar.
  void theUndoButtonKeepsAShortText() {
    ScheduleDocument* doc = window_->document();
    QToolBar* tb = window_->findChild<QToolBar*>(QStringLiteral("toolbar.main"));
    QVERIFY(tb);
    const int width = tb->sizeHint().width();
    const int at = stepOf(doc->schedule(), 0, Op{OpKind::F, 0, 7});
    QVERIFY(doc->moveStep(0, at, at + 1));
    QCOMPARE(tb->sizeHint().width(), width);
    QAction* undo = nullptr;
    for (QAction* a : tb->actions())
      if (a->iconText() == QStringLiteral("Undo")) undo = a;
    if (!undo) QFAIL("no Undo button on the toolbar");
    QVERIFY2(undo->toolTip().contains(QStringLiteral("F7")), qPrintable(undo->toolTip()));
  }

  // (5) A run of another schedule does not stay over a newly opened one, nor its deadlock.
  void anOverlayOfAnotherScheduleIsCleared() {
    ScheduleDocument* doc = window_->document();
    Schedule two = generate(ScheduleKind::OneFOneB, 2, 4);
    doc->load(two, defaultCostProfile(two));
    const Timeline& plan = doc->analysis().timeline;
    Timeline failed = partialRun(plan, plan.metrics.makespan / 2);
    failed.diagnostics = {makeError("validate.deadlock", "deadlock: F2@s1 on device 1 waits for B1@s0")};
    window_->setMeasuredOverlay(failed, QStringLiteral("run 7"));
    QTest::qWait(10);
    QVERIFY(window_->measuredOverlay()->active());
    QCOMPARE(window_->overlaySource(), QStringLiteral("run 7"));
    QVERIFY(allText(window_->diagnostics()).contains(QStringLiteral("deadlock: F2@s1")));

    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("sixteen.pipe"));
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(printDsl(generate(ScheduleKind::OneFOneB, 16, 16)).c_str());
    f.close();
    QVERIFY(window_->openFile(path, true));
    QTest::qWait(10);
    QVERIFY(!window_->measuredOverlay()->active());
    QVERIFY(window_->overlaySource().isEmpty());
    QVERIFY2(!allText(window_->diagnostics()).contains(QStringLiteral("deadlock: F2@s1")),
             qPrintable(allText(window_->diagnostics())));
    QVERIFY2(window_->statusText().contains(QStringLiteral("run 7")), qPrintable(window_->statusText()));

    // The same schedule again keeps a run of it.
    doc->load(two, defaultCostProfile(two));
    window_->setMeasuredOverlay(failed, QStringLiteral("run 7"));
    const QString same = dir.filePath(QStringLiteral("two.pipe"));
    QVERIFY(window_->saveTo(same));
    QVERIFY(window_->openFile(same, true));
    QVERIFY(window_->measuredOverlay()->active());
  }

  // (6) Debug › Stop Debugging (Shift+F5), and New/Open leave step mode.
  void stepModeEnds() {
    StepperController* st = window_->stepperController();
    QVERIFY(st->stopAction());
    QCOMPARE(st->stopAction()->shortcut(), QKeySequence(Qt::SHIFT | Qt::Key_F5));
    QVERIFY(st->runBackAction()->shortcut() != st->stopAction()->shortcut());
    st->next();
    QVERIFY(st->engaged());
    QVERIFY(window_->timeline()->playhead().has_value());
    st->stopAction()->trigger();
    QVERIFY(!st->engaged());
    QVERIFY(!window_->timeline()->playhead().has_value());

    st->next();
    st->next();
    QVERIFY(st->engaged());
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("a.pipe"));
    QVERIFY(window_->saveTo(path));
    QVERIFY(window_->openFile(path, true));
    QTest::qWait(10);
    QVERIFY(!st->engaged());
    QVERIFY(!window_->timeline()->playhead().has_value());
  }

  // (8) Template previews describe one model: interleaving cuts it finer, it does not grow.
  void templatePreviewsAreComparableAndRemembered() {
    QSettings(QStringLiteral("PipeStudio"), QStringLiteral("PipeStudio")).clear();
    double oneF = 0, inter = 0;
    {
      TemplateDialog d;
      d.setKind(ScheduleKind::OneFOneB);
      d.setDevices(4);
      d.setMicrobatches(8);
      QVERIFY(d.schedule());
      oneF = d.previewAnalysis().makespan();
    }
    {
      TemplateDialog d;
      d.setKind(ScheduleKind::Interleaved1F1B);
      d.setDevices(4);
      d.setMicrobatches(8);
      d.setChunks(2);
      QVERIFY(d.schedule());
      QCOMPARE(d.schedule()->pipeline.stages, 8);
      inter = d.previewAnalysis().makespan();
      // Same forward work per micro-batch in both.
      const CostProfile p8 = defaultCostProfile(*d.schedule());
      double f8 = 0;
      for (const auto& l : p8.layers) f8 += l.forwardMs;
      QCOMPARE(f8, 4.0);
      d.accept();
    }
    QVERIFY2(oneF > 0 && inter > 0 && inter < oneF,
             qPrintable(QStringLiteral("1F1B %1 ms, interleaved %2 ms").arg(oneF).arg(inter)));
    TemplateDialog again;
    QCOMPARE(again.kindName(), QString::fromUtf8(scheduleKindName(ScheduleKind::Interleaved1F1B).data()));
    QCOMPARE(again.devices(), 4);
    QCOMPARE(again.microbatches(), 8);
    QCOMPARE(again.chunks(), 2);
    QSettings(QStringLiteral("PipeStudio"), QStringLiteral("PipeStudio")).clear();
  }

  // (9) The bundled example session opens read-only and stays byte for byte as shipped.
  void theBundledSessionIsOpenedReadOnly() {
    QTemporaryDir res;
    QVERIFY(QDir(res.path()).mkpath(QStringLiteral("examples")));
    const QString shipped = QStringLiteral(PIPESTUDIO_RESOURCES_DIR "/examples/example.session");
    QVERIFY(QFileInfo(shipped).isFile());
    const QString path = res.filePath(QStringLiteral("examples/example.session"));
    QVERIFY(QFile::copy(shipped, path));
    QFile::setPermissions(path, QFile::ReadOwner | QFile::WriteOwner | QFile::ReadGroup | QFile::ReadOther);
    auto hash = [](const QString& p) {
      QFile f(p);
      return f.open(QIODevice::ReadOnly) ? QCryptographicHash::hash(f.readAll(), QCryptographicHash::Sha256)
                                         : QByteArray();
    };
    const QByteArray before = hash(path);
    qputenv("PIPESTUDIO_RESOURCES", res.path().toLocal8Bit());
    const bool ok = window_->openSession(path);
    QVERIFY2(ok, qPrintable(window_->sessionDock()->errorText()));
    QVERIFY(window_->sessionDock()->isReadOnly());
    QVERIFY2(window_->windowTitle().contains(QStringLiteral("read-only")),
             qPrintable(window_->windowTitle()));
    window_->sessionDock()->closeSession();
    qunsetenv("PIPESTUDIO_RESOURCES");
    QVERIFY(!QFileInfo::exists(path + QStringLiteral("-wal")));
    QVERIFY(!QFileInfo::exists(path + QStringLiteral("-shm")));
    QCOMPARE(hash(path), before);
  }

  // (10) Ctrl+Y redoes, as does the platform's redo key.
  void ctrlYRedoes() {
    ScheduleDocument* doc = window_->document();
    QAction* redo = nullptr;
    const QList<QKeySequence> platform = QKeySequence::keyBindings(QKeySequence::Redo);
    for (QAction* a : window_->findChildren<QAction*>())
      if (!platform.isEmpty() && a->shortcuts().contains(platform.front())) redo = a;
    if (!redo) QFAIL("no action has the platform's Redo shortcut");
    QVERIFY(redo->shortcuts().contains(QKeySequence(Qt::CTRL | Qt::Key_Y)));
    const int at = stepOf(doc->schedule(), 0, Op{OpKind::F, 0, 7});
    QVERIFY(doc->moveStep(0, at, at + 1));
    doc->undoStack()->undo();
    QCOMPARE(doc->undoStack()->index(), 0);
    window_->activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(window_.get()));
    window_->timeline()->setFocus();
    QTest::keyClick(window_->timeline(), Qt::Key_Y, Qt::ControlModifier);
    QCOMPARE(doc->undoStack()->index(), 1);
  }

  // Polish: Help › Keyboard Shortcuts is generated from the actions.
  void theShortcutsPageListsTheActions() {
    const QString html = window_->shortcutsHtml();
    for (const char* s : {"Stop Debugging", "Next Event", "Redo", "Save", "Search Schedules"})
      QVERIFY2(html.contains(QString::fromLatin1(s)), s);
    QVERIFY(html.contains(QKeySequence(Qt::CTRL | Qt::Key_Y).toString(QKeySequence::NativeText)));
    QVERIFY(html.contains(QKeySequence(Qt::SHIFT | Qt::Key_F5).toString(QKeySequence::NativeText)));
    bool haveShortcuts = false;
    for (QAction* a : window_->menuBar()->actions())
      if (a->menu())
        for (QAction* b : a->menu()->actions())
          haveShortcuts |= b->text().remove(QLatin1Char('&')) == QStringLiteral("Keyboard Shortcuts");
    QVERIFY(haveShortcuts);
  }

  // Polish: the shortcuts page lists the timeline's own keys (generated from the view), and
  // Save As has Ctrl+Shift+S.
  void theShortcutsPageHasTheTimelineKeys() {
    const QString html = window_->shortcutsHtml();
    for (const char* s : {"W / S", "A / D", "Shift+drag", "Ctrl+wheel", "double-click", "Esc", "Home / End",
                          "Ctrl+← / Ctrl+→", "Find Next"})
      QVERIFY2(html.contains(QString::fromUtf8(s).toHtmlEscaped()), s);
    QVERIFY(html.contains(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_S).toString(QKeySequence::NativeText)));
    for (const auto& [keys, what] : TimelineView::inputHelp()) QVERIFY(html.contains(keys.toHtmlEscaped()));
  }

  // Polish: a long status message is elided before the "Measured:" label, whole in its tooltip.
  void theStatusMessageNeverRunsIntoTheMeasuredLabel() {
    window_->setMeasuredOverlay(ps::test::measuredCopy(window_->document()->analysis().timeline, 1.2),
                                QStringLiteral("run 12 on gpu-host-with-a-long-name"));
    const QString longText = QStringLiteral("A status message that goes on and on ").repeated(8);
    window_->statusBar()->setSizeGripEnabled(true);
    window_->showStatus(longText);
    QApplication::processEvents();
    QLabel* measured = nullptr;
    for (QLabel* l : window_->statusBar()->findChildren<QLabel*>())
      if (l->text().startsWith(QStringLiteral("Measured:"))) measured = l;
    if (!measured) QFAIL("no Measured label in the status bar");
    QVERIFY(measured->isVisible());
    auto* message = window_->statusBar()->findChild<ElidedLabel*>();
    if (!message) QFAIL("no status message label");
    QCOMPARE(window_->statusText(), longText);
    QVERIFY2(
        message->geometry().right() < measured->geometry().left(),
        qPrintable(
            QStringLiteral("%1 vs %2").arg(message->geometry().right()).arg(measured->geometry().left())));
    QVERIFY(message->text().endsWith(QStringLiteral("…")));
    QCOMPARE(message->toolTip(), longText);
  }

  // Polish: check boxes stand out on the dark palette (Fusion outlines them with the window
  // colour darkened).
  void checkBoxesAreVisibleOnTheDarkPalette() {
    const QPalette before = QApplication::palette();
    QApplication::setPalette(darkPalette());
    QTemporaryDir dir;
    QSettings settings(dir.filePath(QStringLiteral("s.ini")), QSettings::IniFormat);
    RunDialog d(nullptr, &settings);
    d.show();
    QVERIFY(QTest::qWaitForWindowExposed(&d));
    const QColor window = darkPalette().color(QPalette::Window);
    const auto boxes = d.findChildren<QCheckBox*>();
    QVERIFY(boxes.size() >= 2);
    for (QCheckBox* b : boxes) {
      const QColor outline = indicatorOutline(b->palette());
      QVERIFY2(std::abs(outline.lightnessF() - window.lightnessF()) > 0.2,
               qPrintable(b->text() + QStringLiteral(": ") + outline.name() + QStringLiteral(" on ") +
                          window.name()));
    }
    d.close();
    QApplication::setPalette(before);
  }

  // Issue 30 (15): Help › Documentation shows the guide in the program: from the docs found
  // beside it, else the built-in copy, and says which; it never depends on a URL handler.
  void documentationIsShownNeverSilently() {
    DocumentationDialog builtIn{QString()};
    QVERIFY(builtIn.showsBuiltInCopy());
    QVERIFY2(builtIn.browser()->toPlainText().contains(QStringLiteral("The schedule designer")),
             qPrintable(builtIn.browser()->toPlainText().left(200)));
    QVERIFY(builtIn.whereText().contains(QStringLiteral("built into this program")));
    QVERIFY(!builtIn.openExternally());
    const QString docs = MainWindow::documentationDir();  // the source tree's docs/
    QVERIFY(!docs.isEmpty());
    DocumentationDialog fromDir(docs);
    QVERIFY(!fromDir.showsBuiltInCopy());
    QVERIFY(fromDir.browser()->toPlainText().contains(QStringLiteral("Keyboard Shortcuts")));
    QVERIFY(fromDir.whereText().contains(QStringLiteral("gui.md")));
    DocumentationDialog* shown = window_->showDocumentation();
    QVERIFY(shown && shown->isVisible());
    shown->close();
  }

  // Polish: the legend wraps instead of cutting entries off.
  void theLegendWrapsInsteadOfCutting() {
    LegendBar legend;
    Schedule s = generate(ScheduleKind::Interleaved1F1B, 4, 8, 2);
    legend.setSchedule(s);
    legend.setOverlayShown(true);
    const int narrow = 420;
    const auto rects = legend.entryRects(narrow);
    QCOMPARE(rects.size(), size_t(legend.labels().size()));
    for (const QRect& r : rects) QVERIFY2(r.right() <= narrow, qPrintable(QString::number(r.right())));
    QVERIFY(legend.heightForWidth(narrow) > legend.heightForWidth(4000));
    QVERIFY(legend.labels().contains(QStringLiteral("Deadlock")));
    QVERIFY(legend.labels().contains(QStringLiteral("unplanned")));
  }

  // Polish: memory curves never share the capacity line's colour; hues are distinct.
  void memoryColoursAreDistinctFromCapacity() {
    const QColor cap = memoryCapacityColor();
    for (int d = 0; d < 32; ++d) {
      const QColor c = memoryDeviceColor(d);
      const int dh = std::abs(c.hsvHue() - cap.hsvHue());
      QVERIFY2(std::min(dh, 360 - dh) >= 25,
               qPrintable(QStringLiteral("device %1 hue %2").arg(d).arg(c.hsvHue())));
    }
    for (int a = 0; a < 10; ++a)
      for (int b = a + 1; b < 10; ++b) QVERIFY(memoryDeviceColor(a) != memoryDeviceColor(b));
    MemoryChart chart;
    chart.setTimeline(window_->document()->analysis().timeline, 16LL << 30);
    QVERIFY(chart.capacitySeries());
    QCOMPARE(chart.capacitySeries()->pen().style(), Qt::DashLine);
    for (QLineSeries* s : chart.deviceSeries())
      QVERIFY(s->pen().color() != chart.capacitySeries()->pen().color());
  }

  // Polish: session versions in numeric order, not the store's name order.
  void sessionVersionsSortNumerically() {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("v.session"));
    {
      auto store = ps::sessions::SessionStore::open(path.toStdString());
      QVERIFY(store);
      const std::string text = printDsl(window_->document()->schedule());
      for (const char* name : {"zeta", "alpha", "mid", "alpha", "beta", "zeta", "a", "b", "c", "d", "e", "f"})
        QVERIFY(store->addSchedule(name, text));
    }
    QVERIFY(window_->openSession(path));
    QStandardItemModel* m = window_->sessionDock()->schedulesModel();
    QCOMPARE(m->rowCount(), 12);
    for (int r = 0; r < m->rowCount(); ++r) QCOMPARE(m->item(r, 0)->text(), QString::number(r + 1));
    window_->sessionDock()->closeSession();
  }

  // Polish: each kind of file dialog keeps its own folder.
  void fileDialogsRememberAFolderPerPurpose() {
    QTemporaryDir a;
    QVERIFY(window_->saveTo(a.filePath(QStringLiteral("mine.pipe"))));
    QCOMPARE(QDir(MainWindow::dialogDir(QStringLiteral("save"))).canonicalPath(),
             QDir(a.path()).canonicalPath());
    QVERIFY(QDir(MainWindow::dialogDir(QStringLiteral("export"))).canonicalPath() !=
            QDir(a.path()).canonicalPath());
  }

  // Polish: a failed run's deadlock, also the plan's, is listed once.
  void aDeadlockIsListedOnce() {
    DiagnosticsPanel panel;
    const Diagnostic dead = makeError("validate.deadlock", "deadlock: B5@s2 on device 2 waits for F5@s2");
    panel.setDiagnostics({dead});
    panel.setRunDiagnostics({dead, dead}, QStringLiteral("The run stopped at 3.00 ms"));
    int n = 0;
    for (int i = 0; i < panel.topLevelItemCount(); ++i)
      n += panel.topLevelItem(i)->text(0).startsWith(QStringLiteral("deadlock:"));
    QCOMPARE(n, 1);
    QCOMPARE(panel.errorCount(), 1);
  }

  // Polish: breakpoint dots that would overlap at fit zoom become one dot with a count.
  void breakpointDotsClusterWhenZoomedOut() {
    std::vector<std::pair<double, double>> dots;
    dots.reserve(101);
    for (int i = 0; i < 100; ++i) dots.emplace_back(100 + i * 0.5, 20);  // 100 dots in 50 px
    dots.emplace_back(400, 20);
    const auto c = clusterDots(dots, 10);
    QCOMPARE(c.size(), size_t(6));
    int total = 0;
    for (const auto& g : c) total += g.count;
    QCOMPARE(total, 101);
    QCOMPARE(c.back().count, 1);
    QCOMPARE(c.back().x, 400.0);
    QCOMPARE(clusterDots({{0, 0}, {20, 0}}, 10).size(), size_t(2));  // zoomed in: each its own
  }

  // Polish: one formatter for times and bytes, never wrapped inside a value.
  void oneFormatterForTimesAndBytes() {
    QCOMPARE(QString::fromStdString(formatDurationMs(2)), QStringLiteral("2.00 ms"));
    QCOMPARE(QString::fromStdString(formatDurationMs(3.35554)), QStringLiteral("3.36 ms"));
    QCOMPARE(QString::fromStdString(formatDurationMs(0.004)), QStringLiteral("0.004 ms"));
    QCOMPARE(QString::fromStdString(formatDurationMs(1234.56)), QStringLiteral("1234.6 ms"));
    QCOMPARE(QString::fromStdString(formatByteSize(512LL << 20)), QStringLiteral("512 MiB"));
    QCOMPARE(QString::fromStdString(formatByteSize((17LL << 20) / 2)), QStringLiteral("8.5 MiB"));
    QCOMPARE(QString::fromStdString(formatByteSize(static_cast<std::int64_t>(79.71 * (1LL << 30)))),
             QStringLiteral("79.71 GiB"));
    QCOMPARE(QString::fromStdString(formatByteSize(100)), QStringLiteral("100 B"));
    QVERIFY(!msText(1.0).contains(QLatin1Char(' ')));  // a non-breaking space: no wrap inside
    QCOMPARE(msText(1.0), QStringLiteral("1.00") + QChar(0x00A0) + QStringLiteral("ms"));
  }

 private:
  std::unique_ptr<MainWindow> window_;
};

QTEST_MAIN(DesignerHonestyTest)
#include "designer_honesty_test.moc"
