#include "pipestudio/core/planning/partition_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <unordered_map>

#include "pipestudio/core/model/enum_names.h"
#include "pipestudio/core/planning/schedule_edits.h"

namespace ps::core {

constexpr EnumName<ActivationPolicy> kActivationPolicyNames[] = {{ActivationPolicy::Keep, "keep"},
                                                                 {ActivationPolicy::Recompute, "recompute"},
                                                                 {ActivationPolicy::Offload, "offload"}};

PS_ENUM_NAME_FUNCTION(ActivationPolicy, kActivationPolicyNames, activationPolicyName);

CostProfile scaleMicrobatchSize(const CostProfile& p, int microbatchSize) {
  if (microbatchSize <= 1) return p;
  CostProfile s = p;
  const double k = microbatchSize;
  for (auto& l : s.layers) {
    l.forwardMs *= k;
    l.backwardInputMs *= k;
    l.backwardWeightMs *= k;
    if (l.recomputeMs) *l.recomputeMs *= k;
    l.activationBytes *= microbatchSize;
    l.outputBytes *= microbatchSize;
    if (l.weightGradStashBytes) *l.weightGradStashBytes *= microbatchSize;
  }
  return s;
}

namespace {

std::int64_t staticBytesOf(const CostProfile& p, std::int64_t weightBytes) {
  // As stageCosts computes it, so the planner and the simulator agree to the byte.
  return static_cast<std::int64_t>(
      std::llround(static_cast<double>(weightBytes) *
                   (1.0 + p.gradientBytesPerWeightByte + p.optimizerBytesPerWeightByte)));
}

// Prefix sums so a stage's costs are O(1).
struct Prefix {
  std::vector<double> f, b, r;
  std::vector<std::int64_t> act, weight;
  explicit Prefix(const CostProfile& p) {
    const size_t n = p.layers.size();
    f.assign(n + 1, 0);
    b.assign(n + 1, 0);
    r.assign(n + 1, 0);
    act.assign(n + 1, 0);
    weight.assign(n + 1, 0);
    for (size_t i = 0; i < n; ++i) {
      const auto& l = p.layers[i];
      f[i + 1] = f[i] + l.forwardMs;
      b[i + 1] = b[i] + l.backwardInputMs + l.backwardWeightMs;
      r[i + 1] = r[i] + l.recomputeMs.value_or(l.forwardMs);
      act[i + 1] = act[i] + l.activationBytes;
      weight[i + 1] = weight[i] + l.weightBytes;
    }
  }
};

std::int64_t limitOf(const CostProfile& p, const PartitionOptions& o) {
  if (o.memoryLimitBytes) return std::max<std::int64_t>(0, *o.memoryLimitBytes);
  return std::max<std::int64_t>(0, p.deviceMemoryBytes);
}

// The profile at the plan's micro-batch size, its prefix sums, the memory limit and the layer
// count: what every partition search starts from.
struct Scaled {
  CostProfile p;
  Prefix px;
  std::int64_t limit;
  int n;
  Scaled(const CostProfile& profile, const PartitionOptions& o)
      : p(scaleMicrobatchSize(profile, o.microbatchSize)),
        px(p),
        limit(limitOf(p, o)),
        n(static_cast<int>(p.layers.size())) {}
};

int inflightOf(const PartitionOptions& o, int stage, int stages) {
  if (!o.inflightPerStage.empty() && stage < static_cast<int>(o.inflightPerStage.size()))
    return std::max(1, o.inflightPerStage[static_cast<size_t>(stage)]);
  return std::max(1, std::min(o.microbatches, stages - stage));
}

std::optional<StagePlan> planStageFast(const CostProfile& p, const Prefix& px, int first, int count,
                                       int inflight, std::int64_t limit, bool allowRecompute,
                                       bool allowOffload) {
  const int last = first + count;
  const double fb = (px.f[static_cast<size_t>(last)] - px.f[static_cast<size_t>(first)]) +
                    (px.b[static_cast<size_t>(last)] - px.b[static_cast<size_t>(first)]);
  const std::int64_t act = px.act[static_cast<size_t>(last)] - px.act[static_cast<size_t>(first)];
  const std::int64_t weight = px.weight[static_cast<size_t>(last)] - px.weight[static_cast<size_t>(first)];
  const std::int64_t input = first > 0 ? p.layers[static_cast<size_t>(first - 1)].outputBytes : 0;
  StagePlan sp;
  sp.firstLayer = first;
  sp.layerCount = count;
  sp.inflight = inflight;
  sp.staticBytes = staticBytesOf(p, weight);
  auto fits = [&](std::int64_t peak) { return limit <= 0 || peak <= limit; };

  std::optional<StagePlan> best;
  auto consider = [&](ActivationPolicy pol, double t, std::int64_t peak) {
    if (!fits(peak)) return;
    if (best && !(t < best->timeMs)) return;
    StagePlan c = sp;
    c.policy = pol;
    c.timeMs = t;
    c.peakBytes = peak;
    best = c;
  };
  consider(ActivationPolicy::Keep, fb, sp.staticBytes + static_cast<std::int64_t>(inflight) * act);
  if (allowRecompute && inflight > 1) {
    // Only the stage input stays per micro-batch; one micro-batch's full activations live
    // again between R and its backward.
    const double r = px.r[static_cast<size_t>(last)] - px.r[static_cast<size_t>(first)];
    consider(ActivationPolicy::Recompute, fb + r,
             sp.staticBytes + static_cast<std::int64_t>(inflight) * input + act);
  }
  // Without a host bandwidth the copies cannot be timed: offload would look free, so it is
  // not offered (docs/search.md).
  if (allowOffload && inflight > 2 && p.hostBandwidthBytesPerMs > 0) {
    // Resident at once: the micro-batch being offloaded, the one prefetched and the one in
    // its backward. The copies run beside compute; only what exceeds the stage's compute
    // time is exposed.
    const double copy = 2.0 * static_cast<double>(act) / p.hostBandwidthBytesPerMs;
    const double exposed = std::max(0.0, copy - fb);
    consider(ActivationPolicy::Offload, fb + exposed, sp.staticBytes + 3 * act);
  }
  return best;
}

Diagnostic noFit(const std::string& what) {
  return makeError("partition.no-fit", what);
}

// Greedy packing at target time T. Returns the stage end indices, or nullopt.
std::optional<std::vector<StagePlan>> packGreedy(const CostProfile& p, const Prefix& px, int stages,
                                                 const PartitionOptions& o, std::int64_t limit, double T) {
  const int n = static_cast<int>(p.layers.size());
  std::vector<StagePlan> out;
  int i = 0;
  for (int s = 0; s < stages && i < n; ++s) {
    const int infl = inflightOf(o, s, stages);
    // Leave at least one layer for each remaining stage.
    const int maxCount = n - i - (stages - s - 1);
    std::optional<StagePlan> last;
    for (int c = 1; c <= maxCount; ++c) {
      auto sp = planStageFast(p, px, i, c, infl, limit, o.allowRecompute, o.allowOffload);
      if (!sp || sp->timeMs > T) break;  // feasibility is monotone in the segment
      last = sp;
    }
    if (!last) return std::nullopt;
    out.push_back(*last);
    i += last->layerCount;
  }
  if (i < n) return std::nullopt;
  // Fewer stages than asked: split the longest ones. Later stages hold fewer micro-batches,
  // so a split keeps every stage feasible.
  while (static_cast<int>(out.size()) < stages) {
    size_t pick = out.size();
    for (size_t k = 0; k < out.size(); ++k)
      if (out[k].layerCount > 1 && (pick == out.size() || out[k].timeMs > out[pick].timeMs)) pick = k;
    if (pick == out.size()) return std::nullopt;
    const int first = out[pick].firstLayer, count = out[pick].layerCount;
    out[pick].layerCount = count - 1;
    StagePlan tail;
    tail.firstLayer = first + count - 1;
    tail.layerCount = 1;
    out.insert(out.begin() + static_cast<long>(pick) + 1, tail);
    // Re-plan every stage at its new index.
    for (size_t k = 0; k < out.size(); ++k) {
      auto sp =
          planStageFast(p, px, out[k].firstLayer, out[k].layerCount,
                        inflightOf(o, static_cast<int>(k), stages), limit, o.allowRecompute, o.allowOffload);
      if (!sp) return std::nullopt;
      out[k] = *sp;
    }
  }
  return out;
}

PartitionPlan toPlan(std::vector<StagePlan> stages, const PartitionOptions& o, std::int64_t limit) {
  PartitionPlan plan;
  for (auto& s : stages) {
    plan.layersPerStage.push_back(s.layerCount);
    plan.policies.push_back(s.policy);
    plan.bottleneckMs = std::max(plan.bottleneckMs, s.timeMs);
  }
  plan.stages = std::move(stages);
  plan.microbatchSize = std::max(1, o.microbatchSize);
  plan.memoryLimitBytes = limit;
  return plan;
}

Status checkSizes(const CostProfile& p, const PartitionOptions& o) {
  if (o.stages < 1)
    return makeError("partition.stages", "stages must be at least 1, got " + std::to_string(o.stages));
  if (static_cast<int>(p.layers.size()) < o.stages)
    return makeError("partition.stages", "the profile has " + std::to_string(p.layers.size()) +
                                             " layers, fewer than the " + std::to_string(o.stages) +
                                             " stages asked");
  if (o.microbatchSize < 1)
    return makeError("partition.microbatch-size", "micro-batch size must be at least 1");
  return okStatus();
}

}  // namespace

Result<PartitionPlan> partitionBisection(const CostProfile& profile, const PartitionOptions& o) {
  PS_TRY(checkSizes(profile, o));
  const Scaled scaled(profile, o);
  const auto& [p, px, limit, n] = scaled;

  // Upper bound: everything in one stage with the slowest policy; anything feasible is below.
  double hi = 0;
  for (int i = 0; i < n; ++i) {
    hi += px.f[static_cast<size_t>(i) + 1] - px.f[static_cast<size_t>(i)];
  }
  hi = (px.f.back() + px.b.back() + px.r.back()) * 2 + 1;
  if (p.hostBandwidthBytesPerMs > 0)
    hi += 2.0 * static_cast<double>(px.act.back()) / p.hostBandwidthBytesPerMs;
  auto top = packGreedy(p, px, o.stages, o, limit, hi);
  if (!top) {
    // Name the first layer that cannot fit even alone at its stage's in-flight count.
    for (int i = 0; i < n; ++i) {
      bool any = false;
      for (int s = 0; s < o.stages && !any; ++s)
        any = planStageFast(p, px, i, 1, inflightOf(o, s, o.stages), limit, o.allowRecompute, o.allowOffload)
                  .has_value();
      if (!any)
        return noFit("layer " + std::to_string(i) + " (" + p.layers[static_cast<size_t>(i)].name +
                     ") does not fit the memory limit of " + std::to_string(limit) +
                     " bytes on any stage, whatever its activation policy");
    }
    return noFit("no partition into " + std::to_string(o.stages) + " stages fits the memory limit of " +
                 std::to_string(limit) + " bytes");
  }
  double lo = 0;
  for (int i = 0; i < n; ++i)
    lo = std::max(lo, px.f[static_cast<size_t>(i) + 1] - px.f[static_cast<size_t>(i)] +
                          px.b[static_cast<size_t>(i) + 1] - px.b[static_cast<size_t>(i)]);
  lo = std::min(lo, hi);
  std::vector<StagePlan> best = *top;
  double bestT = 0;
  for (auto& s : best) bestT = std::max(bestT, s.timeMs);
  hi = bestT;
  int steps = 0;
  // Infeasible below lo (some layer alone exceeds it). Bisection on the target time; every
  // feasible probe tightens hi to the packing's actual bottleneck.
  while (hi - lo > 1e-9 * std::max(1.0, hi) && steps < 200) {
    ++steps;
    const double mid = 0.5 * (lo + hi);
    auto r = packGreedy(p, px, o.stages, o, limit, mid);
    if (r) {
      double t = 0;
      for (auto& s : *r) t = std::max(t, s.timeMs);
      best = std::move(*r);
      hi = t;
    } else {
      lo = mid;
    }
  }
  PartitionPlan plan = toPlan(std::move(best), o, limit);
  plan.bisectionSteps = steps;
  return plan;
}

Result<PartitionPlan> partitionBruteForce(const CostProfile& profile, const PartitionOptions& o) {
  PS_TRY(checkSizes(profile, o));
  const Scaled scaled(profile, o);
  // Plain references, not a structured binding: lambdas below capture them (C++20 allows
  // capturing bindings, clang 14 does not).
  const CostProfile& p = scaled.p;
  const Prefix& px = scaled.px;
  const std::int64_t limit = scaled.limit;
  const int n = scaled.n;
  const int S = o.stages;
  // C(n-1, S-1) compositions.
  double combos = 1;
  for (int k = 1; k <= S - 1; ++k) combos = combos * (n - S + k) / k;
  if (combos > 200000)
    return makeError("partition.too-large", "brute force would try " +
                                                std::to_string(static_cast<long long>(combos)) +
                                                " partitions (limit 200000)");
  std::vector<int> cuts(static_cast<size_t>(S) + 1);
  std::optional<std::vector<StagePlan>> best;
  double bestT = std::numeric_limits<double>::infinity();
  // Recursive enumeration of stage boundaries.
  std::vector<StagePlan> cur;
  auto rec = [&](auto&& self, int s, int start) -> void {
    if (s == S - 1) {
      auto sp = planStageFast(p, px, start, n - start, inflightOf(o, s, S), limit, o.allowRecompute,
                              o.allowOffload);
      if (!sp) return;
      cur.push_back(*sp);
      double t = 0;
      for (auto& c : cur) t = std::max(t, c.timeMs);
      if (t < bestT) {
        bestT = t;
        best = cur;
      }
      cur.pop_back();
      return;
    }
    for (int c = 1; start + c <= n - (S - s - 1); ++c) {
      auto sp = planStageFast(p, px, start, c, inflightOf(o, s, S), limit, o.allowRecompute, o.allowOffload);
      if (!sp) break;
      cur.push_back(*sp);
      self(self, s + 1, start + c);
      cur.pop_back();
    }
  };
  rec(rec, 0, 0);
  if (!best) return noFit("no partition into " + std::to_string(S) + " stages fits the memory limit");
  return toPlan(std::move(*best), o, limit);
}

Result<PartitionPlan> planPartition(const CostProfile& profile, const std::vector<int>& layersPerStage,
                                    const PartitionOptions& o) {
  const CostProfile p = scaleMicrobatchSize(profile, o.microbatchSize);
  const Prefix px(p);
  const std::int64_t limit = limitOf(p, o);
  const int S = static_cast<int>(layersPerStage.size());
  int sum = 0;
  for (int c : layersPerStage) {
    if (c < 1) return makeError("partition.layers", "every stage needs at least one layer");
    sum += c;
  }
  if (sum != static_cast<int>(p.layers.size()))
    return makeError("partition.layers", "the split covers " + std::to_string(sum) +
                                             " layers, the profile has " + std::to_string(p.layers.size()));
  PartitionOptions oo = o;
  oo.stages = S;
  std::vector<StagePlan> stages;
  int first = 0;
  for (int s = 0; s < S; ++s) {
    const int c = layersPerStage[static_cast<size_t>(s)];
    auto sp = planStageFast(p, px, first, c, inflightOf(oo, s, S), limit, o.allowRecompute, o.allowOffload);
    if (!sp)
      return noFit("stage " + std::to_string(s) + " (layers " + std::to_string(first) + ".." +
                   std::to_string(first + c - 1) + ") does not fit the memory limit of " +
                   std::to_string(limit) + " bytes");
    stages.push_back(*sp);
    first += c;
  }
  return toPlan(std::move(stages), oo, limit);
}

namespace {
template <typename Probe>
MicrobatchSizeResult largestBy(int maxSize, Probe&& probe) {
  MicrobatchSizeResult out;
  auto r1 = probe(1);
  if (!r1) return out;
  out.largestMicrobatchSize = 1;
  out.plan = *r1;
  // Exponential search, then bisection: fitting is monotone in the size (every byte term
  // grows with it).
  int lo = 1, hi = 2;
  while (hi <= maxSize) {
    auto r = probe(hi);
    if (!r) break;
    lo = hi;
    out.plan = *r;
    hi *= 2;
  }
  hi = std::min(hi, maxSize + 1);
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    auto r = probe(mid);
    if (r) {
      lo = mid;
      out.plan = *r;
    } else {
      hi = mid;
    }
  }
  out.largestMicrobatchSize = lo;
  return out;
}
}  // namespace

