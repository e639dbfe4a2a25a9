// Schedule search: built-in families, partitions x placements x list-scheduler knobs,
// partition refinement and order refinement, all judged by the simulator.
#include "pipestudio/core/planning/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <random>
#include <sstream>

#include "pipestudio/core/analysis/comparison.h"
#include "pipestudio/core/planning/generators.h"
#include "pipestudio/core/analysis/iterations.h"
#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/analysis/validator.h"
#include "planning/zb_greedy.h"

namespace ps::core {

std::string_view searchObjectiveName(SearchObjective o) {
  return o == SearchObjective::SteadyState ? "steady-state" : "makespan";
}

std::optional<SearchObjective> searchObjectiveFromName(std::string_view name) {
  if (name == "makespan") return SearchObjective::Makespan;
  if (name == "steady-state" || name == "steady_state" || name == "steady") return SearchObjective::SteadyState;
  return std::nullopt;
}

bool candidateBefore(const CandidateSummary& a, const CandidateSummary& b) {
  const double tol = 1e-9 * std::max({1.0, std::abs(a.objective), std::abs(b.objective)});
  if (a.objective < b.objective - tol) return true;
  if (b.objective < a.objective - tol) return false;
  if (a.peakMemoryBytes != b.peakMemoryBytes) return a.peakMemoryBytes < b.peakMemoryBytes;
  return a.bubbleRatio < b.bubbleRatio - 1e-12;
}

std::vector<int> uniformPartition(int layers, int stages) {
  std::vector<int> out;
  if (stages < 1 || layers < stages) return out;
  for (int s = 0; s < stages; ++s) out.push_back(layers / stages + (s < layers % stages ? 1 : 0));
  return out;
}

namespace {

using Clock = std::chrono::steady_clock;

std::string policySummary(const std::vector<ActivationPolicy>& p) {
  int r = 0, off = 0;
  for (auto x : p) {
    r += x == ActivationPolicy::Recompute;
    off += x == ActivationPolicy::Offload;
  }
  if (!r && !off) return "keep";
  std::string s;
  if (r) s += "recompute " + std::to_string(r) + "/" + std::to_string(p.size());
  if (off) s += std::string(s.empty() ? "" : ", ") + "offload " + std::to_string(off) + "/" + std::to_string(p.size());
  return s;
}

std::string joinPartition(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += std::to_string(x) + ",";
  return s;
}

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
          "offload not considered: the cost profile gives no host bandwidth (host.bandwidth_bytes_per_ms), so its "
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
    const SimulationModel* model = modelFor(s, summary.partition);
    if (!model) {
      summary.valid = false;
      summary.fitsMemory = false;
      summary.note = "cost model rejected the partition";
      ev.summary = summary;
      return ev;
    }
    SimulationOptions so;
    so.memoryLimitBytes = o_.memoryLimitBytes;
    so.recordMemory = true;
    so.recordTransfers = false;
    auto tl = simulate(s, *model, so);
    if (!tl || !tl->complete) {
      summary.valid = false;
      summary.fitsMemory = false;
      summary.note = tl ? "simulation stalled" : (tl.errors().empty() ? "simulation failed" : tl.error().message);
      ev.summary = summary;
      return ev;
    }
    summary.makespan = tl->metrics.makespan;
    summary.bubbleRatio = tl->metrics.bubbleRatio;
    summary.peakMemoryBytes = 0;
    for (auto& d : tl->metrics.devices) summary.peakMemoryBytes = std::max(summary.peakMemoryBytes, d.peakMemoryBytes);
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
      if (!it || !it->complete) {
        summary.valid = false;
        summary.fitsMemory = false;
        summary.note = it ? "the multi-iteration simulation stalled"
                          : (it.errors().empty() ? "multi-iteration simulation failed" : it.error().message);
        ev.summary = summary;
        return ev;
      }
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
      if (t.name == c.name && std::abs(t.objective - c.objective) < 1e-9 && t.peakMemoryBytes == c.peakMemoryBytes) return;
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
    c.family = "list+local";
    if (c.name.rfind("local ", 0) != 0) c.name = "local improvement of " + curSummary.name;
    c.builtin = false;
    auto ev = evaluate(std::move(cand), c);
    return ev.feasible && candidateBefore(ev.summary, curSummary) && candidateBefore(result_.bestSummary, curSummary);
  }

