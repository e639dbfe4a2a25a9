#pragma once
// Step-through of a timeline in the GUI (docs/gui.md, "Step-through"): a playhead over the
// timeline view, moved event by event, to an op, to a breakpoint or played at a speed, on core's
// Stepper. It steps the measured timeline when a run overlay is shown, else the document's
// simulated timeline, and pushes the state at the playhead to the timeline view (playhead,
// running and blocked ops, breakpoint markers), the memory chart (cursor), the diagnostics dock
// (what is at or after the playhead) and the State dock.
#include <QElapsedTimer>
#include <QObject>
#include <QPointer>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include "pipestudio/core/analysis/stepper.h"
#include "pipestudio/core/model/hang_report.h"

class QAction;
class QComboBox;
class QMenu;
class QTimer;
class QToolBar;

namespace ps::ui {

class ScheduleDocument;
class TimelineView;
class MeasuredOverlay;
class MemoryChart;
class DiagnosticsPanel;
class StatePanel;
class BreakpointsPanel;

class StepperController : public QObject {
  Q_OBJECT
 public:
  // Steps the plan of `doc`, or `overlay`'s measured timeline when it has one; `view` shows
  // the playhead and the marks.
  StepperController(ScheduleDocument* doc, MeasuredOverlay* overlay, TimelineView* view,
                    QObject* parent = nullptr);
  // Views that follow the playhead (any may be null).
  void attach(MemoryChart* memory, DiagnosticsPanel* diagnostics, StatePanel* state, BreakpointsPanel* bps);

  // Debug menu and toolbar (the actions are the same objects).
  QMenu* menu() const { return menu_; }
  QToolBar* toolBar() const { return toolBar_; }
  QAction* nextAction() const { return aNext_; }
  QAction* previousAction() const { return aPrev_; }
  QAction* runToSelectedAction() const { return aRunToOp_; }
  QAction* runToBreakpointAction() const { return aRunBp_; }
  QAction* runBackAction() const { return aRunBack_; }
  QAction* playAction() const { return aPlay_; }
  QAction* startAction() const { return aStart_; }
  QAction* endAction() const { return aEnd_; }
  QAction* toggleBreakpointAction() const { return aToggleBp_; }
  QAction* stopAction() const { return aStop_; }
  bool isLive() const { return live_; }
  // The stepped run was cancelled by the user: where it stopped is not a failure.
  bool isCancelled() const { return cancelled_; }
  // The stepped run hung (its failure carries the engine's wait cycle, core::findHang): it opens
  // at its stop with each device's stuck step marked and the cycle in the State and Diagnostics
  // docks.
  const std::optional<ps::core::RunHang>& hang() const { return hang_; }

  // The stepper of the shown timeline (null when it cannot be built, e.g. an empty schedule).
  const ps::core::Stepper* stepper();
  bool stepsMeasured() const { return measured_; }
  size_t position() const { return position_; }
  double time() const { return time_; }  // in the stepped timeline's clock
  ps::core::StepState state();
  const std::vector<ps::core::Breakpoint>& breakpoints() const { return breakpoints_; }

  // Playhead time as drawn on the timeline's axis (measured times aligned onto the plan's axis).
  double toAxis(double t) const;
  double fromAxis(double x) const;

  bool isPlaying() const;
  // False until the first Debug action, seek or run overlay: until then no stepper is kept
  // up to date and no playhead is drawn.
  bool engaged() const { return isEngaged(); }
  double speed() const { return speed_; }  // timeline ms per wall second

 public Q_SLOTS:
  void seekPosition(size_t position);
  void seekTime(double t);
  void seekAxis(double x) { seekTime(fromAxis(x)); }
  void next();
  void previous();
  void goToStart();
  void goToEnd();
  bool runToSelected();
  bool runToBreakpoint();
  bool runBackToBreakpoint();
  void play();
  void pause();
  void setSpeed(double msPerSecond);
  // Advances playback by `wallMs` of wall time (the timer's tick; tests call it directly).
  void advance(double wallMs);

  void addBreakpoint(const ps::core::Breakpoint& bp);
  void removeBreakpoint(size_t index);
  // "When device d starts OP": added, or removed when already set.
  void toggleBreakpoint(int device, const ps::core::Op& op);
  void toggleBreakpointOnSelection();

  // A run was laid over the plan: rebuild, and open a failed, hung or cancelled run at its
  // stop point; a complete one at its start, unless it refreshes the live run already shown
  // (its ops arriving, or its last update when it ends), which keeps the playhead. A new run
  // after another never inherits that one's playhead.
  // `live`: a run still in progress (its ops arriving): not a failure, nothing "never ran".
  void timelineOpened(bool live = false);
  // Debug › Stop Debugging: leave step mode (no playhead, no stepper kept); also on New/Open.
  void stopDebugging();

 Q_SIGNALS:
  void moved();  // position or time changed (also after a rebuild)
  void breakpointsChanged();
  void playingChanged(bool playing);
  void statusMessage(const QString& text);
  void opActivated(const ps::core::Op& op);

 private:
  void markDirty();
  void ensure();
  void rebuild();
  void publish();
  bool isEngaged() const;
  void setPosition(size_t position, double time);
  QString describe(const ps::core::StepEvent& e) const;
  void chooseDefaultSpeed();
  // Runs to the next (forward) or previous breakpoint, or to the end (start) without one.
  bool runToBreakpointFrom(bool forward);

  QPointer<ScheduleDocument> doc_;
  QPointer<MeasuredOverlay> overlay_;
  QPointer<TimelineView> view_;
  QPointer<MemoryChart> memory_;
  QPointer<DiagnosticsPanel> diagnostics_;
  QPointer<StatePanel> state_;
  QPointer<BreakpointsPanel> bpPanel_;

  std::optional<ps::core::Stepper> stepper_;
  // (kind, stage, micro-batch) -> index in the stepped timeline's ops, for the diagnostics dock.
  struct OpIndex {
    bool built = false;
    std::map<std::tuple<int, int, int>, size_t> map;
  };
  std::shared_ptr<OpIndex> opIndex_;
  bool engaged_ = false;  // the user has stepped (or a run is open): keep a stepper built
  bool dirty_ = true;
  bool measured_ = false;
  size_t position_ = 0;
  double time_ = 0;
  std::vector<ps::core::Breakpoint> breakpoints_;

  QTimer* timer_ = nullptr;

  QTimer* refresh_ = nullptr;  // single shot: one refresh for a burst of change signals
  QElapsedTimer wall_;
  double speed_ = 1.0;
  bool speedChosen_ = false;
  QComboBox* speedCombo_ = nullptr;

  QMenu* menu_ = nullptr;
  QToolBar* toolBar_ = nullptr;
  QAction* aNext_ = nullptr;
  QAction* aPrev_ = nullptr;
  QAction* aRunToOp_ = nullptr;
  QAction* aRunBp_ = nullptr;
  QAction* aRunBack_ = nullptr;
  QAction* aPlay_ = nullptr;
  QAction* aStart_ = nullptr;
  QAction* aEnd_ = nullptr;
  QAction* aToggleBp_ = nullptr;
  QAction* aStop_ = nullptr;
  bool live_ = false;
  bool cancelled_ = false;
  std::optional<ps::core::RunHang> hang_;
};

// "device 2 starts B5@s3": a breakpoint in words (unset fields read "any").
QString breakpointText(const ps::core::Breakpoint& bp);

}  // namespace ps::ui
