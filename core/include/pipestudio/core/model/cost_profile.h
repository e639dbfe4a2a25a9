#pragma once
// Cost profile (docs/formats.md): per-layer times and bytes, device memory, link and host
// bandwidth; mapped to per-stage costs by a partition (layers per stage).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipestudio/core/model/result.h"

namespace ps::core {

struct LayerCost {
  std::string name;
  double forwardMs = 0;
  double backwardInputMs = 0;
  double backwardWeightMs = 0;
  std::optional<double> recomputeMs;  // default: forwardMs
  std::int64_t activationBytes = 0;   // stashed from F until freed by its backward
  std::int64_t weightBytes = 0;
  std::int64_t outputBytes = 0;  // what crosses the link to the next stage
  // Part of activationBytes that W still needs after I (inputs of the layer's matmuls);
  // I frees the rest. Default: half of activationBytes.
  std::optional<std::int64_t> weightGradStashBytes;
  // Optimizer step over this layer's parameters, once per iteration (multi-iteration runs).
  double optimizerStepMs = 0;
};

struct LinkCost {
  double latencyMs = 0;
  double bandwidthBytesPerMs = 0;  // 0 = infinite
};

struct CostProfile {
  std::string name;
  std::vector<LayerCost> layers;
  double optimizerBytesPerWeightByte = 6;  // Adam fp32 states + master weights per weight byte
  double gradientBytesPerWeightByte = 1;
  std::int64_t deviceMemoryBytes = 0;  // 0 = unlimited
  LinkCost link;
  double hostBandwidthBytesPerMs = 0;  // offload / reload copies; 0 = infinite
  // PyTorch's UNSHARD (all-gather of a stage's weights) and REDUCE_GRAD (reduction of its
  // gradients) across the data-parallel group: effective bytes per ms; 0 = instantaneous.
  double dataParallelBandwidthBytesPerMs = 0;
  double overlapFactor = 1.0;         // overlapped F+B pair time = factor x (F + B)
  std::optional<double> fixedCommMs;  // --comm T: fixed time per cross-device transfer
};

// Costs of one stage after partitioning (sums over its layers).
struct StageCost {
  double F = 0, B = 0, I = 0, W = 0, R = 0;  // B = I + W
  double O = 0;  // optimizer step over the stage's parameters (optimizer_step_ms of its layers)
  std::int64_t activationBytes = 0;
  std::int64_t inputBytes = 0;  // the stage input (kept when recomputing)
  std::int64_t outputBytes = 0;
  std::int64_t weightBytes = 0;
  std::int64_t staticBytes = 0;           // weights + gradients + optimizer state
  std::int64_t weightGradStashBytes = 0;  // freed by W when the backward is split into I and W
  int firstLayer = 0;                     // layers [firstLayer, firstLayer + layerCount)
  int layerCount = 0;
};

Result<CostProfile> parseCostProfile(std::string_view json, const std::string& filename = "<profile>");
std::string costProfileToJson(const CostProfile& p);

// Uniform costs for quick studies: "F=1,I=1,W=1" (B defaults to I+W, R to F; B alone splits
// evenly into I and W). One layer per stage.
Result<CostProfile> uniformCostProfile(std::string_view spec, int stages);

// Layer -> stage mapping: explicit partition when given (layers per stage, must sum to the
// layer count), else one layer per stage when layers == stages, else contiguous layers
// balanced by F+I+W time. `unit` names what is partitioned in errors: "stages", or "model
// blocks" for a pipeline whose stages run copies of blocks (Pipeline::partitionUnit).
Result<std::vector<int>> partitionLayers(const CostProfile& p, int stages,
                                         const std::vector<int>& layersPerStage = {},
                                         std::string_view unit = "stages");
Result<std::vector<StageCost>> stageCosts(const CostProfile& p, int stages,
                                          const std::vector<int>& layersPerStage = {},
                                          std::string_view unit = "stages");

}  // namespace ps::core
