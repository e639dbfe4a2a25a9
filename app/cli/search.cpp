// pipestudio-cli search: automated schedule, partition and placement search (docs/search.md).
#include "pipestudio/core/planning/search.h"

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/command.h"
#include "common/flags.h"
#include "common/profile_input.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/io/units.h"

namespace {

using namespace ps::core;
using ps::cli::readInt;

const char* kUsage =
    "usage: pipestudio-cli search --profile P.json --devices D --microbatches M [--memory-limit BYTES]\n"
    "       [--time-limit S] [--seed N] [--max-chunks C] [--max-evaluations N] [--no-recompute]\n"
    "       [--no-offload] [--no-routes] [--no-local] [--objective makespan|steady-state]\n"
    "       [--boundary overlap|sync]\n"
    "       [--iterations K] [--optimizer-step MS] [-o best.pipe] [--json]\n";

// --help: the usage lines (also shown after a usage error), then this.
const char* kHelp =
    "\nEvaluates every built-in schedule on the profile's compute-balanced split, then explores\n"
    "partitions (bisection with per-stage recompute / offload), placements (linear, interleaved,\n"
    "V-shape with up to C chunks per device), list-scheduler knobs, partition refinement and\n"
    "local moves of ops into bubbles, all on the simulator. Prints the best schedule's makespan,\n"
    "bubble ratio and peak memory beside every built-in's (\"vs best\" = its makespan over the\n"
    "best's), and with -o writes the best as a .pipe file whose header carries the partition and\n"
    "placement (-o - writes it to stdout and the report to stderr). Defaults: --time-limit 10,\n"
    "--seed 1, --max-chunks 2, memory limit = the profile's device memory. Deterministic for a\n"
    "seed unless the time limit cuts the search short (--max-evaluations caps it exactly).\n"
    "--objective steady-state minimises the iteration time of a long run instead: K iterations\n"
    "(--iterations, default 3) back to back with the --boundary (overlap: each device starts its\n"
    "next iteration after its own optimizer step; sync: after all devices finish), the time being\n"
    "the last iteration's end minus the one before. Equal objectives are ordered by peak memory,\n"
    "then bubble ratio. Offload is not considered when the profile has no host bandwidth.\n"
    "DualPipe (two directions, a copy of every stage per direction: twice the parameters) is a\n"
    "built-in candidate where memory allows, beside DualPipe-V; --no-routes leaves it out (it has\n"
    "no PyTorch CSV form).\n"
    "Exit status: 0 ok, 1 invalid profile or nothing fits, 2 usage.\n";

nlohmann::json candidateJson(const CandidateSummary& c, double bestObjective, bool steady) {
  nlohmann::json j;
  j["name"] = c.name;
  j["family"] = c.family;
  j["builtin"] = c.builtin;
  j["chunks"] = c.chunks;
  j["placement"] = std::string(placementKindName(c.placement));
  j["partition"] = c.partition;
  std::vector<std::string> pol;
  for (auto p : c.policies) pol.emplace_back(activationPolicyName(p));
  j["policies"] = pol;
  j["valid"] = c.valid;
  if (c.valid) {
    j["fits_memory"] = c.fitsMemory;
    j["makespan_ms"] = c.makespan;
    if (steady) {
      j["steady_state_ms"] = c.steadyStateMs;
      j["max_stage_span_ms"] = c.maxStageSpanMs;
    }
    j["objective_ms"] = c.objective;
    j["bubble_ratio"] = c.bubbleRatio;
    j["peak_memory_bytes"] = c.peakMemoryBytes;
    if (c.objective > 0 && c.fitsMemory) j["speedup_of_best"] = c.objective / bestObjective;
  } else {
    // Never built or never finished: nothing is known about its time or memory.
    j["fits_memory"] = nullptr;
    j["makespan_ms"] = nullptr;
    j["absent_because"] = c.note.empty() ? std::string("it could not be built") : c.note;
  }
  if (!c.note.empty()) j["note"] = c.note;
  return j;
}

void printRow(std::ostream& out, const CandidateSummary& c, double best, bool steady) {
  char buf[512];
  if (!c.valid) {
    std::snprintf(buf, sizeof buf, "  %-28s not built: %s\n", c.name.c_str(), c.note.c_str());
  } else {
    const std::string vs =
        c.fitsMemory && c.objective > 0 ? (std::to_string(c.objective / best).substr(0, 5) + "x") : "-";
    if (steady)
      std::snprintf(buf, sizeof buf, "  %-28s %12.3f %12.3f %12.3f %12s %8.3f %6s %9s\n", c.name.c_str(),
                    c.steadyStateMs, c.maxStageSpanMs, c.makespan,
                    formatByteSizeFixed(c.peakMemoryBytes).c_str(), c.bubbleRatio,
                    c.fitsMemory ? "yes" : "NO", vs.c_str());
    else
      std::snprintf(buf, sizeof buf, "  %-28s %12.3f %12s %8.3f %6s %9s\n", c.name.c_str(), c.makespan,
                    formatByteSizeFixed(c.peakMemoryBytes).c_str(), c.bubbleRatio,
                    c.fitsMemory ? "yes" : "NO", vs.c_str());
  }
  out << buf;
}

int runSearch(const ps::cli::Args& args, const ps::cli::Reporter& rep) {
  auto usage = [&](const std::string& message) { return rep.usage(message); };
  if (!args.positionals().empty() || !args.has("--profile") || !args.has("--devices") ||
      !args.has("--microbatches"))
    return usage("--profile, --devices and --microbatches are required");
  const std::string profilePath = args.value("--profile");
  int code = ps::cli::kExitOk;
  auto profile = ps::cli::loadProfile(rep, profilePath, code);
  if (!profile) return code;
  SearchOptions o;
  int seed = 1, maxEval = 0;
  if (!readInt(args.value("--devices"), 1, o.devices) ||
      !readInt(args.value("--microbatches"), 1, o.microbatches) ||
      !readInt(args.value("--seed", "1"), 0, seed) ||
      !readInt(args.value("--max-chunks", "2"), 1, o.maxChunks) ||
      !readInt(args.value("--max-evaluations", "0"), 0, maxEval))
    return usage(
        "--devices, --microbatches, --seed, --max-chunks and --max-evaluations take non-negative integers");
  o.seed = static_cast<std::uint64_t>(seed);
  o.maxEvaluations = static_cast<std::size_t>(maxEval);
  if (args.has("--time-limit")) {
    auto seconds = ps::cli::parseNumber(args.value("--time-limit"));
    if (!seconds || !(*seconds > 0)) return rep.fail("--time-limit takes a positive number of seconds");
    o.timeLimitSeconds = *seconds;
  }
  if (!ps::cli::memoryLimitFlag(args, rep, o.memoryLimitBytes)) return ps::cli::kExitUsage;
  o.allowRecompute = !args.has("--no-recompute");
  o.allowOffload = !args.has("--no-offload");
  o.allowRoutes = !args.has("--no-routes");
  o.localImprovement = !args.has("--no-local");
  if (args.has("--objective")) {
    auto obj = searchObjectiveFromName(args.value("--objective"));
    if (!obj) return usage("--objective: expected makespan or steady-state");
    o.objective = *obj;
  }
  const bool steady = o.objective == SearchObjective::SteadyState;
  if ((args.has("--boundary") || args.has("--iterations") || args.has("--optimizer-step")) && !steady)
    return usage("--boundary, --iterations and --optimizer-step belong to --objective steady-state");
  if (args.has("--boundary")) {
    auto b = iterationBoundaryFromName(args.value("--boundary"));
    if (!b) return usage("--boundary: expected overlap or sync");
    o.boundary = *b;
  }
  if (args.has("--iterations") &&
      (!readInt(args.value("--iterations"), 2, o.iterations) || o.iterations > 64))
    return usage("--iterations: expected a whole number from 2 to 64");
  if (args.has("--optimizer-step")) {
    auto v = ps::cli::parseMs(args.value("--optimizer-step"));
    if (!v) return rep.fail("--optimizer-step takes a non-negative number of ms");
    o.optimizerStepMs = *v;
  }
  auto r = searchSchedule(*profile, o);
  if (!r) return rep.fail(formatDiagnostics(r.errors()), ps::cli::kExitInvalid);
  Schedule best = r->best;
  const std::string outPath = args.value("-o");
  // The .pipe names its profile relative to itself, so the two can move together.
  best.profile = outPath.empty() ? profilePath : profileReferenceFor(profilePath, outPath);
  best.name = "search";
  const bool dslToStdout = outPath == "-";
  std::ostream& report = dslToStdout ? std::cerr : std::cout;
  const double bestMs = r->bestSummary.objective;
  const std::string objectiveText =
      steady ? "steady-state iteration time (" + std::to_string(r->iterations) + " iterations, " +
                   std::string(iterationBoundaryName(r->boundary)) + " boundary)"
             : std::string("makespan of one iteration");

  if (args.has("--json")) {
    nlohmann::json j;
    j["profile"] = profile->name;
    j["devices"] = o.devices;
    j["microbatches"] = o.microbatches;
    const std::int64_t limit = o.memoryLimitBytes.value_or(profile->deviceMemoryBytes);
    j["memory_limit_bytes"] = limit;
    j["seed"] = o.seed;
    j["objective"] = std::string(searchObjectiveName(r->objective));
    if (steady) {
      j["boundary"] = std::string(iterationBoundaryName(r->boundary));
      j["iterations"] = r->iterations;
    }
    j["order"] = {steady ? "steady_state_ms" : "makespan_ms", "peak_memory_bytes", "bubble_ratio"};
    j["notes"] = r->notes;
    j["evaluated"] = r->evaluated;
    j["elapsed_s"] = r->elapsedSeconds;
    j["timed_out"] = r->timedOut;
    j["best"] = candidateJson(r->bestSummary, bestMs, steady);
    j["best"]["stages"] = best.pipeline.stages;
    j["best"]["stage_to_device"] = best.pipeline.stageToDevice;
    nlohmann::json b = nlohmann::json::array();
    for (auto& c : r->builtins) b.push_back(candidateJson(c, bestMs, steady));
    j["builtins"] = b;
    nlohmann::json t = nlohmann::json::array();
    for (auto& c : r->top) t.push_back(candidateJson(c, bestMs, steady));
    j["top"] = t;
    report << j.dump(2) << "\n";
  } else {
    char buf[256];
    report << "search over " << profile->name << ": " << o.devices << " devices, " << o.microbatches
           << " micro-batches";
    const std::int64_t limit = o.memoryLimitBytes.value_or(profile->deviceMemoryBytes);
    if (limit > 0) report << ", memory limit " << formatByteSizeFixed(limit);
    std::snprintf(buf, sizeof buf, "; %zu candidates in %.2f s%s\n", r->evaluated, r->elapsedSeconds,
                  r->timedOut ? " (time limit reached)" : "");
    report << buf;
    report << "objective: " << objectiveText
           << "; ties go to the lower peak memory, then the lower bubble ratio\n";
    for (const auto& n : r->notes) report << "note: " << n << "\n";
    report << "best: " << r->bestSummary.name << "\n";
    report << "  partition";
    for (int c : best.partition) report << " " << c;
    report << "; placement " << placementKindName(best.pipeline.placementKind) << " (";
    for (size_t s = 0; s < best.pipeline.stageToDevice.size(); ++s)
      report << (s ? " " : "") << best.pipeline.stageToDevice[s];
    report << ")\n\n";
    if (steady)
      std::snprintf(buf, sizeof buf, "  %-28s %12s %12s %12s %12s %8s %6s %9s\n", "schedule", "steady ms",
                    "max span ms", "makespan ms", "peak mem", "bubble", "fits", "vs best");
    else
      std::snprintf(buf, sizeof buf, "  %-28s %12s %12s %8s %6s %9s\n", "schedule", "makespan ms", "peak mem",
                    "bubble", "fits", "vs best");
    report << buf;
    CandidateSummary bs = r->bestSummary;
    bs.name = "search (best)";
    printRow(report, bs, bestMs, steady);
    for (auto& c : r->builtins) printRow(report, c, bestMs, steady);
  }
  if (!outPath.empty() && !rep.write(outPath, printDsl(best))) return ps::cli::kExitUsage;
  return ps::cli::kExitOk;
}

const ps::cli::FlagCommandRegistrar kSearch(
    {"search",
     "find a fast schedule, partition and placement for a profile",
     std::string(kUsage) + kHelp,
     {"--profile", "--devices", "--microbatches", "--memory-limit", "--time-limit", "--seed", "--max-chunks",
      "--max-evaluations", "-o", "--objective", "--boundary", "--iterations", "--optimizer-step"},
     {"--json", "--no-recompute", "--no-offload", "--no-routes", "--no-local"},
     {},
     runSearch,
     kUsage});

}  // namespace
