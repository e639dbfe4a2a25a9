#include "shell/main_window.h"

#include <QAction>
#include <QApplication>
#include <QBoxLayout>
#include <QCloseEvent>
#include <QComboBox>
#include <QDesktopServices>
#include <QDialogButtonBox>
#include <QDir>
#include <QDockWidget>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QInputDialog>
#include <QKeyEvent>
#include <QKeySequence>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QPalette>
#include <QProgressDialog>
#include <QPushButton>
#include <QResizeEvent>
#include <QScreen>
#include <QScrollArea>
#include <QSettings>
#include <QShowEvent>
#include <QStatusBar>
#include <QStyle>
#include <QTextBrowser>
#include <QTimer>
#include <QToolBar>
#include <QUrl>
#include <QVBoxLayout>
#include <QWidgetAction>
#include <atomic>
#include <functional>
#include <thread>

#include "debugger/deviation_panel.h"
#include "debugger/state_panel.h"
#include "debugger/stepper_controller.h"
#include "docks/search_dock.h"
#include "docks/session_controller.h"
#include "docks/session_dock.h"
#include "document/measured_overlay.h"
#include "document/metrics_text.h"
#include "document/schedule_document.h"
#include "panels/diagnostics_panel.h"
#include "panels/iterations_controls.h"
#include "panels/memory_chart.h"
#include "panels/op_details_panel.h"
#include "panels/properties_panel.h"
#include "panels/summary_panel.h"
#include "pipestudio/core/io/chrome_trace.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/io/trace_files.h"
#include "pipestudio/core/io/trace_import.h"
#include "pipestudio/core/planning/generators.h"
#include "pipestudio/core/planning/schedule_edits.h"
#include "remote/profile_dialog.h"
#include "remote/run_dialog.h"
#include "shell/main_window_internal.h"
#include "shell/template_dialog.h"
#include "shell/window_geometry.h"
#include "timeline/legend_bar.h"
#include "timeline/op_search.h"
#include "timeline/theme.h"
#include "timeline/timeline_view.h"
#include "widgets/elided_label.h"
#include "widgets/units_text.h"

namespace ps::ui {

using namespace ps::core;
using namespace ps::ui::shell_detail;

QSettings shell_detail::settings() {
  return QSettings(QStringLiteral("PipeStudio"), QStringLiteral("PipeStudio"));
}

void shell_detail::rememberDialogDir(const QString& purpose, const QString& path) {
  if (path.isEmpty()) return;
  settings().setValue(QStringLiteral("dialogDirs/") + purpose, QFileInfo(path).absolutePath());
}

namespace {
// A file shipped with the application (resources/: examples, profiles).
bool isBundled(const QString& path) {
  const QString res = QFileInfo(resourcesDir()).canonicalFilePath();
  const QString p = QFileInfo(path).canonicalFilePath();
  return !res.isEmpty() && !p.isEmpty() && p.startsWith(res + QLatin1Char('/'));
}
}  // namespace

QString MainWindow::dialogDir(const QString& purpose) {
  QString saved = settings().value(QStringLiteral("dialogDirs/") + purpose).toString();
  if (!saved.isEmpty() && QFileInfo(saved).isDir()) return saved;
  // First use: the examples for opening, the home folder for what the user writes.
  if (purpose == QStringLiteral("open") || purpose == QStringLiteral("session"))
    return resourcesDir() + QStringLiteral("/examples");
  return QDir::homePath();
}

QString MainWindow::documentationDir() {
  // share/doc/pipestudio beside the executable's bin/, as installed (the build tree links it to
  // the source's docs/: packaging/layout.cmake).
  const QString d =
      QDir::cleanPath(QCoreApplication::applicationDirPath() + QStringLiteral("/" PIPESTUDIO_DOC_RELDIR));
  return QFileInfo(d + QStringLiteral("/gui.md")).isFile() ? d : QString();
}

bool MainWindow::selectOpByName(const QString& name) {
  const Schedule& s = doc_->schedule();
  const std::string want = name.toStdString();
  for (int d = 0; d < static_cast<int>(s.devices.size()); ++d) {
    const auto& row = s.devices[static_cast<size_t>(d)];
    for (int i = 0; i < static_cast<int>(row.size()); ++i) {
      const auto& st = row[static_cast<size_t>(i)];
      if (s.opName(st.first) == want || (st.second && s.opName(*st.second) == want)) {
        view_->selectOp(s.opName(st.first) == want ? st.first : *st.second, true);
        return true;
      }
    }
  }
  return false;
}

void MainWindow::setSlotLayout(bool slots) {
  layoutCombo_->setCurrentIndex(slots ? 1 : 0);
}

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  doc_ = new ScheduleDocument(this);
  auto* central = new QWidget;
  auto* lay = new QVBoxLayout(central);
  lay->setContentsMargins(0, 0, 0, 0);
  lay->setSpacing(0);
  legend_ = new LegendBar;
  overlay_ = new MeasuredOverlay(doc_, this);
  view_ = new TimelineView(doc_, overlay_);
  // Above the timeline: the legend, and at its right the op search (docs/gui.md, "Finding ops").
  // Side by side when there is room; in a narrow window the search goes above the legend so
  // the legend keeps the width (it would wrap onto three lines beside it).
  top_ = new QBoxLayout(QBoxLayout::LeftToRight);
  top_->setContentsMargins(0, 0, 4, 0);
  top_->setSpacing(4);
  auto* findBar = new QWidget;
  auto* findLay = new QHBoxLayout(findBar);
  findLay->setContentsMargins(6, 2, 0, 2);
  findLay->setSpacing(4);
  find_ = new QLineEdit;
  find_->setObjectName(QStringLiteral("findOps"));
  find_->setPlaceholderText(tr("Find ops: F3, B@s1, mb 2, d1"));
  find_->setClearButtonEnabled(true);
  find_->setMaximumWidth(240);
  find_->setMinimumWidth(150);
  find_->setToolTip(
      tr("Words that must all match: an op (F3, B3@s1, SEND_F2), a kind (F, W), a micro-batch "
         "(mb 3), a stage (s2) or a device (d1). Enter: next match, Shift+Enter: previous, "
         "Esc: clear (Ctrl+F comes here; F3 / Shift+F3 step from anywhere)"));
  find_->installEventFilter(this);
  findCount_ = new QLabel;
  findCount_->setObjectName(QStringLiteral("findCount"));
  findLay->addWidget(find_);
  findLay->addWidget(findCount_);
  findLay->addStretch(1);
  findBar->setMaximumWidth(340);
  top_->addWidget(legend_, 1);
  top_->addWidget(findBar, 0, Qt::AlignTop | Qt::AlignLeft);
  lay->addLayout(top_);
  central->installEventFilter(this);
  lay->addWidget(view_, 1);
  connect(find_, &QLineEdit::textChanged, this, [this] { updateFind(true); });
  connect(find_, &QLineEdit::returnPressed, this, [this] { findNext(true); });
  setCentralWidget(central);
  setDockOptions(QMainWindow::AnimatedDocks | QMainWindow::AllowTabbedDocks);
  setCorner(Qt::BottomLeftCorner, Qt::LeftDockWidgetArea);
  setCorner(Qt::BottomRightCorner, Qt::RightDockWidgetArea);

