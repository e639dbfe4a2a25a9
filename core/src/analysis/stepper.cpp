// Step-through model: ordered events, playhead moves, breakpoints and the state at a time.
#include "pipestudio/core/analysis/stepper.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include "analysis/timeline_index.h"
#include "pipestudio/core/analysis/dependency_graph.h"
#include "pipestudio/core/model/enum_names.h"

namespace ps::core {

namespace {
constexpr size_t kNone = std::numeric_limits<size_t>::max();

bool isBackwardGrad(OpKind k) {
  return k == OpKind::B || k == OpKind::I;
}

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

constexpr EnumName<InputStatus> kInputStatusNames[] = {{InputStatus::NotStarted, "not-started"},
                                                       {InputStatus::Running, "running"},
                                                       {InputStatus::InTransit, "in-transit"},
                                                       {InputStatus::NeverRan, "never-ran"}};

PS_ENUM_NAME_FUNCTION(InputStatus, kInputStatusNames, inputStatusName);

struct Stepper::Impl {
  Timeline timeline;
  Schedule plan;
  std::optional<Timeline> planned;
  DependencyGraph graph;
  std::unique_ptr<detail::TimelineIndex> index;         // over `timeline`
  std::unique_ptr<detail::TimelineIndex> plannedIndex;  // over `planned`
  std::vector<StepEvent> events;
  std::vector<size_t> startEvent;                 // per op: its start event's index (kNone when none)
  std::vector<size_t> endEvent;                   // per op: its end event's index (kNone when it never ended)
  std::vector<std::vector<size_t>> deviceEvents;  // per device: event indices in order
  int devices = 0;
  double plannedOrigin = 0;

  // Per-device tables that make a state query O(devices x (log n + what it returns)) rather
  // than a pass over every op. kNone (never) compares as later than every position.
  struct Flight {
    size_t start = 0;     // the F's start event
    size_t free = kNone;  // the first B / I end event of the same (stage, micro-batch)
    StageMicrobatch sm;
  };
  struct DeviceTables {
    std::vector<size_t> opsByStart;    // ops with a start event, by it
    std::vector<size_t> startEvents;   // their start events, ascending
    std::vector<size_t> maxEndEvent;   // prefix max of their end events
    std::vector<size_t> endsBefore;    // endsBefore[k]: End events among deviceEvents[0, k)
    std::vector<Flight> flights;       // by start
    std::vector<size_t> maxFree;       // prefix max of flights' free
    std::vector<size_t> stepStartMax;  // prefix max over plan steps of the first op's start event
    size_t opsPlanned = 0;
  };
  std::vector<DeviceTables> tables;
  std::vector<size_t> transfersByStart;  // transfer indices by start time
  std::vector<double> transferMaxEnd;    // prefix max of their ends

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
    if (std::isfinite(ops[i].end) && ops[i].end >= ops[i].start)
      ev.push_back(StepEvent{ops[i].end, StepEventKind::End, i});
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

