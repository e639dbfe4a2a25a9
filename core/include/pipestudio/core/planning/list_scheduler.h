#pragma once
// The list scheduler: builds per-device orders op by op by replaying the pipeline in time
// (docs/search.md). One of the search's candidate families; usable on its own.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/core/model/result.h"
#include "pipestudio/core/model/schedule.h"
#include "pipestudio/core/planning/partition_search.h"  // ActivationPolicy

namespace ps::core {

// Knobs of the list scheduler. It replays the pipeline in time: whenever a device is free
// it starts the ready op of highest priority: backward (I or B) first, then forward while
// the device's warm-up depth and memory headroom allow, then recompute, then pending W.
struct ListSchedulerOptions {
  bool splitBackward = true;  // I + W (zero-bubble) rather than full B
  int maxPendingW = -1;  // W deferred at most this many per device before it takes priority; -1 = unbounded
  // Forward micro-batch-stages a device may hold before it must run a backward; empty =
  // 1F1B depth (devices - d) x chunks per device. warmupOffset is added to every device.
  std::vector<int> warmupDepth;
  int warmupOffset = 0;
  // Order among ready ops of one kind on a device: key (m / group, chunk, m % group), chunks
  // ascending for forwards and descending for backwards; group = devices is Megatron's
  // interleaving, 1 is depth first. 0 = devices.
  int microbatchGroup = 0;
  std::vector<ActivationPolicy> policies;  // per stage; empty = keep all
  // Per micro-batch recompute chosen by memory headroom: a forward of a Keep stage keeps its
  // activations when the device has room for them (plus a rebuild still pending), otherwise it
  // stashes only its input and gets an R before its backward. Recompute and Offload stages
  // keep their fixed policy. Off = every micro-batch follows its stage's policy.
  bool recomputeOnDemand = false;
  std::optional<std::int64_t> memoryLimitBytes;  // headroom check for forwards; unset = profile's
  // Schedule-level knob the GUI shows as "what differs"; free text.
  std::string label;
};

// Builds an order for the given pipeline and stage costs. Always returns a complete,
// dependency-respecting schedule (the memory headroom is advisory: when no op fits it runs
// the forward that unblocks the pipeline and lets the simulator judge the memory).
Result<Schedule> listSchedule(const Pipeline& pipeline, const std::vector<StageCost>& stages,
                              const CostProfile& profile, const ListSchedulerOptions& o);

}  // namespace ps::core
