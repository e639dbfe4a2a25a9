// Step-through model: ordered events, playhead moves, breakpoints and the state at a time.
#include "pipestudio/core/stepper.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "comparison_internal.h"
#include "pipestudio/core/validator.h"

namespace ps::core {

namespace {
constexpr size_t kNone = std::numeric_limits<size_t>::max();

bool isBackwardGrad(OpKind k) { return k == OpKind::B || k == OpKind::I; }

// The last sample at or before t; none before the first sample.
std::optional<std::int64_t> memoryAt(const std::vector<MemorySample>& curve, double t) {
  auto it = std::upper_bound(curve.begin(), curve.end(), t,
                             [](double v, const MemorySample& s) { return v < s.time; });
  if (it == curve.begin()) return std::nullopt;
  return std::prev(it)->bytes;
}
}  // namespace

bool Breakpoint::matches(const TimelineOp& op, StepEventKind event) const {
  if (event != on) return false;
  if (device && *device != op.device) return false;
  if (kind && *kind != op.op.kind) return false;
  if (stage && *stage != op.op.stage) return false;
  if (microbatch && *microbatch != op.op.microbatch) return false;
  return true;
}

std::string_view inputStatusName(InputStatus s) {
  switch (s) {
    case InputStatus::NotStarted: return "not-started";
    case InputStatus::Running: return "running";
    case InputStatus::InTransit: return "in-transit";
    case InputStatus::NeverRan: return "never-ran";
  }
  return "not-started";
}

struct Stepper::Impl {
  Timeline timeline;
  Schedule plan;
  std::optional<Timeline> planned;
  DependencyGraph graph;
  std::unique_ptr<detail::TimelineIndex> index;         // over `timeline`
  std::unique_ptr<detail::TimelineIndex> plannedIndex;  // over `planned`
  std::vector<StepEvent> events;
  std::vector<size_t> startEvent;  // per op: its start event's index (kNone when none)
  std::vector<size_t> endEvent;    // per op: its end event's index (kNone when it never ended)
  std::vector<std::vector<size_t>> deviceEvents;  // per device: event indices in order
  int devices = 0;
  double plannedOrigin = 0;

  bool started(size_t op, size_t pos) const { return startEvent[op] != kNone && startEvent[op] < pos; }
  bool ended(size_t op, size_t pos) const { return endEvent[op] != kNone && endEvent[op] < pos; }
  StepState state(size_t pos, double time) const;
};

Result<Stepper> Stepper::make(Timeline timeline, Schedule plan, std::optional<Timeline> planned) {
  auto impl = std::make_shared<Impl>();
  impl->devices = std::max(timeline.devices, plan.pipeline.devices);
  for (const auto& o : timeline.ops) {
    if (o.device < 0 || o.device >= plan.pipeline.devices)
      return makeError("stepper.device", plan.opName(o.op) + " ran on device " + std::to_string(o.device) +
                                             " but the plan has " + std::to_string(plan.pipeline.devices) +
                                             " device(s)");
  }
  impl->timeline = std::move(timeline);
  impl->plan = std::move(plan);
  impl->planned = std::move(planned);
  impl->graph = DependencyGraph(impl->plan);
  impl->index = std::make_unique<detail::TimelineIndex>(impl->timeline);
  if (impl->planned) {
    impl->plannedIndex = std::make_unique<detail::TimelineIndex>(*impl->planned);
    double origin = std::numeric_limits<double>::infinity();
    for (const auto& o : impl->planned->ops) origin = std::min(origin, o.start);
    impl->plannedOrigin = std::isfinite(origin) ? origin : 0;
  }

  const auto& ops = impl->timeline.ops;
  auto& ev = impl->events;
  ev.reserve(ops.size() * 2);
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!std::isfinite(ops[i].start)) continue;
    ev.push_back(StepEvent{ops[i].start, StepEventKind::Start, i});
    if (std::isfinite(ops[i].end) && ops[i].end >= ops[i].start) ev.push_back(StepEvent{ops[i].end, StepEventKind::End, i});
  }
  // At equal times: ends of ops that took time, then starts, then ends of zero-length ops
  // (so those start before they end).
  auto klass = [&](const StepEvent& e) {
    if (e.kind == StepEventKind::Start) return 1;
    return ops[e.op].end > ops[e.op].start ? 0 : 2;
  };
  std::sort(ev.begin(), ev.end(), [&](const StepEvent& a, const StepEvent& b) {
    int ka = klass(a), kb = klass(b);
    return std::tie(a.time, ka, ops[a.op].device, a.op) < std::tie(b.time, kb, ops[b.op].device, b.op);
  });
  impl->startEvent.assign(ops.size(), kNone);
  impl->endEvent.assign(ops.size(), kNone);
  impl->deviceEvents.resize(static_cast<size_t>(impl->devices));
  for (size_t k = 0; k < ev.size(); ++k) {
    (ev[k].kind == StepEventKind::Start ? impl->startEvent : impl->endEvent)[ev[k].op] = k;
    impl->deviceEvents[static_cast<size_t>(ops[ev[k].op].device)].push_back(k);
  }
  return Stepper(std::move(impl));
}

