// Executor overhead per op: a one-device schedule (GPipe order over S stages) through
// runSchedule. With one device nothing ever waits for another, so the time of an iteration
// not covered by op spans (mailbox hand-over, scheduling between ops, timing, memory
// samples) is the executor's own overhead; counters report it per op and as a share of the
// iteration. Bookkeeping inside an op (stash, NaN check) is counted as op time. Manual time
// is the median measured iteration, so model construction stays out.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "pipestudio/engine/engine.h"

namespace {

constexpr int kStages = 4, kMicro = 4, kIters = 5;

ps::core::Schedule oneDeviceGpipe() {
  ps::core::Schedule s;
  s.name = "one-device-gpipe";
  s.pipeline = ps::core::Pipeline::make(1, kStages, kMicro, ps::core::PlacementKind::Linear).value();
  s.devices.resize(1);
  for (int m = 0; m < kMicro; ++m)
    for (int st = 0; st < kStages; ++st) s.devices[0].push_back({{ps::core::OpKind::F, st, m}, std::nullopt});
  for (int m = 0; m < kMicro; ++m)
    for (int st = kStages - 1; st >= 0; --st)
      s.devices[0].push_back({{ps::core::OpKind::B, st, m}, std::nullopt});
  return s;
}

void runOverhead(benchmark::State& state, ps::engine::Device device) {
  const int hidden = static_cast<int>(state.range(0)), batch = static_cast<int>(state.range(1));
  auto sched = oneDeviceGpipe();
  ps::engine::RunOptions o;
  o.device = device;
  o.model = ps::engine::parseModelSpec("mlp:layers=4,hidden=" + std::to_string(hidden)).value();
  o.microbatchSize = batch;
  o.iterations = kIters;
  o.warmup = 1;
  o.threads = 2;
  double gapMs = 0, busyMs = 0, iterMs = 0;
  for (auto _ : state) {
    auto r = ps::engine::runSchedule(sched, o);
    if (!r || r->status != ps::core::RunState::Succeeded) {
      state.SkipWithError(!r ? r.errors().front().message.c_str() : r->diagnostics.front().message.c_str());
      return;
    }
    std::vector<double> it = r->iterationMs;
    std::sort(it.begin(), it.end());
    iterMs = it[it.size() / 2];
    const auto& ops = r->timeline.ops;
    double busy = 0;
    for (const auto& op : ops) busy += op.duration();
    const double last = r->iterationMs.back();
    busyMs = busy / static_cast<double>(ops.size());
    gapMs = (last - busy) / static_cast<double>(ops.size());
    state.SetIterationTime(iterMs / 1000.0);
  }
  state.counters["op_ms"] = busyMs;
  state.counters["overhead_per_op_us"] = gapMs * 1000.0;
  state.counters["overhead_pct"] = 100.0 * gapMs / (busyMs + gapMs);
}

void BM_ExecutorOverhead(benchmark::State& state) {
  runOverhead(state, ps::engine::Device::Cpu);
}

// hidden x micro-batch rows: tiny ops (~0.05 ms, overhead shows) and ~1-10 ms ops.
BENCHMARK(BM_ExecutorOverhead)
    ->Args({128, 16})
    ->Args({512, 64})
    ->Args({1024, 128})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

// The CUDA variant (op times from CUDA events, streams, allocator statistics) is registered
// only when a GPU is there; otherwise the run says why it is missing.
int main(int argc, char** argv) {
  if (ps::engine::cudaAvailable()) {
    benchmark::RegisterBenchmark("BM_ExecutorOverheadCuda",
                                 [](benchmark::State& st) { runOverhead(st, ps::engine::Device::Cuda); })
        ->Args({1024, 128})
        ->Args({4096, 512})
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  } else {
    std::fprintf(stderr, "BM_ExecutorOverheadCuda skipped: %s\n",
                 ps::engine::cudaCompiled() ? "no GPU visible" : "CPU-only libtorch build");
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
