// Simulator speed: a million-op 1F1B (target >= 10M ops/s) and the GUI's drag loop,
// re-simulating a 10,000-op schedule after one op moves (target <= 5 ms).
#include <benchmark/benchmark.h>

#include <utility>

#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/planning/generators.h"

using namespace ps::core;

namespace {

// 1F1B, D = 64, M = 8192: 1,048,576 ops.
const Schedule& big() {
  static const Schedule s = *generateSchedule(ScheduleKind::OneFOneB, GeneratorOptions{64, 8192});
  return s;
}

SimulationModel modelFor(const Schedule& s, bool comm) {
  CostProfile p = *uniformCostProfile("F=1,I=1,W=1,act=1048576,out=65536,weight=1048576", s.pipeline.stages);
  if (comm) p.link = LinkCost{0.01, 25000};
  return *makeSimulationModel(s, p);
}

void runBig(benchmark::State& state, bool comm, bool record) {
  const Schedule& s = big();
  const SimulationModel model = modelFor(s, comm);
  SimulationOptions o;
  o.recordMemory = record;
  o.recordTransfers = record;
  for (auto _ : state) {
    auto t = simulate(s, model, o);
    if (!t.ok() || !t->complete) state.SkipWithError("simulation failed");
    benchmark::DoNotOptimize(t);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(s.opCount()));
}

// Timeline with ops, transfers and memory curves (what the GUI and trace export use).
void BM_Simulate1F1B_D64_M8192(benchmark::State& state) {
  runBig(state, false, true);
}
void BM_Simulate1F1B_D64_M8192_Link(benchmark::State& state) {
  runBig(state, true, true);
}
// Metrics only (what a search loop needs).
void BM_Simulate1F1B_D64_M8192_MetricsOnly(benchmark::State& state) {
  runBig(state, true, false);
}

// The drag loop: 1F1B D = 8, M = 625 (10,000 ops); each iteration moves one op (swaps two
// neighbouring steps of a device in its steady phase, alternating back and forth) and
// re-simulates from scratch with the model built once.
void BM_ResimulateAfterMove_10k(benchmark::State& state) {
  Schedule s = *generateSchedule(ScheduleKind::OneFOneB, GeneratorOptions{8, 625});
  const SimulationModel model = modelFor(s, true);
  auto& dev = s.devices[3];
  const size_t at = dev.size() / 2;
  for (auto _ : state) {
    std::swap(dev[at], dev[at + 1]);
    auto t = simulate(s, model);
    benchmark::DoNotOptimize(t);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(s.opCount()));
}

}  // namespace

BENCHMARK(BM_Simulate1F1B_D64_M8192)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_Simulate1F1B_D64_M8192_Link)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_Simulate1F1B_D64_M8192_MetricsOnly)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_ResimulateAfterMove_10k)->Unit(benchmark::kMillisecond)->MinTime(1.0);

BENCHMARK_MAIN();