  buildDocks();
  buildStepper();
  buildActions();
  // Docks whose forms are wide (the Search inputs, the breakpoint row, the cost table) scroll
  // instead of setting the window's minimum width: it fits 1024x700 with the default docks.
  for (QDockWidget* d : findChildren<QDockWidget*>()) {
    QWidget* inner = d->widget();
    // A list or tree scrolls (or wraps, or elides) by itself: another scroll area around it
    // would only add a second, outer scroll bar.
    if (!inner || qobject_cast<QAbstractScrollArea*>(inner) || inner->minimumSizeHint().width() <= 220)
      continue;
    auto* sa = new QScrollArea;
    sa->setFrameShape(QFrame::NoFrame);
    sa->setWidgetResizable(true);
    sa->setHorizontalScrollBarPolicy(Qt::ScrollBarAsNeeded);
    d->setWidget(sa);
    sa->setWidget(inner);
  }

  validity_ = new QLabel;
  validity_->setTextFormat(Qt::RichText);
  message_ = new ElidedLabel;  // a long message ends in "…" before the "Measured:" label
  statusBar()->addWidget(validity_);
  statusBar()->addWidget(message_, 1);
  overlayLabel_ = new QLabel;
  overlayLabel_->hide();
  statusBar()->addPermanentWidget(overlayLabel_);
  statusBar()->setSizeGripEnabled(true);

  connect(doc_, &ScheduleDocument::changed, this, &MainWindow::documentChanged);
  // The "*" follows the undo stack's clean state once a command has been applied: during an
  // edit (redo/undo in progress) the stack's index has not moved yet.
  connect(doc_->undoStack(), &QUndoStack::cleanChanged, this, &MainWindow::updateTitle);
  connect(doc_, &ScheduleDocument::effectChanged, this, &MainWindow::showStatus);
  connect(view_, &TimelineView::statusMessage, this, &MainWindow::showStatus);
  connect(view_, &TimelineView::hoverTimeChanged, memory_, &MemoryChart::setCursorTime);
  // The summary follows the live drag preview, and returns to the document when it ends.
  connect(view_, &TimelineView::previewChanged, this, [this] {
    const Analysis* p = view_->previewAnalysis();
    const Analysis& shown = p ? *p : doc_->analysis();
    summary_->setIterations(shown.iterations ? &*shown.iterations : nullptr);
    summary_->setBaseline(summaryBaseline(shown));
    summary_->setMetrics(shown.timeline.metrics, doc_->savedMetrics(), simulationProgress(shown),
                         doc_->savedProgress());
  });
  connect(diagnostics_, &DiagnosticsPanel::opActivated, this, [this](OpRef r) {
    view_->selectRef(r, true);
    view_->setFocus();
  });
  connect(properties_, &PropertiesPanel::newFromTemplateRequested, this, &MainWindow::newFromTemplate);

  resize(1440, 900);
  QSettings st = settings();
  restoreGeometry(st.value(QStringLiteral("window/geometry")).toByteArray());
  restoredState_ = restoreState(st.value(QStringLiteral("window/state")).toByteArray());
  // The default or restored size may come from a larger screen: showEvent fits it inside this
  // one (before the first show the layout's minimum is not yet the real one).
  initialSize_ = size();
  rebuildRecentMenu();
  documentChanged();
}

void MainWindow::keepOnScreen() {
  if (isMaximized() || isFullScreen()) return;
  const QScreen* sc = screen();
  if (!sc) return;
  const QRect g = geometry(), f = frameGeometry();
  QMargins frame(g.left() - f.left(), g.top() - f.top(), f.right() - g.right(), f.bottom() - g.bottom());
  if (frame.isNull()) frame = assumedWindowFrame();  // not known before the window manager frames it
  const QRect fit = fitWindowToScreen(g, frame, sc->availableGeometry());
  if (fit != g) setGeometry(fit);
}

