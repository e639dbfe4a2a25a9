#pragma once
// The main() of the benchmark programs that print tables after their runs: register the
// cases, run them through Google Benchmark, then print what the cases collected.
#include <benchmark/benchmark.h>

namespace ps::bench {

inline int runThenPrint(int argc, char** argv, void (*registerAll)(), void (*printTables)()) {
  registerAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  printTables();
  return 0;
}

}  // namespace ps::bench
