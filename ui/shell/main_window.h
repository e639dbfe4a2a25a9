#pragma once
// The designer's main window: timeline editor in the centre; pipeline & cost-profile,
// diagnostics, memory and summary docks; File / Edit / View menus; status bar with validity
// and the last edit's effect. Menus and toolbar are built in main_window_actions.cpp.
#include <QMainWindow>
#include <QSize>
#include <QStringList>
#include <atomic>
#include <optional>

#include "panels/summary_panel.h"
#include "pipestudio/core/model/result.h"
#include "remote/dialog_host.h"

class QLabel;
class QMenu;
class QAction;
class QComboBox;
class QDockWidget;
class QBoxLayout;
class QLineEdit;

namespace ps::core {
struct Timeline;
}

namespace ps::ui {

struct PlanContext;
class DocumentationDialog;
class ElidedLabel;
class OpDetailsPanel;
struct Analysis;
class ScheduleDocument;
class TimelineView;
class MeasuredOverlay;
class SessionController;
class MemoryChart;
class DiagnosticsPanel;
class PropertiesPanel;
class LegendBar;
class SessionDock;
class DeviationPanel;
class SearchDock;
class StepperController;
class StatePanel;

class MainWindow : public QMainWindow, public DialogHost {
  Q_OBJECT
 public:
  explicit MainWindow(QWidget* parent = nullptr);

  // Opens a .pipe or .csv; on failure shows why (dialog unless quiet) and returns false.
  bool openFile(const QString& path, bool quiet = false);
  bool saveTo(const QString& path);
  // Opens resources/examples/example.pipe when it exists, else a generated 1F1B.
  void openDefault();

  ScheduleDocument* document() const override { return doc_; }
  TimelineView* timeline() const { return view_; }
  MemoryChart* memoryChart() const { return memory_; }
  SummaryPanel* summary() const { return summary_; }
  DiagnosticsPanel* diagnostics() const { return diagnostics_; }
  PropertiesPanel* properties() const { return properties_; }
  QString statusText() const;
  // DialogHost: the Run and Profile dialogs' parent; the window follows each dialog's signals.
  QWidget* hostWidget() override { return this; }
  void adopt(RunDialog* dialog) override;
  void adopt(ProfileDialog* dialog) override;
  void showStatusMessage(const QString& message, int timeoutMs);
  QString validityText() const;

  bool exportFile(const QString& path);  // by extension: .pipe .csv .json .png .svg
  // What the last exportFile of a .pipe wrote, when it was opened from a program ("the
  // program as written", or the explicit form and why).
  QString lastExportNote() const { return lastExportNote_; }
  // Why a .pipe at `path` cannot be the program as opened ("" when it can be).
  QString programKeptWhy(const QString& path) const;
  // Selects an op by its DSL name ("B3@s1") and scrolls to it.
  bool selectOpByName(const QString& name);
  void setSlotLayout(bool slots);

  // Shows a session file in the Session dock (docs/gui.md, "Session dock").
  bool openSession(const QString& path, bool readOnly = false);
  SessionDock* sessionDock() const { return session_; }
  // DialogHost: the session open in this window (the shell owns it; the Session dock shows it).
  SessionController* session() const override { return sessionController_; }

  // Measured overlay (docs/gui.md, "Measured overlay"): imports Chrome traces (torch.profiler
  // PP: ranges, one file per rank, plain or .json.gz, or a folder of torchtitan's, Megatron-LM's
  // or tensorboard_trace_handler's layout; or PipeStudio's own) and lays them over the plan.
  // Unless quiet, a progress dialog can cancel a long import, and a folder of several torchtitan
  // steps asks which (`step` chooses without asking). On a malformed trace shows why (dialog
  // unless quiet), keeps document and overlay, returns false.
  bool openTraces(const QStringList& paths, bool quiet = false, std::optional<long long> step = {});
  // How long an import runs before its progress dialog comes up (tests: 0, at once).
  void setTraceProgressDelay(int ms) { progressDelayMs_ = ms; }
  // `live`: a run still in progress sends its ops as they arrive (not a failed run).
  void setMeasuredOverlay(const ps::core::Timeline& measured, const QString& what, bool live = false);
  // What the overlay is (e.g. "run 3"), empty without one.
  QString overlaySource() const;
  // The measured overlay's model: the timeline, the stepper and the docks follow it.
  MeasuredOverlay* measuredOverlay() const { return overlay_; }
  void clearMeasuredOverlay();
  void setOverlayScaled(bool scaled);
  DeviationPanel* deviation() const { return deviation_; }