MicrobatchSizeResult largestMicrobatchSize(const CostProfile& p, const PartitionOptions& o, int maxSize) {
  return largestBy(maxSize, [&](int size) -> std::optional<PartitionPlan> {
    PartitionOptions oo = o;
    oo.microbatchSize = size;
    auto r = partitionBisection(p, oo);
    if (!r) return std::nullopt;
    return std::move(r).value();
  });
}

MicrobatchSizeResult largestMicrobatchSizeFixed(const CostProfile& p, const std::vector<int>& layersPerStage,
                                                const PartitionOptions& o, int maxSize) {
  std::vector<int> split = layersPerStage;
  if (split.empty()) {
    auto r = partitionLayers(p, o.stages);
    if (!r) return {};
    split = *r;
  }
  return largestBy(maxSize, [&](int size) -> std::optional<PartitionPlan> {
    PartitionOptions oo = o;
    oo.microbatchSize = size;
    auto r = planPartition(p, split, oo);
    if (!r) return std::nullopt;
    return std::move(r).value();
  });
}

Result<Schedule> applyActivationPolicies(const Schedule& s, const std::vector<ActivationPolicy>& policies) {
  if (static_cast<int>(policies.size()) != s.pipeline.stages)
    return makeError("partition.policies", "the plan has " + std::to_string(policies.size()) +
                                               " stage policies, the schedule " +
                                               std::to_string(s.pipeline.stages) + " stages");
  Schedule out = s;
  auto isBackward = [](OpKind k) { return k == OpKind::B || k == OpKind::I; };
  // Stages that already carry memory ops are left as they are.
  std::vector<char> hasMemOps(policies.size(), 0);
  for (auto& dev : s.devices)
    for (auto& st : dev)
      for (const Op* op : {&st.first, st.second ? &*st.second : nullptr})
        if (op && (op->kind == OpKind::R || op->kind == OpKind::Offload || op->kind == OpKind::Reload) &&
            op->stage >= 0 && op->stage < s.pipeline.stages)
          hasMemOps[static_cast<size_t>(op->stage)] = 1;
  auto policyOf = [&](const Op& op) {
    if (op.stage < 0 || op.stage >= s.pipeline.stages || hasMemOps[static_cast<size_t>(op.stage)])
      return ActivationPolicy::Keep;
    return policies[static_cast<size_t>(op.stage)];
  };
  for (size_t d = 0; d < s.devices.size(); ++d) {
    const auto& in = s.devices[d];
    std::vector<Step> res;
    res.reserve(in.size() * 2);
    auto keyOf = [&](const Op& op) {
      return static_cast<long long>(op.stage) * (static_cast<long long>(s.pipeline.microbatches) + 1) +
             op.microbatch;
    };
    std::unordered_map<long long, size_t> fSteps;
    for (size_t j = 0; j < in.size(); ++j)
      for (const Op* f : {&in[j].first, in[j].second ? &*in[j].second : nullptr})
        if (f && f->kind == OpKind::F) fSteps[keyOf(*f)] = j;
    // reloadBefore[i]: RELOAD ops to emit before step i, placed by the one rule the designer's
    // offload edit uses too (reloadSlot: one backward ahead, never before the op's own F).
    std::vector<std::vector<Op>> reloadBefore(in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      if (!isBackwardStep(in[i])) continue;
      const Op& op = backwardOpOf(in[i]);
      if (policyOf(op) != ActivationPolicy::Offload) continue;
      auto fit = fSteps.find(keyOf(op));
      const size_t fStep = fit == fSteps.end() ? 0 : fit->second;
      reloadBefore[reloadSlot(in, i, fStep + 1)].push_back(Op{OpKind::Reload, op.stage, op.microbatch});
    }
    for (size_t i = 0; i < in.size(); ++i) {
      for (auto& r : reloadBefore[i]) res.push_back(Step{r, std::nullopt});
      const Step& st = in[i];
      // Recompute right before the backward (of the pair's backward, for an overlapped pair).
      for (const Op* op : {&st.first, st.second ? &*st.second : nullptr})
        if (op && isBackward(op->kind) && policyOf(*op) == ActivationPolicy::Recompute)
          res.push_back(Step{Op{OpKind::R, op->stage, op->microbatch}, std::nullopt});
      res.push_back(st);
      for (const Op* op : {&st.first, st.second ? &*st.second : nullptr})
        if (op && op->kind == OpKind::F && policyOf(*op) == ActivationPolicy::Offload)
          res.push_back(Step{Op{OpKind::Offload, op->stage, op->microbatch}, std::nullopt});
    }
    out.devices[d] = std::move(res);
  }
  return out;
}

}  // namespace ps::core