const Timeline& Stepper::timeline() const { return impl_->timeline; }
const Schedule& Stepper::plan() const { return impl_->plan; }
const std::vector<StepEvent>& Stepper::events() const { return impl_->events; }

double Stepper::timeAt(size_t position) const {
  const auto& ev = impl_->events;
  if (ev.empty()) return 0;
  if (position == 0) return ev.front().time;
  return ev[std::min(position, ev.size()) - 1].time;
}

std::optional<size_t> Stepper::next(size_t position) const {
  if (position >= size()) return std::nullopt;
  return position + 1;
}

std::optional<size_t> Stepper::previous(size_t position) const {
  if (position == 0) return std::nullopt;
  return std::min(position, size()) - 1;
}

size_t Stepper::positionAt(double time) const {
  const auto& ev = impl_->events;
  auto it = std::upper_bound(ev.begin(), ev.end(), time, [](double t, const StepEvent& e) { return t < e.time; });
  return static_cast<size_t>(it - ev.begin());
}

std::optional<size_t> Stepper::runToBreakpoint(size_t position, const std::vector<Breakpoint>& breakpoints,
                                               std::optional<double> until) const {
  const auto& ev = impl_->events;
  const auto& ops = impl_->timeline.ops;
  for (size_t i = position; i < ev.size(); ++i) {
    if (until && ev[i].time > *until) break;
    for (const auto& bp : breakpoints)
      if (bp.matches(ops[ev[i].op], ev[i].kind)) return i + 1;
  }
  return std::nullopt;
}

std::optional<size_t> Stepper::runBackToBreakpoint(size_t position, const std::vector<Breakpoint>& breakpoints) const {
  const auto& ev = impl_->events;
  const auto& ops = impl_->timeline.ops;
  size_t p = std::min(position, ev.size());
  if (p < 2) return std::nullopt;
  for (size_t i = p - 1; i-- > 0;)
    for (const auto& bp : breakpoints)
      if (bp.matches(ops[ev[i].op], ev[i].kind)) return i + 1;
  return std::nullopt;
}

std::optional<size_t> Stepper::runToOp(size_t position, const Op& op, StepEventKind on) const {
  Breakpoint bp;
  bp.kind = op.kind;
  bp.stage = op.stage;
  bp.microbatch = op.microbatch;
  bp.on = on;
  return runToBreakpoint(position, {bp});
}

StepState Stepper::stateAt(double time) const { return impl_->state(positionAt(time), time); }

StepState Stepper::stateAfter(size_t position) const {
  position = std::min(position, size());
  return impl_->state(position, timeAt(position));
}

StepState Stepper::stopState() const { return impl_->state(size(), timeAt(size())); }

