#include "pipestudio/core/model/timeline.h"

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

#include "pipestudio/core/model/enum_names.h"

namespace ps::core {

bool runsOnCopyStream(OpKind k) {
  return k == OpKind::Offload || k == OpKind::Reload || k == OpKind::Unshard || k == OpKind::ReduceGrad;
}

namespace {

bool isBackwardForInputs(OpKind k) {
  return k == OpKind::B || k == OpKind::I;
}

// The compute op running on `device` at time t (the latest one started by then that is still
// running, or that starts exactly then); {-1,-1} when the device is idle.
OpRef opAt(const std::vector<const TimelineOp*>& ops, double t) {
  const TimelineOp* best = nullptr;
  for (const TimelineOp* op : ops) {
    if (op->start > t) continue;
    if (t < op->end || op->start == t) {
      if (!best || op->start >= best->start) best = op;
    }
  }
  if (!best) return {};
  return OpRef{best->device, best->step};
}

}  // namespace

TimelineMetrics computeMetrics(const Timeline& t) {
  TimelineMetrics m;
  int devices = t.devices;
  for (const TimelineOp& op : t.ops) devices = std::max(devices, op.device + 1);
  devices = std::max(devices, static_cast<int>(t.memory.size()));
  m.ops = t.ops.size();
  m.headOfLineWaits = t.headOfLine.size();
  for (const HeadOfLineWait& w : t.headOfLine) m.headOfLineMs += w.duration();
  m.devices.resize(static_cast<size_t>(std::max(0, devices)));

  std::vector<std::vector<const TimelineOp*>> byDevice(m.devices.size());
  for (const TimelineOp& op : t.ops)
    if (op.device >= 0) byDevice[static_cast<size_t>(op.device)].push_back(&op);

  double first = std::numeric_limits<double>::infinity();
  double last = -std::numeric_limits<double>::infinity();
  double busySum = 0;
  for (size_t d = 0; d < m.devices.size(); ++d) {
    DeviceMetrics& dm = m.devices[d];
    dm.device = static_cast<int>(d);
    auto& ops = byDevice[d];
    std::stable_sort(ops.begin(), ops.end(),
                     [](const TimelineOp* a, const TimelineOp* b) { return a->start < b->start; });
    if (!ops.empty()) {
      dm.start = std::numeric_limits<double>::infinity();
      dm.end = -std::numeric_limits<double>::infinity();
    }
    // Busy = union of compute intervals, so an overlapped pair counts once.
    double curStart = 0, curEnd = -std::numeric_limits<double>::infinity();
    bool open = false;
    for (const TimelineOp* op : ops) {
      dm.start = std::min(dm.start, op->start);
      dm.end = std::max(dm.end, op->end);
      if (runsOnCopyStream(op->op.kind)) continue;
      if (!open || op->start > curEnd) {
        if (open) dm.busy += curEnd - curStart;
        curStart = op->start;
        curEnd = op->end;
        open = true;
      } else {
        curEnd = std::max(curEnd, op->end);
      }
    }
    if (open) dm.busy += curEnd - curStart;
    if (!ops.empty()) {
      first = std::min(first, dm.start);
      last = std::max(last, dm.end);
    }
    busySum += dm.busy;
    m.lowerBound = std::max(m.lowerBound, dm.busy);

    // Memory peak from the step curve.
    if (d < t.memory.size() && !t.memory[d].empty()) {
      const auto& curve = t.memory[d];
      dm.staticBytes = curve.front().bytes;
      dm.peakMemoryBytes = curve.front().bytes;
      dm.peakMemoryTime = curve.front().time;
      for (const MemorySample& s : curve) {
        if (s.bytes > dm.peakMemoryBytes) {
          dm.peakMemoryBytes = s.bytes;
          dm.peakMemoryTime = s.time;
        }
      }
      std::vector<const TimelineOp*> compute;
      for (const TimelineOp* op : ops)
        if (!runsOnCopyStream(op->op.kind)) compute.push_back(op);
      dm.peakMemoryOp = opAt(compute, dm.peakMemoryTime);
    }

    // Micro-batches in flight: from the first F of a micro-batch on this device to the last
    // end of its B or I there (its activations are then freed, but for W's share).
    std::map<int, std::pair<double, double>> life;  // mb -> [first F start, last B/I end]
    for (const TimelineOp* op : ops) {
      if (op->op.microbatch < 0) continue;
      if (op->op.kind == OpKind::F) {
        auto [it, inserted] =
            life.try_emplace(op->op.microbatch, op->start, std::numeric_limits<double>::infinity());
        if (!inserted) it->second.first = std::min(it->second.first, op->start);
      }
    }
    for (const TimelineOp* op : ops) {
      if (!isBackwardForInputs(op->op.kind)) continue;
      auto it = life.find(op->op.microbatch);
      if (it == life.end()) continue;
      double& e = it->second.second;
      e = e == std::numeric_limits<double>::infinity() ? op->end : std::max(e, op->end);
    }
    std::vector<std::pair<double, int>> events;  // (time, +1/-1); ends sort first at ties
    events.reserve(life.size() * 2);
    for (auto& [mb, iv] : life) {
      events.emplace_back(iv.first, +1);
      if (iv.second != std::numeric_limits<double>::infinity()) events.emplace_back(iv.second, -1);
    }
    std::sort(events.begin(), events.end());
    int cur = 0;
    for (auto& e : events) {
      cur += e.second;
      dm.peakInflightMicrobatches = std::max(dm.peakInflightMicrobatches, cur);
    }
  }
  if (last >= first) {
    m.makespan = last - first;
    if (!m.devices.empty() && m.makespan > 0) {
      m.bubbleRatio = 1.0 - busySum / (static_cast<double>(m.devices.size()) * m.makespan);
      m.efficiency = m.lowerBound / m.makespan;
    }
  }
  return m;
}

constexpr EnumName<TimelineSource> kSourceNames[] = {{TimelineSource::Simulated, "simulated"},
                                                     {TimelineSource::Measured, "measured"},
                                                     {TimelineSource::Imported, "imported"}};

PS_ENUM_NAME_FUNCTION(TimelineSource, kSourceNames, timelineSourceName);

TimelineSource timelineSourceFromName(std::string_view name) {
  return enumFromName(name, kSourceNames).value_or(TimelineSource::Simulated);
}

}  // namespace ps::core
