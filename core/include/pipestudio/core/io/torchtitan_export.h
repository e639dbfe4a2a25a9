#pragma once
// What torchtitan needs beside a schedule CSV (docs/pytorch_csv.md, "torchtitan"). Given
// `pipeline_parallel_schedule_csv`, torchtitan runs the file's order with PyTorch's
// _PipelineScheduleRuntime, loaded as compute_only and with scale_grads=False; which stages each
// rank builds it still takes from `pipeline_parallel_schedule`: two stages per rank for a
// multi-stage class (one for GPipe / 1F1B) unless the layers say otherwise, stage s on rank
// s mod D ("loop"), or stages d and 2D-1-d on rank d for ZBVZeroBubble and DualPipeV ("v").
// A CSV whose stages sit anywhere else cannot be built there; these functions say why.
#include <string>
#include <string_view>
#include <vector>

#include "pipestudio/core/model/schedule.h"

namespace ps::core {

struct TorchtitanSettings {
  int degree = 0;         // pipeline_parallel_degree (ranks)
  int stages = 0;         // S
  int stagesPerRank = 0;  // S / degree
  int microbatches = 0;   // num_pp_microbatches
  // pipeline_parallel_schedule: a class whose placement is the CSV's ("1F1B" for one stage per
  // rank, "Interleaved1F1B" for loops, "ZBVZeroBubble" for the V).
  std::string scheduleClass;
  std::string style;  // "loop" or "v"
  // From the schedule's partition (layers per stage), in the module names of torchtitan's
  // decoder models: layer 0 is tok_embeddings, the last is norm + lm_head, the others
  // layers.0, layers.1, ... Empty when the schedule has no partition.
  std::vector<std::vector<std::string>> moduleFqnsPerModelPart;
  // What is left to the user, one sentence each (e.g. how to get 3 stages per rank).
  std::vector<std::string> notes;
};

// The settings for `s` (a valid schedule). Errors, code "torchtitan.*", when torchtitan cannot
// build the pipeline: one rank, or a placement that is neither loop nor V (named with the first
// stage that differs).
Result<TorchtitanSettings> torchtitanSettings(const Schedule& s);

// The settings as TOML lines of torchtitan's [parallelism] section (the same fields are
// `--parallelism.<name>` flags and `config.parallelism.<name>` in a Python config), naming
// `csvPath` as pipeline_parallel_schedule_csv; comments say what the class stands for and
// carry the notes.
std::string torchtitanToml(const TorchtitanSettings& t, std::string_view csvPath);

}  // namespace ps::core
