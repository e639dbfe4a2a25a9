#pragma once
// Megatron-LM's --pipeline-model-parallel-layout for a partition (docs/pytorch_csv.md,
// "Megatron-LM"). The grammar, as megatron/core/transformer/pipeline_parallel_layer_layout.py
// parses it: stages separated by '|', one letter per layer (E embedding, t transformer decoder
// layer, m multi-token-prediction layer, L loss: the output layer), `x*n` repeats a letter,
// `(...)*n` repeats a group (no nesting), commas are cosmetic. The list holds PP x VPP stages;
// stage k runs on pipeline rank k mod PP as its virtual stage k div PP (Megatron's interleaved
// placement). The embedding comes first, the loss last, each exactly once.
#include <string>
#include <string_view>
#include <vector>

#include "pipestudio/core/model/schedule.h"

namespace ps::core {

struct MegatronLayout {
  std::string layout;               // the flag's value, e.g. "Et*3|(t*4|)*2,t*3L"
  int pipelineParallelSize = 0;     // --pipeline-model-parallel-size
  int virtualStages = 1;            // per rank; Megatron derives it from the layout
  int decoderLayers = 0;            // --num-layers (the t's)
  int mtpLayers = 0;                // --mtp-num-layers (the m's), 0 when none
  std::vector<std::string> stages;  // each stage's letters, expanded ("Ettt")
};

// The layout of a model whose layers `layersPerStage` splits into stages placed by `pipeline`
// (its stage count must match). Layer 0 is the embedding, the last layer the loss layer, the
// others decoder layers, except that layers whose `layerNames` (a cost profile's names, may be
// empty) start with "mtp" are multi-token-prediction layers. Errors, code "megatron.*": a
// placement other than stage s on device s mod D, fewer than two layers, a hybrid (Mamba)
// model (Megatron lays those out with --hybrid-layer-pattern), MTP layers Megatron refuses
// where they are.
Result<MegatronLayout> megatronLayout(const std::vector<int>& layersPerStage, const Pipeline& pipeline,
                                      const std::vector<std::string>& layerNames = {});

// Expands a layout string as Megatron-LM reads it: one string of layer letters per stage.
// Errors name the first character Megatron would refuse.
Result<std::vector<std::string>> expandMegatronLayout(std::string_view layout);

}  // namespace ps::core
