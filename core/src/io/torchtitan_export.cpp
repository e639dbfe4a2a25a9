#include "pipestudio/core/io/torchtitan_export.h"

#include <algorithm>
#include <string>

#include "pipestudio/core/analysis/pytorch_lowering.h"

namespace ps::core {

namespace {

// Where torchtitan puts stage s in each style (its _get_pp_rank_to_stage_indices_mapping).
int loopRank(int stage, int degree) {
  return stage % degree;
}
int vRank(int stage, int degree) {
  return stage < degree ? stage : 2 * degree - 1 - stage;
}

// The first stage whose device differs from `rankOf`'s, or -1.
template <typename F>
int firstMismatch(const Pipeline& p, F rankOf) {
  for (int s = 0; s < p.stages; ++s)
    if (p.deviceOf(s) != rankOf(s)) return s;
  return -1;
}

std::string tomlString(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

}  // namespace

Result<TorchtitanSettings> torchtitanSettings(const Schedule& s) {
  PS_TRY(checkPytorchHasNoRoutes(s));
  const Pipeline& p = s.pipeline;
  const int D = p.devices, S = p.stages;
  if (D < 2)
    return makeError("torchtitan.degree", "the schedule has " + std::to_string(D) +
                                              " device; torchtitan turns pipeline parallelism off at "
                                              "pipeline_parallel_degree 1");
  TorchtitanSettings t;
  t.degree = D;
  t.stages = S;
  t.microbatches = p.microbatches;
  const int loopAt = S % D == 0 ? firstMismatch(p, [&](int st) { return loopRank(st, D); }) : 0;
  const int vAt = S == 2 * D ? firstMismatch(p, [&](int st) { return vRank(st, D); }) : 0;
  if (S % D == 0 && loopAt < 0) {
    t.style = "loop";
  } else if (S == 2 * D && vAt < 0) {
    t.style = "v";
  } else {
    std::string why;
    if (S % D != 0) {
      why = std::to_string(S) + " stages do not divide over " + std::to_string(D) +
            " ranks (torchtitan builds the same number of stages on every rank)";
    } else {
      // Name the stage that breaks the nearer of the two styles.
      const int at = S == 2 * D ? std::max(loopAt, vAt) : loopAt;
      why = "stage " + std::to_string(at) + " is on device " + std::to_string(p.deviceOf(at)) +
            ", where torchtitan's loop placement puts it on rank " + std::to_string(loopRank(at, D));
      if (S == 2 * D) why += " and its V placement on rank " + std::to_string(vRank(at, D));
    }
    return makeError(
        "torchtitan.placement",
        "torchtitan cannot build this placement (" + std::string(placementKindName(p.placementKind)) +
            "): " + why +
            ". It builds stage s on rank s mod D (loop schedules), or stages d and 2D-1-d on rank d "
            "(ZBVZeroBubble, DualPipeV)");
  }
  t.stagesPerRank = S / D;
  if (t.style == "v")
    t.scheduleClass = "ZBVZeroBubble";
  else
    t.scheduleClass = t.stagesPerRank == 1 ? "1F1B" : "Interleaved1F1B";

  if (!s.partition.empty() && static_cast<int>(s.partition.size()) == S) {
    int layers = 0;
    for (int n : s.partition) layers += n;
    if (layers >= 2) {
      int layer = 0;
      for (int n : s.partition) {
        std::vector<std::string> part;
        for (int k = 0; k < n; ++k, ++layer) {
          if (layer == 0) {
            part.push_back("tok_embeddings");
          } else if (layer == layers - 1) {
            part.push_back("norm");
            part.push_back("lm_head");
          } else {
            part.push_back("layers." + std::to_string(layer - 1));
          }
        }
        t.moduleFqnsPerModelPart.push_back(std::move(part));
      }
    } else {
      t.notes.push_back("the partition holds " + std::to_string(layers) +
                        " layer(s), too few to name an embedding and an output; module_fqns_per_model_part "
                        "is left out");
    }
  }
  if (t.moduleFqnsPerModelPart.empty() && t.stagesPerRank > 2)
    t.notes.push_back(
        "torchtitan builds 2 stages per rank for a multi-stage class; for " +
        std::to_string(t.stagesPerRank) +
        " set pipeline_parallel_layers_per_stage to n with ceil((n_layers + "
        "pipeline_parallel_first_stage_less_layers + pipeline_parallel_last_stage_less_layers) / n) = " +
        std::to_string(S) + ", or list module_fqns_per_model_part with " + std::to_string(S) + " parts");
  return t;
}

std::string torchtitanToml(const TorchtitanSettings& t, std::string_view csvPath) {
  std::string out;
  out += "# torchtitan: runs " + std::string(csvPath) +
         " with PyTorch's _PipelineScheduleRuntime (loaded as compute_only).\n";
  out += "# pipeline_parallel_schedule only decides which stages each rank builds: ";
  if (t.style == "v")
    out += "V-shape, rank d builds stages d and " + std::to_string(t.stages - 1) + " - d.\n";
  else if (t.stagesPerRank == 1)
    out += "one per rank, stage d on rank d.\n";
  else
    out += "loop, rank d builds stages d, d + " + std::to_string(t.degree) + ", ... (" +
           std::to_string(t.stagesPerRank) + " per rank).\n";
  out += "[parallelism]\n";
  out += "pipeline_parallel_degree = " + std::to_string(t.degree) + "\n";
  out += "pipeline_parallel_schedule = " + tomlString(t.scheduleClass) + "\n";
  out += "pipeline_parallel_schedule_csv = " + tomlString(csvPath) + "\n";
  out += "num_pp_microbatches = " + std::to_string(t.microbatches) + "\n";
  if (!t.moduleFqnsPerModelPart.empty()) {
    out += "# the schedule's partition, in torchtitan's decoder module names\n";
    out += "module_fqns_per_model_part = [\n";
    for (const auto& part : t.moduleFqnsPerModelPart) {
      out += "  [";
      for (size_t i = 0; i < part.size(); ++i) out += (i ? ", " : "") + tomlString(part[i]);
      out += "],\n";
    }
    out += "]\n";
  }
  for (const auto& n : t.notes) out += "# note: " + n + "\n";
  return out;
}

}  // namespace ps::core
