#include "debugger/stepper_controller.h"

#include <QAction>
#include <QComboBox>
#include <QKeySequence>
#include <QMenu>
#include <QTimer>
#include <QToolBar>
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "debugger/state_panel.h"
#include "document/measured_overlay.h"
#include "document/schedule_document.h"
#include "panels/diagnostics_panel.h"
#include "panels/memory_chart.h"
#include "pipestudio/core/io/trace_import.h"
#include "pipestudio/core/planning/schedule_edits.h"
#include "timeline/timeline_view.h"
#include "widgets/units_text.h"

namespace ps::ui {

using namespace ps::core;

namespace {

QString fmtMs(double v) {
  return msValue(v);
}

// A hung run's stuck steps (the engine's post-mortem) at the stop state, each with what the
// stepper finds it waiting for there.
std::vector<TimelineView::StepMarks::Stuck> stuckMarks(const RunHang& hang, const Stepper& stepper,
                                                       const StepState& st) {
  std::vector<TimelineView::StepMarks::Stuck> out;
  const Schedule& plan = stepper.plan();
  for (size_t k = 0; k < hang.stuck.size(); ++k) {
    const OpRef r = hang.stuck[k];
    const Op* o = opAt(plan, r);
    if (!o) continue;
    TimelineView::StepMarks::Stuck m{r.device, *o, {}};
    QStringList waits;
    for (const DeviceState& d : st.devices)
      if (d.device == r.device)
        for (const WaitingOp& w : d.next)
          if (w.op == *o)
            for (const InputWait& in : w.missing)
              waits << StepperController::tr("%1 on device %2 (%3)")
                           .arg(QString::fromStdString(plan.opName(in.input)))
                           .arg(in.device)
                           .arg(QString::fromUtf8(inputStatusName(in.status).data()));
    const QString name = QString::fromStdString(plan.opName(*o));
    // The engine's own line first (what its rank said it waits for); then what the measured
    // timeline lacks there.
    const QString engine = k < hang.notes.size() ? QString::fromStdString(hang.notes[k]) : QString();
    if (!engine.isEmpty())
      m.note = waits.isEmpty() ? StepperController::tr("%1 · in %2").arg(engine, name)
                               : StepperController::tr("%1 · %2 waits for %3")
                                     .arg(engine, name, waits.join(QStringLiteral(", ")));
    else
      m.note = waits.isEmpty() ? StepperController::tr("device %1 in %2").arg(r.device).arg(name)
                               : StepperController::tr("device %1 in %2 waits for %3")
                                     .arg(r.device)
                                     .arg(name, waits.join(QStringLiteral(", ")));
    out.push_back(std::move(m));
  }
  return out;
}

// Playback speeds offered, in timeline ms per wall second.
constexpr double kSpeeds[] = {0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000};

}  // namespace

QString breakpointText(const Breakpoint& bp) {
  QString what;
  if (bp.kind) what = QString::fromUtf8(builtinKindName(*bp.kind).data());
  if (what.isEmpty() && bp.kind) what = QStringLiteral("kind %1").arg(static_cast<int>(*bp.kind));
  if (bp.microbatch)
    what += (what.isEmpty() ? QStringLiteral("micro-batch ") : QString()) + QString::number(*bp.microbatch);
  if (bp.stage)
    what += (what.isEmpty() ? QStringLiteral("an op ") : QString()) + QStringLiteral("@s%1").arg(*bp.stage);
  if (what.isEmpty()) what = StepperController::tr("any op");
  const QString dev =
      bp.device ? StepperController::tr("device %1").arg(*bp.device) : StepperController::tr("any device");
  return bp.on == StepEventKind::Start ? StepperController::tr("when %1 starts %2").arg(dev, what)
                                       : StepperController::tr("when %1 ends %2").arg(dev, what);
}

StepperController::StepperController(ScheduleDocument* doc, MeasuredOverlay* overlay, TimelineView* view,
                                     QObject* parent)
    : QObject(parent), doc_(doc), overlay_(overlay), view_(view) {
  timer_ = new QTimer(this);
  timer_->setInterval(33);
  connect(timer_, &QTimer::timeout, this, [this] { advance(static_cast<double>(wall_.restart())); });
  refresh_ = new QTimer(this);
  refresh_->setSingleShot(true);
  refresh_->setInterval(0);
  connect(refresh_, &QTimer::timeout, this, [this] {
    if (!dirty_) return;
    publish();
    Q_EMIT moved();
  });

  menu_ = new QMenu(tr("&Debug"), view);
  auto act = [this](const QString& text, const QKeySequence& key, const QString& tip, auto slot) {
    QAction* a = menu_->addAction(text);
    a->setShortcut(key);
    a->setToolTip(tip + QStringLiteral(" (") + key.toString(QKeySequence::NativeText) + QLatin1Char(')'));
    connect(a, &QAction::triggered, this, slot);
    return a;
  };
  aStart_ = act(tr("Go to &Start"), QKeySequence(Qt::CTRL | Qt::Key_Home), tr("Playhead to the first event"),
                [this] { goToStart(); });
  aPrev_ = act(tr("&Previous Event"), QKeySequence(Qt::SHIFT | Qt::Key_F10),
               tr("Step back to the previous op start or end"), [this] { previous(); });
  aNext_ = act(tr("&Next Event"), QKeySequence(Qt::Key_F10), tr("Step to the next op start or end"),
               [this] { next(); });
  aEnd_ = act(tr("Go to &End"), QKeySequence(Qt::CTRL | Qt::Key_End),
              tr("Playhead to the last event (where a failed run stopped)"), [this] { goToEnd(); });
  menu_->addSeparator();
  aRunToOp_ = act(tr("Run to &Selected Op"), QKeySequence(Qt::CTRL | Qt::Key_F10),
                  tr("Run until the selected op starts"), [this] { runToSelected(); });
  aRunBp_ = act(tr("&Run to Breakpoint"), QKeySequence(Qt::Key_F5), tr("Run until the next breakpoint"),
                [this] { runToBreakpoint(); });
  aRunBack_ = act(tr("Run &Back to Breakpoint"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_F5),
                  tr("Run backwards to the previous breakpoint"), [this] { runBackToBreakpoint(); });
  aPlay_ =
      act(tr("P&lay"), QKeySequence(Qt::Key_F8), tr("Play / pause at the chosen speed; breakpoints stop it"),
          [this] { isPlaying() ? pause() : play(); });
  aPlay_->setCheckable(true);
  menu_->addSeparator();
  aToggleBp_ =
      act(tr("&Toggle Breakpoint on Selected Op"), QKeySequence(Qt::Key_F9),
          tr("Break when the selected op's device starts it"), [this] { toggleBreakpointOnSelection(); });
  QAction* aClear = menu_->addAction(tr("Remove &All Breakpoints"));
  menu_->addSeparator();
  // Shift+F5 stops debugging in most IDEs.
  aStop_ = act(tr("S&top Debugging"), QKeySequence(Qt::SHIFT | Qt::Key_F5),
               tr("Leave step mode: no playhead, the whole timeline shown"), [this] {
                 stopDebugging();
                 Q_EMIT statusMessage(tr("Stopped debugging"));
               });
  connect(aClear, &QAction::triggered, this, [this] {
    breakpoints_.clear();
    Q_EMIT breakpointsChanged();
    publish();
  });

  toolBar_ = new QToolBar(tr("Debug"), view);
  toolBar_->setObjectName(QStringLiteral("toolbar.debug"));
  toolBar_->setToolButtonStyle(Qt::ToolButtonTextOnly);
  // Short toolbar labels (icon text); the menu keeps the long ones.
  auto tool = [this](QAction* a, const QString& label) {
    a->setIconText(label);
    toolBar_->addAction(a);
  };
  tool(aStart_, tr("Start"));
  tool(aPrev_, tr("◀ Prev"));
  tool(aPlay_, tr("Play"));
  tool(aNext_, tr("Next ▶"));
  tool(aEnd_, tr("End"));
  tool(aRunBp_, tr("To Breakpoint"));
  tool(aStop_, tr("Stop"));
  speedCombo_ = new QComboBox;
  for (double s : kSpeeds) speedCombo_->addItem(tr("%1 ms/s").arg(s), s);
  speedCombo_->setToolTip(tr("Playback speed: timeline milliseconds per second"));
  speedCombo_->setCurrentIndex(3);
  connect(speedCombo_, &QComboBox::activated, this,
          [this](int i) { setSpeed(speedCombo_->itemData(i).toDouble()); });
  toolBar_->addWidget(speedCombo_);

  connect(doc_, &ScheduleDocument::changed, this, &StepperController::markDirty);
  connect(overlay_, &MeasuredOverlay::changed, this, &StepperController::markDirty);
  connect(view_, &TimelineView::playheadSeekRequested, this, &StepperController::seekAxis);
  connect(view_, &TimelineView::breakpointToggleRequested, this, &StepperController::toggleBreakpoint);
  markDirty();
}

void StepperController::attach(MemoryChart* memory, DiagnosticsPanel* diagnostics, StatePanel* state,
                               BreakpointsPanel* bps) {
  memory_ = memory;
  diagnostics_ = diagnostics;
  state_ = state;
  bpPanel_ = bps;
  if (state_) connect(state_, &StatePanel::opActivated, this, &StepperController::opActivated);
  if (bpPanel_) {
    connect(bpPanel_, &BreakpointsPanel::addRequested, this, &StepperController::addBreakpoint);
    connect(bpPanel_, &BreakpointsPanel::removeRequested, this, &StepperController::removeBreakpoint);
    bpPanel_->setBreakpoints(breakpoints_);
  }
  publish();
}

const Stepper* StepperController::stepper() {
  ensure();
  return stepper_ ? &*stepper_ : nullptr;
}

StepState StepperController::state() {
  ensure();
  if (!stepper_) return {};
  // Between events (a seek or playback), the state at the playhead's time: transfers that left
  // after the last event are in the air already.
  if (stepper_->positionAt(time_) == position_) return stepper_->stateAt(time_);
  return stepper_->stateAfter(position_);
}

double StepperController::toAxis(double t) const {
  if (measured_ && overlay_)
    if (const Comparison* c = overlay_->comparison()) return c->align(t);
  return t;
}

double StepperController::fromAxis(double x) const {
  if (measured_ && overlay_)
    if (const Comparison* c = overlay_->comparison(); c && c->scale > 0)
      return x / c->scale + c->measuredOrigin;
  return x;
}

bool StepperController::isPlaying() const {
  return timer_->isActive();
}

void StepperController::markDirty() {
  const bool wasDirty = dirty_;
  dirty_ = true;
  // Until the refresh, every action may apply (each rebuilds first); publish() narrows them.
  for (QAction* a : {aNext_, aEnd_, aRunBp_, aPlay_, aPrev_, aStart_, aRunBack_, aRunToOp_})
    a->setEnabled(true);
  // Coalesce the document's and the overlay's change signals into one refresh.
  if (!wasDirty || !stepper_) refresh_->start();
}

void StepperController::ensure() {
  if (dirty_) rebuild();
}

void StepperController::rebuild() {
  dirty_ = false;
  stepper_.reset();
  opIndex_.reset();
  if (!doc_ || !view_) return;
  const Analysis& a = doc_->analysis();
  measured_ = overlay_ && overlay_->active();
  std::optional<Result<Stepper>> r;
  if (measured_) {
    const Timeline& m = *overlay_->timeline();
    r.emplace(Stepper::make(m, a.schedule, a.timeline));
    // A run on more devices than this plan: step it on its own order.
    if (!*r)
      if (auto plan = scheduleFromTimeline(m)) r.emplace(Stepper::make(m, std::move(plan).value()));
  } else {
    r.emplace(Stepper::make(a.timeline, a.schedule));
  }
  if (r && *r) stepper_ = std::move(*r).value();
  cancelled_ = false;
  if (!stepper_) return;
  for (const Diagnostic& d : stepper_->timeline().diagnostics)
    cancelled_ = cancelled_ || d.code == "run.cancelled";
  const size_t n = stepper_->size();
  position_ = std::min(position_, n);
  // The playhead stays on this timeline: a shorter one (a new run, an edit) pulls it back to
  // its end rather than leaving it past it.
  const double lo = std::min(0.0, stepper_->timeAt(0));
  const double hi = std::max(lo, stepper_->timeAt(n));
  time_ = std::clamp(time_, lo, hi);
  if (std::abs(stepper_->timeAt(position_) - time_) > 1e-12) position_ = stepper_->positionAt(time_);
  chooseDefaultSpeed();
}

void StepperController::chooseDefaultSpeed() {
  if (speedChosen_ || !stepper_ || stepper_->size() == 0) return;
  // About 15 s of wall time for the whole timeline.
  const double span = stepper_->timeAt(stepper_->size()) - stepper_->timeAt(0);
  const double want = span / 15.0;
  double best = kSpeeds[0];
  for (double s : kSpeeds)
    if (std::abs(std::log(s / want)) < std::abs(std::log(best / want))) best = s;
  speed_ = best;
  if (speedCombo_) {
    const int i = speedCombo_->findData(best);
    if (i >= 0) speedCombo_->setCurrentIndex(i);
  }
}

void StepperController::setSpeed(double msPerSecond) {
  if (!(msPerSecond > 0)) return;
  speed_ = msPerSecond;
  speedChosen_ = true;
  if (speedCombo_) {
    const int i = speedCombo_->findData(msPerSecond);
    if (i >= 0) speedCombo_->setCurrentIndex(i);
  }
}

void StepperController::setPosition(size_t position, double time) {
  position_ = position;
  time_ = time;
  publish();
  Q_EMIT moved();
}

QString StepperController::describe(const StepEvent& e) const {
  if (!stepper_ || e.op >= stepper_->timeline().ops.size()) return {};
  const TimelineOp& o = stepper_->timeline().ops[e.op];
  return tr("%1 ms: device %2 %3 %4")
      .arg(fmtMs(e.time))
      .arg(o.device)
      .arg(e.kind == StepEventKind::Start ? tr("starts") : tr("ends"))
      .arg(QString::fromStdString(stepper_->plan().opName(o.op)));
}

bool StepperController::isEngaged() const {
  return engaged_ || (overlay_ && overlay_->active());
}

void StepperController::publish() {
  if (!isEngaged()) {
    // Not stepping yet: no stepper is built (an edit of a large plan does not pay for it), no
    // playhead; breakpoint markers still show. Every action engages.
    for (QAction* a : {aNext_, aEnd_, aRunBp_, aPlay_, aPrev_, aStart_, aRunBack_, aRunToOp_})
      a->setEnabled(true);
    if (!view_) return;
    view_->setPlayhead(std::nullopt);
    view_->setStepMarks({{}, {}, breakpoints_});
    if (memory_) memory_->setPlayheadTime(std::nullopt);
    if (diagnostics_) diagnostics_->setPlayhead(std::nullopt, {});
    if (state_)
      state_->clearState(
          tr("Step through the timeline with the Debug menu (F10: next event) or click the time ruler."));
    return;
  }
  if (dirty_) rebuild();
  const bool have = stepper_.has_value();
  const size_t n = have ? stepper_->size() : 0;
  for (QAction* a : {aNext_, aEnd_, aRunBp_, aPlay_}) a->setEnabled(have && (position_ < n || a == aPlay_));
  for (QAction* a : {aPrev_, aStart_, aRunBack_})
    a->setEnabled(have && (position_ > 0 || time_ > stepper_->timeAt(0)));
  aRunToOp_->setEnabled(have);
  if (!view_) return;
  if (!have || n == 0) {
    view_->setPlayhead(std::nullopt);
    view_->setStepMarks({{}, {}, breakpoints_});
    if (memory_) memory_->setPlayheadTime(std::nullopt);
    if (diagnostics_) diagnostics_->setPlayhead(std::nullopt, {});
    if (state_) state_->clearState(tr("No timeline to step through: the schedule has no ops."));
    return;
  }
  const StepState st = state();
  // Slots have no time: the playhead would be meaningless there (the State dock still shows).
  const bool slots = !measured_ && view_->layoutMode() == TimelineView::LayoutMode::Slots;
  const double axisT = toAxis(time_);
  view_->setPlayhead(slots ? std::nullopt : std::optional<double>(axisT), fmtMs(time_) + tr(" ms"));
  TimelineView::StepMarks marks;
  const Timeline& tl = stepper_->timeline();
  for (const DeviceState& d : st.devices) {
    for (size_t i : d.running) marks.running.emplace_back(tl.ops[i].device, tl.ops[i].op);
    if (!d.blocked || live_) continue;
    // Red only when it can never start (an input never ran, or a failed run stopped here);
    // waiting for an input on its way (the pipeline filling) or a cancelled run's stop is not
    // an error.
    auto& into = isStuck(d, st) && !cancelled_ ? marks.blocked : marks.waiting;
    for (const WaitingOp& w : d.next)
      if (!w.missing.empty()) into.emplace_back(d.device, w.op);
  }
  // A hung run at its stop: the step each device was in when the ranks stopped.
  if (hang_ && st.stopped && !live_ && !cancelled_) {
    marks.stuck = stuckMarks(*hang_, *stepper_, st);
    marks.hang = QString::fromStdString(hang_->clause);
  }
  marks.breakpoints = breakpoints_;
  marks.dimFuture = isPlaying() || (position_ > 0 && position_ < n);
  view_->setStepMarks(std::move(marks));
  if (memory_) memory_->setPlayheadTime(axisT);
  if (state_) {
    state_->setCancelled(cancelled_);
    state_->setHang(live_ || cancelled_ ? std::nullopt : hang_);
    state_->setState(st, *stepper_, measured_);
  }
  if (diagnostics_) {
    // Diagnostics name plan ops; find each one's span in the stepped timeline. The index is
    // built on the first lookup (only when a diagnostic names an op), once per stepper.
    if (!opIndex_) opIndex_ = std::make_shared<OpIndex>();
    auto index = opIndex_;
    Stepper s = *stepper_;
    diagnostics_->setPlayhead(time_, [s, index](OpRef ref) -> std::optional<std::pair<double, double>> {
      const Op* op = opAt(s.plan(), ref);
      if (!op) return std::nullopt;
      if (!index->built) {
        const auto& ops = s.timeline().ops;
        for (size_t i = 0; i < ops.size(); ++i)
          index->map.emplace(
              std::make_tuple(static_cast<int>(ops[i].op.kind), ops[i].op.stage, ops[i].op.microbatch), i);
        index->built = true;
      }
      auto it = index->map.find(std::make_tuple(static_cast<int>(op->kind), op->stage, op->microbatch));
      if (it == index->map.end()) return std::nullopt;
      const TimelineOp& o = s.timeline().ops[it->second];
      const double end = std::isfinite(o.end) && o.end >= o.start ? o.end : INFINITY;
      return std::make_pair(o.start, end);
    });
  }
}

void StepperController::seekPosition(size_t position) {
  engaged_ = true;
  ensure();
  if (!stepper_) return;
  position = std::min(position, stepper_->size());
  setPosition(position, stepper_->timeAt(position));
}

void StepperController::seekTime(double t) {
  engaged_ = true;
  ensure();
  if (!stepper_) return;
  const double lo = std::min(0.0, stepper_->timeAt(0));
  t = std::clamp(t, lo, std::max(lo, stepper_->timeAt(stepper_->size())));
  setPosition(stepper_->positionAt(t), t);
}

void StepperController::next() {
  engaged_ = true;
  ensure();
  if (!stepper_) return;
  if (auto p = stepper_->next(position_)) {
    setPosition(*p, stepper_->timeAt(*p));
    Q_EMIT statusMessage(
        tr("Event %1 of %2 · %3").arg(*p).arg(stepper_->size()).arg(describe(stepper_->events()[*p - 1])));
  } else {
    Q_EMIT statusMessage(tr("At the last event"));
  }
}

void StepperController::previous() {
  engaged_ = true;
  ensure();
  if (!stepper_) return;
  // Between events, back to the last one applied; else one event back.
  std::optional<size_t> p = time_ > stepper_->timeAt(position_) + 1e-12 ? std::optional<size_t>(position_)
                                                                        : stepper_->previous(position_);
  if (!p) {
    Q_EMIT statusMessage(tr("At the first event"));
    return;
  }
  setPosition(*p, stepper_->timeAt(*p));
  Q_EMIT statusMessage(*p == 0 ? tr("Before the first event")
                               : tr("Event %1 of %2 · %3")
                                     .arg(*p)
                                     .arg(stepper_->size())
                                     .arg(describe(stepper_->events()[*p - 1])));
}

void StepperController::goToStart() {
  pause();
  seekPosition(0);
}

void StepperController::goToEnd() {
  pause();
  engaged_ = true;
  ensure();
  if (!stepper_) return;
  seekPosition(stepper_->stopPosition());
  if (!stepper_->timeline().complete && !live_)
    Q_EMIT statusMessage(tr("Where the run stopped: %1 ms").arg(fmtMs(time_)));
}

bool StepperController::runToSelected() {
  engaged_ = true;
  ensure();
  if (!stepper_ || !view_) return false;
  const auto op = view_->selectedOp();
  if (!op) {
    Q_EMIT statusMessage(tr("Select an op to run to"));
    return false;
  }
  auto p = stepper_->runToOp(position_, *op, StepEventKind::Start);
  if (!p) p = stepper_->runToOp(0, *op, StepEventKind::Start);  // it started before the playhead
  const QString name = QString::fromStdString(stepper_->plan().opName(*op));
  if (!p) {
    Q_EMIT statusMessage(tr("%1 never starts in this timeline").arg(name));
    return false;
  }
  setPosition(*p, stepper_->timeAt(*p));
  Q_EMIT statusMessage(tr("Ran to %1 · %2").arg(name, describe(stepper_->events()[*p - 1])));
  return true;
}

bool StepperController::runToBreakpoint() {
  return runToBreakpointFrom(true);
}

bool StepperController::runBackToBreakpoint() {
  return runToBreakpointFrom(false);
}

bool StepperController::runToBreakpointFrom(bool forward) {
  engaged_ = true;
  ensure();
  if (!stepper_) return false;
  const auto p = forward ? stepper_->runToBreakpoint(position_, breakpoints_)
                         : stepper_->runBackToBreakpoint(position_, breakpoints_);
  if (p) {
    setPosition(*p, stepper_->timeAt(*p));
    Q_EMIT statusMessage(tr("Breakpoint · %1").arg(describe(stepper_->events()[*p - 1])));
    return true;
  }
  // None hit: at the end (or the start) of the timeline.
  seekPosition(forward ? stepper_->size() : 0);
  if (!forward)
    Q_EMIT statusMessage(tr("No breakpoint before: back at the start"));
  else
    Q_EMIT statusMessage(breakpoints_.empty() ? tr("No breakpoints: ran to the end")
                                              : tr("No breakpoint hit: ran to the end"));
  return false;
}

void StepperController::play() {
  engaged_ = true;
  ensure();
  if (!stepper_ || stepper_->size() == 0) return;
  if (position_ >= stepper_->size()) setPosition(0, stepper_->timeAt(0));  // replay from the start
  wall_.start();
  timer_->start();
  aPlay_->setChecked(true);
  aPlay_->setText(tr("Pa&use"));
  aPlay_->setIconText(tr("Pause"));
  Q_EMIT playingChanged(true);
}

void StepperController::pause() {
  const bool was = timer_->isActive();
  timer_->stop();
  aPlay_->setChecked(false);
  aPlay_->setText(tr("P&lay"));
  aPlay_->setIconText(tr("Play"));
  if (was) Q_EMIT playingChanged(false);
}

void StepperController::advance(double wallMs) {
  engaged_ = true;
  ensure();
  if (!stepper_ || stepper_->size() == 0) {
    pause();
    return;
  }
  const size_t n = stepper_->size();
  const double endT = stepper_->timeAt(n);
  const double until = time_ + speed_ * std::max(0.0, wallMs) / 1000.0;
  if (!breakpoints_.empty())
    if (auto p = stepper_->runToBreakpoint(position_, breakpoints_, until)) {
      pause();
      setPosition(*p, stepper_->timeAt(*p));
      Q_EMIT statusMessage(tr("Breakpoint · %1").arg(describe(stepper_->events()[*p - 1])));
      return;
    }
  if (until >= endT) {
    pause();
    setPosition(n, endT);
    return;
  }
  setPosition(stepper_->positionAt(until), until);
}

void StepperController::addBreakpoint(const Breakpoint& bp) {
  breakpoints_.push_back(bp);
  if (bpPanel_) bpPanel_->setBreakpoints(breakpoints_);
  Q_EMIT breakpointsChanged();
  Q_EMIT statusMessage(tr("Breakpoint %1").arg(breakpointText(bp)));
  publish();
}

void StepperController::removeBreakpoint(size_t index) {
  if (index >= breakpoints_.size()) return;
  breakpoints_.erase(breakpoints_.begin() + static_cast<std::ptrdiff_t>(index));
  if (bpPanel_) bpPanel_->setBreakpoints(breakpoints_);
  Q_EMIT breakpointsChanged();
  publish();
}

void StepperController::toggleBreakpoint(int device, const Op& op) {
  Breakpoint bp;
  bp.device = device;
  bp.kind = op.kind;
  bp.stage = op.stage;
  bp.microbatch = op.microbatch;
  bp.on = StepEventKind::Start;
  for (size_t i = 0; i < breakpoints_.size(); ++i) {
    const Breakpoint& b = breakpoints_[i];
    if (b.device == bp.device && b.kind == bp.kind && b.stage == bp.stage && b.microbatch == bp.microbatch &&
        b.on == bp.on) {
      removeBreakpoint(i);
      Q_EMIT statusMessage(tr("Breakpoint removed: %1").arg(breakpointText(bp)));
      return;
    }
  }
  addBreakpoint(bp);
}

void StepperController::toggleBreakpointOnSelection() {
  if (!view_) return;
  const auto ref = view_->selection();
  const auto op = view_->selectedOp();
  if (!ref || !op) {
    Q_EMIT statusMessage(tr("Select an op to break on"));
    return;
  }
  toggleBreakpoint(ref->device, *op);
}

void StepperController::stopDebugging() {
  pause();
  engaged_ = false;
  live_ = false;
  cancelled_ = false;
  hang_.reset();
  if (state_) state_->setLive(false);
  stepper_.reset();
  opIndex_.reset();
  dirty_ = true;
  measured_ = overlay_ && overlay_->active();
  position_ = 0;
  time_ = 0;
  if (diagnostics_) diagnostics_->setRunDiagnostics({}, {});
  publish();
  Q_EMIT moved();
}

void StepperController::timelineOpened(bool live) {
  // A live run refreshes its overlay as ops arrive (and once more when it ends): keep the
  // user's playhead then. Any other timeline, a new run's first ops included, starts afresh.
  const bool refresh = live_ && measured_ && stepper_.has_value() && overlay_ && overlay_->active();
  live_ = live && overlay_ && overlay_->active();
  if (state_) state_->setLive(live_);
  dirty_ = true;
  engaged_ = true;
  hang_.reset();
  ensure();
  if (diagnostics_) diagnostics_->setRunDiagnostics({}, {});
  if (!stepper_) {
    publish();
    return;
  }
  const Timeline& tl = stepper_->timeline();
  if (measured_ && !tl.complete && !live_) {
    pause();
    const size_t stop = stepper_->stopPosition();
    position_ = stop;
    time_ = stepper_->timeAt(stop);
    const StepState st = stepper_->stopState();
    if (cancelled_) {
      // Cancelled on purpose: where it stopped, not what failed.
      if (diagnostics_)
        diagnostics_->setRunDiagnostics(
            st.diagnostics,
            tr("The run was cancelled at %1 ms, after %2 events").arg(fmtMs(time_)).arg(stop));
      publish();
      Q_EMIT moved();
      Q_EMIT statusMessage(
          tr("Run cancelled at %1 ms with %2 of %3 ops measured: the playhead is where it stopped")
              .arg(fmtMs(time_))
              .arg(tl.ops.size())
              .arg(doc_ ? doc_->schedule().opCount() : tl.ops.size()));
      return;
    }
    hang_ = findHang(st.diagnostics);
    if (hang_) {
      // A hang: the playhead where the ranks stopped making progress, each device's stuck
      // step marked (publish) and the wait cycle named.
      const auto marks = stuckMarks(*hang_, *stepper_, st);
      if (diagnostics_)
        diagnostics_->setRunDiagnostics(
            st.diagnostics, tr("The run hung at %1 ms, after %2 events; %n device(s) stuck. %3", nullptr,
                               static_cast<int>(marks.size()))
                                .arg(fmtMs(time_))
                                .arg(stop)
                                .arg(QString::fromStdString(hang_->clause)));
      publish();
      Q_EMIT moved();
      if (!marks.empty() && view_) view_->selectOp(marks.front().op, true);
      Q_EMIT statusMessage(
          tr("The run hung: the playhead is where the ranks stopped (%1 ms), %n stuck step(s) "
             "marked; %2",
             nullptr, static_cast<int>(marks.size()))
              .arg(fmtMs(time_), QString::fromStdString(hang_->clause)));
      return;
    }
    size_t blocked = 0;
    std::optional<Op> first;
    for (const auto& d : st.devices)
      if (isStuck(d, st))
        for (const auto& w : d.next)
          if (!w.missing.empty()) {
            ++blocked;
            if (!first) first = w.op;
          }
    if (diagnostics_)
      diagnostics_->setRunDiagnostics(
          st.diagnostics, tr("The run stopped at %1 ms, after %2 events; %n op(s) blocked", nullptr,
                             static_cast<int>(blocked))
                              .arg(fmtMs(time_))
                              .arg(stop));
    publish();
    Q_EMIT moved();
    if (first && view_) view_->selectOp(*first, true);
    Q_EMIT statusMessage(
        tr("The run did not finish: the playhead is where it stopped (%1 ms), %n op(s) blocked", nullptr,
           static_cast<int>(blocked))
            .arg(fmtMs(time_)));
    return;
  }
  if (!refresh) {
    pause();
    position_ = 0;
    time_ = stepper_->timeAt(0);
  }
  publish();
  Q_EMIT moved();
}

}  // namespace ps::ui
