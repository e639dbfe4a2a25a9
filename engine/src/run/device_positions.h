#pragma once
// Where each device of a process stands while it runs: its worker sets the step it enters,
// the wait it starts and how that wait ended, and its finish; a hung run's post-mortem reads
// what every device was in and what it waited for (core::StuckDevice). Torch-free: a unit of its
// own, tested without a run (tests/engine/device_positions_test.cpp). Thread-safe.
#include <chrono>
#include <mutex>
#include <vector>

#include "pipestudio/core/analysis/dependency_graph.h"
#include "pipestudio/core/model/hang_report.h"
#include "pipestudio/core/model/schedule.h"

namespace ps::engine::detail {

class DevicePositions {
 public:
  using Clock = std::chrono::steady_clock;

  // `devices` devices of `schedule` (kept by reference: it outlives the run), none started.
  void reset(const core::Schedule& schedule, int devices);

  void enterStep(int device, int step, const core::Op& op);
  // The device waits for what `producer` (an F for an activation, a B for a gradient) sends
  // from `srcDevice`: the post-mortem names the step of the schedule that sends it (the stage's
  // I when the backward is split).
  void startWait(int device, int srcDevice, const core::Op& producer);
  // The wait ended: with its data, or without (a timeout, a stop), which keeps its place and
  // its length for the post-mortem.
  void endWait(int device, bool arrived);
  void finish(int device);  // done with the iteration
  void clear(int device);   // between iterations: nowhere yet
  core::StuckDevice stuck(int device) const;

 private:
  struct Position {
    bool started = false, done = false, waiting = false;
    int step = -1;
    core::Op op;
    int waitsOnDevice = -1;
    core::Op waitsFor;
    int waitsForStep = -1;
    Clock::time_point since, until;  // the wait; `until` once it ended without its data
  };

  const core::Schedule* schedule_ = nullptr;
  core::DependencyGraph graph_;  // finds the step that produces what a device waits for
  mutable std::mutex mu_;
  std::vector<Position> positions_;
};

}  // namespace ps::engine::detail
