// The main window's menus, toolbar, keyboard-shortcut help and recent files.
#include <QAction>
#include <QComboBox>
#include <QDesktopServices>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QKeySequence>
#include <QMenuBar>
#include <QMessageBox>
#include <QStyle>
#include <QTextBrowser>
#include <QToolBar>
#include <QUndoStack>
#include <QUrl>
#include <QVBoxLayout>
#include <QWidgetAction>
#include <functional>

#include "debugger/stepper_controller.h"
#include "document/measured_overlay.h"
#include "document/schedule_document.h"
#include "panels/iterations_controls.h"
#include "remote/profile_dialog.h"
#include "remote/run_dialog.h"
#include "shell/help_dialog.h"
#include "shell/main_window.h"
#include "shell/main_window_internal.h"
#include "timeline/timeline_view.h"

namespace ps::ui {

using namespace ps::core;
using namespace ps::ui::shell_detail;

namespace {
constexpr int kMaxRecent = 8;
}  // namespace

QString MainWindow::shortcutsHtml() const {
  // Generated from the menus' actions, so it cannot drift from what the keys do.
  QString html = QStringLiteral("<table cellspacing='0' cellpadding='3'>");
  std::function<void(const QMenu*, const QString&)> walk = [&](const QMenu* m, const QString& path) {
    for (QAction* a : m->actions()) {
      if (a->isSeparator()) continue;
      const QString name = QString(a->text()).remove(QLatin1Char('&')).remove(QStringLiteral("…"));
      if (a->menu()) {
        walk(a->menu(), path + name + QStringLiteral(" › "));
        continue;
      }
      if (a->shortcuts().isEmpty()) continue;
      QStringList keys;
      for (const QKeySequence& k : a->shortcuts())
        keys << k.toString(QKeySequence::NativeText).toHtmlEscaped();
      html += QStringLiteral("<tr><td><b>%1</b></td><td>%2</td></tr>")
                  .arg(keys.join(QStringLiteral(", ")), (path + name).toHtmlEscaped());
    }
  };
  for (QAction* top : menuBar()->actions())
    if (top->menu()) {
      html += QStringLiteral("<tr><td colspan='2'><br><b>%1</b></td></tr>")
                  .arg(QString(top->text()).remove(QLatin1Char('&')).toHtmlEscaped());
      walk(top->menu(), QString());
    }
  // The timeline's own keys and gestures: from the view, so they cannot drift either.
  html += QStringLiteral("<tr><td colspan='2'><br><b>%1</b></td></tr>").arg(tr("Timeline").toHtmlEscaped());
  for (const auto& [keys, what] : TimelineView::inputHelp())
    html += QStringLiteral("<tr><td><b>%1</b></td><td>%2</td></tr>")
                .arg(keys.toHtmlEscaped(), what.toHtmlEscaped());
  html += QStringLiteral("</table>");
  return html;
}

void MainWindow::showShortcuts() {
  QDialog dlg(this);
  dlg.setWindowTitle(tr("Keyboard Shortcuts"));
  auto* lay = new QVBoxLayout(&dlg);
  auto* text = new QTextBrowser;
  text->setHtml(shortcutsHtml());
  text->setOpenExternalLinks(true);
  lay->addWidget(text);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close);
  connect(buttons, &QDialogButtonBox::rejected, &dlg, &QDialog::reject);
  lay->addWidget(buttons);
  dlg.resize(560, 600);
  dlg.exec();
}

DocumentationDialog* MainWindow::showDocumentation() {
  // Shown in the program, never handed to a URL handler that may not exist.
  auto* dlg = findChild<DocumentationDialog*>(QString(), Qt::FindDirectChildrenOnly);
  if (!dlg) dlg = new DocumentationDialog(documentationDir(), this);
  dlg->show();
  dlg->raise();
  return dlg;
}

