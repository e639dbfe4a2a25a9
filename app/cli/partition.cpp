// pipestudio-cli partition: DawnPiper-style bisection partition of a profile's layers into
// stages with a keep / recompute / offload choice per stage (docs/search.md).
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/command.h"
#include "common/flags.h"
#include "common/profile_input.h"
#include "pipestudio/core/io/units.h"
#include "pipestudio/core/planning/partition_search.h"

namespace {

using namespace ps::core;
using ps::cli::readInt;

const char* kUsage =
    "usage: pipestudio-cli partition --profile P.json --stages S [--memory-limit BYTES] [--microbatches M]\n"
    "       [--microbatch-size B] [--no-recompute] [--no-offload] [--largest-microbatch-size] [--json]\n";

// --help: the usage lines (also shown after a usage error), then this.
const char* kHelp =
    "\nBisection on the bottleneck stage time: for each candidate time the layers are packed into\n"
    "contiguous stages, and each stage keeps, recomputes or offloads its activations so that its\n"
    "peak under 1F1B (min(M, S - s) micro-batches in flight on stage s) fits the memory limit\n"
    "(default: the profile's device memory). Prints the plan and, for comparison, the\n"
    "compute-balanced split that keeps every activation. --microbatch-size scales times and\n"
    "activation bytes (profiles are for size 1); --largest-microbatch-size reports the largest\n"
    "size that fits either way. BYTES accepts suffixes KiB MiB GiB TiB (powers of 1024) and\n"
    "K M G T, KB MB GB TB (powers of 1000).\n"
    "Exit status: 0 ok, 1 no partition fits or the profile is invalid, 2 usage.\n";

nlohmann::json planJson(const CostProfile& p, const PartitionPlan& plan) {
  nlohmann::json j;
  j["layers_per_stage"] = plan.layersPerStage;
  j["bottleneck_ms"] = plan.bottleneckMs;
  j["microbatch_size"] = plan.microbatchSize;
  j["memory_limit_bytes"] = plan.memoryLimitBytes;
  j["bisection_steps"] = plan.bisectionSteps;
  nlohmann::json stages = nlohmann::json::array();
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    const auto& sp = plan.stages[s];
    nlohmann::json st;
    st["stage"] = s;
    st["first_layer"] = sp.firstLayer;
    st["layers"] = sp.layerCount;
    st["first_layer_name"] = p.layers[static_cast<size_t>(sp.firstLayer)].name;
    st["last_layer_name"] = p.layers[static_cast<size_t>(sp.firstLayer + sp.layerCount - 1)].name;
    st["policy"] = std::string(activationPolicyName(sp.policy));
    st["time_ms"] = sp.timeMs;
    st["static_bytes"] = sp.staticBytes;
    st["peak_bytes"] = sp.peakBytes;
    st["inflight"] = sp.inflight;
    stages.push_back(st);
  }
  j["stages"] = stages;
  return j;
}

void printPlan(std::ostream& out, const CostProfile& p, const PartitionPlan& plan) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "%-6s %-28s %-10s %12s %12s %12s %8s\n", "stage", "layers", "policy",
                "time ms", "static", "peak", "inflight");
  out << buf;
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    const auto& sp = plan.stages[s];
    const std::string range = std::to_string(sp.firstLayer) + ".." +
                              std::to_string(sp.firstLayer + sp.layerCount - 1) + " (" +
                              p.layers[static_cast<size_t>(sp.firstLayer)].name + ".." +
                              p.layers[static_cast<size_t>(sp.firstLayer + sp.layerCount - 1)].name + ")";
    std::snprintf(buf, sizeof buf, "%-6zu %-28s %-10s %12.3f %12s %12s %8d\n", s, range.c_str(),
                  std::string(activationPolicyName(sp.policy)).c_str(), sp.timeMs,
                  formatByteSizeFixed(sp.staticBytes).c_str(), formatByteSizeFixed(sp.peakBytes).c_str(),
                  sp.inflight);
    out << buf;
  }
  std::snprintf(buf, sizeof buf, "bottleneck stage time %.3f ms (micro-batch size %d, %d bisection steps)\n",
                plan.bottleneckMs, plan.microbatchSize, plan.bisectionSteps);
  out << buf;
}

