// Steady-state search (docs/benchmarks.md, "Steady state"): the iteration time a long run pays
// when each device starts its next iteration after its own optimizer step (overlap boundary).
//
// Part 1, Zero Bubble's grid: 4 and 8 devices (one stage each), 8..32 micro-batches, uniform,
// realistic and heterogeneous per-stage costs, memory limits of D and 2D activations (48
// cases). Zero Bubble's automatic scheduler (its heuristic `manual_order` over its eight flag
// combinations, as in sail-sg/zero-bubble-pipeline-parallelism auto_schedule.py; re-implemented
// here from its description of the algorithm) gives its own metric, the longest per-stage span
// from first forward to last weight gradient. PipeStudio's search runs with the steady-state
// objective (and, separately, the makespan objective) under the same memory limit.
//
// Part 2, the model zoo: the steady-state objective against the best built-in measured the
// same way.
//
// After the benchmarks markdown tables are printed to stdout.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <deque>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pipestudio/core/analysis/iterations.h"
#include "pipestudio/core/planning/model_zoo_hetero.h"
#include "pipestudio/core/planning/search.h"
#include "pipestudio/core/analysis/simulator.h"

using namespace ps::core;

namespace {

// ---- Zero Bubble's heuristic (manual_order), one stage per device -----------------------------

struct StageCosts {
  std::vector<double> f, b, w;        // times (ms); b is the input-gradient pass (our I)
  std::vector<double> memF, memB, memW;  // memory units; memF + memB + memW == 0
  double comm = 0;
};

struct ZbResult {
  bool ok = false;
  double bestTime = 0;  // max over stages of (last W end - first F start)
  std::vector<std::vector<std::pair<int, int>>> order;  // per stage: (type 0 F / 1 B / 2 W, micro-batch)
};

// One run of the greedy with its three flags. Follows the published algorithm step by step:
// a first round that decides each stage's warm-up forwards from memory and the time the first
// backward needs to come back, then per micro-batch a forward round (top to bottom) and a
// backward round (bottom to top), inserting W passes where the stage would otherwise idle or
// run out of memory, then the remaining W passes.
ZbResult zbManualOrder(const StageCosts& c, int S, int M, const std::vector<double>& maxMem, bool allowBubbleBeforeFirstB,
                       bool prioritizeB, bool noBubbleGreedy) {
  ZbResult r;
  r.order.assign(static_cast<size_t>(S), {});
  std::vector<int> f(S, 0), b(S, 0), w(S, 0);
  std::vector<double> mem(S, 0), e(S, 0), bubble(S, 0);
  std::vector<double> t(static_cast<size_t>(3 * S * M), 0.0);
  auto T = [&](int type, int s, int mb) -> double& { return t[static_cast<size_t>((type * S + s) * M + mb)]; };
  auto cost = [&](int type, int s) { return type == 0 ? c.f[s] : type == 1 ? c.b[s] : c.w[s]; };
  auto memOf = [&](int type, int s) { return type == 0 ? c.memF[s] : type == 1 ? c.memB[s] : c.memW[s]; };
  auto maxBubble = [&] { return *std::max_element(bubble.begin(), bubble.end()); };
  bool failed = false;
  auto put = [&](int j, int k) {
    const int i = k == 0 ? f[j] : k == 1 ? b[j] : w[j];
    if (i >= M || mem[j] + memOf(k, j) > maxMem[j] + 1e-9) {
      failed = true;
      return;
    }
    double tmp = e[j] + cost(k, j);
    const double noBubble = tmp;
    if (j > 0 && k == 0) tmp = std::max(tmp, T(0, j - 1, i) + c.comm + cost(k, j));
    if (j < S - 1 && k == 1) tmp = std::max(tmp, T(1, j + 1, i) + c.comm + cost(k, j));
    if (f[j] > 0) bubble[j] += tmp - noBubble;
    e[j] = tmp;
    T(k, j, i) = tmp;
    mem[j] += memOf(k, j);
    (k == 0 ? f[j] : k == 1 ? b[j] : w[j]) += 1;
    r.order[static_cast<size_t>(j)].emplace_back(k, i);
  };
  auto fillW = [&](int j, double until) {
    // W passes that fit before `until`, then one more when the gap is worth it.
    while (w[j] < b[j] && e[j] + cost(2, j) <= until) put(j, 2);
    if (w[j] < b[j] && e[j] < until) {
      if (until - e[j] <= maxBubble() - bubble[j]) {
        if (noBubbleGreedy) put(j, 2);
      } else {
        put(j, 2);
      }
    }
  };
  for (int i = 0; i < M && !failed; ++i) {
    if (i == 0) {
      for (int j = 0; j < S; ++j) put(j, 0);
      std::vector<int> req(S, 0);
      double lastT = 0;
      for (int j = S - 1; j >= 0; --j) {
        if (j == S - 1) {
          lastT = T(0, j, i) + cost(1, j);
          continue;
        }
        double m = mem[j], cst = e[j];
        while (f[j] + req[j] < M && m + memOf(0, j) <= maxMem[j] + 1e-9) {
          if (allowBubbleBeforeFirstB) {
            if (cst + cost(0, j) > lastT + c.comm) break;
          } else if (cst >= lastT + c.comm) {
            break;
          }
          m += memOf(0, j);
          cst += cost(0, j);
          ++req[j];
        }
        lastT = std::max(cst, lastT + c.comm) + cost(1, j);
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
      if (j + 1 < S && f[j] >= f[j + 1] + 2 && prioritizeB) {
        const double nextPlusFw = e[j + 1] + cost(0, j + 1) + cost(1, j + 1) + c.comm;
        if (e[j] >= nextPlusFw) continue;
        double wCost = 0;
        int wCnt = 0;
        double memWithW = mem[j] + memOf(0, j);
        while (memWithW > maxMem[j] + 1e-9 && w[j] + wCnt < b[j]) {
          wCost += cost(2, j);
          memWithW += memOf(2, j);
          ++wCnt;
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
      while (mem[j] + memOf(0, j) > maxMem[j] + 1e-9 && !failed) {
        if (w[j] >= b[j]) failed = true;
        else put(j, 2);
      }
      if (failed) break;
      if (j > 0) fillW(j, T(0, j - 1, f[j]) + c.comm);
      put(j, 0);
    }
    for (int j = S - 1; j >= 0 && !failed; --j) {
      while (mem[j] + memOf(1, j) > maxMem[j] + 1e-9 && !failed) {
        if (w[j] >= b[j]) failed = true;
        else put(j, 2);
      }
      if (failed) break;
      if (j + 1 < S) fillW(j, T(1, j + 1, i) + c.comm);
      if (j == 0 && f[j] == M)
        while (w[j] < b[j]) put(j, 2);
      put(j, 1);
    }
  }
  for (int j = 0; j < S && !failed; ++j)
    while (w[j] < M && !failed) put(j, 2);
  if (failed) return r;
  r.ok = true;
  for (int j = 0; j < S; ++j) r.bestTime = std::max(r.bestTime, T(2, j, M - 1) - T(0, j, 0) + cost(0, j));
  return r;
}

// Zero Bubble's initial_solution: the best of the eight flag combinations.
ZbResult zbHeuristic(const StageCosts& c, int S, int M, const std::vector<double>& maxMem) {
  ZbResult best;
  for (bool a : {true, false})
    for (bool p : {true, false})
      for (bool g : {true, false}) {
        ZbResult r = zbManualOrder(c, S, M, maxMem, a, p, g);
        if (r.ok && (!best.ok || r.bestTime < best.bestTime)) best = r;
      }
  return best;
}

// ---- Zero Bubble's ZB-V scheduler (try_v_schedule / get_v_schedule), uniform stage costs ---------

struct ZbvResult {
  bool ok = false;
  double maxBubble = 0;
  std::vector<std::vector<std::array<int, 3>>> order;  // per device: (cat 0 F / 1 B / 2 W, chunk, micro-batch)
};

// Two chunks per device in a V: chunk 0 is model stage d (down), chunk 1 model stage 2S-1-d (up).
// Follows the published greedy: a warm-up of chunk-0 forwards bounded by memory, then alternating
// backward and forward sweeps, W passes filling the gaps before a dependency arrives or when
// memory needs them; a second pass may retry with the first pass's bubbles as the budget.
ZbvResult zbvTry(int S, int M, double fc, double bc, double wc, double cc, double fm, double bm, double wm, double maxMem,
                 bool fillF, bool fillB, const std::vector<double>* approved) {
  ZbvResult r;
  const double cost[3] = {fc, bc, wc}, memc[3] = {fm, bm, wm};
  std::vector<std::array<int, 6>> count(static_cast<size_t>(S), std::array<int, 6>{});
  std::vector<double> endT(static_cast<size_t>(6 * S * M), -1), cur(S, 0), mem(S, 0), bubble(S, 0);
  std::vector<std::deque<int>> pendingW(static_cast<size_t>(S));  // chunks of pending W
  r.order.assign(static_cast<size_t>(S), {});
  std::vector<double> appr = approved ? *approved : std::vector<double>(S, -1);
  const double maxAppr = *std::max_element(appr.begin(), appr.end());
  auto id = [&](int cat, int chunk, int st, int mb) { return static_cast<size_t>(((cat * 2 + chunk) * S + st) * M + mb); };
  auto maxStageBubble = [&](int st) {
    double m = *std::max_element(bubble.begin(), bubble.end());
    if (st >= 0) m = std::max(m, maxAppr - appr[st]);
    return m;
  };
  bool failed = false;
  auto put = [&](int cat, int chunk, int st) {
    if (failed) return;
    double tmp = cur[st] + cost[cat];
    const double noBubble = tmp;
    const int cnt = count[st][cat * 2 + chunk];
    if (cnt >= M || mem[st] + memc[cat] > maxMem + 1e-9) {
      failed = true;
      return;
    }
    if (chunk == 1 && cat < 2 && st < S - 1) {
      const double e = endT[id(cat, chunk, st + 1, cnt)];
      if (e < 0) { failed = true; return; }
      tmp = std::max(tmp, e + cc + cost[cat]);
    }
    if (chunk == 0 && cat < 2 && st > 0) {
      const double e = endT[id(cat, chunk, st - 1, cnt)];
      if (e < 0) { failed = true; return; }
      tmp = std::max(tmp, e + cc + cost[cat]);
    }
    if (count[st][0] > 0) bubble[st] += tmp - noBubble;
    endT[id(cat, chunk, st, cnt)] = tmp;
    cur[st] = tmp;
    mem[st] += memc[cat];
    r.order[static_cast<size_t>(st)].push_back({cat, chunk, cnt});
    if (cat == 1) pendingW[static_cast<size_t>(st)].push_back(chunk);
    ++count[st][cat * 2 + chunk];
  };
  auto putW = [&](int st) {
    if (pendingW[static_cast<size_t>(st)].empty()) { failed = true; return; }
    const int chunk = pendingW[static_cast<size_t>(st)].front();
    pendingW[static_cast<size_t>(st)].pop_front();
    put(2, chunk, st);
  };
  for (int i = 0; i < S; ++i) put(0, 0, i);
  for (int i = S - 1; i >= 0 && !failed; --i) {
    if (i == S - 1) {
      put(0, 1, i);
      continue;
    }
    const double tmp = endT[id(0, 1, i + 1, 0)] + cc;
    while (!failed && mem[i] + fm * (2 + i * 2) <= maxMem + 1e-9 && cur[i] + fc <= tmp && count[i][0] < M - i)
      for (int j = 0; j <= i; ++j) put(0, 0, j);
    put(0, 1, i);
  }
  int iterChunk = 0;
  for (int i = 1; i < S && !failed; ++i)
    while (!failed && (count[i][0] + count[i][1] < count[i - 1][0] + count[i - 1][1] || (count[i][1] <= count[i - 1][1] && count[i - 1][1] < M))) {
      for (int j = S - 1; j >= i; --j)
        if (count[j][iterChunk] < M) put(0, iterChunk, j);
      iterChunk = 1 - iterChunk;
    }
  for (int round = 0; round < 2 * M && !failed; ++round) {
    for (int i = 0; i < S && !failed; ++i)
      while (!failed && mem[i] + bm > maxMem + 1e-9) putW(i);
    std::vector<int> b0, b1;
    for (int i = 0; i < S; ++i) {
      if (count[i][3] >= count[i][2]) b0.push_back(i);
      else if (i == S - 1) b1.push_back(i);
      else if (endT[id(1, 1, i + 1, count[i][3])] >= 0 || count[i][2] >= M) b1.push_back(i);
      else b0.push_back(i);
    }
    std::vector<std::pair<int, int>> ranks;
    for (auto it = b1.rbegin(); it != b1.rend(); ++it) ranks.emplace_back(*it, 1);
    for (int i : b0) ranks.emplace_back(i, 0);
    for (auto [i, ch] : ranks) {
      if (failed) break;
      long fa = -1;
      if (ch == 1 && i < S - 1) fa = static_cast<long>(id(1, 1, i + 1, count[i][3]));
      if (ch == 0 && i > 0) fa = static_cast<long>(id(1, 0, i - 1, count[i][2]));
      auto faEnd = [&] { return fa >= 0 ? endT[static_cast<size_t>(fa)] : endT.back(); };  // Python's end_time[-1]
      while (!failed && !pendingW[static_cast<size_t>(i)].empty() && fa >= 0 && faEnd() + cc >= cur[i] + wc) putW(i);
      if (!pendingW[static_cast<size_t>(i)].empty() && faEnd() + cc - cur[i] > maxStageBubble(i) - bubble[i])
        if (ch == 1 || fillB) putW(i);
      put(1, ch, i);
    }
    for (int i = 0; i < S && !failed; ++i) {
      if (count[i][1] >= M) continue;
      int item = -1;
      if (count[i][1] >= count[i][0]) item = 0;
      else if (i == S - 1) item = 1;
      else if (endT[id(0, 1, i + 1, count[i][1])] >= 0) item = 1;
      else if (count[i][0] < M && (i == 0 || endT[id(0, 0, i - 1, count[i][0])] >= 0)) item = 0;
      if (item < 0) continue;
      while (!failed && mem[i] + fm > maxMem + 1e-9) putW(i);
      long fa = -1;
      if (item == 0 && i > 0) fa = static_cast<long>(id(0, 0, i - 1, count[i][0]));
      if (item == 1 && i < S - 1) fa = static_cast<long>(id(0, 1, i + 1, count[i][1]));
      auto faEnd = [&] { return fa >= 0 ? endT[static_cast<size_t>(fa)] : endT.back(); };
      while (!failed && !pendingW[static_cast<size_t>(i)].empty() && fa >= 0 && faEnd() + cc >= cur[i] + wc) putW(i);
      if (!pendingW[static_cast<size_t>(i)].empty() && faEnd() + cc - cur[i] > maxStageBubble(i) - bubble[i])
        if (fillF) putW(i);
      put(0, item, i);
    }
  }
  for (int i = 0; i < S && !failed; ++i)
    while (!failed && !pendingW[static_cast<size_t>(i)].empty()) putW(i);
  if (failed) return r;
  for (int i = 0; i < S; ++i)
    if (count[i][4] < M || count[i][5] < M) return r;  // did not finish every W
  r.ok = true;
  r.maxBubble = maxStageBubble(-1);
  if (maxAppr < 0 || r.maxBubble < maxAppr) {
    ZbvResult again = zbvTry(S, M, fc, bc, wc, cc, fm, bm, wm, maxMem, fillF, fillB, &bubble);
    if (again.ok && again.maxBubble < r.maxBubble) return again;
  }
  return r;
}

ZbvResult zbvSchedule(int S, int M, double fc, double bc, double wc, double cc, double maxMem) {
  ZbvResult best;
  for (bool fillB : {true, false})
    for (bool fillF : {true, false}) {
      ZbvResult r = zbvTry(S, M, fc, bc, wc, cc, 2, -1, -1, maxMem, fillF, fillB, nullptr);
      if (r.ok && (!best.ok || r.maxBubble < best.maxBubble)) best = r;
    }
  return best;
}

// ---- the grid ---------------------------------------------------------------------------------

constexpr std::int64_t kUnitBytes = 1000;  // one memory unit of the ZB configs

StageCosts gridCosts(const std::string& kind, int D) {
  StageCosts c;
  if (kind == "uniform") {
    c.f.assign(D, 1.0);
    c.b.assign(D, 1.0);
    c.w.assign(D, 1.0);
    c.memF.assign(D, 2);
    c.memB.assign(D, -1);
    c.memW.assign(D, -1);
  } else if (kind == "realistic") {
    // Zero Bubble's measured example: F 5478 µs, B 5806 µs, W 3534 µs, 200 µs per transfer.
    c.f.assign(D, 5.478);
    c.b.assign(D, 5.806);
    c.w.assign(D, 3.534);
    c.comm = 0.2;
    c.memF.assign(D, 2);
    c.memB.assign(D, -1);
    c.memW.assign(D, -1);
  } else {
    // Zero Bubble's heterogeneous 8-stage profile (embedding-light first stage, LM head on the
    // last); on 4 devices neighbouring stages are merged.
    const std::vector<double> f8 = {30715, 29233, 29106, 29078, 28850, 28919, 28924, 41678};
    const std::vector<double> b8 = {31308, 29344, 29357, 29455, 29217, 29384, 29354, 38731};
    const std::vector<double> w8 = {18746, 18789, 19062, 19367, 19455, 19967, 20096, 32833};
    const std::vector<double> mf8 = {943, 1240, 1240, 1240, 1240, 1240, 1240, 1071};
    const std::vector<double> mb8 = {-533, -688, -688, -688, -688, -688, -688, -588};
    const int per = 8 / D;
    for (int d = 0; d < D; ++d) {
      double F = 0, B = 0, W = 0, mf = 0, mb = 0;
      for (int k = 0; k < per; ++k) {
        const size_t s = static_cast<size_t>(d * per + k);
        F += f8[s] / 1000;
        B += b8[s] / 1000;
        W += w8[s] / 1000;
        mf += mf8[s];
        mb += mb8[s];
      }
      c.f.push_back(F);
      c.b.push_back(B);
      c.w.push_back(W);
      c.memF.push_back(mf);
      c.memB.push_back(mb);
      c.memW.push_back(-mf - mb);
    }
    c.comm = 0.473;
  }
  return c;
}

CostProfile profileOf(const StageCosts& c, int D) {
  CostProfile p;
  p.name = "zb-grid";
  for (int d = 0; d < D; ++d) {
    LayerCost l;
    l.name = "stage" + std::to_string(d);
    l.forwardMs = c.f[d];
    l.backwardInputMs = c.b[d];
    l.backwardWeightMs = c.w[d];
    l.activationBytes = static_cast<std::int64_t>(c.memF[d] * kUnitBytes);
    l.weightGradStashBytes = static_cast<std::int64_t>(-c.memW[d] * kUnitBytes);
    p.layers.push_back(l);
  }
  p.fixedCommMs = c.comm;
  p.optimizerBytesPerWeightByte = 0;
  p.gradientBytesPerWeightByte = 0;
  return p;
}

Schedule scheduleOf(const ZbResult& z, int D, int M) {
  Schedule s;
  s.name = "zero-bubble heuristic";
  s.pipeline = *Pipeline::make(D, D, M, PlacementKind::Linear);
  s.devices.assign(static_cast<size_t>(D), {});
  for (int d = 0; d < D; ++d)
    for (auto [type, mb] : z.order[static_cast<size_t>(d)])
      s.devices[static_cast<size_t>(d)].push_back(Step{Op{type == 0 ? OpKind::F : type == 1 ? OpKind::I : OpKind::W, d, mb}, std::nullopt});
  return s;
}

struct Steady {
  double steady = 0, maxSpan = 0, makespan = 0;
  std::int64_t peak = 0;
};

std::optional<Steady> measure(const Schedule& s, const CostProfile& p, std::int64_t limit, int K) {
  auto m = makeSimulationModel(s, p);
  if (!m) return std::nullopt;
  SimulationOptions so;
  so.memoryLimitBytes = limit;
  so.recordTransfers = false;
  auto one = simulate(s, *m, so);
  if (!one || !one->complete) return std::nullopt;
  IterationOptions io;
  io.iterations = K;
  io.simulation = so;
  io.buildTimeline = false;
  auto it = simulateIterations(s, *m, io);
  if (!it || !it->complete) return std::nullopt;
  return Steady{it->steadyStateMs, it->maxFirstSpan, one->metrics.makespan, it->peakMemoryBytes};
}

struct GridRow {
  std::string costs;
  int D = 0, M = 0, memAct = 0;
  bool zbOk = false;
  double zbSpan = 0;          // Zero Bubble's own metric of its schedule
  Steady zbSim;               // its schedule in our simulator
  Steady steady;              // our search, steady-state objective (checked with 8 iterations)
  Steady mk;                  // our search, makespan objective
  double steadySeconds = 0, mkSeconds = 0;
  double searchK3 = 0;        // the search's own figure (3 iterations) for its best
  std::int64_t limit = 0;
  std::string bestName;
};
std::vector<GridRow>& gridRows() {
  static std::vector<GridRow> r;
  return r;
}

void BM_ZbGrid(benchmark::State& state, std::string costs, int D, int M, int memAct) {
  GridRow row;
  row.costs = costs;
  row.D = D;
  row.M = M;
  row.memAct = memAct;
  const StageCosts c = gridCosts(costs, D);
  const double unit = *std::max_element(c.memF.begin(), c.memF.end());
  const std::vector<double> maxMem(static_cast<size_t>(D), unit * memAct);
  const CostProfile p = profileOf(c, D);
  row.limit = static_cast<std::int64_t>(unit * memAct * kUnitBytes);
  for (auto _ : state) {
    ZbResult z = zbHeuristic(c, D, M, maxMem);
    row.zbOk = z.ok;
    if (z.ok) {
      row.zbSpan = z.bestTime;
      if (auto m = measure(scheduleOf(z, D, M), p, row.limit, 8)) row.zbSim = *m;
    }
    for (auto objective : {SearchObjective::SteadyState, SearchObjective::Makespan}) {
      SearchOptions o;
      o.devices = D;
      o.microbatches = M;
      o.memoryLimitBytes = row.limit;
      o.timeLimitSeconds = 10;
      o.seed = 1;
      o.objective = objective;
      auto r = searchSchedule(p, o);
      if (!r) continue;
      auto m = measure(r->best, p, row.limit, 8);
      if (!m) continue;
      if (objective == SearchObjective::SteadyState) {
        row.steady = *m;
        row.searchK3 = r->bestSummary.steadyStateMs;
        row.steadySeconds = r->elapsedSeconds;
        row.bestName = r->bestSummary.name;
      } else {
        row.mk = *m;
        row.mkSeconds = r->elapsedSeconds;
      }
    }
  }
  if (row.zbOk && row.steady.steady > 0) state.counters["zb_span_over_ours"] = row.zbSpan / row.steady.steady;
  gridRows().push_back(row);
}

// ---- ZB-V grid: two chunks per device -------------------------------------------------------------

struct ZbvRow {
  std::string costs;
  int D = 0, M = 0, memAct = 0;
  bool ok = false;
  double zbvSpan = 0;  // ZB-V's own metric: busy time + the largest stage bubble
  Steady zbvSim, steady;
  double seconds = 0;
  std::string bestName;
};
std::vector<ZbvRow>& zbvRows() {
  static std::vector<ZbvRow> r;
  return r;
}

void BM_ZbvGrid(benchmark::State& state, std::string costs, int D, int M, int memMul) {
  ZbvRow row;
  row.costs = costs;
  row.D = D;
  row.M = M;
  row.memAct = memMul * D;
  const bool uni = costs == "uniform";
  const double fc = uni ? 1 : 5.478, bc = uni ? 1 : 5.806, wc = uni ? 1 : 3.534, cc = uni ? 0 : 0.2;
  // One activation = both chunks of a device (2 x 2 units): D activations is 1F1B's memory.
  const double maxMem = 2.0 * 2.0 * memMul * D;
  const std::int64_t limit = static_cast<std::int64_t>(maxMem * kUnitBytes);
  CostProfile p;
  p.name = "zbv-grid";
  for (int s = 0; s < 2 * D; ++s) {
    LayerCost l;
    l.name = "chunk" + std::to_string(s);
    l.forwardMs = fc;
    l.backwardInputMs = bc;
    l.backwardWeightMs = wc;
    l.activationBytes = 2 * kUnitBytes;
    l.weightGradStashBytes = kUnitBytes;
    p.layers.push_back(l);
  }
  p.fixedCommMs = cc;
  p.optimizerBytesPerWeightByte = p.gradientBytesPerWeightByte = 0;
  for (auto _ : state) {
    ZbvResult z = zbvSchedule(D, M, fc, bc, wc, cc, maxMem);
    row.ok = z.ok;
    if (z.ok) {
      row.zbvSpan = z.maxBubble + (fc + bc + wc) * M * 2;
      Schedule s;
      s.name = "zb-v scheduler";
      s.pipeline = *Pipeline::make(D, 2 * D, M, PlacementKind::VShape);
      s.devices.assign(static_cast<size_t>(D), {});
      for (int d = 0; d < D; ++d)
        for (auto [cat, chunk, mb] : z.order[static_cast<size_t>(d)]) {
          // Its backward chunks are numbered the other way round (chunk 1 = the down chunk's
          // backward, which follows the next device's), as its own output reverses them.
          const int modelChunk = cat == 0 ? chunk : 1 - chunk;
          const int stage = modelChunk == 0 ? d : 2 * D - 1 - d;
          s.devices[static_cast<size_t>(d)].push_back(
              Step{Op{cat == 0 ? OpKind::F : cat == 1 ? OpKind::I : OpKind::W, stage, mb}, std::nullopt});
        }
      if (auto m = measure(s, p, limit, 8)) row.zbvSim = *m;
    }
    SearchOptions o;
    o.devices = D;
    o.microbatches = M;
    o.memoryLimitBytes = limit;
    o.timeLimitSeconds = 10;
    o.seed = 1;
    o.maxChunks = 2;
    o.objective = SearchObjective::SteadyState;
    auto r = searchSchedule(p, o);
    if (r) {
      if (auto m = measure(r->best, p, limit, 8)) row.steady = *m;
      row.seconds = r->elapsedSeconds;
      row.bestName = r->bestSummary.name;
    }
  }
  if (row.ok && row.steady.steady > 0) state.counters["zbv_span_over_ours"] = row.zbvSpan / row.steady.steady;
  zbvRows().push_back(row);
}

// ---- the model zoo ------------------------------------------------------------------------------

struct ZooRow {
  std::string model;
  int D = 0, M = 0;
  double search = 0, searchMakespan = 0, builtin = 0;
  std::string builtinName, bestName;
  double seconds = 0;
  double check8 = 0;  // the best's steady state over 8 iterations
  bool timedOut = false;
};
std::vector<ZooRow>& zooRows() {
  static std::vector<ZooRow> r;
  return r;
}

void BM_Zoo(benchmark::State& state, std::string name, int D, int M) {
  static std::map<std::string, CostProfile> cache;
  if (cache.empty())
    for (auto& p : heterogeneousZoo()) cache[p.name] = p;
  const CostProfile& p = cache.at(name);
  ZooRow row;
  row.model = name;
  row.D = D;
  row.M = M;
  for (auto _ : state) {
    SearchOptions o;
    o.devices = D;
    o.microbatches = M;
    o.memoryLimitBytes = 80LL << 30;
    o.timeLimitSeconds = 10;
    o.seed = 1;
    o.objective = SearchObjective::SteadyState;
    auto r = searchSchedule(p, o);
    if (!r) {
      state.SkipWithError(r.error().message.c_str());
      return;
    }
    row.search = r->bestSummary.steadyStateMs;
    if (auto m = measure(r->best, p, 80LL << 30, 8)) row.check8 = m->steady;
    row.searchMakespan = r->bestSummary.makespan;
    row.bestName = r->bestSummary.name;
    row.seconds = r->elapsedSeconds;
    row.timedOut = r->timedOut;
    for (auto& b : r->builtins)
      if (b.valid && b.fitsMemory && b.steadyStateMs > 0 && (row.builtin == 0 || b.steadyStateMs < row.builtin)) {
        row.builtin = b.steadyStateMs;
        row.builtinName = b.name;
      }
  }
  state.counters["vs_builtin"] = row.builtin > 0 ? row.builtin / row.search : 0;
  zooRows().push_back(row);
}

void registerAll() {
  for (const std::string costs : {"uniform", "realistic", "heterogeneous"})
    for (int D : {4, 8})
      for (int M : {8, 16, 24, 32})
        for (int memMul : {1, 2}) {
          const std::string n = "ZbGrid/" + costs + "/D" + std::to_string(D) + "/M" + std::to_string(M) + "/mem" +
                                std::to_string(memMul) + "D";
          benchmark::RegisterBenchmark(n.c_str(), BM_ZbGrid, costs, D, M, memMul * D)
              ->Iterations(1)
              ->Unit(benchmark::kSecond)
              ->UseRealTime();
        }
  for (const std::string costs : {"uniform", "realistic"})
    for (int D : {4, 8})
      for (int M : {8, 16, 24, 32})
        for (int memMul : {1, 2}) {
          const std::string n = "ZbvGrid/" + costs + "/D" + std::to_string(D) + "/M" + std::to_string(M) + "/mem" +
                                std::to_string(memMul) + "D";
          benchmark::RegisterBenchmark(n.c_str(), BM_ZbvGrid, costs, D, M, memMul)
              ->Iterations(1)
              ->Unit(benchmark::kSecond)
              ->UseRealTime();
        }
  for (const std::string m : {"gemma-2b", "gemma-7b", "deepseek-v2-lite", "nemotron-h-8b", "llama2-7b"})
    for (int D : {4, 8})
      for (int M : {2 * D, 4 * D}) {
        const std::string n = "Zoo/" + m + "/D" + std::to_string(D) + "/M" + std::to_string(M);
        benchmark::RegisterBenchmark(n.c_str(), BM_Zoo, m, D, M)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
      }
}

std::string ratio(double a, double b) {
  if (a <= 0 || b <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", a / b);
  return buf;
}

void printTables() {
  if (!gridRows().empty()) {
    std::printf("\n| costs | D | M | memory | ZB span | ZB schedule steady (ours) | search steady | ZB span / search "
                "| search max span | makespan: ZB / search(makespan) | search s (steady, makespan) |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    int wins = 0, ties = 0, losses = 0, spanLosses = 0, mkLosses = 0, kDiffers = 0;
    double worst = 1e9, bestGain = 0, maxSeconds = 0;
    for (auto& r : gridRows()) {
      const double ours = r.steady.steady;
      if (r.zbOk && ours > 0) {
        const double q = r.zbSpan / ours;
        if (q > 1 + 1e-9) ++wins;
        else if (q < 1 - 1e-9) ++losses;
        else ++ties;
        worst = std::min(worst, q);
        bestGain = std::max(bestGain, q);
        if (r.steady.maxSpan > r.zbSpan + 1e-9) ++spanLosses;
        if (r.zbSim.makespan > 0 && r.mk.makespan > r.zbSim.makespan + 1e-9) ++mkLosses;
      }
      maxSeconds = std::max({maxSeconds, r.steadySeconds, r.mkSeconds});
      if (std::abs(r.searchK3 - ours) > 1e-9 * std::max(1.0, ours)) ++kDiffers;
      std::printf("| %s | %d | %d | %dD | %s | %.3f | %.3f | %s | %.3f | %s | %.2f, %.2f |\n", r.costs.c_str(), r.D, r.M,
                  r.memAct / r.D, r.zbOk ? std::to_string(r.zbSpan).substr(0, 8).c_str() : "does not fit", r.zbSim.steady,
                  ours, ratio(r.zbSpan, ours).c_str(), r.steady.maxSpan, ratio(r.zbSim.makespan, r.mk.makespan).c_str(),
                  r.steadySeconds, r.mkSeconds);
    }
    std::printf("\nsteady state vs Zero Bubble's per-stage span: %d better, %d equal, %d worse (ratio min %.3f, max %.3f); "
                "search's own longest span above ZB's in %d cases; makespan objective above ZB's makespan in %d cases; "
                "search time at most %.2f s; the search's 3-iteration figure differs from 8 iterations' in %d cases\n",
                wins, ties, losses, worst, bestGain, spanLosses, mkLosses, maxSeconds, kDiffers);
  }
  if (!zbvRows().empty()) {
    std::printf("\n| costs | D | M | memory | ZB-V span | ZB-V schedule steady (ours) | search steady | ZB-V span / search | "
                "search s | search's best |\n|---|---|---|---|---|---|---|---|---|---|\n");
    int wins = 0, ties = 0, losses = 0;
    for (auto& r : zbvRows()) {
      if (r.ok && r.steady.steady > 0) {
        const double q = r.zbvSpan / r.steady.steady;
        if (q > 1 + 1e-9) ++wins;
        else if (q < 1 - 1e-9) ++losses;
        else ++ties;
      }
      std::printf("| %s | %d | %d | %dD | %s | %.3f | %.3f | %s | %.2f | %s |\n", r.costs.c_str(), r.D, r.M, r.memAct / r.D,
                  r.ok ? std::to_string(r.zbvSpan).substr(0, 8).c_str() : "failed", r.zbvSim.steady, r.steady.steady,
                  ratio(r.zbvSpan, r.steady.steady).c_str(), r.seconds, r.bestName.c_str());
    }
    std::printf("\nsteady state vs ZB-V's span: %d better, %d equal, %d worse\n", wins, ties, losses);
  }
  if (!zooRows().empty()) {
    std::printf("\n| model | D | M | best built-in (steady) | built-in steady ms | search steady ms | vs best built-in | "
                "search makespan ms | search s | 8 iterations |\n|---|---|---|---|---|---|---|---|---|---|\n");
    for (auto& r : zooRows())
      std::printf("| %s | %d | %d | %s | %.2f | %.2f | %s | %.2f | %.2f%s | %.2f |\n", r.model.c_str(), r.D, r.M,
                  r.builtinName.c_str(), r.builtin, r.search, ratio(r.builtin, r.search).c_str(), r.searchMakespan,
                  r.seconds, r.timedOut ? " (limit)" : "", r.check8);
  }
}

}  // namespace

int main(int argc, char** argv) {
  registerAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  printTables();
  return 0;
}