  // Search dock (docs/gui.md, "Search dock"); Tools › Search Schedules… shows and raises it.
  SearchDock* searchDock() const { return search_; }
  void showSearchDock();
  // Step-through (docs/gui.md, "Step-through"): the Debug menu's controller and the State dock.
  StepperController* stepperController() const { return stepper_; }
  StatePanel* statePanel() const { return state_; }
  void showStateDock();
  // Finding ops (docs/gui.md): the search field above the timeline; next / previous match
  // (Enter / Shift+Enter there, F3 / Shift+F3 anywhere) selects it and scrolls to it.
  QLineEdit* findEdit() const { return find_; }
  QString findCountText() const;
  void findNext(bool forward);
  void focusFind();
  // The Op dock: the selected op's details and its dependencies.
  OpDetailsPanel* opDetails() const { return details_; }
  // Help › Keyboard Shortcuts: every menu action with its keys (generated, HTML).
  QString shortcutsHtml() const;
  void showShortcuts();
  // Help › Documentation: docs/gui.md in a dialog (the built-in copy when no docs are found).
  DocumentationDialog* showDocumentation();
  // Where a file dialog for `purpose` ("open", "save", "export", "trace", "session") starts:
  // the folder that kind of dialog last used.
  static QString dialogDir(const QString& purpose);
  // The installed documentation, ../share/doc/pipestudio from the executable ("" when gui.md is
  // not there).
  static QString documentationDir();

 public Q_SLOTS:
  // The status bar's message (elided at its width; the whole of it in its tooltip).
  void showStatus(const QString& text);
  void newFromTemplate();
  void open();
  bool save();
  bool saveAs();
  void openSessionDialog();
  // A dialog stored a run or a profile there: the Session dock shows it (refreshed or opened).
  void showStoredIn(const QString& sessionPath);

 private Q_SLOTS:
  // Once the window is framed: inside the screen again, unless the user resized it meanwhile.
  void refitOnScreen();
  // Narrower side docks and a lower bottom dock for a small window (applyCompactLayout).
  void compactDocks();

 protected:
  void closeEvent(QCloseEvent* e) override;
  void resizeEvent(QResizeEvent* e) override;
  void showEvent(QShowEvent* e) override;
  bool eventFilter(QObject* o, QEvent* e) override;

 private:
  void buildActions();
  void buildDocks();
  void buildStepper();
  void documentChanged();
  // The search's matches for the field's text (fromStart: the next match is the first).
  void updateFind(bool fromStart);
  // A measured overlay whose ops are not this schedule's (another shape) is cleared.
  // Returns what it did for the status bar ("" when the overlay stays).
  QString dropMismatchedOverlay();
  // Narrower docks once when the window is small and no layout was saved.
  void applyCompactLayout();
  // The window with its frame inside the screen's available area (docs/gui.md, "Window").
  void keepOnScreen();
  // New / Open: leave step mode, drop an overlay of another schedule.
  QString documentReplaced();
  // What the Deviation dock compares against: the plan's cost model and how far it simulated.
  PlanContext planContext() const;
  // How the Summary's "Now" compares with "Saved" (same cost model; errors now).
  SummaryPanel::Baseline summaryBaseline(const Analysis& a) const;
  bool usesDefaultCostModel() const;
  void updateTitle();
  void addRecent(const QString& path);
  void rebuildRecentMenu();
  bool maybeSave();
  void exportAs(const QString& filter, const QString& suffix);
  // A .pipe: the program as opened when unedited, else the explicit form (what in `note`).
  ps::core::Status writePipe(const QString& path, QString* note) const;
  bool openSessionVersion(const QString& pipeText, const QString& name, qint64 versionId);

  ScheduleDocument* doc_ = nullptr;
  MeasuredOverlay* overlay_ = nullptr;  // before view_: views rebuild on its figures
  TimelineView* view_ = nullptr;
  LegendBar* legend_ = nullptr;
  MemoryChart* memory_ = nullptr;
  SummaryPanel* summary_ = nullptr;
  DiagnosticsPanel* diagnostics_ = nullptr;
  PropertiesPanel* properties_ = nullptr;
  SessionController* sessionController_ = nullptr;
  SessionDock* session_ = nullptr;
  DeviationPanel* deviation_ = nullptr;
  SearchDock* search_ = nullptr;
  StepperController* stepper_ = nullptr;
  StatePanel* state_ = nullptr;
  QDockWidget* stateDock_ = nullptr;
  QAction* scaledAction_ = nullptr;
  QLabel* validity_ = nullptr;
  ElidedLabel* message_ = nullptr;
  QBoxLayout* top_ = nullptr;  // the legend and the search above the timeline
  QLineEdit* find_ = nullptr;
  QLabel* findCount_ = nullptr;
  int matchIndex_ = -1;
  OpDetailsPanel* details_ = nullptr;
  QMenu* recentMenu_ = nullptr;
  QMenu* viewMenu_ = nullptr;
  QComboBox* layoutCombo_ = nullptr;
  QString loadNote_;
  QString lastExportNote_;
  bool restoredState_ = false;
  bool shownOnce_ = false;
  QSize initialSize_;         // as constructed (default or restored)
  QSize fittedSize_;          // as fitted to the screen at the first show
  int compactWidth_ = -1000;  // the width the compact dock sizes were last made for
  QLabel* overlayLabel_ = nullptr;
  int progressDelayMs_ = 400;
  std::atomic<bool>* importCancel_ = nullptr;  // the import being read, while openTraces runs
};

}  // namespace ps::ui