void MainWindow::buildDocks() {
  auto dock = [this](const QString& title, const QString& name, QWidget* w, Qt::DockWidgetArea area) {
    auto* d = new QDockWidget(title, this);
    d->setObjectName(name);
    d->setWidget(w);
    d->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetClosable |
                   QDockWidget::DockWidgetFloatable);
    addDockWidget(area, d);
    return d;
  };
  properties_ = new PropertiesPanel(doc_);
  summary_ = new SummaryPanel;
  diagnostics_ = new DiagnosticsPanel;
  memory_ = new MemoryChart;
  auto* dp =
      dock(tr("Pipeline and costs"), QStringLiteral("dock.properties"), properties_, Qt::LeftDockWidgetArea);
  auto* ds = dock(tr("Summary"), QStringLiteral("dock.summary"), summary_, Qt::RightDockWidgetArea);
  auto* dd =
      dock(tr("Diagnostics"), QStringLiteral("dock.diagnostics"), diagnostics_, Qt::RightDockWidgetArea);
  // The Op dock: the selected op's details and flow, tabbed with the diagnostics; it comes to
  // the front the first time an op is selected.
  details_ = new OpDetailsPanel(doc_, overlay_, view_);
  auto* dop = dock(tr("Op"), QStringLiteral("dock.op"), details_, Qt::RightDockWidgetArea);
  tabifyDockWidget(dd, dop);
  dd->raise();
  connect(details_, &OpDetailsPanel::opActivated, this, [this](const Op& op) { view_->selectOp(op, true); });
  connect(view_, &TimelineView::selectionChanged, this, [this, dop, raised = false]() mutable {
    if (raised || !view_->selectedOp()) return;
    raised = true;
    dop->raise();
  });
  auto* dm = dock(tr("Memory"), QStringLiteral("dock.memory"), memory_, Qt::BottomDockWidgetArea);
  deviation_ = new DeviationPanel;
  auto* dv = dock(tr("Deviation"), QStringLiteral("dock.deviation"), deviation_, Qt::BottomDockWidgetArea);
  tabifyDockWidget(dm, dv);
  dm->raise();
  // The dock comes to the front when an overlay appears, not on every re-comparison after an edit.
  connect(overlay_, &MeasuredOverlay::changed, this, [this, dv, shown = false]() mutable {
    deviation_->setComparison(overlay_->comparison(), planContext());
    legend_->setOverlayShown(overlay_->active());
    if (overlay_->active() && !shown) dv->raise();
    shown = overlay_->active();
  });
  sessionController_ = new SessionController(this);
  session_ = new SessionDock(sessionController_, this);
  connect(doc_, &ScheduleDocument::changed, session_,
          [this] { session_->setFallbackProfile(doc_->profile()); });
  addDockWidget(Qt::LeftDockWidgetArea, session_);
  tabifyDockWidget(dp, session_);
  dp->raise();
  connect(
      session_, &SessionDock::openScheduleRequested, this,
      [this](const QString& text, const QString& name, qint64 id) { openSessionVersion(text, name, id); });
  connect(session_, &SessionDock::openRunRequested, this,
          [this](qint64 runId, const Timeline& t, const QString& text, const QString& name) {
            // The designer draws its own simulation; the stored timeline's figures go to the status bar.
            if (!text.isEmpty() && !openSessionVersion(text, name, session_->currentVersion().value_or(0)))
              return;
            setMeasuredOverlay(t, tr("run %1").arg(runId));
            QString tail = t.complete ? QString() : tr(" · incomplete");
            if (const auto& hang = stepper_->hang())
              tail = tr(" · hung: %1").arg(QString::fromStdString(hang->clause));
            showStatus(tr("Run %1 over the plan: makespan %2 · bubble %3 % · %4 ops%5")
                           .arg(runId)
                           .arg(msPlain(t.metrics.makespan))
                           .arg(t.metrics.bubbleRatio * 100, 0, 'f', 1)
                           .arg(t.ops.size())
                           .arg(tail));
          });
  connect(session_, &SessionDock::sessionChanged, this, &MainWindow::updateTitle);
  resizeDocks({dp, ds}, {360, 330}, Qt::Horizontal);
  resizeDocks({ds, dd, dm}, {420, 260, 280}, Qt::Vertical);
  // Search dock (docs/gui.md, "Search dock"): tabbed with Memory, opened from Tools.
  search_ = new SearchDock(doc_, this);
  addDockWidget(Qt::BottomDockWidgetArea, search_);
  tabifyDockWidget(dm, search_);
  dm->raise();
  connect(search_, &SearchDock::designOpened, this, [this](const QString& what) {
    view_->selectOp(std::nullopt, false);
    view_->zoomToFit();
    showStatus(what);
  });
}

void MainWindow::buildStepper() {
  // The State dock (state at the playhead, breakpoints) tabbed with the Summary.
  state_ = new StatePanel;
  auto* bps = new BreakpointsPanel;
  auto* box = new QWidget;
  auto* lay = new QVBoxLayout(box);
  lay->setContentsMargins(0, 0, 0, 0);
  lay->addWidget(state_, 1);
  lay->addWidget(bps);
  stateDock_ = new QDockWidget(tr("State"), this);
  stateDock_->setObjectName(QStringLiteral("dock.state"));
  stateDock_->setWidget(box);
  addDockWidget(Qt::RightDockWidgetArea, stateDock_);
  if (auto* summaryDock = findChild<QDockWidget*>(QStringLiteral("dock.summary"))) {
    tabifyDockWidget(summaryDock, stateDock_);
    summaryDock->raise();
  }
  stepper_ = new StepperController(doc_, overlay_, view_, this);
  stepper_->attach(memory_, diagnostics_, state_, bps);
  connect(stepper_, &StepperController::statusMessage, this, &MainWindow::showStatus);
  connect(stepper_, &StepperController::opActivated, this,
          [this](const Op& op) { view_->selectOp(op, true); });
  connect(stepper_->menu(), &QMenu::triggered, this, &MainWindow::showStateDock);
}

void MainWindow::showStateDock() {
  stateDock_->show();
  stateDock_->raise();
}

void MainWindow::showSearchDock() {
  search_->show();
  search_->raise();
}

void MainWindow::updateFind(bool fromStart) {
  const QString text = find_->text().trimmed();
  if (text.isEmpty()) {
    view_->setSearchMatches({});
    findCount_->clear();
    matchIndex_ = -1;
    return;
  }
  const Analysis& a = doc_->analysis();
  const OpQuery q = parseOpQuery(text, a.schedule);
  if (!q.valid) {
    view_->setSearchMatches({});
    findCount_->setText(tr("'%1'?").arg(q.problem));
    findCount_->setToolTip(
        tr("Not an op, kind, micro-batch (mb 3), stage (s2) or device (d1): %1").arg(q.problem));
    matchIndex_ = -1;
    return;
  }
  std::vector<OpRef> matches = findOps(a.schedule, a.timeline, q);
  findCount_->setToolTip(QString());
  if (fromStart) matchIndex_ = -1;
  matchIndex_ = std::min(matchIndex_, static_cast<int>(matches.size()) - 1);
  findCount_->setText(matches.empty()    ? tr("no match")
                      : matchIndex_ >= 0 ? tr("%1 / %2").arg(matchIndex_ + 1).arg(matches.size())
                                         : tr("%n match(es)", nullptr, static_cast<int>(matches.size())));
  view_->setSearchMatches(std::move(matches));
}

void MainWindow::findNext(bool forward) {
  if (find_->text().trimmed().isEmpty()) {
    focusFind();
    return;
  }
  const auto& m = view_->searchMatches();
  if (m.empty()) {
    showStatus(tr("No op matches '%1'").arg(find_->text().trimmed()));
    return;
  }
  const int n = static_cast<int>(m.size());
  matchIndex_ = matchIndex_ < 0 ? (forward ? 0 : n - 1) : (matchIndex_ + (forward ? 1 : n - 1)) % n;
  const OpRef r = m[static_cast<size_t>(matchIndex_)];
  view_->selectRef(r, true);
  findCount_->setText(tr("%1 / %2").arg(matchIndex_ + 1).arg(n));
  showStatus(tr("Match %1 of %2: %3 on device %4")
                 .arg(matchIndex_ + 1)
                 .arg(n)
                 .arg(QString::fromStdString(doc_->schedule().opName(*opAt(doc_->schedule(), r))))
                 .arg(r.device));
}