StepState Stepper::Impl::state(size_t pos, double time) const {
  StepState st;
  st.time = time;
  st.position = pos;
  st.devices.resize(static_cast<size_t>(devices));
  const auto& ops = timeline.ops;
  const int S = plan.pipeline.stages;
  const int M = plan.pipeline.microbatches;
  // Per device, per (stage, micro-batch): 1 = forward started, 2 = its gradient done.
  std::vector<std::vector<std::uint8_t>> flight(static_cast<size_t>(devices));

  for (int d = 0; d < devices; ++d) st.devices[static_cast<size_t>(d)].device = d;
  for (size_t i = 0; i < ops.size(); ++i) {
    const TimelineOp& o = ops[i];
    DeviceState& ds = st.devices[static_cast<size_t>(o.device)];
    if (!started(i, pos)) continue;
    if (ended(i, pos))
      ++ds.opsDone;
    else
      ds.running.push_back(i);
    if (o.op.stage < 0 || o.op.stage >= S || o.op.microbatch < 0 || o.op.microbatch >= M) continue;
    auto& f = flight[static_cast<size_t>(o.device)];
    if (f.empty()) f.assign(static_cast<size_t>(S) * static_cast<size_t>(M), 0);
    auto& cell = f[static_cast<size_t>(o.op.stage) * static_cast<size_t>(M) + static_cast<size_t>(o.op.microbatch)];
    if (o.op.kind == OpKind::F) cell |= 1;
    if (isBackwardGrad(o.op.kind) && ended(i, pos)) cell |= 2;
  }

  for (int d = 0; d < devices; ++d) {
    DeviceState& ds = st.devices[static_cast<size_t>(d)];
    std::sort(ds.running.begin(), ds.running.end(), [&](size_t a, size_t b) { return ops[a].start < ops[b].start; });
    ds.idle = ds.running.empty();
    const auto& f = flight[static_cast<size_t>(d)];
    for (size_t k = 0; k < f.size(); ++k)
      if (f[k] == 1) ds.inFlight.push_back(StageMicrobatch{static_cast<int>(k / static_cast<size_t>(M)),
                                                          static_cast<int>(k % static_cast<size_t>(M))});
    if (d < static_cast<int>(timeline.memory.size())) ds.memoryBytes = memoryAt(timeline.memory[static_cast<size_t>(d)], time);

    // Planned memory at the same progress: the planned time of this device's latest event.
    if (planned && d < static_cast<int>(planned->memory.size()) && !planned->memory[static_cast<size_t>(d)].empty()) {
      const auto& curve = planned->memory[static_cast<size_t>(d)];
      const auto& de = deviceEvents[static_cast<size_t>(d)];
      auto it = std::lower_bound(de.begin(), de.end(), pos);  // events before pos are applied
      std::optional<double> plannedTime;
      if (it != de.begin()) {
        const StepEvent& e = events[*std::prev(it)];
        if (auto pi = plannedIndex->find(ops[e.op].op)) {
          const TimelineOp& po = planned->ops[*pi];
          plannedTime = e.kind == StepEventKind::Start ? po.start : po.end;
        }
      }
      ds.plannedMemoryBytes = plannedTime ? memoryAt(curve, *plannedTime) : curve.front().bytes;
    }

    // The device's next step in its plan order: the first whose ops have not started.
    if (d >= static_cast<int>(plan.devices.size())) continue;
    const auto& steps = plan.devices[static_cast<size_t>(d)];
    for (const auto& s : steps) ds.opsPlanned += s.overlapped() ? 2 : 1;
    for (size_t k = 0; k < steps.size(); ++k) {
      auto ti = index->find(steps[k].first);
      if (ti && started(*ti, pos)) continue;
      for (const Op* op : {&steps[k].first, steps[k].second ? &*steps[k].second : nullptr}) {
        if (!op) continue;
        WaitingOp w;
        w.op = *op;
        w.planned = OpRef{d, static_cast<int>(k)};
        w.timelineOp = index->find(*op);
        for (int id : graph.dependenciesFor(*op)) {
          const Op& dep = graph.op(id);
          InputWait in;
          in.input = dep;
          in.device = graph.deviceOf(id);
          auto di = index->find(dep);
          if (!di) {
            in.status = InputStatus::NeverRan;
          } else {
            in.op = di;
            in.device = ops[*di].device;
            if (!started(*di, pos)) {
              in.status = InputStatus::NotStarted;
            } else if (!ended(*di, pos)) {
              in.status = InputStatus::Running;
            } else {
              auto tr = index->transfer(dep, *op);
              if (!tr || timeline.transfers[*tr].end <= time) continue;  // arrived
              in.status = InputStatus::InTransit;
              in.transfer = tr;
            }
          }
          w.missing.push_back(in);
        }
        ds.next.push_back(std::move(w));
      }
      break;
    }
    ds.blocked = ds.idle && std::any_of(ds.next.begin(), ds.next.end(), [](const WaitingOp& w) { return !w.missing.empty(); });
    ds.finished = ds.next.empty() && ds.running.empty();
  }

  for (size_t k = 0; k < timeline.transfers.size(); ++k) {
    const Transfer& t = timeline.transfers[k];
    if (t.start <= time && time < t.end) st.transfersInAir.push_back(k);
  }
  st.stopped = !timeline.complete && pos >= events.size();
  if (st.stopped) st.diagnostics = timeline.diagnostics;
  return st;
}

}  // namespace ps::core
