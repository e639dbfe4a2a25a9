#pragma once
// Step-through model of a timeline (docs/debugger.md): the ordered op start/end events, a
// playhead that moves event by event or to an op or breakpoint, and the state at the
// playhead (per device the running op, the op it waits for and on what, micro-batches in
// flight, memory; transfers in the air). For a failed or hung run (Timeline::complete ==
// false) the state where it stopped, with the blocked ops and their missing inputs.
//
// A Stepper is immutable and cheap to copy (it shares its data); every query is a const
// function returning a value, so the GUI can hold one per open run and ask from any thread.
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "pipestudio/core/model/result.h"
#include "pipestudio/core/model/schedule.h"
#include "pipestudio/core/model/timeline.h"

namespace ps::core {

enum class StepEventKind : std::uint8_t { Start, End };

struct StepEvent {
  double time = 0;
  StepEventKind kind = StepEventKind::Start;
  size_t op = 0;  // index into Timeline::ops
};

// "When device 2 starts B5": every field that is set must match.
struct Breakpoint {
  std::optional<int> device;
  std::optional<OpKind> kind;
  std::optional<int> stage;
  std::optional<int> microbatch;
  StepEventKind on = StepEventKind::Start;
  bool matches(const TimelineOp& op, StepEventKind event) const;
};

// What keeps an input from an op.
enum class InputStatus : std::uint8_t {
  NotStarted,  // its producer has not started yet
  Running,     // its producer is running
  InTransit,   // produced; its transfer is in the air
  NeverRan,    // its producer is not in the timeline (a failed or partial run)
};
std::string_view inputStatusName(InputStatus s);  // "not-started", "running", "in-transit", "never-ran"

struct InputWait {
  Op input;         // the dependency
  int device = -1;  // where it runs (or would run, by the plan's placement)
  InputStatus status = InputStatus::NotStarted;
  std::optional<size_t> op;  // its index in Timeline::ops when it ran
  std::optional<size_t> transfer;
};

// The op a device will run next, and the inputs it still lacks (empty when it could start).
struct WaitingOp {
  Op op;
  OpRef planned;                     // its place in the plan
  std::optional<size_t> timelineOp;  // index in Timeline::ops when it ran later
  std::vector<InputWait> missing;
};

struct StageMicrobatch {
  int stage = 0;
  int microbatch = 0;
  friend bool operator==(const StageMicrobatch&, const StageMicrobatch&) = default;
};

struct DeviceState {
  int device = 0;
  std::vector<size_t> running;              // Timeline::ops indices (two for an overlapped pair)
  std::vector<WaitingOp> next;              // the device's next step (two ops for a pair); empty when done
  bool idle = true;                         // nothing running
  bool blocked = false;                     // idle and the next step lacks an input
  bool finished = false;                    // every op of its plan has ended
  size_t opsDone = 0;                       // ops of this device that have ended
  size_t opsPlanned = 0;                    // ops of this device in the plan
  std::vector<StageMicrobatch> inFlight;    // F started, its B / I not yet ended
  std::optional<std::int64_t> memoryBytes;  // from this timeline's memory curve
  std::optional<std::int64_t> plannedMemoryBytes;  // from the planned timeline, at the same progress
};

struct StepState {
  double time = 0;
  size_t position = 0;  // events applied (0 = before the first)
  std::vector<DeviceState> devices;
  std::vector<size_t> transfersInAir;  // Timeline::transfers indices
  bool stopped = false;                // incomplete timeline, at or after the point where it stopped
  Diagnostics diagnostics;             // the timeline's diagnostics when stopped (the failure)
};

// Whether an idle device that lacks an input is stuck rather than waiting. Waiting is normal:
// the pipeline filling at warm-up, a producer still running, an activation in the air. Stuck:
// an input never ran, or the timeline stopped here (where a failed or hung run ended).
bool isStuck(const DeviceState& device, const StepState& state);

class Stepper {
 public:
  // `plan` gives each device's order and the dependency rules (scheduleFromTimeline for a
  // trace without a plan); `planned`, when given, supplies planned memory. Errors when the
  // timeline's devices exceed the plan's.
  static Result<Stepper> make(Timeline timeline, Schedule plan,
                              std::optional<Timeline> planned = std::nullopt);

  const Timeline& timeline() const;
  const Schedule& plan() const;
  // Ordered by time; at equal times ends before starts, then by device. An op whose end is
  // not finite or before its start (it never finished in a failed run) has no end event.
  const std::vector<StepEvent>& events() const;
  size_t size() const { return events().size(); }

  // Positions count applied events: 0 .. size(). The time of a position is that of its last
  // applied event (the first start for position 0).
  double timeAt(size_t position) const;
  std::optional<size_t> next(size_t position) const;      // position + 1
  std::optional<size_t> previous(size_t position) const;  // position - 1
  size_t positionAt(double time) const;                   // every event at or before time applied
  // The position just after the first event past `position` that matches a breakpoint;
  // with `until`, only events at or before that time count (playing at a speed).
  std::optional<size_t> runToBreakpoint(size_t position, const std::vector<Breakpoint>& breakpoints,
                                        std::optional<double> until = std::nullopt) const;
  // Backwards: the position just after the last matching event before `position`.
  std::optional<size_t> runBackToBreakpoint(size_t position,
                                            const std::vector<Breakpoint>& breakpoints) const;
  // Run to the start (or end) of an op, on whichever device ran it.
  std::optional<size_t> runToOp(size_t position, const Op& op, StepEventKind on = StepEventKind::Start) const;

  StepState stateAt(double time) const;  // = stateAfter(positionAt(time)) at that time
  StepState stateAfter(size_t position) const;

  // Failed or hung runs: the position where the timeline stops (every event applied) and the
  // state there, stopped = true, with the blocked ops and their missing inputs. For a complete
  // timeline these are the end and the finished state.
  size_t stopPosition() const { return size(); }
  StepState stopState() const;

  struct Impl;

 private:
  explicit Stepper(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace ps::core
