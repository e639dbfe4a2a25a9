// .pipe DSL throughput: parse and print a 1,000,000-op explicit schedule (target: >= 2M ops/s
// parsed), and expand the 1F1B program to the same size.
#include <benchmark/benchmark.h>

#include <fstream>
#include <map>
#include <sstream>

#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/planning/generators.h"

using namespace ps::core;

namespace {

// 1F1B with 8 devices and 62,500 micro-batches: 8 x 62,500 x 2 = 1,000,000 ops.
const Schedule& oneMillionOps(ScheduleKind kind) {
  static std::map<ScheduleKind, Schedule> cache;
  auto it = cache.find(kind);
  if (it != cache.end()) return it->second;
  GeneratorOptions o;
  o.devices = 8;
  o.microbatches = kind == ScheduleKind::Interleaved1F1B ? 31'248 : 62'500;  // chunks 2: 4 ops per (d, m)
  auto r = generateSchedule(kind, o);
  if (!r.ok()) std::abort();
  return cache.emplace(kind, std::move(*r)).first->second;
}

void parseExplicit(benchmark::State& state, ScheduleKind kind) {
  const Schedule& s = oneMillionOps(kind);
  const std::string text = printDsl(s);
  for (auto _ : state) {
    auto r = parseDsl(text);
    if (!r.ok()) state.SkipWithError("parse failed");
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(s.opCount()));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
  state.counters["ops"] = static_cast<double>(s.opCount());
}

void printExplicit(benchmark::State& state, ScheduleKind kind) {
  const Schedule& s = oneMillionOps(kind);
  for (auto _ : state) {
    std::string text = printDsl(s);
    benchmark::DoNotOptimize(text);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(s.opCount()));
}

void BM_DslParseExplicit1F1B(benchmark::State& state) {
  parseExplicit(state, ScheduleKind::OneFOneB);
}
void BM_DslParseExplicitInterleaved(benchmark::State& state) {
  parseExplicit(state, ScheduleKind::Interleaved1F1B);
}
void BM_DslPrintExplicit1F1B(benchmark::State& state) {
  printExplicit(state, ScheduleKind::OneFOneB);
}
void BM_DslPrintExplicitInterleaved(benchmark::State& state) {
  printExplicit(state, ScheduleKind::Interleaved1F1B);
}

// The programmable form: resources/schedules/1f1b.pipe expanded to 1,000,000 ops (cursors).
void BM_DslExpandProgram1F1B(benchmark::State& state) {
  std::ifstream in(std::string(PIPESTUDIO_RESOURCES_DIR) + "/schedules/1f1b.pipe");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  DslOptions o;
  o.overrides = {{"devices", 8}, {"microbatches", 62'500}};
  size_t ops = 0;
  for (auto _ : state) {
    auto r = parseDsl(text, o);
    if (!r.ok()) state.SkipWithError("expand failed");
    ops = r.ok() ? r->opCount() : 0;
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(ops));
}

}  // namespace

BENCHMARK(BM_DslParseExplicit1F1B)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_DslParseExplicitInterleaved)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_DslPrintExplicit1F1B)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_DslPrintExplicitInterleaved)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_DslExpandProgram1F1B)->Unit(benchmark::kMillisecond)->MinTime(1.0);

BENCHMARK_MAIN();