QString MainWindow::findCountText() const {
  return findCount_->text();
}

void MainWindow::focusFind() {
  find_->setFocus(Qt::ShortcutFocusReason);
  find_->selectAll();
}

bool MainWindow::eventFilter(QObject* o, QEvent* e) {
  if (o == centralWidget() && e->type() == QEvent::Resize) {
    const auto dir = centralWidget()->width() < 720 ? QBoxLayout::BottomToTop : QBoxLayout::LeftToRight;
    if (top_->direction() != dir) top_->setDirection(dir);
  }
  if (o == find_ && e->type() == QEvent::KeyPress) {
    auto* k = static_cast<QKeyEvent*>(e);
    if ((k->key() == Qt::Key_Return || k->key() == Qt::Key_Enter) && (k->modifiers() & Qt::ShiftModifier)) {
      findNext(false);
      return true;
    }
    if (k->key() == Qt::Key_Escape) {
      find_->clear();
      view_->setFocus();
      return true;
    }
    if (k->key() == Qt::Key_Down || k->key() == Qt::Key_Up) {
      findNext(k->key() == Qt::Key_Down);
      return true;
    }
  }
  return QMainWindow::eventFilter(o, e);
}

void MainWindow::documentChanged() {
  if (find_ && !find_->text().isEmpty()) updateFind(false);  // steps moved: match again
  const Analysis& a = doc_->analysis();
  legend_->setSchedule(a.schedule);
  std::int64_t cap = doc_->profile().deviceMemoryBytes;
  // The memory chart follows what the timeline shows (K iterations when asked for).
  memory_->setTimeline(a.iterations && !view_->iterationsShown() ? a.timeline
                       : a.iterations                            ? a.iterations->timeline
                                                                 : a.timeline,
                       cap);
  summary_->setIterations(a.iterations ? &*a.iterations : nullptr);
  summary_->setBaseline(summaryBaseline(a));
  summary_->setMetrics(a.timeline.metrics, doc_->savedMetrics(), simulationProgress(a),
                       doc_->savedProgress());
  diagnostics_->setDiagnostics(a.diagnostics);
  int errors = 0, warnings = 0;
  for (const auto& d : a.diagnostics)
    (d.severity == Severity::Error ? errors : warnings) += d.severity != Severity::Note;
  QString v;
  if (errors == 0)
    v = tr("<span style='color:%1'>●</span> Valid").arg(Theme::html(Theme::current().good));
  else
    v = tr("<span style='color:%1'>●</span> %n error(s)", nullptr, errors)
            .arg(Theme::html(Theme::current().error));
  if (warnings) v += tr(" · %n warning(s)", nullptr, warnings);
  const SimulationProgress progress = simulationProgress(a);
  v += tr(" · %1 ops · makespan %2")
           .arg(a.schedule.opCount())
           .arg(progress.finished ? makespanText(a) : tr("n/a, %1").arg(stalledText(progress)));
  validity_->setToolTip(progress.finished ? QString() : notAvailableText(progress));
  validity_->setText(v + QStringLiteral("&nbsp;&nbsp;"));
  updateTitle();
}

void MainWindow::showStatusMessage(const QString& message, int timeoutMs) {
  statusBar()->showMessage(message, timeoutMs);
}

QString MainWindow::statusText() const {
  return message_->fullText();
}
QString MainWindow::validityText() const {
  return validity_->text();
}

void MainWindow::showStatus(const QString& text) {
  message_->setFullText(text);
}

void MainWindow::updateTitle() {
  QString name = doc_->filePath().isEmpty() ? QString::fromStdString(doc_->schedule().name)
                                            : QFileInfo(doc_->filePath()).fileName();
  if (name.isEmpty()) name = tr("Untitled");
  if (!doc_->filePath().isEmpty() &&
      (isBundled(doc_->filePath()) || !QFileInfo(doc_->filePath()).isWritable()))
    name += tr(" (read-only)");   // Save asks for a new name
  name += QStringLiteral("[*]");  // the unsaved marker goes right after the schedule's name
  if (session_ && session_->hasSession())
    name += tr(" — session %1%2")
                .arg(QFileInfo(session_->sessionPath()).fileName(),
                     session_->isReadOnly() ? tr(" (read-only)") : QString());
  setWindowTitle(name + QStringLiteral(" — PipeStudio"));
  setWindowModified(doc_->isModified());
}

bool MainWindow::openFile(const QString& path, bool quiet) {
  auto loaded = readScheduleFile(path);
  if (!loaded) {
    const QString msg = QString::fromStdString(formatDiagnostics(loaded.errors()));
    if (!quiet) QMessageBox::warning(this, tr("Cannot open %1").arg(QFileInfo(path).fileName()), msg);
    showStatus(tr("Cannot open %1").arg(path));
    return false;
  }
  doc_->load(std::move(loaded->schedule), std::move(loaded->profile), QFileInfo(path).absoluteFilePath(),
             loaded->text);
  const QString dropped = documentReplaced();
  view_->selectOp(std::nullopt, false);
  view_->zoomToFit();
  addRecent(QFileInfo(path).absoluteFilePath());
  showStatus((loaded->notes.empty() ? tr("Opened %1").arg(QFileInfo(path).fileName())
                                    : QString::fromStdString(loaded->notes.front().message)) +
             (dropped.isEmpty() ? QString() : QStringLiteral(" · ") + dropped));
  return true;
}

