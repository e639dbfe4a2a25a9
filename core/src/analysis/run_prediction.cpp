#include "pipestudio/core/analysis/run_prediction.h"

#include <optional>
#include <string>

#include "pipestudio/core/analysis/iterations.h"
#include "pipestudio/core/analysis/simulator.h"

namespace ps::core {

Result<RunPrediction> predictRun(const Schedule& executed, const CostProfile& profile,
                                 const std::vector<int>& partition, const CommOptions& comm) {
  auto model = makeSimulationModel(executed, profile, partition);
  PS_TRY(model);
  RunPrediction out;
  if (executed.kindFromName(std::string(kOptimizerStepKind))) {
    const std::vector<double> perDevice = optimizerStepPerDevice(executed, *model, std::nullopt);
    for (auto& st : model->stages) st.O = 0;
    for (int d = 0; d < static_cast<int>(perDevice.size()); ++d) {
      const double step = perDevice[static_cast<size_t>(d)];
      const auto stages = executed.pipeline.stagesOn(d);
      if (!stages.empty()) model->stages[static_cast<size_t>(stages.front())].O = step;
      out.optimizerStepsTimed = out.optimizerStepsTimed || step > 0;
    }
  }
  SimulationOptions so;
  so.comm = comm;
  auto predicted = simulate(executed, *model, so);
  PS_TRY(predicted);
  out.timeline = std::move(predicted).value();
  return out;
}

}  // namespace ps::core