int runPartition(const ps::cli::Args& args, const ps::cli::Reporter& rep) {
  if (!args.positionals().empty() || !args.has("--profile") || !args.has("--stages"))
    return rep.usage("--profile and --stages are required");
  int code = ps::cli::kExitOk;
  auto profile = ps::cli::loadProfile(rep, args.value("--profile"), code);
  if (!profile) return code;
  PartitionOptions o;
  if (!readInt(args.value("--stages"), 1, o.stages) ||
      (args.has("--microbatches") && !readInt(args.value("--microbatches"), 1, o.microbatches)) ||
      (args.has("--microbatch-size") && !readInt(args.value("--microbatch-size"), 1, o.microbatchSize)))
    return rep.usage("--stages, --microbatches and --microbatch-size take positive integers");
  if (!ps::cli::memoryLimitFlag(args, rep, o.memoryLimitBytes)) return ps::cli::kExitUsage;
  o.allowRecompute = !args.has("--no-recompute");
  o.allowOffload = !args.has("--no-offload");

  auto plan = partitionBisection(*profile, o);
  // The reference: the compute-balanced split keeping every activation.
  PartitionOptions plain = o;
  plain.allowRecompute = plain.allowOffload = false;
  auto balancedSplit = partitionLayers(*profile, o.stages);
  std::optional<Result<PartitionPlan>> balanced;
  if (balancedSplit) balanced = planPartition(*profile, *balancedSplit, plain);

  std::optional<MicrobatchSizeResult> largest, largestBase;
  if (args.has("--largest-microbatch-size")) {
    PartitionOptions lo = o;
    lo.microbatchSize = 1;
    largest = largestMicrobatchSize(*profile, lo);
    PartitionOptions lb = plain;
    lb.microbatchSize = 1;
    largestBase = largestMicrobatchSizeFixed(*profile, {}, lb);
  }

  if (args.has("--json")) {
    nlohmann::json j;
    j["profile"] = profile->name;
    j["stages"] = o.stages;
    if (plan)
      j["plan"] = planJson(*profile, *plan);
    else
      j["error"] = plan.error().message;
    if (balanced) {
      if (*balanced)
        j["balanced_keep"] = planJson(*profile, **balanced);
      else
        j["balanced_keep"] = {{"error", balanced->error().message}};
    }
    if (largest) {
      j["largest_microbatch_size"] = largest->largestMicrobatchSize;
      j["largest_microbatch_size_balanced_keep"] = largestBase->largestMicrobatchSize;
    }
    std::cout << j.dump(2) << "\n";
  } else {
    if (plan) {
      std::cout << "bisection partition of " << profile->name << " into " << o.stages << " stages";
      if (plan->memoryLimitBytes > 0) std::cout << " under " << formatByteSizeFixed(plan->memoryLimitBytes);
      std::cout << ":\n";
      printPlan(std::cout, *profile, *plan);
    }
    if (balanced) {
      if (*balanced) {
        std::cout << "\ncompute-balanced split, keeping all activations:\n";
        printPlan(std::cout, *profile, **balanced);
      } else {
        std::cout << "\ncompute-balanced split, keeping all activations: " << balanced->error().message
                  << "\n";
      }
    }
    if (largest)
      std::cout << "\nlargest micro-batch size that fits: " << largest->largestMicrobatchSize
                << " with the bisection plan, " << largestBase->largestMicrobatchSize
                << " with the compute-balanced split keeping all activations\n";
  }
  return plan ? ps::cli::kExitOk : rep.fail(formatDiagnostics(plan.errors()), ps::cli::kExitInvalid);
}

const ps::cli::FlagCommandRegistrar kPartition(
    {"partition",
     "split a profile's layers into stages that fit memory (bisection partition)",
     std::string(kUsage) + kHelp,
     {"--profile", "--stages", "--memory-limit", "--microbatches", "--microbatch-size"},
     {"--json", "--no-recompute", "--no-offload", "--largest-microbatch-size"},
     {},
     runPartition,
     kUsage});

}  // namespace
