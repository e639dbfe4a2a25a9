#pragma once
// K training iterations back to back (docs/search.md, "Iterations"): the one-iteration simulator run
// over an unrolled schedule, with an explicit boundary between iterations, and the steady-state
// iteration time a long run pays.
//
// The schedule's device orders repeat K times; iteration k's micro-batch m becomes k·M + m, so
// the dependency rules of one iteration apply unchanged and iterations only meet through each
// device's order. Each device ends an iteration with an optimizer step (a user kind named
// OPTIMIZER, micro-batch field = the iteration index, on the device's first stage) whose cost
// is the sum of `optimizer_step_ms` over the layers of the device's stages (cost profile), or
// IterationOptions::optimizerStepMs per stage.
//
// Boundaries:
//   overlap  each device starts its next iteration as soon as its own optimizer step ends
//            (Zero Bubble's post-validation removes the global barrier): the unrolled schedule
//            is simulated once.
//   sync     every device finishes the iteration (a global barrier, e.g. the gradient-norm
//            all-reduce), then each runs its optimizer step and starts the next iteration: one
//            iteration with the steps in front is simulated and repeated after each barrier.
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/core/model/result.h"
#include "pipestudio/core/model/schedule.h"
#include "pipestudio/core/model/timeline.h"

namespace ps::core {

enum class IterationBoundary : std::uint8_t { Sync, Overlap };
std::string_view iterationBoundaryName(IterationBoundary b);  // "sync", "overlap"
std::optional<IterationBoundary> iterationBoundaryFromName(std::string_view name);

struct IterationOptions {
  int iterations = 4;  // K >= 1; the steady state needs K >= 2
  IterationBoundary boundary = IterationBoundary::Overlap;
  // Optimizer step time per stage (ms); unset = the profile's optimizer_step_ms per layer.
  std::optional<double> optimizerStepMs;
  SimulationOptions simulation;  // memory limit, curves, transfers of the unrolled run
  bool buildTimeline = true;     // false: metrics only (the search's fast path)
};

struct IterationDeviceMetrics {
  int device = 0;
  double optimizerStepMs = 0;
  // First op start to last op end of one iteration's work on the device (optimizer step not
  // included): Zero Bubble's per-stage span. `first` in the first iteration, `steady` in the
  // last one of the unrolled run.
  double firstSpan = 0;
  double steadySpan = 0;
  double period = 0;                 // end of its last iteration's step minus the end of the one before
  std::int64_t peakMemoryBytes = 0;  // over all K iterations
};

struct IterationResult {
  int iterations = 0;
  int microbatches = 0;  // per iteration
  IterationBoundary boundary = IterationBoundary::Overlap;
  // Per iteration: when its last optimizer step ends (over all devices).
  std::vector<double> iterationEnds;
  double firstIterationMs = 0;  // iterationEnds[0] - first start
  // What each iteration costs once the run is long: iterationEnds[K-1] - iterationEnds[K-2]
  // (the single iteration's length when K == 1).
  double steadyStateMs = 0;
  double maxFirstSpan = 0;           // max over devices of firstSpan (Zero Bubble's metric)
  double maxSteadySpan = 0;          // max over devices of steadySpan
  std::int64_t peakMemoryBytes = 0;  // max over devices and iterations
  std::vector<IterationDeviceMetrics> devices;
  bool complete = true;     // false: some iteration stalled (see diagnostics)
  Diagnostics diagnostics;  // the simulations' (stall, memory over the limit)
  // The unrolled schedule (K iterations and their optimizer steps) and its timeline; the
  // timeline's ops name that schedule's steps. Empty unless buildTimeline.
  Schedule unrolled;
  Timeline timeline;
};

// The schedule repeated K times with an optimizer step after each iteration on every device
// (the form `simulateIterations` runs and the GUI shows). stepMs: per device.
Result<Schedule> unrollIterations(const Schedule& s, int iterations,
                                  const std::vector<double>& stepMsPerDevice);

// Optimizer step time per device: the sum over its stages of the per-stage time (override) or
// of optimizer_step_ms over the stages' layers.
std::vector<double> optimizerStepPerDevice(const Schedule& s, const SimulationModel& model,
                                           std::optional<double> perStageOverride = std::nullopt);

// Simulates K iterations of `s` with the boundary. Errors only where one iteration cannot be
// simulated at all (as `simulate`).
Result<IterationResult> simulateIterations(const Schedule& s, const SimulationModel& model,
                                           const IterationOptions& o);

}  // namespace ps::core
