// Validating 1,000,000-op schedules (target: at least 5M ops/s on the 2-core CI machine).
#include <benchmark/benchmark.h>

#include "pipestudio/core/analysis/validator.h"
#include "pipestudio/core/io/pytorch_csv.h"
#include "pipestudio/core/planning/generators.h"

using namespace ps::core;

namespace {

// 1F1B on 8 devices x 62,500 micro-batches: exactly 1,000,000 ops.
const Schedule& oneFOneB() {
  static const Schedule s = *generateSchedule(ScheduleKind::OneFOneB, GeneratorOptions{8, 62'500});
  return s;
}

// ZB-V on 8 devices (16 stages) x 20,834 micro-batches: 1,000,032 ops with split backwards.
const Schedule& zbV() {
  static const Schedule s = *generateSchedule(ScheduleKind::ZBV, GeneratorOptions{8, 20'834});
  return s;
}

// Validates `s` once per iteration; items are ops.
void validateEachIteration(benchmark::State& state, const Schedule& s) {
  for (auto _ : state) {
    auto r = validateSchedule(s);
    if (!r.valid()) state.SkipWithError("schedule should be valid");
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(s.opCount()));
}

void BM_Validate1F1B(benchmark::State& state) {
  validateEachIteration(state, oneFOneB());
}

void BM_ValidateZBV(benchmark::State& state) {
  validateEachIteration(state, zbV());
}

void BM_DependencyGraph1F1B(benchmark::State& state) {
  const Schedule& s = oneFOneB();
  for (auto _ : state) {
    DependencyGraph g(s);
    benchmark::DoNotOptimize(g.size());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(s.opCount()));
}

void BM_Generate1F1B(benchmark::State& state) {
  for (auto _ : state) {
    auto s = generateSchedule(ScheduleKind::OneFOneB, GeneratorOptions{8, 62'500});
    benchmark::DoNotOptimize(s);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * 1'000'000);
}

void BM_ReadCsv1F1B(benchmark::State& state) {
  static const std::string csv = writePytorchCsv(oneFOneB()).value();
  for (auto _ : state) {
    auto s = readPytorchCsv(csv);
    benchmark::DoNotOptimize(s);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * 1'000'000);
}

}  // namespace

BENCHMARK(BM_Validate1F1B)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ValidateZBV)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DependencyGraph1F1B)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Generate1F1B)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReadCsv1F1B)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
