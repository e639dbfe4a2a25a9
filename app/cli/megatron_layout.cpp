// pipestudio-cli megatron-layout: Megatron-LM's --pipeline-model-parallel-layout for a
// schedule's partition (its stages placed as the schedule places them), or for a partition
// given on the command line.
#include "pipestudio/core/io/megatron_layout.h"

#include <iostream>

#include "common/command.h"
#include "common/flags.h"
#include "common/profile_input.h"
#include "common/schedule_input.h"

namespace {

using namespace ps::core;

const char* kUsage =
    "usage: pipestudio-cli megatron-layout FILE|- [--partition 1,4,4,3] [--profile P.json] [--set "
    "name=value]...\n"
    "       pipestudio-cli megatron-layout --partition 1,4,4,3 [--devices D] [--profile P.json]\n\n"
    "Prints the Megatron-LM flags that lay the model out as the schedule's partition does:\n"
    "--pipeline-model-parallel-size, --num-layers and --pipeline-model-parallel-layout (E\n"
    "embedding, t decoder layer, m MTP layer, L loss; stages split by '|'). The partition is\n"
    "--partition, else the .pipe header's; layer 0 is the embedding and the last layer the\n"
    "loss layer; with a cost profile (--profile, else the .pipe's), layers named mtp* are MTP\n"
    "layers and a hybrid (Mamba) model is refused. Megatron-LM runs stage k on rank k mod D,\n"
    "so other placements (the V) are refused with the reason. Without FILE, --devices (default:\n"
    "one stage each) gives the ranks; stage s runs on rank s mod D.\n"
    "Exit status: 0 ok, 1 Megatron-LM cannot take this layout (the reason on stderr), 2 usage.\n";

int runMegatronLayout(const ps::cli::Args& args, const ps::cli::Reporter& rep) {
  std::vector<int> partition;
  if (args.has("--partition")) {
    auto list = ps::cli::parseIntList(args.value("--partition"), 0);
    if (!list) return rep.usage("--partition is a comma-separated list of layers per stage, e.g. 1,4,4,3");
    partition = std::move(*list);
  }
  std::optional<Schedule> schedule;
  std::string schedulePath;
  if (!args.positionals().empty()) {
    if (args.has("--devices"))
      return rep.usage("--devices goes with --partition alone; FILE places its stages");
    schedulePath = args.positionals()[0];
    ScheduleLoadOptions options;
    options.overrides = args.values("--set");
    ps::cli::ScheduleInput input = ps::cli::readSchedule(rep, schedulePath, options, false);
    if (!input.schedule) return input.exitCode;
    schedule = std::move(input.schedule);
    if (partition.empty()) partition = schedule->partition;
    if (partition.empty())
      return rep.fail(
          schedulePath +
              ": the schedule has no partition (layers per stage): give --partition, or a .pipe whose "
              "header has one (`search -o` writes it)",
          ps::cli::kExitInvalid);
  } else {
    if (!args.values("--set").empty()) return rep.usage("--set applies to a FILE");
    if (partition.empty()) return rep.usage("give FILE or --partition");
  }

  Pipeline pipeline;
  if (schedule) {
    pipeline = schedule->pipeline;
  } else {
    const int stages = static_cast<int>(partition.size());
    int devices = stages;
    if (args.has("--devices")) {
      auto d = ps::cli::parseInt(args.value("--devices"), 1);
      if (!d) return rep.usage("--devices needs a positive number");
      devices = *d;
    }
    if (stages % devices != 0)
      return rep.fail(std::to_string(stages) + " stages do not divide over " + std::to_string(devices) +
                          " ranks (Megatron-LM gives every rank as many virtual stages)",
                      ps::cli::kExitInvalid);
    auto p = Pipeline::make(devices, stages, 1,
                            stages == devices ? PlacementKind::Linear : PlacementKind::Interleaved);
    if (!p.ok()) return rep.invalid(p.errors());
    pipeline = std::move(*p);
  }

  std::vector<std::string> names;
  std::string profilePath = args.value("--profile");
  if (profilePath.empty() && schedule && schedule->profile)
    profilePath = ps::cli::resolveProfilePath(*schedule->profile, schedulePath);
  if (!profilePath.empty()) {
    int code = ps::cli::kExitOk;
    auto profile = ps::cli::loadProfile(rep, profilePath, code);
    if (!profile) return code;
    for (const auto& l : profile->layers) names.push_back(l.name);
  }

  auto layout = megatronLayout(partition, pipeline, names);
  if (!layout.ok()) return rep.invalid(layout.errors());
  std::cout << "--pipeline-model-parallel-size " << layout->pipelineParallelSize << " --num-layers "
            << layout->decoderLayers;
  if (layout->mtpLayers > 0) std::cout << " --mtp-num-layers " << layout->mtpLayers;
  std::cout << " --pipeline-model-parallel-layout '" << layout->layout << "'\n";
  // What each rank builds, on stderr: the line above stays one copyable line.
  std::cerr << "megatron-layout: " << layout->stages.size() << " stages on " << layout->pipelineParallelSize
            << " ranks, " << layout->virtualStages << " virtual stage(s) each"
            << (names.empty()
                    ? " (no cost profile: layer 0 taken as the embedding, the last layer as the loss)"
                    : "")
            << "\n";
  for (size_t s = 0; s < layout->stages.size(); ++s)
    std::cerr << "  stage " << s << ": rank " << static_cast<int>(s) % layout->pipelineParallelSize
              << ", virtual stage " << static_cast<int>(s) / layout->pipelineParallelSize << ": "
              << (layout->stages[s].empty() ? "(empty)" : layout->stages[s]) << "\n";
  return ps::cli::kExitOk;
}

const ps::cli::FlagCommandRegistrar kMegatronLayout(
    {"megatron-layout",
     "print Megatron-LM's pipeline layout for a schedule's partition",
     kUsage,
     {"--partition", "--profile", "--devices", "--set"},
     {},
     {0, 1, "expected at most one FILE"},
     runMegatronLayout});

}  // namespace
