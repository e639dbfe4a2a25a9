// List scheduler: replays the pipeline in time and, whenever a device is free, starts its
// ready op of highest priority, as the zero-bubble heuristics do. The timing model here is
// only a guide for the order; the simulator judges the result.
#include "pipestudio/core/planning/list_scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

namespace ps::core {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

enum class Cat : int {
  UrgentW = -1,
  Backward = 0,
  ForcedW = 1,
  Forward = 2,
  Recompute = 3,
  FillerW = 4,
  None = 9
};

struct Choice {
  Cat cat = Cat::None;
  OpKind kind = OpKind::F;
  int stage = -1;
  int mb = -1;
  double start = kInf;
  std::tuple<int, int, int> key{0, 0, 0};
  bool recompute = false;  // forwards: stash only the input, R before the backward
};

}  // namespace

Result<Schedule> listSchedule(const Pipeline& pl, const std::vector<StageCost>& stages,
                              const CostProfile& profile, const ListSchedulerOptions& o) {
  const int D = pl.devices, S = pl.stages, M = pl.microbatches;
  if (static_cast<int>(stages.size()) != S)
    return makeError("search.list-scheduler", "stage costs for " + std::to_string(stages.size()) +
                                                  " stages, the pipeline has " + std::to_string(S));
  if (static_cast<int>(pl.stageToDevice.size()) != S || D < 1 || M < 1)
    return makeError("search.list-scheduler", "pipeline placement is not materialised");
  for (int dv : pl.stageToDevice)
    if (dv < 0 || dv >= D) return makeError("search.list-scheduler", "placement names a device out of range");
  std::vector<ActivationPolicy> pol = o.policies;
  pol.resize(static_cast<size_t>(S), ActivationPolicy::Keep);

  const auto us = [](int v) { return static_cast<size_t>(v); };
  // Stage position among its device's stages (the chunk index).
  std::vector<int> chunkOf(us(S), 0);
  std::vector<int> stagesOnDevice(us(D), 0);
  for (int s = 0; s < S; ++s) chunkOf[us(s)] = stagesOnDevice[us(pl.stageToDevice[us(s)])]++;
  int maxChunks = 1;
  for (int c : stagesOnDevice) maxChunks = std::max(maxChunks, c);

  const int group = o.microbatchGroup > 0 ? o.microbatchGroup : D;
  std::vector<int> depth(us(D));
  for (int d = 0; d < D; ++d) {
    int v;
    if (d < static_cast<int>(o.warmupDepth.size())) {
      v = o.warmupDepth[us(d)];
    } else {
      // 1F1B depth: sum over the device's stages of the stages from it to the end, per chunk.
      int sum = 0;
      for (int s = 0; s < S; ++s)
        if (pl.stageToDevice[us(s)] == d) sum += S - s;
      v = (sum + stagesOnDevice[us(d)] - 1) / std::max(1, stagesOnDevice[us(d)]);
      v = std::max(v, 1);
    }
    depth[us(d)] = std::max(1, v + o.warmupOffset);
  }

  std::int64_t limit = o.memoryLimitBytes ? *o.memoryLimitBytes : profile.deviceMemoryBytes;
  std::vector<std::int64_t> used(us(D), 0);
  for (int s = 0; s < S; ++s) used[us(pl.stageToDevice[us(s)])] += stages[us(s)].staticBytes;

  auto commMs = [&](std::int64_t bytes) {
    if (profile.fixedCommMs) return *profile.fixedCommMs;
    double t = profile.link.latencyMs;
    if (profile.link.bandwidthBytesPerMs > 0)
      t += static_cast<double>(bytes) / profile.link.bandwidthBytesPerMs;
    return t;
  };
  std::vector<double> fwdComm(us(S), 0), bwdComm(us(S), 0);  // into stage s (from s-1 / from s+1)
  for (int s = 0; s < S; ++s) {
    if (s > 0 && pl.stageToDevice[us(s)] != pl.stageToDevice[us(s - 1)])
      fwdComm[us(s)] = commMs(stages[us(s - 1)].outputBytes);
    if (s + 1 < S && pl.stageToDevice[us(s)] != pl.stageToDevice[us(s + 1)])
      bwdComm[us(s)] = commMs(stages[us(s)].outputBytes);
  }

  const size_t SM = us(S) * us(M);
  auto at = [&](int s, int m) { return us(s) * us(M) + us(m); };
  std::vector<double> fEnd(SM, kInf), bEnd(SM, kInf), rEnd(SM, kInf);
  std::vector<int> nextF(us(S), 0), nextB(us(S), 0), nextW(us(S), 0);
  std::vector<double> freeAt(us(D), 0);
  std::vector<int> inflight(us(D), 0), pendingW(us(D), 0);
  std::vector<std::int64_t> wStash(SM, 0);
  std::vector<char> rec(SM, 0);  // (s, m) stashes its input only and is rebuilt by R
  const bool onDemand = o.recomputeOnDemand;
  std::vector<std::vector<Step>> orders(us(D));
  const bool split = o.splitBackward;

  auto stashOf = [&](int s) -> std::int64_t {
    const auto& c = stages[us(s)];
    switch (pol[us(s)]) {
      case ActivationPolicy::Keep:
        return c.activationBytes;
      case ActivationPolicy::Recompute:
        return c.inputBytes;
      case ActivationPolicy::Offload:
        return 0;
    }
    return c.activationBytes;
  };
  auto fits = [&](int d, std::int64_t extra) { return limit <= 0 || used[us(d)] + extra <= limit; };
  // Room a device keeps free for one rebuild (on-demand recompute): the largest stash of its
  // stages that may recompute, so a forward that does not fit can always fall back to
  // stashing its input.
  std::vector<std::int64_t> reserveOf(us(D), 0);
  for (int s = 0; s < S; ++s)
    if (pol[us(s)] == ActivationPolicy::Keep)
      reserveOf[us(pl.stageToDevice[us(s)])] =
          std::max(reserveOf[us(pl.stageToDevice[us(s)])], stages[us(s)].activationBytes);
  auto backwardReady = [&](int s, int m) {  // gradient (or loss) available
    if (s == S - 1) return fEnd[at(s, m)];
    const double e = bEnd[at(s + 1, m)];
    return e == kInf ? kInf : e + bwdComm[us(s)];
  };

  auto better = [](const Choice& a, const Choice& b) {
    // earlier start, then category, then key
    if (a.start != b.start) return a.start < b.start;
    if (a.cat != b.cat) return a.cat < b.cat;
    return a.key < b.key;
  };

  // Best op on device d; `force` lifts the warm-up and memory limits on forwards.
  auto choose = [&](int d, bool force) {
    std::vector<Choice> cands;
    for (int s = 0; s < S; ++s) {
      if (pl.stageToDevice[us(s)] != d) continue;
      const int c = chunkOf[us(s)];
      // forward
      if (int m = nextF[us(s)]; m < M) {
        double ready =
            s == 0 ? 0.0 : (fEnd[at(s - 1, m)] == kInf ? kInf : fEnd[at(s - 1, m)] + fwdComm[us(s)]);
        const std::int64_t A = stages[us(s)].activationBytes;
        bool allowed = force;
        bool recompute = pol[us(s)] == ActivationPolicy::Recompute;
        if (onDemand && pol[us(s)] == ActivationPolicy::Keep) {
          // Keep when there is room for the stash and any rebuild still owed; otherwise
          // stash the input only, as long as its own rebuild will fit later.
          const std::int64_t reserve = reserveOf[us(d)];
          recompute = !fits(d, A + reserve);
          if (!force && inflight[us(d)] < depth[us(d)])
            allowed = !recompute || fits(d, stages[us(s)].inputBytes + std::max(reserve, A));
        } else if (!force) {
          allowed = inflight[us(d)] < depth[us(d)] && fits(d, std::max(stashOf(s), A));
        }
        if (ready < kInf && allowed)
          cands.push_back({Cat::Forward, OpKind::F, s, m, ready, {m / group, c, m % group}, recompute});
      }
      // backward (or its recompute)
      if (int m = nextB[us(s)]; m < nextF[us(s)]) {
        const double grad = backwardReady(s, m);
        if (rec[at(s, m)] && rEnd[at(s, m)] == kInf) {
          const double ready = fEnd[at(s, m)];
          // Urgent once the gradient is there; otherwise it fills a bubble.
          const Cat cat = grad < kInf ? Cat::Backward : Cat::Recompute;
          if (cat == Cat::Backward || fits(d, stages[us(s)].activationBytes))
            cands.push_back(
                {cat, OpKind::R, s, m, std::max(ready, 0.0), {m / group, maxChunks - c, m % group}});
        } else if (grad < kInf) {
          double ready = std::max(grad, fEnd[at(s, m)]);
          if (rec[at(s, m)]) ready = std::max(ready, rEnd[at(s, m)]);
          cands.push_back({Cat::Backward,
                           split ? OpKind::I : OpKind::B,
                           s,
                           m,
                           ready,
                           {m / group, maxChunks - c, m % group}});
        }
      }
      // weight gradient
      if (split) {
        if (int m = nextW[us(s)]; m < nextB[us(s)]) {
          Cat cat = (o.maxPendingW >= 0 && pendingW[us(d)] > o.maxPendingW) ? Cat::ForcedW : Cat::FillerW;
          // On-demand recompute: deferred W stashes must not eat the room kept for a rebuild.
          if (onDemand && !fits(d, reserveOf[us(d)])) cat = Cat::UrgentW;
          cands.push_back({cat, OpKind::W, s, m, bEnd[at(s, m)], {m / group, maxChunks - c, m % group}});
        }
      }
    }
    Choice best;
    if (cands.empty()) return best;
    // Start time: the device is free at freeAt[d]; if nothing is ready then, the earliest ready.
    double t = kInf;
    for (auto& c : cands) t = std::min(t, std::max(c.start, freeAt[us(d)]));
    for (auto& c : cands) {
      if (std::max(c.start, freeAt[us(d)]) > t) continue;
      Choice cc = c;
      cc.start = t;
      if (best.cat == Cat::None || cc.cat < best.cat || (cc.cat == best.cat && cc.key < best.key)) best = cc;
    }
    return best;
  };

  const size_t perSM = split ? 3 : 2;
  size_t total = SM * perSM;  // grows by one R per recomputed forward
  size_t done = 0;
  while (done < total) {
    Choice best;
    int bestDev = -1;
    auto pickAmongDevices = [&](bool force) {
      for (int d = 0; d < D; ++d) {
        Choice c = choose(d, force);
        if (c.cat == Cat::None) continue;
        if (bestDev < 0 || better(c, best)) {
          best = c;
          bestDev = d;
        }
      }
    };
    pickAmongDevices(false);
    // Every device is held back by its warm-up depth or memory headroom: let the earliest
    // forward through so the pipeline drains (the simulator reports any overflow).
    if (bestDev < 0) pickAmongDevices(true);
    if (bestDev < 0) return makeError("search.list-scheduler", "no op can start (internal ordering error)");
    const int d = bestDev, s = best.stage, m = best.mb;
    const auto& c = stages[us(s)];
    double dur = 0;
    switch (best.kind) {
      case OpKind::F:
        dur = c.F;
        fEnd[at(s, m)] = best.start + dur;
        ++nextF[us(s)];
        ++inflight[us(d)];
        // Memory as the simulator accounts it: F stashes the input (recompute) or the
        // activations, R adds the activations again, I keeps the weight-gradient share.
        if (best.recompute) {
          rec[at(s, m)] = 1;
          ++total;
          used[us(d)] += c.inputBytes;
        } else {
          used[us(d)] += stashOf(s);
        }
        break;
      case OpKind::R:
        dur = c.R;
        rEnd[at(s, m)] = best.start + dur;
        used[us(d)] += c.activationBytes;
        break;
      case OpKind::B:
      case OpKind::I: {
        dur = best.kind == OpKind::B ? c.B : c.I;
        bEnd[at(s, m)] = best.start + dur;
        ++nextB[us(s)];
        --inflight[us(d)];
        const std::int64_t held = rec[at(s, m)]                             ? c.inputBytes + c.activationBytes
                                  : pol[us(s)] == ActivationPolicy::Offload ? 0
                                                                            : c.activationBytes;
        if (best.kind == OpKind::B) {
          used[us(d)] -= held;
        } else {
          const std::int64_t keepForW = std::min(c.weightGradStashBytes, held);
          wStash[at(s, m)] = keepForW;
          used[us(d)] -= held - keepForW;
          ++pendingW[us(d)];
        }
        break;
      }
      case OpKind::W:
        dur = c.W;
        ++nextW[us(s)];
        --pendingW[us(d)];
        used[us(d)] -= wStash[at(s, m)];
        break;
      default:
        break;
    }
    freeAt[us(d)] = best.start + dur;
    orders[us(d)].push_back(Step{Op{best.kind, s, m}, std::nullopt});
    ++done;
  }

  Schedule out;
  out.name = o.label.empty() ? "list" : o.label;
  out.pipeline = pl;
  out.devices = std::move(orders);
  bool anyOffload =
      std::any_of(pol.begin(), pol.end(), [](auto p) { return p == ActivationPolicy::Offload; });
  if (anyOffload) return applyActivationPolicies(out, pol);
  return out;
}

}  // namespace ps::core
