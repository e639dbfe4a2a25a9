#pragma once
// Structural checks and order/deadlock detection of a schedule (its dependency graph is in
// dependency_graph.h).
#include <vector>

#include "pipestudio/core/analysis/dependency_graph.h"
#include "pipestudio/core/model/schedule.h"

namespace ps::core {

struct DeadlockWait {
  int device = 0;
  OpRef at;     // the op this device is stuck at
  Op waitsFor;  // the dependency it waits for
  int waitsOnDevice = 0;
};

struct ValidationReport {
  Diagnostics diagnostics;             // errors and warnings, each naming ops
  std::vector<DeadlockWait> deadlock;  // the cycle, empty when none
  bool valid() const { return !hasErrors(diagnostics); }
};

struct ValidateOptions {
  int maxDiagnostics = 200;  // further errors are summarised in one note
};

// Structural checks (ranges, placement, duplicates, one F and one B or one I + one W per
// (stage, micro-batch), pairs, declared kinds' rules), then executes the device orders with
// unit durations and reports a deadlock with the cycle of waiting ops and devices.
ValidationReport validateSchedule(const Schedule& s);
ValidationReport validateSchedule(const Schedule& s, const ValidateOptions& options);
// The same with `graph`, DependencyGraph(s) built by the caller, so that a caller that also
// simulates (simulate(s, model, o, graph)) builds it once.
ValidationReport validateSchedule(const Schedule& s, const ValidateOptions& options,
                                  const DependencyGraph& graph);

}  // namespace ps::core
