// Session store throughput: bulk op inserts (target: 1,000,000 op rows in 2 s or less) and
// loading a run (target: a 100,000-op run in 200 ms or less). Results: docs/benchmarks.md.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "pipestudio/sessions/session_store.h"

namespace {

using namespace ps::sessions;

std::filesystem::path benchDir() {
  auto dir = std::filesystem::temp_directory_path() / ("ps_sessions_bench_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

void removeSession(const std::filesystem::path& p) {
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(p.string() + suffix);
}

// A 1F1B-like op list: `n` ops over 8 devices, sorted by (device, start).
ps::core::Timeline makeTimeline(size_t n) {
  ps::core::Timeline t;
  t.devices = 8;
  t.label = "bench";
  size_t perDevice = (n + 7) / 8;
  t.ops.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    ps::core::TimelineOp op;
    op.device = static_cast<int>(i / perDevice);
    op.step = static_cast<int>(i % perDevice);
    op.op.kind =
        (i % 3 == 0) ? ps::core::OpKind::F : (i % 3 == 1 ? ps::core::OpKind::I : ps::core::OpKind::W);
    op.op.stage = op.device;
    op.op.microbatch = op.step / 3;
    op.start = static_cast<double>(op.step) * 1.5 + op.device;
    op.end = op.start + 1.25;
    t.ops.push_back(op);
  }
  t.metrics.makespan = static_cast<double>(perDevice) * 1.5 + 8;
  t.metrics.ops = n;
  return t;
}

SessionStore openStore(const std::filesystem::path& p) {
  auto s = SessionStore::open(p.string());
  if (!s) {
    std::fprintf(stderr, "%s\n", ps::core::formatDiagnostics(s.errors()).c_str());
    std::abort();
  }
  return std::move(s).value();
}

// recordTimeline: begin, ops in committed chunks, finish: the path simulate --session takes.
void BM_RecordTimelineOps(benchmark::State& state) {
  auto n = static_cast<size_t>(state.range(0));
  auto timeline = makeTimeline(n);
  auto path = benchDir() / "record.session";
  for (auto _ : state) {
    state.PauseTiming();
    removeSession(path);
    auto store = openStore(path);
    state.ResumeTiming();
    auto id = store.recordTimeline(RunInfo{}, timeline);
    if (!id) state.SkipWithError("recordTimeline failed");
    benchmark::DoNotOptimize(id);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
  removeSession(path);
}
BENCHMARK(BM_RecordTimelineOps)
    ->Arg(100000)
    ->Arg(1000000)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);

void BM_LoadTimeline(benchmark::State& state) {
  auto n = static_cast<size_t>(state.range(0));
  auto path = benchDir() / "load.session";
  removeSession(path);
  auto store = openStore(path);
  auto id = store.recordTimeline(RunInfo{}, makeTimeline(n));
  // Another run in the file, so the load is a range of a shared table.
  (void)store.recordTimeline(RunInfo{}, makeTimeline(n));
  if (!id) {
    state.SkipWithError("recordTimeline failed");
    return;
  }
  for (auto _ : state) {
    auto t = store.loadTimeline(*id);
    if (!t || t->ops.size() != n) state.SkipWithError("loadTimeline failed");
    benchmark::DoNotOptimize(t);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
  removeSession(path);
}
BENCHMARK(BM_LoadTimeline)
    ->Arg(100000)
    ->Arg(1000000)
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);

// The session dock's run list over a file with 1,000 runs.
void BM_ListRuns(benchmark::State& state) {
  auto path = benchDir() / "list.session";
  removeSession(path);
  auto store = openStore(path);
  auto small = makeTimeline(64);
  for (int i = 0; i < 1000; ++i) (void)store.recordTimeline(RunInfo{}, small);
  for (auto _ : state) {
    auto runs = store.listRuns();
    if (!runs || runs->size() != 1000) state.SkipWithError("listRuns failed");
    benchmark::DoNotOptimize(runs);
  }
  removeSession(path);
}
BENCHMARK(BM_ListRuns)->Unit(benchmark::kMillisecond)->Repetitions(5)->ReportAggregatesOnly(true);

}  // namespace

BENCHMARK_MAIN();
