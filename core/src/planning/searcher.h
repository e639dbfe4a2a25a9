#pragma once
// The search's state and phases (search.cpp: candidates, built-ins and exploration;
// search_refine.cpp: knob samples and the refinement phases). Internal to core.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "pipestudio/core/analysis/iterations.h"
#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/analysis/validator.h"
#include "pipestudio/core/planning/search.h"

namespace ps::core::detail {

using Clock = std::chrono::steady_clock;

// "keep", "recompute 2/8, offload 1/8": how many stages recompute or offload.
std::string policySummary(const std::vector<ActivationPolicy>& p);
std::string joinPartition(const std::vector<int>& v);
// Different knobs often give the same order: a hash of the split and every device's order
// lets each distinct schedule be simulated once.
std::size_t orderHash(const std::vector<int>& partition, const Schedule& s);

struct Layout {
  int chunks = 1;
  PlacementKind placement = PlacementKind::Linear;
};

// A point of the search space that the list scheduler turns into an order.
struct Point {
  Layout layout;
  std::vector<int> partition;
  std::string partitionName;
  std::vector<ActivationPolicy> policies;
  ListSchedulerOptions knobs;
};

class Searcher {
 public:
  Searcher(const CostProfile& p, const SearchOptions& o) : profile_(p), o_(o), rng_(o.seed) {
    limit_ = o.memoryLimitBytes ? *o.memoryLimitBytes : p.deviceMemoryBytes;
    start_ = Clock::now();
    result_.objective = o.objective;
    result_.boundary = o.boundary;
    result_.iterations = steady() ? std::max(2, o.iterations) : 1;
    if (o_.allowOffload && p.hostBandwidthBytesPerMs <= 0) {
      // Without a host bandwidth the copies would take no time and offload would look free.
      o_.allowOffload = false;
      result_.notes.push_back(
          "offload not considered: the cost profile gives no host bandwidth (host.bandwidth_bytes_per_ms), "
          "so its "
          "copies cannot be timed");
    }
  }

  Result<SearchResult> run();

 private:
  struct Evaluated {
    bool feasible = false;
    CandidateSummary summary;
    Timeline timeline;
  };

  bool shouldStop() {
    if (stopped_) return true;
    if (o_.cancel && o_.cancel->load()) {
      result_.cancelled = true;
      stopped_ = true;
    } else if (o_.maxEvaluations && result_.evaluated >= o_.maxEvaluations) {
      stopped_ = true;
    } else if (elapsed() > o_.timeLimitSeconds) {
      result_.timedOut = true;
      stopped_ = true;
    }
    return stopped_;
  }
  bool steady() const { return o_.objective == SearchObjective::SteadyState; }
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  const SimulationModel* modelFor(const Schedule& s, const std::vector<int>& partition) {
    auto key = partition;
    // A routed pipeline's stages copy blocks (DualPipe): its model differs from an unrouted one
    // with the same partition.
    if (!s.pipeline.stageBlock.empty()) {
      key.push_back(-1);
      key.insert(key.end(), s.pipeline.stageBlock.begin(), s.pipeline.stageBlock.end());
    }
    auto it = models_.find(key);
    if (it != models_.end()) return &it->second;
    auto m = makeSimulationModel(s, profile_, partition);
    if (!m) return nullptr;
    return &models_.emplace(key, std::move(m).value()).first->second;
  }

  const std::vector<StageCost>* costsFor(int stages, const std::vector<int>& partition) {
    auto it = costs_.find(partition);
    if (it != costs_.end()) return &it->second;
    auto c = stageCosts(profile_, stages, partition);
    if (!c) return nullptr;
    return &costs_.emplace(partition, std::move(c).value()).first->second;
  }

  // Simulates one candidate; counts it; keeps it when it is the best.
  Evaluated evaluate(Schedule s, CandidateSummary summary) {
    Evaluated ev;
    s.partition = summary.partition;
    ++result_.evaluated;
    // Not simulated to the end: invalid, nothing known to fit, with the reason.
    auto reject = [&](std::string note) {
      summary.valid = false;
      summary.fitsMemory = false;
      summary.note = std::move(note);
      ev.summary = summary;
      return ev;
    };
    auto why = [](const Diagnostics& errors, const char* fallback) {
      return errors.empty() ? std::string(fallback) : errors.front().message;
    };
    const SimulationModel* model = modelFor(s, summary.partition);
    if (!model) return reject("cost model rejected the partition");
    const SimulationOptions so{
        .memoryLimitBytes = o_.memoryLimitBytes, .recordMemory = true, .recordTransfers = false};
    auto tl = simulate(s, *model, so);
    if (!tl) return reject(why(tl.errors(), "simulation failed"));
    if (!tl->complete) return reject("simulation stalled");
    summary.makespan = tl->metrics.makespan;
    summary.bubbleRatio = tl->metrics.bubbleRatio;
    summary.peakMemoryBytes = 0;
    for (auto& d : tl->metrics.devices)
      summary.peakMemoryBytes = std::max(summary.peakMemoryBytes, d.peakMemoryBytes);
    summary.objective = summary.makespan;
    if (steady()) {
      // K iterations back to back: memory in flight across the boundary counts too.
      IterationOptions io;
      io.iterations = result_.iterations;
      io.boundary = o_.boundary;
      io.optimizerStepMs = o_.optimizerStepMs;
      io.simulation = so;
      io.buildTimeline = false;
      auto it = simulateIterations(s, *model, io);
      if (!it) return reject(why(it.errors(), "multi-iteration simulation failed"));
      if (!it->complete) return reject("the multi-iteration simulation stalled");
      summary.steadyStateMs = it->steadyStateMs;
      summary.maxStageSpanMs = it->maxFirstSpan;
      summary.objective = it->steadyStateMs;
      summary.peakMemoryBytes = std::max(summary.peakMemoryBytes, it->peakMemoryBytes);
    }
    summary.fitsMemory = limit_ <= 0 || summary.peakMemoryBytes <= limit_;
    if (!summary.fitsMemory) summary.note = "exceeds the memory limit";
    ev.feasible = summary.fitsMemory && summary.valid;
    ev.summary = summary;
    if (ev.feasible) {
      record(s, ev.summary);
      ev.timeline = std::move(tl).value();
    }
    reportProgress(false);
    return ev;
  }

