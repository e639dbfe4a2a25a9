#pragma once
// The hand-built two-device, two-micro-batch 1F1B plan that the comparison, critical-path and
// stepper tests lay their measured timelines over, and shorthands for writing those timelines.
#include "pipestudio/core/model/schedule.h"
#include "pipestudio/core/model/timeline.h"

namespace ps::core::test {

inline Op F(int s, int m) { return Op{OpKind::F, s, m}; }
inline Op B(int s, int m) { return Op{OpKind::B, s, m}; }

// dev0: F0 F1 B0 B1 (stage 0); dev1: F0 B0 F1 B1 (stage 1).
inline Schedule oneFOneB() {
  Schedule s;
  s.name = "1f1b";
  s.pipeline = Pipeline::make(2, 2, 2, PlacementKind::Linear).value();
  s.devices = {{Step{F(0, 0)}, Step{F(0, 1)}, Step{B(0, 0)}, Step{B(0, 1)}},
               {Step{F(1, 0)}, Step{B(1, 0)}, Step{F(1, 1)}, Step{B(1, 1)}}};
  return s;
}

// A measured op whose step in the plan is not known (-1).
inline TimelineOp op(int device, Op o, double start, double end) {
  return TimelineOp{device, -1, o, false, start, end};
}

}  // namespace ps::core::test
