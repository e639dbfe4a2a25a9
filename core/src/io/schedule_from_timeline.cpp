// A plan read back from a timeline: each device's ops in the order they started, overlapped
// pairs joined again, stages placed where they ran.
#include <algorithm>
#include <tuple>

#include "pipestudio/core/io/trace_import.h"
#include "pipestudio/core/model/limits.h"

namespace ps::core {

Result<Schedule> scheduleFromTimeline(const Timeline& t) {
  // The timeline may come from any reader: its numbers size the plan, so bound them first.
  if (t.devices > limits::kMaxDevices)
    return makeError("trace.schedule", "the timeline has " + std::to_string(t.devices) +
                                           " devices, more than " + std::to_string(limits::kMaxDevices));
  if (t.ops.size() > static_cast<size_t>(limits::kMaxOps))
    return makeError("trace.schedule", "the timeline has " + std::to_string(t.ops.size()) +
                                           " ops, more than " + std::to_string(limits::kMaxOps));
  int stages = 0;
  int mbs = 0;
  for (const auto& o : t.ops) {
    if (o.op.stage < 0) return makeError("trace.schedule", "an op has a negative stage");
    if (o.op.stage >= limits::kMaxStages)
      return makeError("trace.schedule", "an op has stage " + std::to_string(o.op.stage) +
                                             ", out of range (at most " +
                                             std::to_string(limits::kMaxStages - 1) + ")");
    if (o.op.microbatch >= limits::kMaxMicrobatches)
      return makeError("trace.schedule", "an op has micro-batch " + std::to_string(o.op.microbatch) +
                                             ", out of range (at most " +
                                             std::to_string(limits::kMaxMicrobatches - 1) + ")");
    stages = std::max(stages, o.op.stage + 1);
    mbs = std::max(mbs, o.op.microbatch + 1);
  }
  if (stages == 0) return makeError("trace.schedule", "the timeline has no ops");
  int devices = std::max(t.devices, 1);
  std::vector<int> stageToDevice(static_cast<size_t>(stages), -1);
  for (const auto& o : t.ops) {
    int& d = stageToDevice[static_cast<size_t>(o.op.stage)];
    if (d >= 0 && d != o.device)
      return makeError("trace.schedule", "stage " + std::to_string(o.op.stage) + " ran on devices " +
                                             std::to_string(d) + " and " + std::to_string(o.device));
    d = o.device;
  }
  // Stages that never ran (only possible for a partial timeline): keep them on device 0.
  for (int& d : stageToDevice)
    if (d < 0) d = 0;
  auto p = Pipeline::makeExplicit(devices, std::max(mbs, 1), stageToDevice);
  PS_TRY(p);
  Schedule s;
  s.name = t.label;
  s.pipeline = *p;
  s.devices.resize(static_cast<size_t>(devices));
  std::vector<size_t> order(t.ops.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::tie(t.ops[a].device, t.ops[a].start) < std::tie(t.ops[b].device, t.ops[b].start);
  });
  for (size_t k = 0; k < order.size(); ++k) {
    const TimelineOp& o = t.ops[order[k]];
    if (o.device < 0 || o.device >= devices) continue;
    auto& steps = s.devices[static_cast<size_t>(o.device)];
    // An overlapped pair is two TimelineOps with the same device and start.
    if (o.overlapped && !steps.empty() && !steps.back().second && k > 0) {
      const TimelineOp& prev = t.ops[order[k - 1]];
      if (prev.overlapped && prev.device == o.device && prev.start == o.start &&
          prev.op == steps.back().first) {
        steps.back().second = o.op;
        continue;
      }
    }
    steps.push_back(Step{o.op, std::nullopt});
  }
  return s;
}

}  // namespace ps::core
