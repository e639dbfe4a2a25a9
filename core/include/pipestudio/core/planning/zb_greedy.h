#pragma once
// A greedy builder of zero-bubble orders for a linear pipeline (one stage per device) under a
// per-device memory limit, in the manner of Zero Bubble's automatic scheduler (Qi et al., ICLR
// 2024, its heuristic `manual_order`): warm-up forwards chosen from memory and the time the
// first gradient needs to return, then per micro-batch a forward sweep down the pipeline and a
// backward (I) sweep up, with weight-gradient passes (W) placed into the gaps a stage would
// otherwise idle in, or wherever memory requires them. Three flags select its variants; the
// search tries all eight as one more candidate family and judges them by the simulator.
// A detail of the search (namespace detail), public so that the steady-state benchmark can set
// Zero Bubble's own figures beside the search's without a second copy of the algorithm.
#include <optional>
#include <vector>

#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/core/model/schedule.h"

namespace ps::core::detail {

struct ZbGreedyInput {
  std::vector<double> f, i, w;           // per stage (ms)
  std::vector<double> commAfter;         // per stage boundary s -> s + 1 (ms); size stages - 1
  std::vector<double> memF, memI, memW;  // bytes: + at F, - at I, - at W (sum 0 per stage)
  std::vector<double> maxMem;            // per stage: bytes available for activations
};

struct ZbGreedyFlags {
  bool allowBubbleBeforeFirstB = false;
  bool prioritizeB = false;
  bool noBubbleGreedy = false;
};

// The order for `microbatches` micro-batches, or nullopt when memory cannot be met. With
// `longestStageSpanMs`, also the greedy's own estimate of the order: the longest per-stage span
// from the first forward's start to the last weight gradient's end (Zero Bubble's metric).
std::optional<Schedule> zbGreedySchedule(const ZbGreedyInput& in, int microbatches,
                                         const ZbGreedyFlags& flags, double* longestStageSpanMs = nullptr);

// A schedule of the given per-device op orders (one step per op) on `orders.size()` devices.
std::optional<Schedule> scheduleOfOrders(int stages, int microbatches, PlacementKind placement,
                                         const std::vector<std::vector<Op>>& orders);

// Inputs from stage costs on a linear pipeline with one stage per device; limit <= 0 means no
// memory limit.
ZbGreedyInput zbGreedyInput(const std::vector<StageCost>& stages, const CostProfile& profile,
                            std::int64_t limit);

}  // namespace ps::core::detail

namespace ps::core::detail {

// Zero Bubble's ZB-V greedy (try_v_schedule): two stages per device in a V (stage d and stage
// 2D-1-d on device d), warm-up forwards bounded by memory, then alternating backward and
// forward sweeps with W passes filling the gaps before a dependency arrives or where memory
// needs them; a second pass retries with the first pass's bubbles as its budget. `stages` are
// the 2D stage costs in model order. nullopt when it cannot finish within memory. With
// `maxStageBubbleMs`, also the greedy's own estimate: the largest idle time of a device.
std::optional<Schedule> zbvGreedySchedule(const std::vector<StageCost>& stages, const CostProfile& profile,
                                          std::int64_t limit, int microbatches, bool fillF, bool fillB,
                                          double* maxStageBubbleMs = nullptr);

}  // namespace ps::core::detail