  void record(const Schedule& s, const CandidateSummary& c) {
    const bool improves = !haveBest_ || candidateBefore(c, result_.bestSummary);
    if (improves) {
      // Every result passes the validator; a candidate that does not is dropped.
      if (!validateSchedule(s).valid()) return;
      haveBest_ = true;
      result_.best = s;
      result_.bestSummary = c;
      reportProgress(true);
    }
    // Keep the best distinct candidates.
    auto& top = result_.top;
    for (auto& t : top)
      if (t.name == c.name && std::abs(t.objective - c.objective) < 1e-9 &&
          t.peakMemoryBytes == c.peakMemoryBytes)
        return;
    const size_t keep = std::max<size_t>(1, o_.keepTop);
    if (top.size() >= keep && !candidateBefore(c, top.back())) return;  // would be dropped
    top.push_back(c);
    top.back().schedule = std::make_shared<const Schedule>(s);
    std::stable_sort(top.begin(), top.end(), [](auto& a, auto& b) { return candidateBefore(a, b); });
    if (top.size() > keep) top.resize(keep);
  }

  void reportProgress(bool force) {
    if (!o_.progress) return;
    if (!force && result_.evaluated % 16 != 0) return;
    SearchProgress pr;
    pr.evaluated = result_.evaluated;
    pr.bestMakespan = haveBest_ ? result_.bestSummary.makespan : 0;
    pr.bestObjective = haveBest_ ? result_.bestSummary.objective : 0;
    pr.bestDescription = haveBest_ ? result_.bestSummary.name : std::string();
    pr.elapsedSeconds = elapsed();
    pr.phase = phase_;
    o_.progress(pr);
  }

  void builtins();
  std::vector<Layout> layouts() const;
  void explore();
  // The best schedule's timeline (ops, no transfers or memory curves) for the refinement
  // phases; nullopt when it cannot be simulated to the end.
  std::optional<Timeline> bestTimeline() {
    const SimulationModel* model = modelFor(result_.best, result_.best.partition);
    if (!model) return std::nullopt;
    SimulationOptions so;
    so.memoryLimitBytes = o_.memoryLimitBytes;
    so.recordTransfers = false;
    auto tl = simulate(result_.best, *model, so);
    if (!tl || !tl->complete) return std::nullopt;
    return std::move(tl).value();
  }

  // A local improvement of `cur` (the best so far, summarised by `curSummary`): its op at
  // `from` on `device` moved to `to`, evaluated. True when that made it the new best.
  bool tryMove(const Schedule& cur, const CandidateSummary& curSummary, int device, size_t from, size_t to) {
    Schedule cand = cur;
    auto& ord = cand.devices[static_cast<size_t>(device)];
    Step moved = ord[from];
    ord.erase(ord.begin() + static_cast<long>(from));
    ord.insert(ord.begin() + static_cast<long>(to), moved);
    CandidateSummary c = curSummary;
    c.recipe.moves.push_back({device, from, to});
    c.family = "list+local";
    if (c.name.rfind("local ", 0) != 0) c.name = "local improvement of " + curSummary.name;
    c.builtin = false;
    auto ev = evaluate(std::move(cand), c);
    return ev.feasible && candidateBefore(ev.summary, curSummary) &&
           candidateBefore(result_.bestSummary, curSummary);
  }

  Evaluated evaluatePoint(const Point& p, const std::string& family);
  // The sizes, layout and split of a point; the caller sets the source and knobs.
  CandidateRecipe recipeFor(const Point& p) const {
    CandidateRecipe r;
    r.devices = o_.devices;
    r.microbatches = o_.microbatches;
    r.chunks = p.layout.chunks;
    r.placement = p.layout.placement;
    r.partition = p.partition;
    r.splitName = p.partitionName;
    r.policies = p.policies;
    return r;
  }
  void zbGreedy(const std::vector<Point>& bases);
  bool refinePartition();
  void randomKnobs(const Point& base, int samples);
  void refineOrder();
  void refineCriticalPath();
  std::vector<int> inflightFor(const Pipeline& pl) const;
  PartitionOptions planOptions(const Pipeline& pl) const;
  std::optional<std::vector<int>> deviceBalanced(std::vector<int> split, const Pipeline& pl) const;

  const CostProfile& profile_;
  SearchOptions o_;
  std::mt19937_64 rng_;
  std::int64_t limit_ = 0;
  Clock::time_point start_;
  bool stopped_ = false;
  bool haveBest_ = false;
  std::string phase_;
  SearchResult result_;
  std::map<std::vector<int>, SimulationModel> models_;
  std::map<std::vector<int>, std::vector<StageCost>> costs_;
  std::set<std::size_t> seen_;  // hashes of list-scheduled candidates already simulated
  // The point behind the best list-scheduled candidate, for the refinement phases.
  std::optional<Point> bestPoint_;
  CandidateSummary bestPointSummary_;
  // Best point per (layout, split, recompute mode): the runners-up whose knobs are tuned too.
  std::map<std::string, std::pair<CandidateSummary, Point>> bestPerBase_;
};

}  // namespace ps::core::detail
