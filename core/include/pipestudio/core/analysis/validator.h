#pragma once
// Structural checks and order/deadlock detection of a schedule (its dependency graph is in
// dependency_graph.h).
#include <vector>

#include "pipestudio/core/analysis/comm_semantics.h"
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
  // The communication semantics the order was checked under (ValidateOptions::comm; `posted`
  // when the schedule has no explicit SEND/RECV, where all of them agree).
  CommSemantics semantics = CommSemantics::Posted;
  bool valid() const { return !hasErrors(diagnostics); }
};

struct ValidateOptions {
  int maxDiagnostics = 200;  // further errors are summarised in one note
  // How explicit SEND/RECV behave (comm_semantics.h). Under nccl and dualpipe an order that is
  // fine when posted can deadlock through the ranks' communication streams; the deadlock names
  // its cycle action by action across ranks.
  CommOptions comm;
};

// Structural checks (ranges, placement, duplicates, one F and one B or one I + one W per
// (stage, micro-batch), pairs, declared kinds' rules), then executes the device orders with
// unit durations and reports a deadlock with the cycle of waiting ops and devices (under
// options.comm: with every rank's communication stream).
ValidationReport validateSchedule(const Schedule& s);
ValidationReport validateSchedule(const Schedule& s, const ValidateOptions& options);
// The same with `graph`, DependencyGraph(s) built by the caller, so that a caller that also
// simulates (simulate(s, model, o, graph)) builds it once.
ValidationReport validateSchedule(const Schedule& s, const ValidateOptions& options,
                                  const DependencyGraph& graph);

}  // namespace ps::core
