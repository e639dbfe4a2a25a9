#pragma once
// Memory-scalable partitioning (DawnPiper's method, docs/search.md): layers -> contiguous
// stages by bisection on the target stage time. For a candidate time the layers are packed
// greedily into stages, and each stage keeps, recomputes or offloads its activations so
// that its peak memory under the schedule (micro-batches in flight per stage) fits the
// device. The smallest feasible time wins. Also the inverse question: the largest
// micro-batch size that fits.
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/core/model/result.h"
#include "pipestudio/core/model/schedule.h"

namespace ps::core {

// What a stage does with the activations it stashes between F and its backward.
enum class ActivationPolicy : std::uint8_t {
  Keep,       // stash everything until the backward frees it
  Recompute,  // stash only the stage input; R rebuilds the rest before the backward
  Offload     // OFFLOAD to host after F, RELOAD before the backward
};
std::string_view activationPolicyName(ActivationPolicy p);  // "keep", "recompute", "offload"

struct PartitionOptions {
  int stages = 1;
  // Micro-batches whose activations a stage holds at once. Empty: 1F1B on a linear
  // placement, min(microbatches, stages - s) for stage s.
  std::vector<int> inflightPerStage;
  int microbatches = 1 << 20;                    // caps the 1F1B default above
  std::optional<std::int64_t> memoryLimitBytes;  // overrides the profile's device memory; 0 = unlimited
  bool allowRecompute = true;
  bool allowOffload = true;
  // Profile costs are for micro-batch size 1 (the zoo's convention); times, activation and
  // output bytes scale linearly with this, weights and optimizer state do not.
  int microbatchSize = 1;
};

// One stage of a plan.
struct StagePlan {
  int firstLayer = 0;
  int layerCount = 0;
  ActivationPolicy policy = ActivationPolicy::Keep;
  double timeMs = 0;             // F + B (+ R when recomputing, + exposed copy time when offloading)
  std::int64_t staticBytes = 0;  // weights + gradients + optimizer state
  std::int64_t peakBytes = 0;    // static + peak activations under the in-flight count
  int inflight = 0;
};

struct PartitionPlan {
  std::vector<int> layersPerStage;
  std::vector<ActivationPolicy> policies;
  std::vector<StagePlan> stages;
  double bottleneckMs = 0;  // max stage time: the target time the bisection settled on
  int microbatchSize = 1;
  std::int64_t memoryLimitBytes = 0;  // 0 = unlimited
  int bisectionSteps = 0;
};

// The profile with times, activation and output bytes multiplied by microbatchSize.
CostProfile scaleMicrobatchSize(const CostProfile& p, int microbatchSize);

// Bisection partition: the smallest bottleneck stage time whose greedy packing fits memory.
// Errors when no partition fits (names the stage and layers that cannot fit).
Result<PartitionPlan> partitionBisection(const CostProfile& p, const PartitionOptions& o);

// Exhaustive reference for tests and tiny models: every composition of the layers into
// stages, best policy per stage. Refuses more than 200000 compositions.
Result<PartitionPlan> partitionBruteForce(const CostProfile& p, const PartitionOptions& o);

// Evaluates a given layer split (e.g. balanced or uniform) with the best policy per stage;
// errors when a stage cannot fit. With allowRecompute/allowOffload off this is the plain
// memory check.
Result<PartitionPlan> planPartition(const CostProfile& p, const std::vector<int>& layersPerStage,
                                    const PartitionOptions& o);

struct MicrobatchSizeResult {
  int largestMicrobatchSize = 0;      // 0 when even size 1 does not fit
  std::optional<PartitionPlan> plan;  // the plan at that size
};

// The largest micro-batch size (up to maxSize) for which partitionBisection finds a plan.
MicrobatchSizeResult largestMicrobatchSize(const CostProfile& p, const PartitionOptions& o,
                                           int maxSize = 4096);
// The same for a fixed split (layersPerStage empty = partitionLayers' compute balance).
MicrobatchSizeResult largestMicrobatchSizeFixed(const CostProfile& p, const std::vector<int>& layersPerStage,
                                                const PartitionOptions& o, int maxSize = 4096);

// Adds the ops a memory plan needs to a schedule: R(s,m) right before each backward (B or I)
// of a recomputing stage; OFFLOAD(s,m) right after F(s,m) and RELOAD(s,m) before the
// backward of an offloading stage (one backward ahead on its device, so the copy can overlap).
// policies.size() must equal the schedule's stages; stages already holding such ops are left alone.
Result<Schedule> applyActivationPolicies(const Schedule& s, const std::vector<ActivationPolicy>& policies);

}  // namespace ps::core