bool MainWindow::openTraces(const QStringList& paths, bool quiet, std::optional<long long> step) {
  if (importCancel_) {
    // The window stays usable until the progress dialog comes up; one import at a time.
    showStatus(tr("A measured trace is being read; wait for it or cancel it."));
    return false;
  }
  std::vector<std::string> args;
  for (const QString& p : paths) args.push_back(p.toStdString());
  TraceDiscoveryOptions discovery;
  discovery.step = step;
  // A torchtitan folder with several profiled steps: ask which (the newest by default).
  if (!quiet && !step && paths.size() == 1 && QFileInfo(paths.front()).isDir()) {
    auto sel = findTraceFiles(args);
    if (sel && sel->steps.size() > 1) {
      QStringList items;
      for (long long n : sel->steps) items << QStringLiteral("iteration_%1").arg(n);
      bool ok = false;
      const QString item = QInputDialog::getItem(this, tr("Profiled step"),
                                                 tr("%1 holds traces of several steps:").arg(paths.front()),
                                                 items, static_cast<int>(items.size() - 1), false, &ok);
      if (!ok) return false;
      discovery.step = sel->steps[static_cast<size_t>(std::max<qsizetype>(0, items.indexOf(item)))];
    }
  }
  // Traces of real runs reach gigabytes: the import streams them on a worker thread while a
  // dialog shows how far it got and can cancel it (the import asks after every chunk read).
  std::atomic<bool> cancel{false};
  std::atomic<int> permille{0};
  std::atomic<int> fileIndex{0};
  TraceImportOptions options;
  options.progress = [&](const TraceProgress& p) {
    if (p.bytesTotal > 0)
      permille = static_cast<int>(std::min<std::uint64_t>(p.bytesRead * 1000 / p.bytesTotal, 1000));
    fileIndex = static_cast<int>(p.file);
    return !cancel.load();
  };
  const auto import = [&]() -> Result<TraceImport> {
    try {
      return importTraceFiles(args, options, discovery);
    } catch (const std::exception& e) {
      return makeError("trace.open", std::string("cannot read the traces: ") + e.what());
    }
  };
  Result<TraceImport> r = Diagnostics{};
  if (quiet) {
    r = import();
  } else {
    importCancel_ = &cancel;
    QProgressDialog dialog(tr("Reading measured traces…"), tr("Cancel"), 0, 1000, this);
    dialog.setWindowTitle(tr("Open Measured Trace"));
    dialog.setWindowModality(Qt::WindowModal);
    dialog.setMinimumDuration(progressDelayMs_);
    dialog.setAutoReset(false);
    dialog.setAutoClose(false);
    dialog.setValue(0);  // starts its clock: shown after the delay, or early for a long import
    QEventLoop loop;
    connect(&dialog, &QProgressDialog::canceled, &loop, [&] { cancel = true; });
    QTimer tick;
    connect(&tick, &QTimer::timeout, &dialog, [&] {
      if (dialog.wasCanceled()) cancel = true;
      if (args.size() > 1)
        dialog.setLabelText(
            tr("Reading measured traces… (file %1 of %2)").arg(fileIndex.load() + 1).arg(args.size()));
      dialog.setValue(permille.load());
    });
    tick.start(100);
    std::atomic<bool> finished{false};
    std::thread worker([&] {
      r = import();
      finished = true;
      // By name: the functor overloads allocate a slot object in Qt's headers that
      // clang-analyzer takes for a leak.
      QMetaObject::invokeMethod(&loop, "quit", Qt::QueuedConnection);
    });
    loop.exec();
    // The loop also ends when the application quits: stop the import rather than wait for it.
    if (!finished) cancel = true;
    worker.join();
    tick.stop();
    importCancel_ = nullptr;
  }
  QString problem;
  if (!r) {
    problem = r.error().code == "trace.cancelled" ? tr("Cancelled.")
                                                  : QString::fromStdString(formatDiagnostics(r.errors()));
  } else if (r->trace.timeline.ops.empty()) {
    problem = tr("No pipeline actions (PP: ranges) in the trace.");
  }
  if (!problem.isEmpty()) {
    const QString title = tr("Cannot read measured trace");
    if (!quiet && !cancel) QMessageBox::warning(this, title, problem);
    showStatus(title + QStringLiteral(": ") + problem.section(QLatin1Char('\n'), 0, 0));
    return false;
  }
  QStringList names;
  for (const auto& f : r->selection.files) names << QFileInfo(QString::fromStdString(f)).fileName();
  QString what = names.join(QStringLiteral(", "));
  if (r->selection.step) what = QStringLiteral("iteration_%1: ").arg(*r->selection.step) + what;
  setMeasuredOverlay(r->trace.timeline, what);
  // What the folder's reading left out (other dumps, unreadable entries) is worth a word.
  QStringList warnings;
  for (const Diagnostic& d : r->selection.notes)
    if (d.severity == Severity::Warning) warnings << QString::fromStdString(d.message);
  if (!warnings.isEmpty())
    showStatus(statusText() + tr(" · %n warning(s): %1", nullptr, static_cast<int>(warnings.size()))
                                  .arg(warnings.join(QStringLiteral("; "))));
  return true;
}

void MainWindow::setMeasuredOverlay(const Timeline& measured, const QString& what, bool live) {
  ComparisonOptions o;
  o.alignment = scaledAction_ && scaledAction_->isChecked() ? Alignment::Scaled : Alignment::Absolute;
  overlay_->set(measured, o, what);
  overlayLabel_->setText(tr("Measured: %1").arg(what));
  overlayLabel_->setToolTip(
      tr("The measured lanes, the Deviation dock and the State dock compare the plan with %1").arg(what));
  overlayLabel_->show();
  if (live)
    showStatus(tr("Run in progress (%1): %2 of %3 ops measured")
                   .arg(what)
                   .arg(measured.ops.size())
                   .arg(doc_->schedule().opCount()));
  else if (const Comparison* c = overlay_->comparison()) {
    const SimulationProgress plan = simulationProgress(doc_->analysis());
    if (plan.finished)
      showStatus(tr("Measured overlay from %1: %2 ops · makespan %3 vs planned %4 (%5%6 %)%7")
                     .arg(what)
                     .arg(measured.ops.size())
                     .arg(msPlain(c->measuredMakespan), msPlain(c->plannedMakespan))
                     .arg(c->relativeError >= 0 ? QStringLiteral("+") : QString())
                     .arg(c->relativeError * 100, 0, 'f', 1)
                     .arg(usesDefaultCostModel() ? tr(" · plan: default cost model") : QString()));
    else
      showStatus(tr("Measured overlay from %1: %2 ops · makespan %3; the plan has none (%4)")
                     .arg(what)
                     .arg(measured.ops.size())
                     .arg(msPlain(c->measuredMakespan))
                     .arg(notAvailableText(plan)));
  }
  stepper_->timelineOpened(live);  // a failed run opens where it stopped
  if (!measured.complete && !live) showStateDock();
}

QString MainWindow::overlaySource() const {
  return overlay_->what();
}

void MainWindow::clearMeasuredOverlay() {
  const bool had = overlay_->active();
  overlay_->clear();
  overlayLabel_->clear();
  overlayLabel_->hide();
  // Back to the plain designer: the step-through was of the run, so it ends with it.
  if (had) stepper_->stopDebugging();
  showStatus(tr("Measured overlay cleared"));
}

