// Schedule search: built-in families, partitions x placements x list-scheduler knobs,
// partition refinement and order refinement, all judged by the simulator.
#include "pipestudio/core/planning/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "pipestudio/core/analysis/critical_path.h"
#include "pipestudio/core/analysis/iterations.h"
#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/analysis/validator.h"
#include "pipestudio/core/model/enum_names.h"
#include "pipestudio/core/planning/generators.h"
#include "pipestudio/core/planning/zb_greedy.h"
#include "planning/searcher.h"

namespace ps::core {

// The first name of each value is its own; the others are accepted spellings.
constexpr EnumName<SearchObjective> kObjectiveNames[] = {{SearchObjective::Makespan, "makespan"},
                                                         {SearchObjective::SteadyState, "steady-state"},
                                                         {SearchObjective::SteadyState, "steady_state"},
                                                         {SearchObjective::SteadyState, "steady"}};

PS_ENUM_NAME_FUNCTION(SearchObjective, kObjectiveNames, searchObjectiveName);
PS_ENUM_FROM_NAME_FUNCTION(SearchObjective, kObjectiveNames, searchObjectiveFromName);

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

namespace detail {

std::string policySummary(const std::vector<ActivationPolicy>& p) {
  int r = 0, off = 0;
  for (auto x : p) {
    r += x == ActivationPolicy::Recompute;
    off += x == ActivationPolicy::Offload;
  }
  if (!r && !off) return "keep";
  std::string s;
  if (r) s += "recompute " + std::to_string(r) + "/" + std::to_string(p.size());
  if (off)
    s += std::string(s.empty() ? "" : ", ") + "offload " + std::to_string(off) + "/" +
         std::to_string(p.size());
  return s;
}

std::string joinPartition(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += std::to_string(x) + ",";
  return s;
}

std::size_t orderHash(const std::vector<int>& partition, const Schedule& s) {
  std::size_t h = std::hash<std::string>{}(joinPartition(partition));
  for (const auto& dev : s.devices)
    for (const auto& st : dev)
      h = h * 1000003u ^
          (static_cast<std::size_t>(st.first.kind) * 131071u +
           static_cast<std::size_t>(st.first.stage) * 8191u + static_cast<std::size_t>(st.first.microbatch));
  return h;
}

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
    if (s->pipeline.routed() && !o_.allowRoutes) continue;
    const int S = s->pipeline.stages;
    // The layers are split over the model's blocks: DualPipe's two copies of a block share them.
    const int blocks = s->pipeline.blocks();
    c.chunks = S / std::max(1, o_.devices);
    c.placement = s->pipeline.placementKind;
    if (layers < blocks) {
      c.valid = false;
      c.fitsMemory = false;
      c.note = "the profile has fewer layers (" + std::to_string(layers) + ") than stages (" +
               std::to_string(blocks) + ")";
      result_.builtins.push_back(c);
      continue;
    }
    auto part = partitionLayers(profile_, blocks);
    if (!part) {
      c.valid = false;
      c.fitsMemory = false;
      c.note = part.error().message;
      result_.builtins.push_back(c);
      continue;
    }
    c.partition = *part;
    c.policies.assign(static_cast<size_t>(S), ActivationPolicy::Keep);
    c.recipe.source = CandidateSource::Builtin;
    c.recipe.builtin = k;
    c.recipe.devices = o_.devices;
    c.recipe.microbatches = o_.microbatches;
    c.recipe.chunks = c.chunks;
    c.recipe.placement = c.placement;
    c.recipe.partition = c.partition;
    c.recipe.policies = c.policies;
    auto ev = evaluate(*s, c);
    result_.builtins.push_back(ev.summary);
    if (!ev.feasible && ev.summary.valid && o_.allowRecompute) {
      // Megatron's answer to memory pressure: full recompute on every stage.
      CandidateSummary r = c;
      r.name += "+recompute";
      r.policies.assign(static_cast<size_t>(S), ActivationPolicy::Recompute);
      r.recipe.policies = r.policies;
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
  for (const auto& l : profile_.layers)
    layerTime.push_back(l.forwardMs + l.backwardInputMs + l.backwardWeightMs);
  // Objective: (max device load, sum of squared device loads), compared lexicographically.
  auto score = [&](const std::vector<int>& v) {
    std::vector<double> load(static_cast<size_t>(pl.devices), 0);
    size_t layer = 0;
    for (int s = 0; s < S; ++s)
      for (int k = 0; k < v[static_cast<size_t>(s)]; ++k)
        load[static_cast<size_t>(pl.deviceOf(s))] += layerTime[layer++];
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
        if (sc.first < best.first - 1e-9 ||
            (sc.first <= best.first + 1e-9 && sc.second < best.second - 1e-9)) {
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
  c.recipe = recipeFor(p);
  c.recipe.source = CandidateSource::ListScheduler;
  c.recipe.list = k;
  std::ostringstream name;
  name << family << "(" << recipeKnobsText(c.recipe) << ") " << placementKindName(p.layout.placement) << " x"
       << p.layout.chunks << ", " << p.partitionName << " split, " << policySummary(p.policies);
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
    name << ", recompute on demand " << rebuilt << "/"
         << p.partition.size() * static_cast<size_t>(o_.microbatches);
  }
  c.name = name.str();
  c.family = family;
  s->name = "search";
  if (!seen_.insert(orderHash(p.partition, *s)).second) return none;
  auto ev = evaluate(std::move(s).value(), c);
  if (ev.feasible && (!bestPoint_ || candidateBefore(ev.summary, bestPointSummary_))) {
    bestPoint_ = p;
    bestPointSummary_ = ev.summary;
  }
  if (ev.feasible) {
    const std::string key = std::to_string(p.layout.chunks) +
                            std::string(placementKindName(p.layout.placement)) + "|" +
                            joinPartition(p.partition) + (k.recomputeOnDemand ? "|od" : "|fixed");
    auto it = bestPerBase_.find(key);
    if (it == bestPerBase_.end() || candidateBefore(ev.summary, it->second.first))
      bestPerBase_[key] = {ev.summary, p};
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
      if (plans.empty() || r->layersPerStage != plans.front().second.layersPerStage ||
          r->policies != plans.front().second.policies)
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
    if (std::any_of(b.policies.begin(), b.policies.end(), [](auto x) { return x != ActivationPolicy::Keep; }))
      continue;
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
      auto sched = linear
                       ? detail::zbGreedySchedule(in, o_.microbatches, fl)
                       : detail::zbvGreedySchedule(*costs, profile_, limit_, o_.microbatches, v & 1, v & 2);
      if (!sched) continue;
      sched->name = "search";
      if (!seen_.insert(orderHash(b.partition, *sched)).second) continue;
      CandidateSummary c;
      c.recipe = recipeFor(b);
      c.recipe.source = linear ? CandidateSource::ZbGreedy : CandidateSource::ZbvGreedy;
      c.recipe.memoryLimitBytes = limit_;
      if (linear) {
        c.recipe.zbAllowBubbleBeforeFirstB = fl.allowBubbleBeforeFirstB;
        c.recipe.zbPrioritizeB = fl.prioritizeB;
        c.recipe.zbNoBubbleGreedy = fl.noBubbleGreedy;
      } else {
        c.recipe.zbvFillF = v & 1;
        c.recipe.zbvFillB = v & 2;
      }
      c.family = std::string(candidateSourceName(c.recipe.source));
      c.name = c.family + "(" + recipeKnobsText(c.recipe) + ") " + (linear ? "linear x1, " : "vshape x2, ") +
               b.partitionName + " split, keep";
      c.chunks = b.layout.chunks;
      c.placement = b.layout.placement;
      c.partition = b.partition;
      c.policies = b.policies;
      evaluate(std::move(*sched), c);
    }
  }
}

Result<SearchResult> Searcher::run() {
  if (o_.devices < 1) return makeError("search.devices", "devices must be at least 1");
  if (o_.microbatches < 1) return makeError("search.microbatches", "micro-batches must be at least 1");
  if (profile_.layers.empty()) return makeError("search.profile", "the cost profile has no layers");
  if (static_cast<int>(profile_.layers.size()) < o_.devices)
    return makeError("search.profile", "the profile has " + std::to_string(profile_.layers.size()) +
                                           " layers, fewer than the " + std::to_string(o_.devices) +
                                           " devices");
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
    std::stable_sort(others.begin(), others.end(),
                     [](auto& a, auto& b) { return candidateBefore(a.first, b.first); });
    for (size_t i = 1; i < std::min<size_t>(others.size(), 4); ++i)
      randomKnobs(others[i].second, o_.randomSamples / 3);
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
    return makeError("search.no-fit",
                     "no schedule fits the memory limit of " + std::to_string(limit_) +
                         " bytes (not even with full recompute); try more devices or a smaller model");
  phase_ = "done";
  reportProgress(true);
  return std::move(result_);
}

}  // namespace detail

Result<SearchResult> searchSchedule(const CostProfile& profile, const SearchOptions& o) {
  detail::Searcher s(profile, o);
  return s.run();
}

}  // namespace ps::core
