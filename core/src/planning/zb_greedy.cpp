#include "pipestudio/core/planning/zb_greedy.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ps::core::detail {

ZbGreedyInput zbGreedyInput(const std::vector<StageCost>& stages, const CostProfile& profile,
                            std::int64_t limit) {
  ZbGreedyInput in;
  const size_t S = stages.size();
  for (size_t s = 0; s < S; ++s) {
    const StageCost& c = stages[s];
    in.f.push_back(c.F);
    in.i.push_back(c.I);
    in.w.push_back(c.W);
    const double act = static_cast<double>(c.activationBytes);
    const double stash = static_cast<double>(std::min(c.weightGradStashBytes, c.activationBytes));
    in.memF.push_back(act);
    in.memI.push_back(-(act - stash));
    in.memW.push_back(-stash);
    in.maxMem.push_back(limit > 0 ? static_cast<double>(limit - c.staticBytes)
                                  : std::numeric_limits<double>::infinity());
    if (s + 1 < S) {
      // The simulator's transfer time of the lower stage's output (docs/formats.md).
      const double bytes = static_cast<double>(c.outputBytes);
      in.commAfter.push_back(profile.fixedCommMs
                                 ? *profile.fixedCommMs
                                 : profile.link.latencyMs + (profile.link.bandwidthBytesPerMs > 0
                                                                 ? bytes / profile.link.bandwidthBytesPerMs
                                                                 : 0.0));
    }
  }
  return in;
}