QString MainWindow::dropMismatchedOverlay() {
  const Timeline* m = overlay_->timeline();
  if (!m) return {};
  // The overlay belongs to this schedule when every measured op is one of its ops, on the
  // device the plan puts it (a run of another schedule would be compared op by op with
  // unrelated work).
  QString why;
  if (m->devices > 0 && m->devices != doc_->schedule().pipeline.devices)
    why = tr("%1 devices measured, %2 planned").arg(m->devices).arg(doc_->schedule().pipeline.devices);
  for (size_t i = 0; why.isEmpty() && i < m->ops.size(); ++i) {
    const TimelineOp& o = m->ops[i];
    const auto ref = doc_->find(o.op);
    if (!ref || ref->device != o.device)
      why = tr("%1 on device %2 is not in this schedule")
                .arg(QString::fromStdString(doc_->schedule().opName(o.op)))
                .arg(o.device);
  }
  if (why.isEmpty()) return {};
  const QString what = overlay_->what();
  clearMeasuredOverlay();
  QString note = tr("measured overlay (%1) cleared: it is not a run of this schedule (%2)").arg(what, why);
  showStatus(note);
  return note;
}

SummaryPanel::Baseline MainWindow::summaryBaseline(const Analysis& a) const {
  SummaryPanel::Baseline b;
  b.sameModel = doc_->savedWithCurrentModel();
  b.savedModel = doc_->savedModelName();
  for (const Diagnostic& d : a.diagnostics)
    if (d.severity == Severity::Error && b.currentErrors++ == 0)
      b.currentProblem = QString::fromStdString(d.message);
  return b;
}

bool MainWindow::usesDefaultCostModel() const {
  return costProfileToJson(doc_->profile()) == costProfileToJson(defaultCostProfile(doc_->schedule()));
}

PlanContext MainWindow::planContext() const {
  PlanContext p;
  const Analysis& a = doc_->analysis();
  p.progress = simulationProgress(a);
  p.costModel = QString::fromStdString(doc_->profile().name);
  p.defaultModel = usesDefaultCostModel();
  const Comparison* c = overlay_->comparison();
  const Timeline* m = overlay_->timeline();
  if (!c || !m) return p;
  // A measured op the planned timeline lacks is either not in the plan at all, or one the
  // plan's stalled simulation never reached.
  for (size_t i : c->unmatchedMeasured) {
    if (i >= m->ops.size()) continue;
    if (doc_->find(m->ops[i].op))
      ++p.notReached;
    else
      ++p.notInPlan;
  }
  if (p.progress.finished) {
    p.notInPlan += p.notReached;  // the plan ran to its end: it lacks them indeed (another device)
    p.notReached = 0;
  }
  return p;
}

QString MainWindow::documentReplaced() {
  // The overlay first: dropping it must not leave the new document in step mode.
  QString dropped = dropMismatchedOverlay();
  stepper_->stopDebugging();
  return dropped;
}

void MainWindow::setOverlayScaled(bool scaled) {
  scaledAction_->setChecked(scaled);
}

void MainWindow::openDefault() {
  const QString example = resourcesDir() + QStringLiteral("/examples/example.pipe");
  if (QFileInfo(example).isFile() && openFile(example, true)) {
    // An example is a template, not the user's file.
    return;
  }
  GeneratorOptions o;
  o.devices = 4;
  o.microbatches = 8;
  auto s = generateSchedule(ScheduleKind::OneFOneB, o);
  if (s) {
    Schedule sched = std::move(s).value();
    if (sched.name.empty()) sched.name = "1f1b";
    doc_->load(sched, defaultCostProfile(sched));
    view_->zoomToFit();
  }
}

void MainWindow::newFromTemplate() {
  if (!maybeSave()) return;
  TemplateDialog dlg(this);
  if (dlg.exec() != QDialog::Accepted || !dlg.schedule()) return;
  Schedule s = *dlg.schedule();
  doc_->load(s, defaultCostProfile(s));
  const QString dropped = documentReplaced();
  view_->selectOp(std::nullopt, false);
  view_->zoomToFit();
  showStatus(tr("New %1 schedule").arg(QString::fromStdString(s.name)) +
             (dropped.isEmpty() ? QString() : QStringLiteral(" · ") + dropped));
}

void MainWindow::open() {
  if (!maybeSave()) return;
  const QString path =
      QFileDialog::getOpenFileName(this, tr("Open schedule"), dialogDir(QStringLiteral("open")),
                                   tr("Schedules (*.pipe *.csv);;PipeStudio (*.pipe);;PyTorch CSV (*.csv)"));
  if (path.isEmpty()) return;
  rememberDialogDir(QStringLiteral("open"), path);
  openFile(path);
}

QString MainWindow::programKeptWhy(const QString& path) const {
  if (!doc_->isProgram()) return tr("it was not opened from a program");
  if (doc_->editedSinceLoad())
    return tr("the schedule was edited, and an edit cannot be written back into its loops");
  if (path.endsWith(QStringLiteral(".csv"), Qt::CaseInsensitive)) return tr("a CSV holds the op orders only");
  const auto& profile = doc_->schedule().profile;
  if (profile && !profile->empty() && QFileInfo(QString::fromStdString(*profile)).isRelative() &&
      !doc_->filePath().isEmpty()) {
    // The program names its profile relative to its own folder: it must still be found from
    // the new one (or among the bundled profiles, where every folder finds it).
    const QString name = QString::fromStdString(*profile);
    const QString was = QFileInfo(QFileInfo(doc_->filePath()).dir().filePath(name)).canonicalFilePath();
    const QString will = QFileInfo(QFileInfo(path).absoluteDir().filePath(name)).canonicalFilePath();
    const QString bundled = resourcesDir() + QStringLiteral("/profiles/");
    const bool found = was == will || QFileInfo(bundled + name).isFile() ||
                       QFileInfo(bundled + name + QStringLiteral(".json")).isFile();
    if (!was.isEmpty() && !found) return tr("its profile \"%1\" would not be found next to it").arg(name);
  }
  return {};
}

Status MainWindow::writePipe(const QString& path, QString* note) const {
  const QString why = programKeptWhy(path);
  if (why.isEmpty()) {
    // Unedited: the program exactly as written (its loops, variables and comments).
    QFile f(path);
    const QByteArray bytes = doc_->sourceText().toUtf8();
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate) || f.write(bytes) != bytes.size())
      return makeError("io.write",
                       "cannot write " + path.toStdString() + ": " + f.errorString().toStdString());
    if (note) *note = tr("the program as written");
    return okStatus();
  }
  if (note && doc_->isProgram())
    *note = tr("in the explicit form, the program's loops expanded: %1").arg(why);
  return writeScheduleFile(path, doc_->schedule());
}

