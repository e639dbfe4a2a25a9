#pragma once
// Where the designer marks the iteration boundary when it shows K iterations: the end of each
// device's optimizer step, read from the core's K-iteration timeline (never recomputed here).
#include <vector>

#include "pipestudio/core/analysis/iterations.h"

namespace ps::ui {

struct IterationMark {
  int device = 0;
  int iteration = 0;     // 0-based: the mark ends iteration `iteration` on `device`
  double stepStart = 0;  // the optimizer step's start (ms)
  double end = 0;        // its end: the device's iteration end (ms)
};

// One mark per device and iteration, ordered by device then time. Optimizer steps are the
// unrolled schedule's OPTIMIZER kinds; their micro-batch field is the iteration index.
std::vector<IterationMark> iterationMarks(const ps::core::IterationResult& r);

}  // namespace ps::ui
