// The search's later phases: seeded knob samples around a point, AdaPtis-style partition
// moves, and order moves guided by the critical path and by the idle gaps.
#include <algorithm>
#include <random>

#include "pipestudio/core/analysis/critical_path.h"
#include "planning/searcher.h"

namespace ps::core::detail {

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
      p.knobs.warmupDepth.push_back(
          std::max(1, (sum[static_cast<size_t>(d)] + c - 1) / c + base.knobs.warmupOffset + offset(rng_)));
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
      const size_t from = static_cast<size_t>(g.step) + static_cast<size_t>(ahead);
      if (from >= order.size()) break;
      improved = tryMove(cur, curSummary, g.device, from, static_cast<size_t>(g.step));
    }
  }
}

}  // namespace ps::core::detail
