#pragma once
// Automated schedule search (docs/search.md): FlexPipe's exploration of schedule families
// and their knobs, a list scheduler that builds per-device orders op by op, simulator-guided
// local improvement, and AdaPtis's joint search of partition, placement and schedule.
// Everything is evaluated by the simulator. Results are immutable value structs so a GUI can
// receive them from a worker thread.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/core/analysis/iterations.h"
#include "pipestudio/core/planning/partition_search.h"
#include "pipestudio/core/model/result.h"
#include "pipestudio/core/model/schedule.h"
#include "pipestudio/core/model/timeline.h"

namespace ps::core {

// ---- list scheduler -------------------------------------------------------------------

// Knobs of the list scheduler. It replays the pipeline in time: whenever a device is free
// it starts the ready op of highest priority: backward (I or B) first, then forward while
// the device's warm-up depth and memory headroom allow, then recompute, then pending W.
struct ListSchedulerOptions {
  bool splitBackward = true;   // I + W (zero-bubble) rather than full B
  int maxPendingW = -1;        // W deferred at most this many per device before it takes priority; -1 = unbounded
  // Forward micro-batch-stages a device may hold before it must run a backward; empty =
  // 1F1B depth (devices - d) x chunks per device. warmupOffset is added to every device.
  std::vector<int> warmupDepth;
  int warmupOffset = 0;
  // Order among ready ops of one kind on a device: key (m / group, chunk, m % group), chunks
  // ascending for forwards and descending for backwards; group = devices is Megatron's
  // interleaving, 1 is depth first. 0 = devices.
  int microbatchGroup = 0;
  std::vector<ActivationPolicy> policies;  // per stage; empty = keep all
  // Per micro-batch recompute chosen by memory headroom: a forward of a Keep stage keeps its
  // activations when the device has room for them (plus a rebuild still pending), otherwise it
  // stashes only its input and gets an R before its backward. Recompute and Offload stages
  // keep their fixed policy. Off = every micro-batch follows its stage's policy.
  bool recomputeOnDemand = false;
  std::optional<std::int64_t> memoryLimitBytes;  // headroom check for forwards; unset = profile's
  // Schedule-level knob the GUI shows as "what differs"; free text.
  std::string label;
};

// Builds an order for the given pipeline and stage costs. Always returns a complete,
// dependency-respecting schedule (the memory headroom is advisory: when no op fits it runs
// the forward that unblocks the pipeline and lets the simulator judge the memory).
Result<Schedule> listSchedule(const Pipeline& pipeline, const std::vector<StageCost>& stages,
                              const CostProfile& profile, const ListSchedulerOptions& o);

// ---- search ---------------------------------------------------------------------------

// What the search minimises. Makespan: one iteration, first start to last end. SteadyState:
// the iteration time of a long run (K iterations back to back with SearchOptions::boundary;
// docs/search.md "Objective"). Ties on the objective go to the lower peak memory, then the
// lower bubble ratio.
enum class SearchObjective : std::uint8_t { Makespan, SteadyState };
std::string_view searchObjectiveName(SearchObjective o);  // "makespan", "steady-state"
std::optional<SearchObjective> searchObjectiveFromName(std::string_view name);

struct SearchProgress {
  std::size_t evaluated = 0;     // candidates simulated so far
  double bestMakespan = 0;       // ms; 0 before the first feasible candidate
  double bestObjective = 0;      // the best's objective value (ms): makespan or steady-state time
  std::string bestDescription;
  double elapsedSeconds = 0;
  std::string phase;             // "built-ins", "partitions", "list scheduler", "local improvement"
};

struct SearchOptions {
  int devices = 1;
  int microbatches = 1;
  std::optional<std::int64_t> memoryLimitBytes;  // overrides the profile's device memory
  double timeLimitSeconds = 10;  // wall clock; the best found so far is returned when it runs out
  std::uint64_t seed = 1;
  // Exact reproducibility: stop after this many simulated candidates (0 = no cap). A run that
  // ends by its evaluation cap or its own exhaustion is deterministic for a seed; one cut by
  // the time limit returns the best of what it reached.
  std::size_t maxEvaluations = 0;
  int maxChunks = 2;             // stages per device explored: 1..maxChunks
  bool allowRecompute = true;
  bool allowOffload = true;
  int randomSamples = 150;       // seeded knob samples (per-device warm-up depths) around the best point
  bool localImprovement = true;
  int localImprovementRounds = 200;
  std::size_t keepTop = 10;      // candidates kept in SearchResult::top
  SearchObjective objective = SearchObjective::Makespan;
  // Steady-state objective: the boundary between iterations and how many are simulated (the
  // steady-state time is the difference of the last two iterations' ends).
  IterationBoundary boundary = IterationBoundary::Overlap;
  int iterations = 3;
  std::optional<double> optimizerStepMs;  // per stage; unset = the profile's optimizer_step_ms
  const std::atomic<bool>* cancel = nullptr;      // set to true to stop; the best so far is returned
  std::function<void(const SearchProgress&)> progress;  // called from the searching thread
};

// One evaluated candidate.
struct CandidateSummary {
  std::string name;         // "zb-h1", "list(split, pendW=2, group=4) on balanced x2 interleaved"
  std::string family;       // built-in kind name or "list", "list+local"
  bool builtin = false;
  int chunks = 1;
  PlacementKind placement = PlacementKind::Linear;
  std::vector<int> partition;  // layers per stage
  std::vector<ActivationPolicy> policies;
  double makespan = 0;
  double bubbleRatio = 0;
  std::int64_t peakMemoryBytes = 0;  // max over devices (over all simulated iterations)
  // Steady-state objective only (0 otherwise): the iteration time of a long run and the
  // longest per-device span of one iteration (first op start to last op end).
  double steadyStateMs = 0;
  double maxStageSpanMs = 0;
  double objective = 0;     // the value the search minimised: makespan or steadyStateMs
  bool fitsMemory = true;
  bool valid = true;        // validateSchedule and a complete simulation
  std::string note;         // why a built-in failed (memory, sizes), empty otherwise
  // The candidate's schedule (partition and placement in its header) where the search keeps
  // it (entries of SearchResult::top), so a GUI can open any of them; null when not kept.
  std::shared_ptr<const Schedule> schedule;
};

// The search's order: lower objective first (equal within 1e-9 relative), then lower peak
// memory, then lower bubble ratio. True when `a` comes before `b`.
bool candidateBefore(const CandidateSummary& a, const CandidateSummary& b);

struct SearchResult {
  SearchObjective objective = SearchObjective::Makespan;
  IterationBoundary boundary = IterationBoundary::Overlap;  // steady-state objective only
  int iterations = 1;       // iterations simulated per candidate
  std::vector<std::string> notes;  // choices the search made for the user (e.g. offload refused)
  Schedule best;            // with partition and placement in its header
  CandidateSummary bestSummary;
  std::vector<CandidateSummary> builtins;  // every built-in family tried, feasible or not
  std::vector<CandidateSummary> top;       // best distinct feasible candidates, best first
  std::size_t evaluated = 0;
  double elapsedSeconds = 0;
  bool cancelled = false;
  bool timedOut = false;
};

// Errors when nothing (not even a built-in with full recompute) fits or the sizes are
// invalid. The best is never worse than the best feasible built-in.
Result<SearchResult> searchSchedule(const CostProfile& profile, const SearchOptions& o);

// Layers per stage with equal layer counts (the first `layers % stages` stages get one more):
// Megatron's uniform split.
std::vector<int> uniformPartition(int layers, int stages);

}  // namespace ps::core
