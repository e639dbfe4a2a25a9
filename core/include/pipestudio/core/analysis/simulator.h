#pragma once
// Event-driven simulator: a schedule + stage costs -> a predicted Timeline.
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "pipestudio/core/analysis/comm_semantics.h"
#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/core/model/duration_expression.h"  // evaluateDurationExpression
#include "pipestudio/core/model/schedule.h"
#include "pipestudio/core/model/timeline.h"

namespace ps::core {

struct SimulationOptions {
  std::optional<std::int64_t> memoryLimitBytes;  // overrides the profile's device memory
  bool recordMemory = true;                      // memory curves (the GUI and trace export want them)
  bool recordTransfers = true;
  // How explicit SEND/RECV behave (comm_semantics.h). Under nccl and dualpipe they run on each
  // rank's communication stream: a transfer starts when both sides are at the heads of their
  // streams, and a point-to-point op queued behind another is a head-of-line wait
  // (Timeline::headOfLine). Schedules without explicit SEND/RECV simulate alike under all.
  CommOptions comm;
};

// The inputs that don't change while a user drags ops: build once, simulate many times.
struct SimulationModel {
  CostProfile profile;
  std::vector<StageCost> stages;
};

Result<SimulationModel> makeSimulationModel(const Schedule& s, const CostProfile& p,
                                            const std::vector<int>& layersPerStage = {});

class DependencyGraph;  // dependency_graph.h

// Always returns a Timeline for a structurally sound schedule; a stall (deadlock) gives an
// incomplete timeline with the cycle in its diagnostics, a memory overflow a diagnostic
// naming device, time and op. Errors only for schedules it cannot interpret at all.
Result<Timeline> simulate(const Schedule& s, const SimulationModel& model, const SimulationOptions& o = {});
// The same with `graph`, DependencyGraph(s) built by the caller (e.g. shared with
// validateSchedule), instead of building one.
Result<Timeline> simulate(const Schedule& s, const SimulationModel& model, const SimulationOptions& o,
                          const DependencyGraph& graph);

}  // namespace ps::core
