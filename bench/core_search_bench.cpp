// Schedule and partition search over the heterogeneous model zoo (docs/benchmarks.md,
// "Search"). Each case runs one search (time limit 10 s) and reports, as counters:
//   vs_builtin    best built-in makespan / search makespan        (>= 1 by construction)
//   vs_megatron   interleaved 1F1B with Megatron-LM's default split (transformer blocks evenly
//                 over the stages, the embedding with the first stage and the LM head with the
//                 last) / search makespan
//   vs_uniform    interleaved 1F1B with every layer, embedding and LM head included, counted
//                 evenly over the stages (a kinder baseline) / search makespan
//   mbs_ratio     largest micro-batch size that fits with the DawnPiper plan / with a
//                 compute-balanced 1F1B split keeping all activations
// After the benchmarks a markdown table of every case is printed to stdout.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "bench_main.h"
#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/planning/generators.h"
#include "pipestudio/core/planning/model_zoo_hetero.h"
#include "pipestudio/core/planning/search.h"

using namespace ps::core;

namespace {

struct Row {
  std::string model;
  int D = 0, M = 0;
  double memGiB = 0;
  double search = 0, builtin = 0, megatron = 0, uniform = 0;
  std::string builtinName, megatronNote, uniformNote, bestName;
  double seconds = 0;
  double cpuSeconds = 0;  // thread CPU time: what the search costs without the other load
  std::size_t evaluated = 0;
  bool timedOut = false;
  int mbsPlan = 0, mbsBase = 0;
};
std::vector<Row>& rows() {
  static std::vector<Row> r;
  return r;
}

const CostProfile& model(const std::string& name) {
  static std::map<std::string, CostProfile> cache;
  if (cache.empty())
    for (auto& p : heterogeneousZoo()) cache[p.name] = p;
  return cache.at(name);
}

double simulateWith(const Schedule& s, const CostProfile& p, const std::vector<int>& part, std::int64_t limit,
                    bool& fits) {
  auto m = makeSimulationModel(s, p, part);
  if (!m) return 0;
  SimulationOptions so;
  so.memoryLimitBytes = limit;
  so.recordTransfers = false;
  auto tl = simulate(s, *m, so);
  if (!tl || !tl->complete) return 0;
  fits = true;
  for (auto& d : tl->metrics.devices) fits = fits && d.peakMemoryBytes <= limit;
  return tl->metrics.makespan;
}

// Megatron-LM's default split: its pipeline split counts transformer blocks only, evenly over
// the (virtual) stages, and puts the embedding on the first stage and the LM head on the last.
// Every zoo profile starts with its embedding and ends with its LM head.
std::vector<int> megatronPartition(int layers, int stages) {
  auto part = uniformPartition(layers - 2, stages);
  part.front() += 1;
  part.back() += 1;
  return part;
}

// Megatron's interleaved 1F1B (2 chunks per device) on a given split; with full recompute
// when it does not fit otherwise (what a Megatron user does).
double megatron(const CostProfile& p, int D, int M, std::int64_t limit, bool megatronSplit,
                std::string& note) {
  auto s = generateSchedule(ScheduleKind::Interleaved1F1B, GeneratorOptions{D, M, 2});
  if (!s) {
    note = "n/a";
    return 0;
  }
  const int layers = static_cast<int>(p.layers.size());
  auto part = megatronSplit ? megatronPartition(layers, s->pipeline.stages)
                            : uniformPartition(layers, s->pipeline.stages);
  bool fits = false;
  double t = simulateWith(*s, p, part, limit, fits);
  if (fits) return t;
  auto r =
      applyActivationPolicies(*s, std::vector<ActivationPolicy>(part.size(), ActivationPolicy::Recompute));
  fits = false;
  t = simulateWith(*r, p, part, limit, fits);
  note = fits ? "full recompute" : "does not fit";
  return fits ? t : 0;
}

void BM_Search(benchmark::State& state, std::string name, int D, int M, double memGiB) {
  const CostProfile& p = model(name);
  const auto limit = static_cast<std::int64_t>(memGiB * (1LL << 30));
  Row row;
  row.model = name;
  row.D = D;
  row.M = M;
  row.memGiB = memGiB;
  for (auto _ : state) {
    SearchOptions o;
    o.devices = D;
    o.microbatches = M;
    o.memoryLimitBytes = limit;
    o.timeLimitSeconds = 10;
    o.seed = 1;
    // Up to 16 stages: 4 chunks per device on 4 devices, 2 on 8 (more stages per device split
    // the work finer; beyond 16 the grid costs more than it finds).
    o.maxChunks = std::max(2, 16 / D);
    timespec c0{}, c1{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    auto r = searchSchedule(p, o);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    row.cpuSeconds =
        static_cast<double>(c1.tv_sec - c0.tv_sec) + 1e-9 * static_cast<double>(c1.tv_nsec - c0.tv_nsec);
    if (!r) {
      row.bestName = "nothing fits: " + r.error().message;
      rows().push_back(row);
      state.SkipWithError(r.error().message.c_str());
      return;
    }
    row.search = r->bestSummary.makespan;
    row.bestName = r->bestSummary.name;
    row.seconds = r->elapsedSeconds;
    row.evaluated = r->evaluated;
    row.timedOut = r->timedOut;
    row.builtin = 0;
    for (auto& b : r->builtins)
      if (b.valid && b.fitsMemory && (row.builtin == 0 || b.makespan < row.builtin)) {
        row.builtin = b.makespan;
        row.builtinName = b.name;
      }
  }
  row.megatron = megatron(p, D, M, limit, true, row.megatronNote);
  row.uniform = megatron(p, D, M, limit, false, row.uniformNote);
  // Largest micro-batch size on a linear pipeline of D stages under 1F1B.
  PartitionOptions po;
  po.stages = D;
  po.microbatches = M;
  po.memoryLimitBytes = limit;
  row.mbsPlan = largestMicrobatchSize(p, po, 512).largestMicrobatchSize;
  PartitionOptions plain = po;
  plain.allowRecompute = plain.allowOffload = false;
  row.mbsBase = largestMicrobatchSizeFixed(p, {}, plain, 512).largestMicrobatchSize;
  state.counters["vs_builtin"] = row.builtin > 0 ? row.builtin / row.search : 0;
  state.counters["vs_megatron"] = row.megatron > 0 ? row.megatron / row.search : 0;
  state.counters["vs_uniform"] = row.uniform > 0 ? row.uniform / row.search : 0;
  state.counters["mbs_ratio"] = row.mbsBase > 0 ? static_cast<double>(row.mbsPlan) / row.mbsBase : 0;
  state.counters["evaluated"] = static_cast<double>(row.evaluated);
  rows().push_back(row);
}

void registerAll() {
  const std::vector<std::string> models = {"gemma-2b", "gemma-7b", "deepseek-v2-lite", "nemotron-h-8b",
                                           "llama2-7b"};
  for (const auto& m : models)
    for (int D : {4, 8})
      for (int M : {2 * D, 4 * D})
        for (double mem : {80.0, 40.0}) {
          const std::string n = "Search/" + m + "/D" + std::to_string(D) + "/M" + std::to_string(M) + "/mem" +
                                std::to_string(static_cast<int>(mem)) + "GiB";
          benchmark::RegisterBenchmark(n.c_str(), BM_Search, m, D, M, mem)
              ->Iterations(1)
              ->Unit(benchmark::kSecond)
              ->UseRealTime();
        }
}

// "1.234 (full recompute)", or "n/a does not fit".
std::string ratioCell(double baseline, double search, const std::string& note) {
  if (baseline <= 0) return "n/a " + note;
  return std::to_string(baseline / search).substr(0, 5) + (note.empty() ? "" : " (" + note + ")");
}

void printMeans(const char* title, double Row::*baseline) {
  std::map<std::string, std::pair<double, int>> meanByModel;
  for (auto& r : rows())
    if (r.*baseline > 0 && r.search > 0) {
      auto& e = meanByModel[r.model];
      e.first += r.*baseline / r.search;
      ++e.second;
    }
  std::printf("\nmean speed-up over %s:\n", title);
  for (auto& [m, e] : meanByModel)
    std::printf("  %s: %.3f over %d cases\n", m.c_str(), e.first / e.second, e.second);
  double hetSum = 0;
  int hetN = 0;
  for (auto& [m, e] : meanByModel)
    if (m.rfind("llama", 0) != 0) {
      hetSum += e.first;
      hetN += e.second;
    }
  if (hetN) std::printf("  heterogeneous models: %.3f over %d cases\n", hetSum / hetN, hetN);
}

void printTable() {
  if (rows().empty()) return;
  std::printf(
      "\n| model | D | M | memory | best built-in | vs best built-in | vs Megatron interleaved (default "
      "split) "
      "| vs interleaved (all layers even) | search s (CPU) | mbs plan / 1F1B |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  for (auto& r : rows()) {
    if (r.search <= 0) {
      std::printf("| %s | %d | %d | %.0f GiB | nothing fits | - | - | - | - | - |\n", r.model.c_str(), r.D,
                  r.M, r.memGiB);
      continue;
    }
    const std::string vsBuiltin =
        r.builtin > 0 ? std::to_string(r.builtin / r.search).substr(0, 5) : "no built-in fits";
    std::printf("| %s | %d | %d | %.0f GiB | %s | %s | %s | %s | %.2f (%.2f) | %d / %d |\n", r.model.c_str(),
                r.D, r.M, r.memGiB, r.builtin > 0 ? r.builtinName.c_str() : "-", vsBuiltin.c_str(),
                ratioCell(r.megatron, r.search, r.megatronNote).c_str(),
                ratioCell(r.uniform, r.search, r.uniformNote).c_str(), r.seconds, r.cpuSeconds, r.mbsPlan,
                r.mbsBase);
  }
  printMeans("Megatron interleaved 1F1B, default split (blocks even, embedding first, LM head last)",
             &Row::megatron);
  printMeans("interleaved 1F1B, every layer counted evenly", &Row::uniform);
  int mbsN = 0, mbsZero = 0;
  double mbsMin = 1e9, mbsSum = 0;
  for (auto& r : rows()) {
    if (r.mbsBase > 0) {
      const double q = static_cast<double>(r.mbsPlan) / r.mbsBase;
      mbsMin = std::min(mbsMin, q);
      mbsSum += q;
      ++mbsN;
    } else if (r.mbsPlan > 0) {
      ++mbsZero;
    }
  }
  if (mbsN)
    std::printf(
        "largest micro-batch size, plan / compute-balanced 1F1B keep-all: mean %.2fx, min %.2fx over %d "
        "cases; "
        "%d more cases where only the plan fits at all\n",
        mbsSum / mbsN, mbsMin, mbsN, mbsZero);
  int cut = 0;
  double maxWall = 0, maxCpu = 0;
  for (auto& r : rows()) {
    cut += r.timedOut;
    maxWall = std::max(maxWall, r.seconds);
    maxCpu = std::max(maxCpu, r.cpuSeconds);
  }
  std::printf("search time: at most %.2f s wall, %.2f s CPU per case; %d searches cut by the time limit\n",
              maxWall, maxCpu, cut);
  std::printf("\nbest candidates:\n");
  for (auto& r : rows())
    std::printf("  %s D%d M%d %.0fGiB: %s\n", r.model.c_str(), r.D, r.M, r.memGiB, r.bestName.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  return ps::bench::runThenPrint(argc, argv, registerAll, printTable);
}