void MainWindow::buildActions() {
  QStyle* st = style();
  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* aNew = file->addAction(st->standardIcon(QStyle::SP_FileIcon), tr("&New from Template…"), this,
                                  &MainWindow::newFromTemplate);
  aNew->setShortcut(QKeySequence::New);
  QAction* aOpen =
      file->addAction(st->standardIcon(QStyle::SP_DialogOpenButton), tr("&Open…"), this, &MainWindow::open);
  aOpen->setShortcut(QKeySequence::Open);
  recentMenu_ = file->addMenu(tr("Open &Recent"));
  file->addAction(tr("Open Sess&ion…"), this, &MainWindow::openSessionDialog);
  QAction* aTraceIn = file->addAction(tr("Open &Measured Trace…"), this, [this] {
    const QStringList paths = QFileDialog::getOpenFileNames(
        this, tr("Open measured trace (one file per rank)"), dialogDir(QStringLiteral("trace")),
        tr("Chrome traces (*.json *.json.gz);;All files (*)"));
    if (paths.isEmpty()) return;
    rememberDialogDir(QStringLiteral("trace"), paths.front());
    openTraces(paths);
  });
  aTraceIn->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_T));
  // torchtitan's profiling/traces, Megatron-LM's torch_profile, a tensorboard_trace_handler folder.
  file->addAction(tr("Open Measured Trace &Folder…"), this, [this] {
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Open a folder of measured traces"),
                                                          dialogDir(QStringLiteral("trace")));
    if (dir.isEmpty()) return;
    rememberDialogDir(QStringLiteral("trace"), dir);
    openTraces({dir});
  });
  file->addAction(tr("&Clear Measured Overlay"), this, &MainWindow::clearMeasuredOverlay);
  file->addSeparator();
  QAction* aSave =
      file->addAction(st->standardIcon(QStyle::SP_DialogSaveButton), tr("&Save"), this, &MainWindow::save);
  aSave->setShortcut(QKeySequence::Save);
  QAction* aSaveAs = file->addAction(tr("Save &As…"), this, &MainWindow::saveAs);
  {  // The platform's Save As keys, and Ctrl+Shift+S everywhere (some platforms define none).
    QList<QKeySequence> keys = QKeySequence::keyBindings(QKeySequence::SaveAs);
    const QKeySequence ctrlShiftS(Qt::CTRL | Qt::SHIFT | Qt::Key_S);
    if (!keys.contains(ctrlShiftS)) keys.prepend(ctrlShiftS);
    aSaveAs->setShortcuts(keys);
  }
  QMenu* exp = file->addMenu(tr("&Export"));
  exp->addAction(tr("Schedule (.pipe)…"), this,
                 [this] { exportAs(tr("PipeStudio schedule (*.pipe)"), QStringLiteral("pipe")); });
  exp->addAction(tr("PyTorch CSV…"), this,
                 [this] { exportAs(tr("PyTorch schedule CSV (*.csv)"), QStringLiteral("csv")); });
  exp->addAction(tr("Chrome trace…"), this,
                 [this] { exportAs(tr("Chrome trace (*.json)"), QStringLiteral("json")); });
  exp->addAction(tr("Timeline as PNG…"), this,
                 [this] { exportAs(tr("PNG image (*.png)"), QStringLiteral("png")); });
  exp->addAction(tr("Timeline as SVG…"), this,
                 [this] { exportAs(tr("SVG image (*.svg)"), QStringLiteral("svg")); });
  file->addSeparator();
  QAction* aQuit = file->addAction(tr("&Quit"), this, &QWidget::close);
  aQuit->setShortcut(QKeySequence::Quit);

  QMenu* edit = menuBar()->addMenu(tr("&Edit"));
  QAction* aUndo = doc_->undoStack()->createUndoAction(this, tr("&Undo"));
  aUndo->setShortcut(QKeySequence::Undo);
  aUndo->setIcon(st->standardIcon(QStyle::SP_ArrowBack));
  QAction* aRedo = doc_->undoStack()->createRedoAction(this, tr("&Redo"));
  {  // The platform's redo keys (Ctrl+Shift+Z here) and Ctrl+Y, which many users expect.
    QList<QKeySequence> keys = QKeySequence::keyBindings(QKeySequence::Redo);
    const QKeySequence ctrlY(Qt::CTRL | Qt::Key_Y);
    if (!keys.contains(ctrlY)) keys << ctrlY;
    aRedo->setShortcuts(keys);
  }
  aRedo->setIcon(st->standardIcon(QStyle::SP_ArrowForward));
  edit->addAction(aUndo);
  edit->addAction(aRedo);
  edit->addSeparator();
  QAction* aEarlier = edit->addAction(tr("Move Op &Earlier"));
  aEarlier->setShortcut(QKeySequence(Qt::ALT | Qt::Key_Left));
  connect(aEarlier, &QAction::triggered, this, [this] {
    if (auto r = view_->selection()) {
      QString err;
      if (!doc_->moveOp(r->device, r->step, -1, &err)) showStatus(err);
    }
  });
  QAction* aLater = edit->addAction(tr("Move Op &Later"));
  aLater->setShortcut(QKeySequence(Qt::ALT | Qt::Key_Right));
  connect(aLater, &QAction::triggered, this, [this] {
    if (auto r = view_->selection()) {
      QString err;
      if (!doc_->moveOp(r->device, r->step, +1, &err)) showStatus(err);
    }
  });

  edit->addSeparator();
  QAction* aFind = edit->addAction(tr("&Find Ops…"), this, &MainWindow::focusFind);
  aFind->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_F));
  QAction* aFindNext = edit->addAction(tr("Find &Next"), this, [this] { findNext(true); });
  aFindNext->setShortcut(QKeySequence(Qt::Key_F3));
  QAction* aFindPrev = edit->addAction(tr("Find Pre&vious"), this, [this] { findNext(false); });
  aFindPrev->setShortcut(QKeySequence(Qt::SHIFT | Qt::Key_F3));

  viewMenu_ = menuBar()->addMenu(tr("&View"));
  QAction* aZoomIn = viewMenu_->addAction(tr("Zoom &In"), view_, &TimelineView::zoomIn);
  aZoomIn->setShortcut(QKeySequence::ZoomIn);
  QAction* aZoomOut = viewMenu_->addAction(tr("Zoom &Out"), view_, &TimelineView::zoomOut);
  aZoomOut->setShortcut(QKeySequence::ZoomOut);
  QAction* aFit = viewMenu_->addAction(tr("&Fit to Window"), view_, &TimelineView::zoomToFit);
  aFit->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_0));
  scaledAction_ = viewMenu_->addAction(tr("Scale Measured to Planned &Makespan"));
  scaledAction_->setCheckable(true);
  connect(scaledAction_, &QAction::toggled, this,
          [this](bool on) { overlay_->setAlignment(on ? Alignment::Scaled : Alignment::Absolute); });
  {  // View › Iterations: K iterations back to back (in the menu: the toolbars must fit 1024 px)
    QMenu* iter = viewMenu_->addMenu(tr("&Iterations"));
    auto* controls = new QWidgetAction(iter);
    controls->setObjectName(QStringLiteral("action.iterations"));
    controls->setDefaultWidget(new IterationsControls(doc_));
    iter->addAction(controls);
  }
  viewMenu_->addSeparator();
  for (QDockWidget* d : findChildren<QDockWidget*>()) viewMenu_->addAction(d->toggleViewAction());

  {  // Tools › Search schedules… (Search dock)
    QMenu* tools = nullptr;
    for (QAction* a : menuBar()->actions())
      if (a->menu() && a->text() == tr("&Tools")) tools = a->menu();
    if (!tools) tools = menuBar()->addMenu(tr("&Tools"));
    QAction* aSearch = tools->addAction(tr("&Search Schedules…"), this, &MainWindow::showSearchDock);
    aSearch->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_F));
  }
  menuBar()->addMenu(stepper_->menu());
  {  // Run › Run schedule… (docs/gui.md, "Running a schedule")
    QMenu* runMenu = nullptr;
    for (QAction* a : menuBar()->actions())
      if (a->menu() && a->text() == tr("&Run")) runMenu = a->menu();
    if (!runMenu) runMenu = menuBar()->addMenu(tr("&Run"));
    QAction* aRunSchedule =
        runMenu->addAction(tr("Run &Schedule…"), this, [this] { RunDialog::showFor(this); });
    aRunSchedule->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
    runMenu->addAction(tr("&Profile Model…"), this, [this] { ProfileDialog::showFor(this); });  // docs/gui.md
  }
  QMenu* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("&Keyboard Shortcuts"), this, &MainWindow::showShortcuts);
  QAction* aDocs = help->addAction(tr("&Documentation"), this, [this] { showDocumentation(); });
  aDocs->setShortcut(QKeySequence::HelpContents);
  help->addSeparator();
  help->addAction(tr("&About PipeStudio"), this, [this] {
    QMessageBox::about(
        this, tr("About PipeStudio"),
        tr("<b>PipeStudio</b><br>Design, check and simulate pipeline-parallel training schedules."
           "<p>Drag ops along their device's row to reorder; right-click for more edits. "
           "Ctrl+wheel zooms, Shift+wheel pans.</p>"));
  });

  auto* tb = addToolBar(tr("Main"));
  tb->setObjectName(QStringLiteral("toolbar.main"));
  tb->setMovable(false);
  tb->setIconSize(QSize(18, 18));
  tb->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  // Short, fixed button texts (icon text) so the toolbar never reflows when an action's text
  // changes ("Undo Open search candidate #1 (487.30 ms)"); the details are in the tooltips,
  // which follow the action's text.
  aNew->setIconText(tr("New"));
  aNew->setToolTip(tr("New from template (%1)").arg(aNew->shortcut().toString(QKeySequence::NativeText)));
  aOpen->setIconText(tr("Open"));
  aOpen->setToolTip(tr("Open a schedule (%1)").arg(aOpen->shortcut().toString(QKeySequence::NativeText)));
  aSave->setIconText(tr("Save"));
  aSave->setToolTip(tr("Save (%1)").arg(aSave->shortcut().toString(QKeySequence::NativeText)));
  aUndo->setIconText(tr("Undo"));
  aRedo->setIconText(tr("Redo"));
  tb->addAction(aNew);
  tb->addAction(aOpen);
  tb->addAction(aSave);
  tb->addSeparator();
  tb->addAction(aUndo);
  tb->addAction(aRedo);
  tb->addSeparator();
  QAction* tFit = tb->addAction(tr("Fit"), view_, &TimelineView::zoomToFit);
  tFit->setToolTip(tr("Fit the whole schedule (Ctrl+0)"));
  tb->addAction(tr("−"), view_, &TimelineView::zoomOut)->setToolTip(tr("Zoom out (Ctrl+-)"));
  tb->addAction(tr("+"), view_, &TimelineView::zoomIn)->setToolTip(tr("Zoom in (Ctrl++)"));
  tb->addSeparator();
  layoutCombo_ = new QComboBox;
  layoutCombo_->addItem(tr("Time"));
  layoutCombo_->addItem(tr("Slots"));
  layoutCombo_->setToolTip(
      tr("Layout: blocks by the cost model's simulated time, or one slot per action as PyTorch's "
         "visualiser draws them"));
  connect(layoutCombo_, &QComboBox::currentIndexChanged, this, [this](int i) {
    view_->setLayoutMode(i == 0 ? TimelineView::LayoutMode::Time : TimelineView::LayoutMode::Slots);
  });
  tb->addWidget(layoutCombo_);
  addToolBar(stepper_->toolBar());
}

void MainWindow::addRecent(const QString& path) {
  QSettings st = settings();
  QStringList files = st.value(QStringLiteral("recentFiles")).toStringList();
  files.removeAll(path);
  files.prepend(path);
  while (files.size() > kMaxRecent) files.removeLast();
  st.setValue(QStringLiteral("recentFiles"), files);
  rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu() {
  recentMenu_->clear();
  const QStringList files = settings().value(QStringLiteral("recentFiles")).toStringList();
  for (const QString& f : files) {
    QAction* a = recentMenu_->addAction(QFileInfo(f).fileName());
    a->setToolTip(f);
    connect(a, &QAction::triggered, this, [this, f] {
      if (maybeSave()) openFile(f);
    });
  }
  recentMenu_->setEnabled(!files.isEmpty());
}

}  // namespace ps::ui
