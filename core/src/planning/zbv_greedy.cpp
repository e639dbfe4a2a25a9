#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <limits>

#include "pipestudio/core/planning/zb_greedy.h"

namespace ps::core::detail {

namespace {

struct VInput {
  int S = 0, M = 0;  // devices, micro-batches
  // [cat][chunk][device]: cost and memory; chunk as the greedy numbers it (backward chunk 1 is
  // the down stage's backward).
  std::vector<double> cost, mem;
  std::vector<double> comm;  // [cat][chunk][device]: transfer time of the dependency from the neighbour
  std::vector<double> maxMem;
  double at(const std::vector<double>& v, int cat, int chunk, int d) const {
    return v[(static_cast<size_t>(cat) * 2 + static_cast<size_t>(chunk)) * static_cast<size_t>(S) +
             static_cast<size_t>(d)];
  }
};

struct VResult {
  bool ok = false;
  double maxBubble = 0;
  std::vector<std::vector<std::array<int, 3>>> order;
};

VResult tryV(const VInput& in, bool fillF, bool fillB, const std::vector<double>* approved) {
  const int S = in.S, M = in.M;
  VResult r;
  std::vector<std::array<int, 6>> count(static_cast<size_t>(S), std::array<int, 6>{});
  std::vector<double> endT(static_cast<size_t>(6) * S * M, -1), cur(S, 0), mem(S, 0), bubble(S, 0);
  std::vector<std::deque<int>> pendingW(static_cast<size_t>(S));
  r.order.assign(static_cast<size_t>(S), {});
  const std::vector<double> appr = approved ? *approved : std::vector<double>(S, -1);
  const double maxAppr = *std::max_element(appr.begin(), appr.end());
  auto id = [&](int cat, int chunk, int st, int mb) {
    return ((static_cast<size_t>(cat) * 2 + static_cast<size_t>(chunk)) * static_cast<size_t>(S) +
            static_cast<size_t>(st)) *
               static_cast<size_t>(M) +
           static_cast<size_t>(mb);
  };
  auto cost = [&](int cat, int chunk, int d) { return in.at(in.cost, cat, chunk, d); };
  auto memOf = [&](int cat, int chunk, int d) { return in.at(in.mem, cat, chunk, d); };
  auto comm = [&](int cat, int chunk, int d) { return in.at(in.comm, cat, chunk, d); };
  auto fits = [&](int d, double add) {
    return mem[d] + add <= in.maxMem[d] + 1e-9 * std::max(1.0, std::abs(in.maxMem[d]));
  };
  auto maxStageBubble = [&](int st) {
    double m = *std::max_element(bubble.begin(), bubble.end());
    if (st >= 0) m = std::max(m, maxAppr - appr[static_cast<size_t>(st)]);
    return m;
  };
  bool failed = false;
  auto put = [&](int cat, int chunk, int st) {
    if (failed) return;
    double tmp = cur[st] + cost(cat, chunk, st);
    const double noBubble = tmp;
    const int cnt = count[st][cat * 2 + chunk];
    if (cnt >= M || !fits(st, memOf(cat, chunk, st))) {
      failed = true;
      return;
    }
    if (cat < 2 && ((chunk == 1 && st < S - 1) || (chunk == 0 && st > 0))) {
      const double e = endT[id(cat, chunk, chunk == 1 ? st + 1 : st - 1, cnt)];
      if (e < 0) {
        failed = true;
        return;
      }
      tmp = std::max(tmp, e + comm(cat, chunk, st) + cost(cat, chunk, st));
    }
    if (count[st][0] > 0) bubble[st] += tmp - noBubble;
    endT[id(cat, chunk, st, cnt)] = tmp;
    cur[st] = tmp;
    mem[st] += memOf(cat, chunk, st);
    r.order[static_cast<size_t>(st)].push_back({cat, chunk, cnt});
    if (cat == 1) pendingW[static_cast<size_t>(st)].push_back(chunk);
    ++count[st][cat * 2 + chunk];
  };
  auto putW = [&](int st) {
    if (pendingW[static_cast<size_t>(st)].empty()) {
      failed = true;
      return;
    }
    const int chunk = pendingW[static_cast<size_t>(st)].front();
    pendingW[static_cast<size_t>(st)].pop_front();
    put(2, chunk, st);
  };
  // The dependency's end for the gap tests; -1 (none) reads as the greedy's end_time[-1].
  auto endOr = [&](long fa) { return fa >= 0 ? endT[static_cast<size_t>(fa)] : endT.back(); };
  for (int i = 0; i < S; ++i) put(0, 0, i);
  for (int i = S - 1; i >= 0 && !failed; --i) {
    if (i == S - 1) {
      put(0, 1, i);
      continue;
    }
    const double tmp = endT[id(0, 1, i + 1, 0)] + comm(0, 1, i);
    while (!failed && fits(i, memOf(0, 0, i) * (2 + i * 2)) && cur[i] + cost(0, 0, i) <= tmp &&
           count[i][0] < M - i)
      for (int j = 0; j <= i; ++j) put(0, 0, j);
    put(0, 1, i);
  }
  int iterChunk = 0;
  for (int i = 1; i < S && !failed; ++i)
    while (!failed && (count[i][0] + count[i][1] < count[i - 1][0] + count[i - 1][1] ||
                       (count[i][1] <= count[i - 1][1] && count[i - 1][1] < M))) {
      for (int j = S - 1; j >= i; --j)
        if (count[j][iterChunk] < M) put(0, iterChunk, j);
      iterChunk = 1 - iterChunk;
    }
  for (int round = 0; round < 2 * M && !failed; ++round) {
    for (int i = 0; i < S && !failed; ++i)
      while (!failed && !fits(i, std::max(memOf(1, 0, i), memOf(1, 1, i)))) putW(i);
    std::vector<int> b0, b1;
    for (int i = 0; i < S; ++i) {
      // The down chunk's backward when one is owed and its input is there (or nothing else is).
      const bool down = count[i][3] < count[i][2] &&
                        (i == S - 1 || endT[id(1, 1, i + 1, count[i][3])] >= 0 || count[i][2] >= M);
      (down ? b1 : b0).push_back(i);
    }
    std::vector<std::pair<int, int>> ranks;
    for (auto it = b1.rbegin(); it != b1.rend(); ++it) ranks.emplace_back(*it, 1);
    for (int i : b0) ranks.emplace_back(i, 0);
    for (auto [i, ch] : ranks) {
      if (failed) break;
      long fa = -1;
      if (ch == 1 && i < S - 1) fa = static_cast<long>(id(1, 1, i + 1, count[i][3]));
      if (ch == 0 && i > 0) fa = static_cast<long>(id(1, 0, i - 1, count[i][2]));
      const double c = comm(1, ch, i);
      while (!failed && !pendingW[static_cast<size_t>(i)].empty() && fa >= 0 &&
             endOr(fa) + c >= cur[i] + cost(2, pendingW[static_cast<size_t>(i)].front(), i))
        putW(i);
      if (!failed && !pendingW[static_cast<size_t>(i)].empty() &&
          endOr(fa) + c - cur[i] > maxStageBubble(i) - bubble[i])
        if (ch == 1 || fillB) putW(i);
      put(1, ch, i);
    }
    for (int i = 0; i < S && !failed; ++i) {
      if (count[i][1] >= M) continue;
      // The down chunk's forward when the up chunk is ahead and its input is there; else the up
      // chunk's when it is not behind, or has one left whose input is there.
      const bool upAhead = count[i][1] < count[i][0];
      const bool down = upAhead && (i == S - 1 || endT[id(0, 1, i + 1, count[i][1])] >= 0);
      const bool up =
          !down && (!upAhead || (count[i][0] < M && (i == 0 || endT[id(0, 0, i - 1, count[i][0])] >= 0)));
      if (!down && !up) continue;
      const int item = down ? 1 : 0;
      while (!failed && !fits(i, memOf(0, item, i))) putW(i);
      long fa = -1;
      if (item == 0 && i > 0) fa = static_cast<long>(id(0, 0, i - 1, count[i][0]));
      if (item == 1 && i < S - 1) fa = static_cast<long>(id(0, 1, i + 1, count[i][1]));
      const double c = comm(0, item, i);
      while (!failed && !pendingW[static_cast<size_t>(i)].empty() && fa >= 0 &&
             endOr(fa) + c >= cur[i] + cost(2, pendingW[static_cast<size_t>(i)].front(), i))
        putW(i);
      if (!failed && !pendingW[static_cast<size_t>(i)].empty() &&
          endOr(fa) + c - cur[i] > maxStageBubble(i) - bubble[i])
        if (fillF) putW(i);
      put(0, item, i);
    }
  }
  for (int i = 0; i < S && !failed; ++i)
    while (!failed && !pendingW[static_cast<size_t>(i)].empty()) putW(i);
  if (failed) return r;
  for (int i = 0; i < S; ++i)
    if (count[i][4] < M || count[i][5] < M) return r;
  r.ok = true;
  r.maxBubble = maxStageBubble(-1);
  if (maxAppr < 0 || r.maxBubble < maxAppr) {
    VResult again = tryV(in, fillF, fillB, &bubble);
    if (again.ok && again.maxBubble < r.maxBubble) return again;
  }
  return r;
}

}  // namespace

std::optional<Schedule> zbvGreedySchedule(const std::vector<StageCost>& stages, const CostProfile& profile,
                                          std::int64_t limit, int M, bool fillF, bool fillB,
                                          double* maxStageBubbleMs) {
  const int S2 = static_cast<int>(stages.size());
  if (S2 < 2 || S2 % 2 != 0 || M < 1) return std::nullopt;
  VInput in;
  in.S = S2 / 2;
  in.M = M;
  const int S = in.S;
  in.cost.assign(6 * static_cast<size_t>(S), 0);
  in.mem.assign(6 * static_cast<size_t>(S), 0);
  in.comm.assign(6 * static_cast<size_t>(S), 0);
  auto link = [&](int lower) {
    const double bytes = static_cast<double>(stages[static_cast<size_t>(lower)].outputBytes);
    return profile.fixedCommMs
               ? *profile.fixedCommMs
               : profile.link.latencyMs +
                     (profile.link.bandwidthBytesPerMs > 0 ? bytes / profile.link.bandwidthBytesPerMs : 0.0);
  };
  for (int d = 0; d < S; ++d) {
    std::int64_t stat =
        stages[static_cast<size_t>(d)].staticBytes + stages[static_cast<size_t>(S2 - 1 - d)].staticBytes;
    in.maxMem.push_back(limit > 0 ? static_cast<double>(limit - stat)
                                  : std::numeric_limits<double>::infinity());
    for (int cat = 0; cat < 3; ++cat)
      for (int chunk = 0; chunk < 2; ++chunk) {
        const int modelChunk = cat == 0 ? chunk : 1 - chunk;
        const int st = modelChunk == 0 ? d : S2 - 1 - d;
        const StageCost& c = stages[static_cast<size_t>(st)];
        const size_t k =
            (static_cast<size_t>(cat) * 2 + static_cast<size_t>(chunk)) * static_cast<size_t>(S) +
            static_cast<size_t>(d);
        const double act = static_cast<double>(c.activationBytes);
        const double stash = static_cast<double>(std::min(c.weightGradStashBytes, c.activationBytes));
        in.cost[k] = cat == 0 ? c.F : cat == 1 ? c.I : c.W;
        in.mem[k] = cat == 0 ? act : cat == 1 ? -(act - stash) : -stash;
        // Forward from the previous model stage, backward from the next one.
        if (cat == 0)
          in.comm[k] = st > 0 ? link(st - 1) : 0;
        else if (cat == 1)
          in.comm[k] = st + 1 < S2 ? link(st) : 0;
      }
  }
  VResult v = tryV(in, fillF, fillB, nullptr);
  if (!v.ok) return std::nullopt;
  if (maxStageBubbleMs) *maxStageBubbleMs = v.maxBubble;
  std::vector<std::vector<Op>> order(static_cast<size_t>(S));
  for (int d = 0; d < S; ++d)
    for (auto [cat, chunk, mb] : v.order[static_cast<size_t>(d)]) {
      const int modelChunk = cat == 0 ? chunk : 1 - chunk;
      const int st = modelChunk == 0 ? d : S2 - 1 - d;
      order[static_cast<size_t>(d)].push_back(Op{cat == 0   ? OpKind::F
                                                 : cat == 1 ? OpKind::I
                                                            : OpKind::W,
                                                 st, mb});
    }
  return scheduleOfOrders(S2, M, PlacementKind::VShape, order);
}

}  // namespace ps::core::detail
