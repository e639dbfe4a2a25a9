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

#include "pipestudio/core/analysis/iterations.h"
#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/core/model/result.h"
#include "pipestudio/core/model/schedule.h"
#include "pipestudio/core/model/timeline.h"
#include "pipestudio/core/planning/generators.h"
#include "pipestudio/core/planning/list_scheduler.h"
#include "pipestudio/core/planning/partition_search.h"

namespace ps::core {

// ---- search ---------------------------------------------------------------------------

// What the search minimises. Makespan: one iteration, first start to last end. SteadyState:
// the iteration time of a long run (K iterations back to back with SearchOptions::boundary;
// docs/search.md "Objective"). Ties on the objective go to the lower peak memory, then the
// lower bubble ratio.
enum class SearchObjective : std::uint8_t { Makespan, SteadyState };
std::string_view searchObjectiveName(SearchObjective o);  // "makespan", "steady-state"
std::optional<SearchObjective> searchObjectiveFromName(std::string_view name);

struct SearchProgress {
  std::size_t evaluated = 0;  // candidates simulated so far
  double bestMakespan = 0;    // ms; 0 before the first feasible candidate
  double bestObjective = 0;   // the best's objective value (ms): makespan or steady-state time
  std::string bestDescription;
  double elapsedSeconds = 0;
  std::string phase;  // "built-ins", "partitions", "list scheduler", "local improvement"
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
  int maxChunks = 2;  // stages per device explored: 1..maxChunks
  bool allowRecompute = true;
  bool allowOffload = true;
  // Built-ins with route groups (DualPipe: a copy of every stage per direction, twice the
  // parameters) are candidates too; they have no PyTorch form, so a search for a schedule to
  // export to PyTorch turns them off.
  bool allowRoutes = true;
  int randomSamples = 150;  // seeded knob samples (per-device warm-up depths) around the best point
  bool localImprovement = true;
  int localImprovementRounds = 200;
  std::size_t keepTop = 10;  // candidates kept in SearchResult::top
  SearchObjective objective = SearchObjective::Makespan;
  // Steady-state objective: the boundary between iterations and how many are simulated (the
  // steady-state time is the difference of the last two iterations' ends).
  IterationBoundary boundary = IterationBoundary::Overlap;
  int iterations = 3;
  std::optional<double> optimizerStepMs;                // per stage; unset = the profile's optimizer_step_ms
  const std::atomic<bool>* cancel = nullptr;            // set to true to stop; the best so far is returned
  std::function<void(const SearchProgress&)> progress;  // called from the searching thread
};

// How a candidate's schedule is made, as data: which family built it with which knobs, on
// which sizes, layout and split, plus the local-improvement moves applied after. The search
// fills it for every candidate; rebuildCandidate turns it back into the identical schedule,
// so a GUI opens any candidate without reading its display name.
enum class CandidateSource : std::uint8_t {
  Builtin,        // generateSchedule(builtin), then activation policies when any is not Keep
  ListScheduler,  // listSchedule(list) on the layout and split
  ZbGreedy,       // Zero Bubble's greedy on a linear split (zbGreedy flags)
  ZbvGreedy       // Zero Bubble's ZB-V greedy on a V-shape split (zbvFillF, zbvFillB)
};
std::string_view candidateSourceName(CandidateSource s);  // "builtin", "list", "zb-greedy", "zbv-greedy"

// One local-improvement step: the op at `from` in `device`'s order moved to `to`.
struct OrderMove {
  int device = 0;
  std::size_t from = 0;
  std::size_t to = 0;
  friend bool operator==(const OrderMove&, const OrderMove&) = default;
};

struct CandidateRecipe {
  CandidateSource source = CandidateSource::Builtin;
  int devices = 1;
  int microbatches = 1;
  int chunks = 1;  // stages per device
  PlacementKind placement = PlacementKind::Linear;
  std::vector<int> partition;  // layers per stage
  std::string splitName;       // how the split was chosen ("bisection", "balanced", ...); display only
  // Builtin: the generator and the per-stage policies applied to its order (all Keep = none).
  ScheduleKind builtin = ScheduleKind::OneFOneB;
  std::vector<ActivationPolicy> policies;
  // ListScheduler: the scheduler's options in full (policies and memory limit included).
  ListSchedulerOptions list;
  // ZbGreedy: Zero Bubble's three flags; ZbvGreedy: its two fill flags.
  bool zbAllowBubbleBeforeFirstB = false;
  bool zbPrioritizeB = false;
  bool zbNoBubbleGreedy = false;
  bool zbvFillF = false;
  bool zbvFillB = false;
  std::int64_t memoryLimitBytes = 0;  // the greedy builders' limit; <= 0 = none
  std::vector<OrderMove> moves;       // local improvement, applied in order after the build
};

// The recipe's schedule, identical to the one the search simulated for it (partition in its
// header). Errors when the recipe does not fit the profile (a split of other layers, sizes a
// generator refuses, a move out of range).
Result<Schedule> rebuildCandidate(const CostProfile& profile, const CandidateRecipe& recipe);

// The knobs of a recipe in words, without the layout and split ("I/W, pending W 4, warm-up +2,
// group 4", "early F, backward first"); empty for a built-in. Candidate names use it.
std::string recipeKnobsText(const CandidateRecipe& recipe);

// One evaluated candidate.
struct CandidateSummary {
  std::string name;    // "zb-h1", "list(split, pendW=2, group=4) on balanced x2 interleaved"
  std::string family;  // built-in kind name or "list", "list+local"
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
  double objective = 0;  // the value the search minimised: makespan or steadyStateMs
  bool fitsMemory = true;
  bool valid = true;       // validateSchedule and a complete simulation
  std::string note;        // why a built-in failed (memory, sizes), empty otherwise
  CandidateRecipe recipe;  // how to build it again (rebuildCandidate)
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
  int iterations = 1;                                       // iterations simulated per candidate
  std::vector<std::string> notes;  // choices the search made for the user (e.g. offload refused)
  Schedule best;                   // with partition and placement in its header
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