bool MainWindow::saveTo(const QString& path) {
  QString note;
  auto st = path.endsWith(QStringLiteral(".csv"), Qt::CaseInsensitive)
                ? writeScheduleFile(path, doc_->schedule())
                : writePipe(path, &note);
  if (!st) {
    QMessageBox::warning(this, tr("Cannot save"), QString::fromStdString(st.error().message));
    return false;
  }
  doc_->markSaved(QFileInfo(path).absoluteFilePath());
  rememberDialogDir(QStringLiteral("save"), path);
  addRecent(QFileInfo(path).absoluteFilePath());
  showStatus(
      tr("Saved %1").arg(QFileInfo(path).fileName()) +
      (doc_->isProgram() && !note.isEmpty() ? QStringLiteral(" (") + note + QLatin1Char(')') : QString()));
  return true;
}

bool MainWindow::save() {
  const QString p = doc_->filePath();
  if (session_->hasSession() && !session_->isReadOnly()) {
    // With a session open, Save stores a new version; the file too when it is the user's.
    if (!session_->saveVersion(QString::fromStdString(doc_->schedule().name),
                               QString::fromStdString(printDsl(doc_->schedule())))) {
      QMessageBox::warning(this, tr("Cannot save to the session"), session_->errorText());
      return false;
    }
    if (p.isEmpty() || p.startsWith(QFileInfo(resourcesDir()).absoluteFilePath())) {
      doc_->markSaved(p);
      showStatus(tr("Stored version %1 in %2")
                     .arg(session_->currentVersion().value_or(0))
                     .arg(QFileInfo(session_->sessionPath()).fileName()));
      updateTitle();
      return true;
    }
  }
  // Examples from the resources folder are not overwritten in place.
  if (p.isEmpty() || p.startsWith(QFileInfo(resourcesDir()).absoluteFilePath()) || isBundled(p) ||
      !QFileInfo(p).isWritable())
    return saveAs();
  if (doc_->isProgram() && !programKeptWhy(p).isEmpty() && !p.endsWith(QStringLiteral(".csv"))) {
    // Saving an edited program over itself replaces its loops with the explicit form.
    QMessageBox box(QMessageBox::Question, tr("Save"),
                    tr("%1 is a program (loops, variables). The edited schedule can only be written in the "
                       "explicit form, one op list per device. Overwrite the program with it?")
                        .arg(QFileInfo(p).fileName()),
                    QMessageBox::NoButton, this);
    QPushButton* as = box.addButton(tr("Save &As…"), QMessageBox::AcceptRole);
    QPushButton* over = box.addButton(tr("&Overwrite"), QMessageBox::DestructiveRole);
    box.addButton(QMessageBox::Cancel);
    box.setDefaultButton(as);
    box.exec();
    if (box.clickedButton() == as) return saveAs();
    if (box.clickedButton() != over) return false;
  }
  return saveTo(p);
}

void MainWindow::adopt(RunDialog* dialog) {
  connect(dialog, &RunDialog::timelineMeasured, this, &MainWindow::setMeasuredOverlay);
  connect(dialog, &RunDialog::runStored, this, &MainWindow::showStoredIn);
}

void MainWindow::adopt(ProfileDialog* dialog) {
  connect(dialog, &ProfileDialog::profileApplied, this,
          [this](const QString& message) { showStatusMessage(message, 15000); });
  connect(dialog, &ProfileDialog::profileStored, this, &MainWindow::showStoredIn);
}

void MainWindow::showStoredIn(const QString& sessionPath) {
  if (sessionController_->hasSession() && sessionController_->path() == sessionPath)
    sessionController_->notifyWritten();
  else
    openSession(sessionPath, false);
}

bool MainWindow::openSession(const QString& path, bool readOnly) {
  // The bundled example and files we may not write are never changed by opening them (no
  // migration, no switch to WAL, no -wal/-shm files beside them).
  if (isBundled(path) || (QFileInfo(path).isFile() && !QFileInfo(path).isWritable())) readOnly = true;
  session_->setFallbackProfile(doc_->profile());
  const bool ok = session_->openSession(path, readOnly);
  session_->show();
  session_->raise();
  if (!ok) showStatus(session_->errorText());
  updateTitle();
  return ok;
}

void MainWindow::openSessionDialog() {
  const QString path =
      QFileDialog::getOpenFileName(this, tr("Open session"), dialogDir(QStringLiteral("session")),
                                   tr("PipeStudio sessions (*.session);;All files (*)"));
  rememberDialogDir(QStringLiteral("session"), path);
  if (!path.isEmpty() && !openSession(path))
    QMessageBox::warning(this, tr("Cannot open session"), session_->errorText());
}

bool MainWindow::openSessionVersion(const QString& text, const QString& name, qint64 id) {
  if (!maybeSave()) return false;
  DslOptions o;
  o.filename = QStringLiteral("%1 (v%2)").arg(name).arg(id).toStdString();
  auto parsed = parseDsl(text.toStdString(), o);
  if (!parsed) {
    QMessageBox::warning(this, tr("Cannot open version %1").arg(id),
                         QString::fromStdString(formatDiagnostics(parsed.errors())));
    return false;
  }
  Schedule s = std::move(parsed).value();
  if (s.name.empty()) s.name = name.toStdString();
  CostProfile p = session_->profileForVersion(id).value_or(doc_->profile());
  if (!makeSimulationModel(s, p)) p = defaultCostProfile(s);
  doc_->load(std::move(s), std::move(p), {}, text);
  const QString dropped = documentReplaced();
  view_->selectOp(std::nullopt, false);
  view_->zoomToFit();
  showStatus(tr("Opened version %1 of %2 from the session").arg(id).arg(name) +
             (dropped.isEmpty() ? QString() : QStringLiteral(" · ") + dropped));
  return true;
}

bool MainWindow::saveAs() {
  // The user's own file's folder, else where schedules were last saved (never resources/).
  QString start = dialogDir(QStringLiteral("save"));
  const QString cur = doc_->filePath();
  const QString name =
      cur.isEmpty() ? QString::fromStdString(doc_->schedule().name) : QFileInfo(cur).completeBaseName();
  if (!cur.isEmpty() && !isBundled(cur)) start = QFileInfo(cur).absolutePath();
  const QString path = QFileDialog::getSaveFileName(
      this, tr("Save schedule"),
      QDir(start).filePath((name.isEmpty() ? QStringLiteral("schedule") : name) + QStringLiteral(".pipe")),
      tr("PipeStudio schedule (*.pipe);;PyTorch CSV (*.csv)"));
  if (path.isEmpty()) return false;
  return saveTo(path);
}

