// Steady-state search (docs/benchmarks.md, "Steady state"): the iteration time a long run pays
// when each device starts its next iteration after its own optimizer step (overlap boundary).
//
// Part 1, Zero Bubble's grid: 4 and 8 devices (one stage each), 8..32 micro-batches, uniform,
// realistic and heterogeneous per-stage costs, memory limits of D and 2D activations (48
// cases). Zero Bubble's automatic scheduler (its heuristic `manual_order` over its eight flag
// combinations, as in sail-sg/zero-bubble-pipeline-parallelism auto_schedule.py; core's
// implementation, zb_greedy.h, which the search also runs) gives its own metric, the longest per-stage span
// from first forward to last weight gradient. PipeStudio's search runs with the steady-state
// objective (and, separately, the makespan objective) under the same memory limit.
//
// Part 2, the model zoo: the steady-state objective against the best built-in measured the
// same way.
//
// After the benchmarks markdown tables are printed to stdout.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench_main.h"
#include "pipestudio/core/analysis/iterations.h"
#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/planning/model_zoo_hetero.h"
#include "pipestudio/core/planning/search.h"
#include "pipestudio/core/planning/zb_greedy.h"

using namespace ps::core;

namespace {

// ---- Zero Bubble's schedulers, as core implements them for the search (zb_greedy.h) ----------

struct StageCosts {
  std::vector<double> f, b, w;           // times (ms); b is the input-gradient pass (our I)
  std::vector<double> memF, memB, memW;  // memory units; memF + memB + memW == 0
  double comm = 0;
};

struct ZbResult {
  bool ok = false;
  double bestTime = 0;  // Zero Bubble's own metric: max over stages of (last W end - first F start)
  Schedule schedule;
};

// Zero Bubble's initial_solution: the best of its heuristic's eight flag combinations, by the
// heuristic's own estimate.
ZbResult zbHeuristic(const std::vector<StageCost>& stages, const CostProfile& p, std::int64_t limit, int M) {
  ZbResult best;
  const detail::ZbGreedyInput in = detail::zbGreedyInput(stages, p, limit);
  for (int v = 0; v < 8; ++v) {
    detail::ZbGreedyFlags fl;
    fl.allowBubbleBeforeFirstB = v & 1;
    fl.prioritizeB = v & 2;
    fl.noBubbleGreedy = v & 4;
    double span = 0;
    auto s = detail::zbGreedySchedule(in, M, fl, &span);
    if (s && (!best.ok || span < best.bestTime)) best = {true, span, std::move(*s)};
  }
  best.schedule.name = "zero-bubble heuristic";
  return best;
}

struct ZbvResult {
  bool ok = false;
  double maxBubble = 0;
  Schedule schedule;
};

// Zero Bubble's ZB-V scheduler: the best of its fill flags by its largest stage bubble.
ZbvResult zbvSchedule(const std::vector<StageCost>& stages, const CostProfile& p, std::int64_t limit, int M) {
  ZbvResult best;
  for (bool fillB : {true, false})
    for (bool fillF : {true, false}) {
      double bubble = 0;
      auto s = detail::zbvGreedySchedule(stages, p, limit, M, fillF, fillB, &bubble);
      if (s && (!best.ok || bubble < best.maxBubble)) best = {true, bubble, std::move(*s)};
    }
  best.schedule.name = "zb-v scheduler";
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

// The rows each benchmark family collects for the tables printed at the end.
template <typename Row>
std::vector<Row>& rowsOf() {
  static std::vector<Row> r;
  return r;
}

// The search as every case runs it: 10 s, seed 1, under the case's memory limit.
SearchOptions searchOptions(int D, int M, std::int64_t limit, SearchObjective objective) {
  SearchOptions o;
  o.devices = D;
  o.microbatches = M;
  o.memoryLimitBytes = limit;
  o.timeLimitSeconds = 10;
  o.seed = 1;
  o.objective = objective;
  return o;
}

struct GridRow {
  std::string costs;
  int D = 0, M = 0, memAct = 0;
  bool zbOk = false;
  double zbSpan = 0;  // Zero Bubble's own metric of its schedule
  Steady zbSim;       // its schedule in our simulator
  Steady steady;      // our search, steady-state objective (checked with 8 iterations)
  Steady mk;          // our search, makespan objective
  double steadySeconds = 0, mkSeconds = 0;
  double searchK3 = 0;  // the search's own figure (3 iterations) for its best
  std::int64_t limit = 0;
  std::string bestName;
};

void BM_ZbGrid(benchmark::State& state, std::string costs, int D, int M, int memAct) {
  GridRow row;
  row.costs = costs;
  row.D = D;
  row.M = M;
  row.memAct = memAct;
  const StageCosts c = gridCosts(costs, D);
  const double unit = *std::max_element(c.memF.begin(), c.memF.end());
  const CostProfile p = profileOf(c, D);
  row.limit = static_cast<std::int64_t>(unit * memAct * kUnitBytes);
  const std::vector<StageCost> stages = *stageCosts(p, D);
  for (auto _ : state) {
    ZbResult z = zbHeuristic(stages, p, row.limit, M);
    row.zbOk = z.ok;
    if (z.ok) {
      row.zbSpan = z.bestTime;
      if (auto m = measure(z.schedule, p, row.limit, 8)) row.zbSim = *m;
    }
    for (auto objective : {SearchObjective::SteadyState, SearchObjective::Makespan}) {
      auto r = searchSchedule(p, searchOptions(D, M, row.limit, objective));
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
  rowsOf<GridRow>().push_back(row);
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
  const std::vector<StageCost> stages = *stageCosts(p, 2 * D);
  for (auto _ : state) {
    ZbvResult z = zbvSchedule(stages, p, limit, M);
    row.ok = z.ok;
    if (z.ok) {
      row.zbvSpan = z.maxBubble + (fc + bc + wc) * M * 2;
      if (auto m = measure(z.schedule, p, limit, 8)) row.zbvSim = *m;
    }
    SearchOptions o = searchOptions(D, M, limit, SearchObjective::SteadyState);
    o.maxChunks = 2;
    auto r = searchSchedule(p, o);
    if (r) {
      if (auto m = measure(r->best, p, limit, 8)) row.steady = *m;
      row.seconds = r->elapsedSeconds;
      row.bestName = r->bestSummary.name;
    }
  }
  if (row.ok && row.steady.steady > 0) state.counters["zbv_span_over_ours"] = row.zbvSpan / row.steady.steady;
  rowsOf<ZbvRow>().push_back(row);
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
    auto r = searchSchedule(p, searchOptions(D, M, 80LL << 30, SearchObjective::SteadyState));
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
      if (b.valid && b.fitsMemory && b.steadyStateMs > 0 &&
          (row.builtin == 0 || b.steadyStateMs < row.builtin)) {
        row.builtin = b.steadyStateMs;
        row.builtinName = b.name;
      }
  }
  state.counters["vs_builtin"] = row.builtin > 0 ? row.builtin / row.search : 0;
  rowsOf<ZooRow>().push_back(row);
}

void registerAll() {
  for (const std::string costs : {"uniform", "realistic", "heterogeneous"})
    for (int D : {4, 8})
      for (int M : {8, 16, 24, 32})
        for (int memMul : {1, 2}) {
          const std::string n = "ZbGrid/" + costs + "/D" + std::to_string(D) + "/M" + std::to_string(M) +
                                "/mem" + std::to_string(memMul) + "D";
          benchmark::RegisterBenchmark(n.c_str(), BM_ZbGrid, costs, D, M, memMul * D)
              ->Iterations(1)
              ->Unit(benchmark::kSecond)
              ->UseRealTime();
        }
  for (const std::string costs : {"uniform", "realistic"})
    for (int D : {4, 8})
      for (int M : {8, 16, 24, 32})
        for (int memMul : {1, 2}) {
          const std::string n = "ZbvGrid/" + costs + "/D" + std::to_string(D) + "/M" + std::to_string(M) +
                                "/mem" + std::to_string(memMul) + "D";
          benchmark::RegisterBenchmark(n.c_str(), BM_ZbvGrid, costs, D, M, memMul)
              ->Iterations(1)
              ->Unit(benchmark::kSecond)
              ->UseRealTime();
        }
  for (const std::string m : {"gemma-2b", "gemma-7b", "deepseek-v2-lite", "nemotron-h-8b", "llama2-7b"})
    for (int D : {4, 8})
      for (int M : {2 * D, 4 * D}) {
        const std::string n = "Zoo/" + m + "/D" + std::to_string(D) + "/M" + std::to_string(M);
        benchmark::RegisterBenchmark(n.c_str(), BM_Zoo, m, D, M)
            ->Iterations(1)
            ->Unit(benchmark::kSecond)
            ->UseRealTime();
      }
}

std::string ratio(double a, double b) {
  if (a <= 0 || b <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", a / b);
  return buf;
}

void printTables() {
  if (!rowsOf<GridRow>().empty()) {
    std::printf(
        "\n| costs | D | M | memory | ZB span | ZB schedule steady (ours) | search steady | ZB span / search "
        "| search max span | makespan: ZB / search(makespan) | search s (steady, makespan) |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    int wins = 0, ties = 0, losses = 0, spanLosses = 0, mkLosses = 0, kDiffers = 0;
    double worst = 1e9, bestGain = 0, maxSeconds = 0;
    for (auto& r : rowsOf<GridRow>()) {
      const double ours = r.steady.steady;
      if (r.zbOk && ours > 0) {
        const double q = r.zbSpan / ours;
        if (q > 1 + 1e-9)
          ++wins;
        else if (q < 1 - 1e-9)
          ++losses;
        else
          ++ties;
        worst = std::min(worst, q);
        bestGain = std::max(bestGain, q);
        if (r.steady.maxSpan > r.zbSpan + 1e-9) ++spanLosses;
        if (r.zbSim.makespan > 0 && r.mk.makespan > r.zbSim.makespan + 1e-9) ++mkLosses;
      }
      maxSeconds = std::max({maxSeconds, r.steadySeconds, r.mkSeconds});
      if (std::abs(r.searchK3 - ours) > 1e-9 * std::max(1.0, ours)) ++kDiffers;
      std::printf("| %s | %d | %d | %dD | %s | %.3f | %.3f | %s | %.3f | %s | %.2f, %.2f |\n",
                  r.costs.c_str(), r.D, r.M, r.memAct / r.D,
                  r.zbOk ? std::to_string(r.zbSpan).substr(0, 8).c_str() : "does not fit", r.zbSim.steady,
                  ours, ratio(r.zbSpan, ours).c_str(), r.steady.maxSpan,
                  ratio(r.zbSim.makespan, r.mk.makespan).c_str(), r.steadySeconds, r.mkSeconds);
    }
    std::printf(
        "\nsteady state vs Zero Bubble's per-stage span: %d better, %d equal, %d worse (ratio min %.3f, max "
        "%.3f); "
        "search's own longest span above ZB's in %d cases; makespan objective above ZB's makespan in %d "
        "cases; "
        "search time at most %.2f s; the search's 3-iteration figure differs from 8 iterations' in %d "
        "cases\n",
        wins, ties, losses, worst, bestGain, spanLosses, mkLosses, maxSeconds, kDiffers);
  }
  if (!rowsOf<ZbvRow>().empty()) {
    std::printf(
        "\n| costs | D | M | memory | ZB-V span | ZB-V schedule steady (ours) | search steady | ZB-V span / "
        "search | "
        "search s | search's best |\n|---|---|---|---|---|---|---|---|---|---|\n");
    int wins = 0, ties = 0, losses = 0;
    for (auto& r : rowsOf<ZbvRow>()) {
      if (r.ok && r.steady.steady > 0) {
        const double q = r.zbvSpan / r.steady.steady;
        if (q > 1 + 1e-9)
          ++wins;
        else if (q < 1 - 1e-9)
          ++losses;
        else
          ++ties;
      }
      std::printf("| %s | %d | %d | %dD | %s | %.3f | %.3f | %s | %.2f | %s |\n", r.costs.c_str(), r.D, r.M,
                  r.memAct / r.D, r.ok ? std::to_string(r.zbvSpan).substr(0, 8).c_str() : "failed",
                  r.zbvSim.steady, r.steady.steady, ratio(r.zbvSpan, r.steady.steady).c_str(), r.seconds,
                  r.bestName.c_str());
    }
    std::printf("\nsteady state vs ZB-V's span: %d better, %d equal, %d worse\n", wins, ties, losses);
  }
  if (!rowsOf<ZooRow>().empty()) {
    std::printf(
        "\n| model | D | M | best built-in (steady) | built-in steady ms | search steady ms | vs best "
        "built-in | "
        "search makespan ms | search s | 8 iterations |\n|---|---|---|---|---|---|---|---|---|---|\n");
    for (auto& r : rowsOf<ZooRow>())
      std::printf("| %s | %d | %d | %s | %.2f | %.2f | %s | %.2f | %.2f%s | %.2f |\n", r.model.c_str(), r.D,
                  r.M, r.builtinName.c_str(), r.builtin, r.search, ratio(r.builtin, r.search).c_str(),
                  r.searchMakespan, r.seconds, r.timedOut ? " (limit)" : "", r.check8);
  }
}

}  // namespace

int main(int argc, char** argv) {
  return ps::bench::runThenPrint(argc, argv, registerAll, printTables);
}
