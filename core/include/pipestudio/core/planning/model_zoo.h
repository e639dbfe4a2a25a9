#pragma once
// Analytic cost profiles of dense decoder-only transformers from their public configs
// (docs/formats.md "Model zoo"): per-layer FLOPs and bytes, times from a roofline of the GPU's
// FLOP/s and memory bandwidth; the embedding and the LM head are layers of their own.
#include <string>
#include <string_view>
#include <vector>

#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/core/model/result.h"

namespace ps::core {

struct TransformerConfig {
  std::string name;
  int layers = 0;                  // transformer blocks
  int hidden = 0;                  // h
  int heads = 0;                   // a
  int seqLength = 0;               // s
  int vocab = 0;                   // V
  int microbatchSize = 1;          // b
  int dtypeBytes = 2;              // bf16 / fp16 = 2, fp32 = 4
  double gpuTflops = 0;            // peak dense TFLOP/s for the dtype
  double computeEfficiency = 0.5;  // fraction of peak the matmuls reach
  double hbmGBps = 0;              // GB/s (1e9 bytes/s)
  double linkGBps = 0;             // GB/s per direction between pipeline stages
  double linkLatencyUs = 10;
  double hostGBps = 25;         // offload / reload copies
  double memoryGiB = 80;        // device memory, GiB
  bool flashAttention = false;  // no s x s attention matrices stashed (drops the 5as/h term)
};

// FLOPs and bytes of one layer of the model (the numbers behind the profile).
struct LayerEstimate {
  std::string name;
  double forwardFlops = 0, backwardInputFlops = 0, backwardWeightFlops = 0;
  double weightBytes = 0, activationBytes = 0, weightGradStashBytes = 0, outputBytes = 0;
  // Memory traffic of each pass (the roofline's bytes).
  double forwardTraffic = 0, backwardInputTraffic = 0, backwardWeightTraffic = 0;
};

// "bf16", "fp16" -> 2; "fp32" -> 4.
Result<int> dtypeBytesFromName(std::string_view name);
// "gpt3-1.3b", "llama2-7b", "llama2-70b" on an 80 GB H100-class GPU.
Result<TransformerConfig> transformerPreset(std::string_view name);
std::vector<std::string> transformerPresetNames();

std::vector<LayerEstimate> transformerLayerEstimates(const TransformerConfig& c);
Result<CostProfile> transformerProfile(const TransformerConfig& c);

}  // namespace ps::core
