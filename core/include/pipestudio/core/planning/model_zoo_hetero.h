#pragma once
// Analytic cost profiles of models whose layers differ (docs/search.md, "Model zoo"): a
// Gemma-style model (256k vocabulary: heavy embedding and LM head), a DeepSeek-style MoE
// (dense first layer, then MoE layers with expert compute and all-to-all), a
// Nemotron-H-style hybrid (Mamba-2, attention and MLP layers), and Llama-2 as the
// homogeneous reference. One layer per profile entry; costs for micro-batch size 1.
#include <string>
#include <vector>

#include "pipestudio/core/model/cost_profile.h"

namespace ps::core {

// The hardware and run the formulas assume: the dense generator's H100-class device
// (model_zoo.h), plus the expert-parallel all-to-all link.
struct ZooHardware {
  double gpuTflops = 989;          // dense bf16 peak
  double computeEfficiency = 0.5;  // fraction of peak the matmuls reach
  double hbmGBps = 3350;
  double linkGBps = 50;  // between pipeline stages, per direction
  double linkLatencyUs = 10;
  double hostGBps = 25;  // offload / reload copies
  double memoryGiB = 80;
  double expertLinkGBps = 450;  // NVLink all-to-all inside the expert-parallel group
  // Grouped GEMMs of many small experts reach this fraction of the dense matmul rate.
  double expertEfficiency = 0.75;
  int seqLength = 4096;
  int microbatchSize = 1;
};

CostProfile gemmaStyleProfile(const std::string& variant = "gemma-2b",
                              const ZooHardware& hw = {});      // "gemma-2b", "gemma-7b"
CostProfile deepseekStyleProfile(const ZooHardware& hw = {});   // "deepseek-v2-lite"
CostProfile nemotronHStyleProfile(const ZooHardware& hw = {});  // "nemotron-h-8b"
CostProfile llama2Profile(const ZooHardware& hw = {});          // "llama2-7b": the dense generator's preset

// Every profile above, named by its file stem under resources/profiles/.
std::vector<CostProfile> heterogeneousZoo(const ZooHardware& hw = {});

}  // namespace ps::core
