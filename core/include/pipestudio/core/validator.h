#pragma once
// Structural checks and order/deadlock detection of a schedule.
#include <vector>

#include "pipestudio/core/schedule.h"

namespace ps::core {

struct DeadlockWait {
  int device = 0;
  OpRef at;        // the op this device is stuck at
  Op waitsFor;     // the dependency it waits for
  int waitsOnDevice = 0;
};

struct ValidationReport {
  Diagnostics diagnostics;            // errors and warnings, each naming ops
  std::vector<DeadlockWait> deadlock;  // the cycle, empty when none
  bool valid() const { return !hasErrors(diagnostics); }
};

// Direct dependencies of an op within a schedule (the shared semantics of DESIGN.md plus
// user kinds' rules). Used by the validator, the simulator and the GUI's arrows.
std::vector<Op> dependenciesOf(const Schedule& s, const Op& op);

ValidationReport validateSchedule(const Schedule& s);

}  // namespace ps::core