std::optional<Schedule> zbGreedySchedule(const ZbGreedyInput& in, int M, const ZbGreedyFlags& fl,
                                         double* longestStageSpanMs) {
  const int S = static_cast<int>(in.f.size());
  if (S < 1 || M < 1) return std::nullopt;
  constexpr double kEps = 1e-9;
  std::vector<int> f(S, 0), b(S, 0), w(S, 0);
  std::vector<double> mem(S, 0), e(S, 0), bubble(S, 0);
  std::vector<double> t(static_cast<size_t>(3) * S * M, 0.0);
  std::vector<std::vector<Op>> order(static_cast<size_t>(S));
  auto T = [&](int type, int s, int mb) -> double& {
    return t[(static_cast<size_t>(type) * S + s) * M + mb];
  };
  auto cost = [&](int type, int s) { return type == 0 ? in.f[s] : type == 1 ? in.i[s] : in.w[s]; };
  auto memOf = [&](int type, int s) { return type == 0 ? in.memF[s] : type == 1 ? in.memI[s] : in.memW[s]; };
  auto comm = [&](int lower) {
    return lower >= 0 && lower + 1 < S ? in.commAfter[static_cast<size_t>(lower)] : 0.0;
  };
  auto maxBubble = [&] { return *std::max_element(bubble.begin(), bubble.end()); };
  auto fits = [&](int s, double add) {
    return mem[s] + add <= in.maxMem[s] + kEps * std::max(1.0, std::abs(in.maxMem[s]));
  };
  bool failed = false;
  auto put = [&](int j, int k) {
    const int i = k == 0 ? f[j] : k == 1 ? b[j] : w[j];
    if (failed || i >= M || !fits(j, memOf(k, j))) {
      failed = true;
      return;
    }
    double tmp = e[j] + cost(k, j);
    const double noBubble = tmp;
    if (j > 0 && k == 0) tmp = std::max(tmp, T(0, j - 1, i) + comm(j - 1) + cost(k, j));
    if (j < S - 1 && k == 1) tmp = std::max(tmp, T(1, j + 1, i) + comm(j) + cost(k, j));
    if (f[j] > 0) bubble[j] += tmp - noBubble;
    e[j] = tmp;
    T(k, j, i) = tmp;
    mem[j] += memOf(k, j);
    (k == 0 ? f[j] : k == 1 ? b[j] : w[j]) += 1;
    order[static_cast<size_t>(j)].push_back(Op{k == 0 ? OpKind::F : k == 1 ? OpKind::I : OpKind::W, j, i});
  };
  // W passes that end before `until`; then one more into the remaining gap when the gap is
  // no larger than what the worst stage already idles (or always, without the greedy flag).
  auto fillW = [&](int j, double until) {
    while (w[j] < b[j] && e[j] + cost(2, j) <= until) put(j, 2);
    if (w[j] < b[j] && e[j] < until) {
      if (until - e[j] <= maxBubble() - bubble[j]) {
        if (fl.noBubbleGreedy) put(j, 2);
      } else {
        put(j, 2);
      }
    }
  };
  auto makeRoom = [&](int j, double need) {
    while (!failed && !fits(j, need)) {
      if (w[j] >= b[j])
        failed = true;
      else
        put(j, 2);
    }
  };
  for (int i = 0; i < M && !failed; ++i) {
    if (i == 0) {
      for (int j = 0; j < S; ++j) put(j, 0);
      // Warm-up: forwards each stage can run before the first gradient comes back.
      std::vector<int> req(S, 0);
      double lastT = 0;
      for (int j = S - 1; j >= 0; --j) {
        if (j == S - 1) {
          lastT = T(0, j, 0) + cost(1, j);
          continue;
        }
        double m = mem[j], c = e[j];
        while (f[j] + req[j] < M &&
               m + memOf(0, j) <= in.maxMem[j] + kEps * std::max(1.0, std::abs(in.maxMem[j]))) {
          if (fl.allowBubbleBeforeFirstB) {
            if (c + cost(0, j) > lastT + comm(j)) break;
          } else if (c >= lastT + comm(j)) {
            break;
          }
          m += memOf(0, j);
          c += cost(0, j);
          ++req[j];
        }
        lastT = std::max(c, lastT + comm(j)) + cost(1, j);
      }
      for (int j = 1; j < S; ++j)
        while (req[j] > 0 && req[j] >= req[j - 1] && f[j] + req[j] < M) --req[j];
      for (int j = 0; j < S; ++j)
        for (int k = 0; k < req[j]; ++k) put(j, 0);
      for (int j = S - 1; j >= 0; --j) put(j, 1);
      continue;
    }
    std::vector<int> req(S, 0);
    for (int j = 0; j < S; ++j) {
      if (f[j] >= M) continue;
      if (j + 1 < S && f[j] >= f[j + 1] + 2 && fl.prioritizeB) {
        const double nextPlusFw = e[j + 1] + cost(0, j + 1) + cost(1, j + 1) + comm(j);
        if (e[j] >= nextPlusFw) continue;
        double wCost = 0, memWithW = mem[j] + memOf(0, j);
        for (int k = 0; memWithW > in.maxMem[j] && w[j] + k < b[j]; ++k) {
          wCost += cost(2, j);
          memWithW += memOf(2, j);
        }
        if (e[j] + cost(0, j) + wCost <= nextPlusFw) {
          req[j] = 1;
          continue;
        }
        if (nextPlusFw - e[j] <= maxBubble() - bubble[j]) continue;
      }
      req[j] = 1;
    }
    for (int j = S - 2; j >= 0; --j) req[j] = std::min(req[j], req[j + 1]);
    for (int j = 0; j < S && !failed; ++j) {
      if (!req[j]) continue;
      makeRoom(j, memOf(0, j));
      if (j > 0 && !failed) fillW(j, T(0, j - 1, f[j]) + comm(j - 1));
      put(j, 0);
    }
    for (int j = S - 1; j >= 0 && !failed; --j) {
      makeRoom(j, memOf(1, j));
      if (j + 1 < S && !failed) fillW(j, T(1, j + 1, i) + comm(j));
      if (j == 0 && f[j] == M)
        while (!failed && w[j] < b[j]) put(j, 2);
      put(j, 1);
    }
  }
  for (int j = 0; j < S && !failed; ++j)
    while (!failed && w[j] < M) put(j, 2);
  if (failed) return std::nullopt;
  if (longestStageSpanMs) {
    *longestStageSpanMs = 0;
    for (int j = 0; j < S; ++j)
      *longestStageSpanMs = std::max(*longestStageSpanMs, T(2, j, M - 1) - T(0, j, 0) + cost(0, j));
  }
  return scheduleOfOrders(S, M, PlacementKind::Linear, order);
}

std::optional<Schedule> scheduleOfOrders(int stages, int microbatches, PlacementKind placement,
                                         const std::vector<std::vector<Op>>& orders) {
  auto pl = Pipeline::make(static_cast<int>(orders.size()), stages, microbatches, placement);
  if (!pl) return std::nullopt;
  Schedule s;
  s.pipeline = *pl;
  s.devices.resize(orders.size());
  for (size_t d = 0; d < orders.size(); ++d)
    for (const Op& op : orders[d]) s.devices[d].push_back(Step{op, std::nullopt});
  return s;
}

}  // namespace ps::core::detail
