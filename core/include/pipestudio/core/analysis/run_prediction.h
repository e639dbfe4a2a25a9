#pragma once
// The prediction filed beside a measured run: the schedule the engine executed, simulated with
// a cost profile and the layer partition the run used. One function, so the CLI's `run
// --session` and the GUI's Run dialog predict a run alike.
#include <vector>

#include "pipestudio/core/analysis/comm_semantics.h"
#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/core/model/result.h"
#include "pipestudio/core/model/schedule.h"
#include "pipestudio/core/model/timeline.h"

namespace ps::core {

struct RunPrediction {
  Timeline timeline;
  // The schedule has OPTIMIZER ops (`run --optimizer`) and the profile gave some device a step
  // time above 0 (optimizer_step_ms); false: they are predicted at 0 ms.
  bool optimizerStepsTimed = false;
};

// `partition`: layers per stage as the run split the model (empty: the profile's default split).
// The engine steps every stage of a device in one OPTIMIZER op on the device's first stage, so
// that stage is given the device's whole step and the others none. Errors where the profile
// does not fit the schedule or the schedule cannot be simulated.
Result<RunPrediction> predictRun(const Schedule& executed, const CostProfile& profile,
                                 const std::vector<int>& partition, const CommOptions& comm);

}  // namespace ps::core
