// Debugger core on large timelines: trace import, comparison (with critical path and bubble
// attribution), and the step-through state the GUI asks for on every playhead move.
#include <benchmark/benchmark.h>

#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "pipestudio/core/analysis/comparison.h"
#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/analysis/stepper.h"
#include "pipestudio/core/io/trace_import.h"
#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/core/planning/generators.h"

using namespace ps::core;

namespace {

struct Fixture {
  Schedule plan;
  Timeline planned;
  Timeline measured;
};

// 1F1B with D devices and M micro-batches simulated with F = 1, B = 2; the "measured" timeline
// is the same schedule simulated with stage D/2 forward 20% slower.
const Fixture& fixture(int devices, int microbatches) {
  static std::map<std::pair<int, int>, Fixture> cache;
  auto key = std::make_pair(devices, microbatches);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  Fixture f;
  GeneratorOptions g;
  g.devices = devices;
  g.microbatches = microbatches;
  f.plan = generateSchedule(ScheduleKind::OneFOneB, g).value();
  auto profile = uniformCostProfile("F=1,B=2", f.plan.pipeline.stages).value();
  auto model = makeSimulationModel(f.plan, profile).value();
  f.planned = simulate(f.plan, model).value();
  profile.layers[static_cast<size_t>(devices / 2)].forwardMs *= 1.2;
  auto slower = makeSimulationModel(f.plan, profile).value();
  f.measured = simulate(f.plan, slower).value();
  f.measured.source = TimelineSource::Measured;
  return cache.emplace(key, std::move(f)).first->second;
}

std::string torchTrace(const Timeline& t, int rank) {
  nlohmann::json ev = nlohmann::json::array();
  for (const auto& o : t.ops) {
    if (o.device != rank) continue;
    std::string name = "PP:" + std::to_string(o.op.stage) + std::string(builtinKindName(o.op.kind)) +
                       std::to_string(o.op.microbatch);
    ev.push_back({{"ph", "X"},
                  {"cat", "gpu_user_annotation"},
                  {"name", name},
                  {"pid", rank},
                  {"tid", 7},
                  {"ts", o.start * 1000},
                  {"dur", o.duration() * 1000}});
    ev.push_back({{"ph", "X"},
                  {"cat", "kernel"},
                  {"name", "sgemm"},
                  {"pid", rank},
                  {"tid", 7},
                  {"ts", o.start * 1000 + 1},
                  {"dur", o.duration() * 1000 - 2}});
  }
  return nlohmann::json{{"traceEvents", ev}, {"distributedInfo", {{"rank", rank}}}}.dump();
}

void BM_ImportTorchTraces(benchmark::State& state) {
  const Fixture& f = fixture(8, static_cast<int>(state.range(0)));
  std::vector<TraceFile> files;
  size_t bytes = 0;
  for (int r = 0; r < 8; ++r) {
    files.push_back(TraceFile{"rank" + std::to_string(r) + ".json", torchTrace(f.measured, r), std::nullopt});
    bytes += files.back().text.size();
  }
  for (auto _ : state) {
    auto t = importChromeTraces(files);
    benchmark::DoNotOptimize(t);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(f.measured.ops.size()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}
BENCHMARK(BM_ImportTorchTraces)->Arg(64)->Arg(512)->Unit(benchmark::kMillisecond);

void BM_Compare(benchmark::State& state) {
  const Fixture& f = fixture(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  for (auto _ : state) {
    Comparison c = compareTimelines(f.plan, f.planned, f.measured);
    benchmark::DoNotOptimize(c);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(f.measured.ops.size()));
}
BENCHMARK(BM_Compare)->Args({8, 64})->Args({64, 1024})->Unit(benchmark::kMillisecond);

void BM_StepperStateAt(benchmark::State& state) {
  const Fixture& f = fixture(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  Stepper s = Stepper::make(f.measured, f.plan, f.planned).value();
  double end = s.timeAt(s.size());
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> at(0, end);
  for (auto _ : state) {
    StepState st = s.stateAt(at(rng));
    benchmark::DoNotOptimize(st);
  }
  state.counters["ops"] = static_cast<double>(f.measured.ops.size());
}
BENCHMARK(BM_StepperStateAt)->Args({8, 64})->Args({64, 1024})->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