  impl->tables.resize(static_cast<size_t>(impl->devices));
  // Micro-batches in flight: from the F's start to the first end of a B or I of the same
  // (stage, micro-batch), on the device that ran the F.
  std::map<std::tuple<int, int, int>, Impl::Flight> flights;
  for (size_t k = 0; k < ev.size(); ++k) {
    const TimelineOp& o = ops[ev[k].op];
    auto& tb = impl->tables[static_cast<size_t>(o.device)];
    if (ev[k].kind == StepEventKind::Start) {
      tb.opsByStart.push_back(ev[k].op);
      tb.startEvents.push_back(k);
      size_t end = impl->endEvent[ev[k].op];
      tb.maxEndEvent.push_back(tb.maxEndEvent.empty() ? end : std::max(tb.maxEndEvent.back(), end));
    }
    if (o.op.stage < 0 || o.op.microbatch < 0) continue;
    auto key = std::make_tuple(o.device, o.op.stage, o.op.microbatch);
    if (o.op.kind == OpKind::F && ev[k].kind == StepEventKind::Start && !flights.count(key))
      flights[key] = Impl::Flight{k, kNone, StageMicrobatch{o.op.stage, o.op.microbatch}};
    if (isBackwardGrad(o.op.kind) && ev[k].kind == StepEventKind::End)
      if (auto it = flights.find(key); it != flights.end()) it->second.free = std::min(it->second.free, k);
  }
  for (const auto& [key, f] : flights)
    impl->tables[static_cast<size_t>(std::get<0>(key))].flights.push_back(f);
  for (int d = 0; d < impl->devices; ++d) {
    auto& tb = impl->tables[static_cast<size_t>(d)];
    std::sort(tb.flights.begin(), tb.flights.end(),
              [](const Impl::Flight& a, const Impl::Flight& b) { return a.start < b.start; });
    for (const auto& f : tb.flights)
      tb.maxFree.push_back(tb.maxFree.empty() ? f.free : std::max(tb.maxFree.back(), f.free));
    const auto& de = impl->deviceEvents[static_cast<size_t>(d)];
    tb.endsBefore.assign(de.size() + 1, 0);
    for (size_t k = 0; k < de.size(); ++k)
      tb.endsBefore[k + 1] = tb.endsBefore[k] + (ev[de[k]].kind == StepEventKind::End ? 1 : 0);
    if (d < static_cast<int>(impl->plan.devices.size())) {
      for (const auto& step : impl->plan.devices[static_cast<size_t>(d)]) {
        tb.opsPlanned += step.overlapped() ? 2 : 1;
        auto ti = impl->index->find(step.first);
        size_t se = ti ? impl->startEvent[*ti] : kNone;
        tb.stepStartMax.push_back(tb.stepStartMax.empty() ? se : std::max(tb.stepStartMax.back(), se));
      }
    }
  }
  const auto& trs = impl->timeline.transfers;
  for (size_t i = 0; i < trs.size(); ++i)
    if (std::isfinite(trs[i].start)) impl->transfersByStart.push_back(i);
  std::stable_sort(impl->transfersByStart.begin(), impl->transfersByStart.end(),
                   [&](size_t a, size_t b) { return trs[a].start < trs[b].start; });
  for (size_t i : impl->transfersByStart)
    impl->transferMaxEnd.push_back(
        impl->transferMaxEnd.empty() ? trs[i].end : std::max(impl->transferMaxEnd.back(), trs[i].end));
  return Stepper(std::move(impl));
}

const Timeline& Stepper::timeline() const {
  return impl_->timeline;
}
const Schedule& Stepper::plan() const {
  return impl_->plan;
}
const std::vector<StepEvent>& Stepper::events() const {
  return impl_->events;
}

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
  auto it =
      std::upper_bound(ev.begin(), ev.end(), time, [](double t, const StepEvent& e) { return t < e.time; });
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

std::optional<size_t> Stepper::runBackToBreakpoint(size_t position,
                                                   const std::vector<Breakpoint>& breakpoints) const {
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

StepState Stepper::stateAt(double time) const {
  return impl_->state(positionAt(time), time);
}

StepState Stepper::stateAfter(size_t position) const {
  position = std::min(position, size());
  return impl_->state(position, timeAt(position));
}

StepState Stepper::stopState() const {
  return impl_->state(size(), timeAt(size()));
}

StepState Stepper::Impl::state(size_t pos, double time) const {
  StepState st;
  st.time = time;
  st.position = pos;
  st.devices.resize(static_cast<size_t>(devices));
  const auto& ops = timeline.ops;
  for (int d = 0; d < devices; ++d) {
    DeviceState& ds = st.devices[static_cast<size_t>(d)];
    ds.device = d;
    const DeviceTables& tb = tables[static_cast<size_t>(d)];
    // Running: started before pos and not ended; only ops whose prefix max end reaches pos
    // can qualify, so walk back from the last started op until none can.
    size_t k = static_cast<size_t>(std::lower_bound(tb.startEvents.begin(), tb.startEvents.end(), pos) -
                                   tb.startEvents.begin());
    for (size_t j = k; j-- > 0;) {
      if (tb.maxEndEvent[j] < pos) break;
      if (endEvent[tb.opsByStart[j]] >= pos) ds.running.push_back(tb.opsByStart[j]);
    }
    std::sort(ds.running.begin(), ds.running.end(),
              [&](size_t a, size_t b) { return std::tie(ops[a].start, a) < std::tie(ops[b].start, b); });
    ds.idle = ds.running.empty();
    const auto& de = deviceEvents[static_cast<size_t>(d)];
    ds.opsDone = tb.endsBefore[static_cast<size_t>(std::lower_bound(de.begin(), de.end(), pos) - de.begin())];
    // In flight: F started before pos, not yet freed.
    size_t kf = static_cast<size_t>(std::lower_bound(tb.flights.begin(), tb.flights.end(), pos,
                                                     [](const Flight& x, size_t p) { return x.start < p; }) -
                                    tb.flights.begin());
    for (size_t j = kf; j-- > 0;) {
      if (tb.maxFree[j] < pos) break;
      if (tb.flights[j].free >= pos) ds.inFlight.push_back(tb.flights[j].sm);
    }
    std::sort(ds.inFlight.begin(), ds.inFlight.end(), [](const StageMicrobatch& a, const StageMicrobatch& b) {
      return std::tie(a.stage, a.microbatch) < std::tie(b.stage, b.microbatch);
    });
    if (d < static_cast<int>(timeline.memory.size()))
      ds.memoryBytes = memoryAt(timeline.memory[static_cast<size_t>(d)], time);

    // Planned memory at the same progress: the planned time of this device's latest event.
    if (planned && d < static_cast<int>(planned->memory.size()) &&
        !planned->memory[static_cast<size_t>(d)].empty()) {
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
    ds.opsPlanned = tb.opsPlanned;
    // The first step whose start is at or after pos is the first whose prefix max is.
    size_t firstOpen = static_cast<size_t>(
        std::lower_bound(tb.stepStartMax.begin(), tb.stepStartMax.end(), pos) - tb.stepStartMax.begin());
    for (size_t k = firstOpen; k < steps.size(); ++k) {
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
    ds.blocked = ds.idle && std::any_of(ds.next.begin(), ds.next.end(),
                                        [](const WaitingOp& w) { return !w.missing.empty(); });
    ds.finished = ds.next.empty() && ds.running.empty();
  }

  // In the air: started at or before time, not ended; walk back while a prefix max end allows.
  const auto& trs = timeline.transfers;
  size_t kt = static_cast<size_t>(std::upper_bound(transfersByStart.begin(), transfersByStart.end(), time,
                                                   [&](double t, size_t i) { return t < trs[i].start; }) -
                                  transfersByStart.begin());
  for (size_t j = kt; j-- > 0;) {
    if (!(transferMaxEnd[j] > time)) break;
    if (time < trs[transfersByStart[j]].end) st.transfersInAir.push_back(transfersByStart[j]);
  }
  std::sort(st.transfersInAir.begin(), st.transfersInAir.end());
  st.stopped = !timeline.complete && pos >= events.size();
  if (st.stopped) st.diagnostics = timeline.diagnostics;
  return st;
}

bool isStuck(const DeviceState& device, const StepState& state) {
  if (!device.blocked) return false;
  if (state.stopped) return true;
  for (const WaitingOp& w : device.next)
    for (const InputWait& in : w.missing)
      if (in.status == InputStatus::NeverRan) return true;
  return false;
}

}  // namespace ps::core