bool MainWindow::exportFile(const QString& path) {
  const QString ext = QFileInfo(path).suffix().toLower();
  lastExportNote_.clear();
  if (ext == QStringLiteral("png")) return view_->exportImage(2000).save(path);
  if (ext == QStringLiteral("svg")) return view_->exportSvg(path, 1600);
  if (ext == QStringLiteral("json")) {
    const std::string text = exportChromeTrace(doc_->analysis().timeline, &doc_->schedule());
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate)) return false;
    return f.write(text.data(), static_cast<qint64>(text.size())) == static_cast<qint64>(text.size());
  }
  if (ext == QStringLiteral("csv")) return static_cast<bool>(writeScheduleFile(path, doc_->schedule()));
  return static_cast<bool>(writePipe(path, &lastExportNote_));
}

void MainWindow::exportAs(const QString& filter, const QString& suffix) {
  QString base = doc_->filePath().isEmpty() ? QStringLiteral("schedule")
                                            : QFileInfo(doc_->filePath()).completeBaseName();
  QString path = QFileDialog::getSaveFileName(
      this, tr("Export"),
      QDir(dialogDir(QStringLiteral("export"))).filePath(base + QLatin1Char('.') + suffix), filter);
  if (path.isEmpty()) return;
  rememberDialogDir(QStringLiteral("export"), path);
  if (QFileInfo(path).suffix().isEmpty()) path += QLatin1Char('.') + suffix;
  if (QFileInfo(path).suffix().compare(QStringLiteral("csv"), Qt::CaseInsensitive) == 0) {
    // A PyTorch CSV holds the op orders only: say what the design loses before writing it.
    const auto lost = csvExportLosses(doc_->schedule(), csvFormatFor(doc_->schedule()));
    if (!lost.empty()) {
      QStringList items;
      for (const auto& l : lost) items << QString::fromStdString(l).toHtmlEscaped();
      const auto answer = QMessageBox::information(
          this, tr("Export as PyTorch CSV"),
          tr("<p>%1 will not carry:</p><ul><li>%2</li></ul><p>Simulating the CSV under the same cost profile "
             "can give a different result. The .pipe keeps all of it.</p>")
              .arg(QFileInfo(path).fileName().toHtmlEscaped(), items.join(QStringLiteral("</li><li>"))),
          QMessageBox::Ok | QMessageBox::Cancel, QMessageBox::Ok);
      if (answer != QMessageBox::Ok) return;
    }
  }
  if (QFileInfo(path).suffix().compare(QStringLiteral("pipe"), Qt::CaseInsensitive) == 0 &&
      doc_->isProgram()) {
    // A program that cannot be written back as it is: say what is written instead.
    const QString why = programKeptWhy(path);
    if (!why.isEmpty() && QMessageBox::information(
                              this, tr("Export as .pipe"),
                              tr("<p>%1 was opened from a program (loops, variables). %2 will be written in "
                                 "the explicit form, one op list per device, because %3.</p>")
                                  .arg(QFileInfo(doc_->filePath()).fileName().toHtmlEscaped(),
                                       QFileInfo(path).fileName().toHtmlEscaped(), why.toHtmlEscaped()),
                              QMessageBox::Ok | QMessageBox::Cancel, QMessageBox::Ok) != QMessageBox::Ok)
      return;
  }
  const bool ok = exportFile(path);
  showStatus(ok ? tr("Exported %1").arg(QFileInfo(path).fileName()) +
                      (lastExportNote_.isEmpty() ? QString()
                                                 : QStringLiteral(" (") + lastExportNote_ + QLatin1Char(')'))
                : tr("Export to %1 failed").arg(path));
}

bool MainWindow::maybeSave() {
  if (!doc_->isModified()) return true;
  const auto r =
      QMessageBox::question(this, tr("Unsaved changes"), tr("Save the changes to this schedule first?"),
                            QMessageBox::Save | QMessageBox::Discard | QMessageBox::Cancel);
  if (r == QMessageBox::Cancel) return false;
  if (r == QMessageBox::Save) return save();
  return true;
}

void MainWindow::resizeEvent(QResizeEvent* e) {
  QMainWindow::resizeEvent(e);
  applyCompactLayout();
}

void MainWindow::showEvent(QShowEvent* e) {
  QMainWindow::showEvent(e);
  if (!shownOnce_) {
    shownOnce_ = true;
    // Inside the screen now, and again once framed with the real decorations; unless someone
    // sized the window on purpose before showing it (or resizes it meanwhile).
    if (size() == initialSize_) {
      keepOnScreen();
      fittedSize_ = size();
      // By name, as in openTraces: clang-analyzer takes the functor overloads' slot objects
      // for leaks.
      for (int ms : {0, 300}) QTimer::singleShot(ms, this, SLOT(refitOnScreen()));
    }
  }
  applyCompactLayout();
}

void MainWindow::refitOnScreen() {
  if (size() != fittedSize_) return;
  keepOnScreen();
  fittedSize_ = size();
}

void MainWindow::applyCompactLayout() {
  // Again only after a large change of width, so the user's own dock sizes stay.
  if (restoredState_ || !isVisible() || width() >= 1300 || std::abs(width() - compactWidth_) < 100) return;
  compactWidth_ = width();
  // Made small (e.g. 1024x700) with no saved layout: narrower side docks and a lower bottom
  // dock, so the timeline keeps most of the room.
  compactDocks();
  QTimer::singleShot(0, this, SLOT(compactDocks()));  // and once the layout has taken the new size
}

void MainWindow::compactDocks() {
  auto* dp = findChild<QDockWidget*>(QStringLiteral("dock.properties"));
  auto* ds = findChild<QDockWidget*>(QStringLiteral("dock.summary"));
  auto* dm = findChild<QDockWidget*>(QStringLiteral("dock.memory"));
  if (dp && ds) resizeDocks({dp, ds}, {width() * 27 / 100, width() * 30 / 100}, Qt::Horizontal);
  if (dm) resizeDocks({dm}, {height() / 4}, Qt::Vertical);
}

void MainWindow::closeEvent(QCloseEvent* e) {
  if (!maybeSave()) {
    e->ignore();
    return;
  }
  if (importCancel_) *importCancel_ = true;  // a trace being read is not waited for
  QSettings st = settings();
  st.setValue(QStringLiteral("window/geometry"), saveGeometry());
  st.setValue(QStringLiteral("window/state"), saveState());
  e->accept();
}

}  // namespace ps::ui