  Evaluated evaluatePoint(const Point& p, const std::string& family);
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

void Searcher::builtins() {
  phase_ = "built-ins";
  const int layers = static_cast<int>(profile_.layers.size());
  for (ScheduleKind k : allScheduleKinds()) {
    GeneratorOptions g;
    g.devices = o_.devices;
    g.microbatches = o_.microbatches;
    CandidateSummary c;
    c.name = std::string(scheduleKindName(k));
    c.family = c.name;
    c.builtin = true;
    auto s = generateSchedule(k, g);
    if (!s) {
      c.valid = false;
      c.fitsMemory = false;  // never built: nothing is known to fit
      c.note = s.error().message;
      result_.builtins.push_back(c);
      continue;
    }
    const int S = s->pipeline.stages;
    c.chunks = S / std::max(1, o_.devices);
    c.placement = s->pipeline.placementKind;
    if (layers < S) {
      c.valid = false;
      c.fitsMemory = false;
      c.note = "the profile has fewer layers (" + std::to_string(layers) + ") than stages (" + std::to_string(S) + ")";
      result_.builtins.push_back(c);
      continue;
    }
    auto part = partitionLayers(profile_, S);
    if (!part) {
      c.valid = false;
      c.fitsMemory = false;
      c.note = part.error().message;
      result_.builtins.push_back(c);
      continue;
    }
    c.partition = *part;
    c.policies.assign(static_cast<size_t>(S), ActivationPolicy::Keep);
    auto ev = evaluate(*s, c);
    result_.builtins.push_back(ev.summary);
    if (!ev.feasible && ev.summary.valid && o_.allowRecompute) {
      // Megatron's answer to memory pressure: full recompute on every stage.
      CandidateSummary r = c;
      r.name += "+recompute";
      r.policies.assign(static_cast<size_t>(S), ActivationPolicy::Recompute);
      auto sr = applyActivationPolicies(*s, r.policies);
      if (sr) result_.builtins.push_back(evaluate(*sr, r).summary);
    }
  }
}

std::vector<Layout> Searcher::layouts() const {
  std::vector<Layout> out;
  const int layers = static_cast<int>(profile_.layers.size());
  for (int c = 1; c <= std::max(1, o_.maxChunks); ++c) {
    if (layers < c * o_.devices) break;
    if (c == 1) {
      out.push_back({1, PlacementKind::Linear});
      continue;
    }
    out.push_back({c, PlacementKind::Interleaved});
    if (c % 2 == 0) out.push_back({c, PlacementKind::VShape});
  }
  return out;
}

std::vector<int> Searcher::inflightFor(const Pipeline& pl) const {
  // 1F1B-like depth per stage: a forward reaches stage s after s stage-steps and its gradient
  // returns after another S - s, while each device serves its `chunks` stages in turn, so
  // about ceil((S - s) / chunks) micro-batches wait at stage s. The list scheduler's
  // memory headroom and the simulator check what the plan assumes.
  const int S = pl.stages;
  const int chunks = std::max(1, S / std::max(1, pl.devices));
  std::vector<int> out(static_cast<size_t>(S));
  for (int s = 0; s < S; ++s)
    out[static_cast<size_t>(s)] = std::max(1, std::min(o_.microbatches, (S - s + chunks - 1) / chunks));
  return out;
}

PartitionOptions Searcher::planOptions(const Pipeline& pl) const {
  // Each of a device's `chunks` stages plans against an equal share of the device's memory,
  // so the device's stages together stay within it.
  PartitionOptions po;
  po.stages = pl.stages;
  po.microbatches = o_.microbatches;
  po.inflightPerStage = inflightFor(pl);
  const int chunks = std::max(1, pl.stages / std::max(1, pl.devices));
  po.memoryLimitBytes = limit_ > 0 ? limit_ / chunks : 0;
  po.allowRecompute = o_.allowRecompute;
  po.allowOffload = o_.allowOffload;
  return po;
}

std::optional<std::vector<int>> Searcher::deviceBalanced(std::vector<int> split, const Pipeline& pl) const {
  const int S = static_cast<int>(split.size());
  if (S != pl.stages) return std::nullopt;
  std::vector<double> layerTime;
  for (const auto& l : profile_.layers) layerTime.push_back(l.forwardMs + l.backwardInputMs + l.backwardWeightMs);
  // Objective: (max device load, sum of squared device loads), compared lexicographically.
  auto score = [&](const std::vector<int>& v) {
    std::vector<double> load(static_cast<size_t>(pl.devices), 0);
    size_t layer = 0;
    for (int s = 0; s < S; ++s)
      for (int k = 0; k < v[static_cast<size_t>(s)]; ++k) load[static_cast<size_t>(pl.deviceOf(s))] += layerTime[layer++];
    double mx = 0, sq = 0;
    for (double x : load) {
      mx = std::max(mx, x);
      sq += x * x;
    }
    return std::pair<double, double>(mx, sq);
  };
  auto best = score(split);
  for (int iter = 0; iter < 10000; ++iter) {
    bool moved = false;
    for (int b = 0; b + 1 < S; ++b)
      for (int dir : {-1, +1}) {
        auto& v = split;
        if (dir < 0 && v[static_cast<size_t>(b)] <= 1) continue;
        if (dir > 0 && v[static_cast<size_t>(b) + 1] <= 1) continue;
        v[static_cast<size_t>(b)] += dir;
        v[static_cast<size_t>(b) + 1] -= dir;
        auto sc = score(v);
        if (sc.first < best.first - 1e-9 || (sc.first <= best.first + 1e-9 && sc.second < best.second - 1e-9)) {
          best = sc;
          moved = true;
        } else {
          v[static_cast<size_t>(b)] -= dir;
          v[static_cast<size_t>(b) + 1] += dir;
        }
      }
    if (!moved) break;
  }
  return split;
}

Searcher::Evaluated Searcher::evaluatePoint(const Point& p, const std::string& family) {
  Evaluated none;
  auto pl = Pipeline::make(o_.devices, o_.devices * p.layout.chunks, o_.microbatches, p.layout.placement);
  if (!pl) return none;
  const auto* costs = costsFor(pl->stages, p.partition);
  if (!costs) return none;
  ListSchedulerOptions k = p.knobs;
  k.policies = p.policies;
  k.memoryLimitBytes = limit_ > 0 ? std::optional<std::int64_t>(limit_) : std::nullopt;
  auto s = listSchedule(*pl, *costs, profile_, k);
  if (!s) return none;
  CandidateSummary c;
  std::ostringstream name;
  name << family << "(" << (k.splitBackward ? "I/W" : "B");
  if (k.splitBackward) name << ", pending W " << (k.maxPendingW < 0 ? std::string("any") : std::to_string(k.maxPendingW));
  if (k.warmupDepth.empty()) {
    name << ", warm-up " << (k.warmupOffset >= 0 ? "+" : "") << k.warmupOffset;
  } else {
    name << ", warm-up";
    for (int w : k.warmupDepth) name << " " << w;
  }
  name << ", group "
       << (k.microbatchGroup > 0 ? k.microbatchGroup : o_.devices) << ") " << placementKindName(p.layout.placement)
       << " x" << p.layout.chunks << ", " << p.partitionName << " split, " << policySummary(p.policies);
  c.chunks = p.layout.chunks;
  c.placement = p.layout.placement;
  c.partition = p.partition;
  c.policies = p.policies;
  if (k.recomputeOnDemand) {
    // The scheduler chose per micro-batch: a stage that recomputes any is reported as
    // recomputing, and the name says how many micro-batch-stages were rebuilt.
    int rebuilt = 0;
    for (const auto& dev : s->devices)
      for (const auto& st : dev)
        if (st.first.kind == OpKind::R) {
          ++rebuilt;
          c.policies[static_cast<size_t>(st.first.stage)] = ActivationPolicy::Recompute;
        }
    name << ", recompute on demand " << rebuilt << "/" << p.partition.size() * static_cast<size_t>(o_.microbatches);
  }
  c.name = name.str();
  c.family = family;
  s->name = "search";
  // Different knobs often give the same order: simulate each distinct schedule once.
  std::size_t h = std::hash<std::string>{}(joinPartition(p.partition));
  for (const auto& dev : s->devices)
    for (const auto& st : dev)
      h = h * 1000003u ^ (static_cast<std::size_t>(st.first.kind) * 131071u + static_cast<std::size_t>(st.first.stage) * 8191u +
                          static_cast<std::size_t>(st.first.microbatch));
  if (!seen_.insert(h).second) return none;
  auto ev = evaluate(std::move(s).value(), c);
  if (ev.feasible && (!bestPoint_ || candidateBefore(ev.summary, bestPointSummary_))) {
    bestPoint_ = p;
    bestPointSummary_ = ev.summary;
  }
  if (ev.feasible) {
    const std::string key = std::to_string(p.layout.chunks) + std::string(placementKindName(p.layout.placement)) + "|" +
                            joinPartition(p.partition) + (k.recomputeOnDemand ? "|od" : "|fixed");
    auto it = bestPerBase_.find(key);
    if (it == bestPerBase_.end() || candidateBefore(ev.summary, it->second.first)) bestPerBase_[key] = {ev.summary, p};
  }
  return ev;
}

void Searcher::explore() {
  phase_ = "list scheduler";
  const int D = o_.devices;
  // Partition and policy options per layout, most promising first.
  std::vector<Point> bases;
  for (const Layout& lay : layouts()) {
    const int S = D * lay.chunks;
    auto pl = Pipeline::make(D, S, o_.microbatches, lay.placement);
    if (!pl) continue;
    const PartitionOptions po = planOptions(*pl);
    std::vector<std::pair<std::string, PartitionPlan>> plans;
    // Time-optimal split whose stages keep everything, when memory allows.
    PartitionOptions keepOnly = po;
    keepOnly.allowRecompute = keepOnly.allowOffload = false;
    if (auto r = partitionBisection(profile_, keepOnly)) {
      plans.emplace_back("bisection", *r);
    } else if (limit_ > 0) {
      // Otherwise keep everything anyway and let the list scheduler's memory headroom hold
      // forwards back (fewer in flight instead of recompute).
      PartitionOptions unlimited = keepOnly;
      unlimited.memoryLimitBytes = 0;
      if (auto u = partitionBisection(profile_, unlimited)) {
        u->policies.assign(u->policies.size(), ActivationPolicy::Keep);
        plans.emplace_back("bisection (throttled)", *u);
      }
    }
    // Memory-aware split (DawnPiper): recompute or offload where keeping does not fit.
    if (auto r = partitionBisection(profile_, po)) {
      if (plans.empty() || r->layersPerStage != plans.front().second.layersPerStage || r->policies != plans.front().second.policies)
        plans.emplace_back("bisection+memory", *r);
    }
    if (auto bal = partitionLayers(profile_, S)) {
      if (auto r = planPartition(profile_, *bal, po)) plans.emplace_back("balanced", *r);
    }
    if (auto r = planPartition(profile_, uniformPartition(static_cast<int>(profile_.layers.size()), S), po))
      plans.emplace_back("uniform", *r);
    // With several stages per device the device's total is what matters (AdaPtis): move
    // boundaries of the bisection split until the busiest device's work stops shrinking.
    if (lay.chunks > 1 && !plans.empty()) {
      if (auto split = deviceBalanced(plans.front().second.layersPerStage, *pl)) {
        if (auto r = planPartition(profile_, *split, po)) plans.emplace_back("device-balanced", *r);
      }
    }
    for (auto& [name, plan] : plans) {
      Point p;
      p.layout = lay;
      p.partition = plan.layersPerStage;
      p.partitionName = name;
      p.policies = plan.policies;
      bases.push_back(p);
    }
    // Where memory binds, the same splits with recompute decided per micro-batch by the list
    // scheduler's headroom: only the forwards that do not fit are rebuilt, instead of every
    // micro-batch of a stage.
    if (limit_ > 0 && o_.allowRecompute) {
      std::set<std::vector<int>> twins;
      for (auto& [name, plan] : plans) {
        const bool binds = name == "bisection (throttled)" ||
                           std::any_of(plan.policies.begin(), plan.policies.end(),
                                       [](auto x) { return x != ActivationPolicy::Keep; });
        if (!binds || !twins.insert(plan.layersPerStage).second) continue;
        Point p;
        p.layout = lay;
        p.partition = plan.layersPerStage;
        p.partitionName = name;
        p.policies.assign(plan.policies.size(), ActivationPolicy::Keep);
        p.knobs.recomputeOnDemand = true;
        bases.push_back(p);
      }
    }
  }
  zbGreedy(bases);
  // Knob grid, the ZB- and 1F1B-like settings first.
  struct Knob {
    bool split;
    int pendingW;
    int warm;
    int group;
  };
  std::vector<Knob> grid;
  for (int warm : {0, 2, 4, 1, 8, -1})
    for (bool split : {true, false})
      for (int pend : split ? std::vector<int>{-1, D, 1} : std::vector<int>{-1})
        for (int group : {0, 1, 2 * D}) grid.push_back({split, pend, warm, group});
  // Breadth first over bases so a short time limit still sees every layout and split.
  for (const Knob& k : grid) {
    for (const Point& b : bases) {
      if (shouldStop()) return;
      Point p = b;
      p.knobs = b.knobs;
      p.knobs.splitBackward = k.split;
      p.knobs.maxPendingW = k.pendingW;
      p.knobs.warmupOffset = k.warm;
      p.knobs.microbatchGroup = k.group;
      evaluatePoint(p, "list");
    }
  }
}

void Searcher::zbGreedy(const std::vector<Point>& bases) {
  // Zero Bubble's greedy (its eight variants) on every linear split that keeps all
  // activations: a different way to place W passes than the list scheduler's priorities.
  std::set<std::pair<int, std::vector<int>>> done;
  for (const Point& b : bases) {
    const bool linear = b.layout.chunks == 1 && b.layout.placement == PlacementKind::Linear;
    const bool vshape = b.layout.chunks == 2 && b.layout.placement == PlacementKind::VShape;
    if ((!linear && !vshape) || b.knobs.recomputeOnDemand) continue;
    if (std::any_of(b.policies.begin(), b.policies.end(), [](auto x) { return x != ActivationPolicy::Keep; })) continue;
    if (!done.insert({b.layout.chunks, b.partition}).second) continue;
    const auto* costs = costsFor(o_.devices * b.layout.chunks, b.partition);
    if (!costs) continue;
    const auto in = detail::zbGreedyInput(*costs, profile_, limit_);
    // Linear: Zero Bubble's heuristic, eight variants; V: its ZB-V greedy, four variants.
    for (int v = 0; v < (linear ? 8 : 4); ++v) {
      if (shouldStop()) return;
      detail::ZbGreedyFlags fl;
      fl.allowBubbleBeforeFirstB = v & 1;
      fl.prioritizeB = v & 2;
      fl.noBubbleGreedy = v & 4;
      auto sched = linear ? detail::zbGreedySchedule(in, o_.microbatches, fl)
                          : detail::zbvGreedySchedule(*costs, profile_, limit_, o_.microbatches, v & 1, v & 2);
      if (!sched) continue;
      sched->name = "search";
      std::size_t h = std::hash<std::string>{}(joinPartition(b.partition));
      for (const auto& dev : sched->devices)
        for (const auto& st : dev)
          h = h * 1000003u ^ (static_cast<std::size_t>(st.first.kind) * 131071u + static_cast<std::size_t>(st.first.stage) * 8191u +
                              static_cast<std::size_t>(st.first.microbatch));
      if (!seen_.insert(h).second) continue;
      CandidateSummary c;
      c.family = linear ? "zb-greedy" : "zbv-greedy";
      c.name = linear ? std::string("zb-greedy(") + (fl.allowBubbleBeforeFirstB ? "early F" : "no early F") +
                            (fl.prioritizeB ? ", backward first" : "") + (fl.noBubbleGreedy ? ", W into gaps" : "") +
                            ") linear x1, " + b.partitionName + " split, keep"
                      : std::string("zbv-greedy(") + (v & 1 ? "W before F" : "no W before F") +
                            (v & 2 ? ", W before B" : "") + ") vshape x2, " + b.partitionName + " split, keep";
      c.chunks = b.layout.chunks;
      c.placement = b.layout.placement;
      c.partition = b.partition;
      c.policies = b.policies;
      evaluate(std::move(*sched), c);
    }
  }
}

void Searcher::randomKnobs(const Point& base, int samples) {
  // Seeded samples around a point: per-device warm-up depths (AdaPtis tunes devices
  // separately), pending-W bounds and groups the grid does not hold.
  phase_ = "list scheduler";
  const int D = o_.devices;
  std::uniform_int_distribution<int> offset(-1, 4), pend(-1, 2 * D), grp(1, 2 * D);
  for (int i = 0; i < samples && !shouldStop(); ++i) {
    Point p = base;
    p.knobs.warmupDepth.clear();
    auto pl = Pipeline::make(D, static_cast<int>(p.partition.size()), o_.microbatches, p.layout.placement);
    if (!pl) return;
    // The scheduler's default depth per device, then a random offset each.
    std::vector<int> sum(static_cast<size_t>(D), 0), cnt(static_cast<size_t>(D), 0);
    for (int st = 0; st < pl->stages; ++st) {
      sum[static_cast<size_t>(pl->deviceOf(st))] += pl->stages - st;
      ++cnt[static_cast<size_t>(pl->deviceOf(st))];
    }
    for (int d = 0; d < D; ++d) {
      const int c = std::max(1, cnt[static_cast<size_t>(d)]);
      p.knobs.warmupDepth.push_back(std::max(1, (sum[static_cast<size_t>(d)] + c - 1) / c + base.knobs.warmupOffset +
                                                    offset(rng_)));
    }
    p.knobs.warmupOffset = 0;
    if (p.knobs.splitBackward) p.knobs.maxPendingW = pend(rng_);
    p.knobs.microbatchGroup = grp(rng_);
    evaluatePoint(p, "list");
  }
}

bool Searcher::refinePartition() {
  // AdaPtis-style joint step: move one layer across a stage boundary, re-plan memory and
  // re-schedule, keep it when the simulator says it is faster; until no move helps.
  phase_ = "partitions";
  if (!bestPoint_) return false;
  const CandidateSummary start = bestPointSummary_;
  bool improved = true;
  while (improved && !shouldStop()) {
    improved = false;
    Point base = *bestPoint_;
    const CandidateSummary before = bestPointSummary_;
    const int S = static_cast<int>(base.partition.size());
    auto pl = Pipeline::make(o_.devices, S, o_.microbatches, base.layout.placement);
    if (!pl) return candidateBefore(bestPointSummary_, start);
    for (int b = 0; b + 1 < S && !shouldStop(); ++b) {
      for (int dir : {-1, +1}) {
        Point p = base;
        auto& v = p.partition;
        if (dir < 0 && v[static_cast<size_t>(b)] <= 1) continue;
        if (dir > 0 && v[static_cast<size_t>(b) + 1] <= 1) continue;
        v[static_cast<size_t>(b)] += dir;
        v[static_cast<size_t>(b) + 1] -= dir;
        auto plan = planPartition(profile_, v, planOptions(*pl));
        if (!plan) continue;
        p.policies = plan->policies;
        if (p.knobs.recomputeOnDemand) p.policies.assign(p.policies.size(), ActivationPolicy::Keep);
        p.partitionName = "refined";
        evaluatePoint(p, "list");
        if (candidateBefore(bestPointSummary_, before)) improved = true;
        if (shouldStop()) return candidateBefore(bestPointSummary_, start);
      }
    }
  }
  return candidateBefore(bestPointSummary_, start);
}

void Searcher::refineCriticalPath() {
  // Moves guided by the best schedule's critical path: an op of the chain that waited for its
  // device (the previous op there was still running) is pulled one to five places earlier in
  // its device's order; the first move the simulator confirms as faster is kept, and the
  // path is recomputed. Only the chain sets the makespan, so moves elsewhere cannot help.
  phase_ = "local improvement";
  if (!haveBest_ || !o_.localImprovement) return;
  const int rounds = std::max(0, o_.localImprovementRounds / 6);
  for (int round = 0; round < rounds && !shouldStop(); ++round) {
    const Schedule cur = result_.best;
    const CandidateSummary curSummary = result_.bestSummary;
    auto tl = bestTimeline();
    if (!tl) return;
    const CriticalPath cp = criticalPath(*tl, cur);
    // Latest steps first: moves near the end shorten the tail directly.
    std::vector<std::pair<int, int>> moves;  // (device, step)
    for (auto it = cp.steps.rbegin(); it != cp.steps.rend() && moves.size() < 12; ++it) {
      if (it->via != CriticalLink::DeviceOrder || it->op >= tl->ops.size()) continue;
      const TimelineOp& op = tl->ops[it->op];
      if (op.step > 0 && !op.overlapped) moves.emplace_back(op.device, op.step);
    }
    bool improved = false;
    for (auto [dev, step] : moves) {
      for (int back = 1; back <= 5 && !improved && !shouldStop(); ++back) {
        if (step - back < 0) break;
        improved = tryMove(cur, curSummary, dev, static_cast<size_t>(step), static_cast<size_t>(step - back));
      }
      if (improved) break;
    }
    if (!improved) return;
  }
}

void Searcher::refineOrder() {
  // Move ops earlier into the bubbles the simulated timeline shows: for the longest idle gaps,
  // try pulling one of the next few ops of that device in front of the op after the gap.
  phase_ = "local improvement";
  if (!haveBest_ || !o_.localImprovement) return;
  for (int round = 0; round < o_.localImprovementRounds && !shouldStop(); ++round) {
    const Schedule cur = result_.best;
    const CandidateSummary curSummary = result_.bestSummary;
    auto tl = bestTimeline();
    if (!tl) return;
    struct Gap {
      double length;
      int device;
      int step;  // the step after the gap
    };
    std::vector<Gap> gaps;
    std::vector<double> lastEnd(static_cast<size_t>(cur.pipeline.devices), -1);
    for (const auto& op : tl->ops) {  // sorted by (device, start)
      if (op.step < 0 || op.overlapped) continue;
      double& le = lastEnd[static_cast<size_t>(op.device)];
      if (le >= 0 && op.start - le > 1e-9) gaps.push_back({op.start - le, op.device, op.step});
      le = std::max(le, op.end);
    }
    if (gaps.empty()) return;
    std::stable_sort(gaps.begin(), gaps.end(), [](auto& a, auto& b) { return a.length > b.length; });
    // A seeded pick among the largest gaps keeps rounds from repeating themselves.
    const size_t consider = std::min<size_t>(gaps.size(), 6);
    const Gap g = gaps[std::uniform_int_distribution<size_t>(0, consider - 1)(rng_)];
    const auto& order = cur.devices[static_cast<size_t>(g.device)];
    bool improved = false;
    for (int ahead = 1; ahead <= 8 && !improved && !shouldStop(); ++ahead) {
      const size_t from = static_cast<size_t>(g.step + ahead);
      if (from >= order.size()) break;
      improved = tryMove(cur, curSummary, g.device, from, static_cast<size_t>(g.step));
    }
  }
}

Result<SearchResult> Searcher::run() {
  if (o_.devices < 1) return makeError("search.devices", "devices must be at least 1");
  if (o_.microbatches < 1) return makeError("search.microbatches", "micro-batches must be at least 1");
  if (profile_.layers.empty()) return makeError("search.profile", "the cost profile has no layers");
  if (static_cast<int>(profile_.layers.size()) < o_.devices)
    return makeError("search.profile", "the profile has " + std::to_string(profile_.layers.size()) +
                                           " layers, fewer than the " + std::to_string(o_.devices) + " devices");
  builtins();
  // Built-ins are always evaluated in full (the guarantee rests on them); the limits apply
  // from here on.
  explore();
  // Knob samples around the best point, then around the best point of the runners-up bases
  // (another layout or split may overtake once its knobs are tuned).
  if (bestPoint_) randomKnobs(*bestPoint_, o_.randomSamples);
  {
    std::vector<std::pair<CandidateSummary, Point>> others;
    for (auto& [key, v] : bestPerBase_) others.push_back(v);
    std::stable_sort(others.begin(), others.end(), [](auto& a, auto& b) { return candidateBefore(a.first, b.first); });
    for (size_t i = 1; i < std::min<size_t>(others.size(), 4); ++i) randomKnobs(others[i].second, o_.randomSamples / 3);
  }
  // Alternate partition moves and knob samples while the partition keeps improving (AdaPtis).
  for (int round = 0; round < 4 && !shouldStop(); ++round) {
    if (!refinePartition() || !bestPoint_) break;
    randomKnobs(*bestPoint_, o_.randomSamples / 3);
  }
  refineCriticalPath();
  refineOrder();
  shouldStop();
  result_.elapsedSeconds = elapsed();
  if (!haveBest_)
    return makeError("search.no-fit", "no schedule fits the memory limit of " + std::to_string(limit_) +
                                          " bytes (not even with full recompute); try more devices or a smaller model");
  phase_ = "done";
  reportProgress(true);
  return std::move(result_);
}

}  // namespace

Result<SearchResult> searchSchedule(const CostProfile& profile, const SearchOptions& o) {
  Searcher s(profile, o);
  return s.run();
}

}  // namespace ps::core
