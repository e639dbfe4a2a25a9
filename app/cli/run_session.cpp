// `run --session`: the run's prediction and measurement filed in a session (run_session.h).
#include "run_session.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/command.h"
#include "pipestudio/core/analysis/iterations.h"
#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/sessions/recording.h"

namespace ps::cli {

core::Result<PredictionProfile> loadPredictionProfile(const std::string& path) {
  std::string text, error;
  if (!readInput(path, text, error))
    return core::makeError("cli.read", error, core::SourceLocation{path, 0, 0});
  auto p = core::parseCostProfile(text, path);
  PS_TRY(p);
  PredictionProfile out;
  out.profile = *p;
  out.json = text;
  out.name = !p->name.empty() ? p->name : std::filesystem::path(path).stem().string();
  // `pipestudio-cli profile` writes "source": "profiled" (an unknown field to the loader).
  out.source = "manual";
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_object() && j.contains("source") && j["source"].is_string()) {
    std::string s = j["source"];
    if (sessions::profileSourceFromName(s)) out.source = s;
  }
  return out;
}

PredictionProfile analyticPredictionProfile(const engine::ModelSpec& model, int microbatchSize) {
  PredictionProfile out;
  out.profile = engine::modelCostProfile(model, microbatchSize);
  out.name = "analytic " + engine::modelSpecToString(model) + " b=" + std::to_string(microbatchSize);
  out.profile.name = out.name;
  out.json = core::costProfileToJson(out.profile);
  out.source = "analytic";
  return out;
}

bool recordRunInSession(const RunSessionRecording& r, std::ostream& out) {
  const engine::RunOptions& o = *r.options;
  const engine::RunReport& rep = *r.report;
  PredictionProfile profile = r.profile ? *r.profile : analyticPredictionProfile(o.model, o.microbatchSize);
  const auto stepKind = r.schedule->kindFromName(std::string(core::kOptimizerStepKind));
  if (stepKind && !r.profile) {
    engine::addNominalOptimizerStepCosts(profile.profile, o.optimizer);
    profile.json = core::costProfileToJson(profile.profile);
  }

  sessions::MeasuredRunRecording rec;
  rec.scheduleName = r.schedule->name.empty() ? "schedule" : r.schedule->name;
  rec.pipeText = r.pipeText;
  rec.profileName = profile.name;
  rec.profileJson = profile.json;
  rec.profileSource =
      sessions::profileSourceFromName(profile.source).value_or(sessions::ProfileSource::Manual);
  // The prediction: the schedule simulated with that profile and the partition the run used.
  auto model = core::makeSimulationModel(*r.schedule, profile.profile, rep.partition);
  bool stepsTimed = false;
  if (model && stepKind) {
    // The engine steps every stage of a device in one OPTIMIZER op on its first stage, whose
    // duration is that stage's O: give the first stage the device's whole step.
    const std::vector<double> perDevice = core::optimizerStepPerDevice(*r.schedule, *model, std::nullopt);
    for (auto& st : model->stages) st.O = 0;
    for (int d = 0; d < static_cast<int>(perDevice.size()); ++d) {
      const auto stages = r.schedule->pipeline.stagesOn(d);
      if (!stages.empty())
        model->stages[static_cast<size_t>(stages.front())].O = perDevice[static_cast<size_t>(d)];
      stepsTimed = stepsTimed || perDevice[static_cast<size_t>(d)] > 0;
    }
  }
  if (model) {
    core::SimulationOptions so;
    so.comm = r.comm;
    auto predicted = core::simulate(*r.schedule, *model, so);
    if (predicted) {
      rec.predicted = std::move(*predicted);
      rec.predicted->label = rec.scheduleName + " (predicted)";
    } else {
      std::cerr << "pipestudio-cli run: no prediction recorded:\n"
                << core::formatDiagnostics(predicted.errors());
    }
  } else {
    std::cerr << "pipestudio-cli run: no prediction recorded (profile " << profile.name << "):\n"
              << core::formatDiagnostics(model.errors());
  }
  rec.measured = rep.timeline;
  // A hang: where each device stood, kept with the timeline for the GUI (hang_report.h).
  for (const auto& d : rep.stuck)
    if (d.device >= 0)
      rec.measured.diagnostics.push_back(core::stuckNote(d, o.distributed.worldSize > 1 ? "rank" : "device"));
  rec.startedMs = r.startedMs;
  rec.target = r.target;
  rec.devices = r.schedule->pipeline.devices;
  rec.model = engine::modelSpecToString(o.model);
  rec.status = rep.status;
  for (const auto& d : rep.diagnostics)
    if (d.severity == core::Severity::Error) {
      rec.error = d.message;
      break;
    }
  nlohmann::json config = {{"device", o.device},
                           {"microbatch_size", o.microbatchSize},
                           {"iterations", o.iterations},
                           {"warmup", o.warmup},
                           {"threads", o.threads},
                           {"seed", o.seed},
                           {"partition", rep.partition},
                           {"world_size", o.distributed.worldSize},
                           {"iteration_ms", rep.iterationMs},
                           {"parameters", rep.parameterCount}};
  if (!rep.losses.empty() && rep.status == ps::core::RunState::Succeeded) config["loss"] = rep.losses.back();
  if (rep.gradients.ran)
    config["gradient_check"] = {{"passed", rep.gradients.passed},
                                {"max_relative_error", rep.gradients.maxRelativeError}};
  config["comm"] = std::string(core::commSemanticsName(r.comm.semantics));
  if (!rep.stuck.empty()) {
    // A hang's post-mortem: where every device stood (the wait chain is in the error).
    nlohmann::json stuck = nlohmann::json::array();
    for (const auto& d : rep.stuck)
      if (d.device >= 0)
        stuck.push_back(core::describeStuckDevice(d, o.distributed.worldSize > 1 ? "rank" : "device"));
    config["stuck"] = std::move(stuck);
  }
  rec.configJson = config.dump();

  auto stored = sessions::recordMeasuredRun(r.sessionPath, rec);
  if (!stored) {
    std::cerr << "pipestudio-cli run: cannot record the run in the session:\n"
              << core::formatDiagnostics(stored.errors());
    return false;
  }
  out << "  session " << r.sessionPath << ": measured run " << stored->measuredRunId;
  if (stored->predictedRunId) {
    const double predicted = rec.predicted->metrics.makespan, measured = rep.timeline.metrics.makespan;
    const bool analytic = profile.source == "analytic";
    out << ", predicted run " << *stored->predictedRunId << " (profile '" << profile.name
        << "', makespan predicted " << predicted << " ms";
    if (analytic) out << " " << kUncalibratedMark;
    // A failed or cancelled run's makespan covers part of the schedule: nothing to compare.
    if (rep.status == ps::core::RunState::Succeeded) {
      out << ", measured " << measured << " ms";
      if (predicted > 0) out << ", error " << (measured - predicted) / predicted * 100.0 << "%";
    } else {
      out << "; the run " << (rep.status == ps::core::RunState::Cancelled ? "was cancelled" : "failed")
          << ", so no measured makespan to compare";
    }
    out << ")";
    if (analytic) {
      out << "\n  prediction: " << kUncalibratedExplanation;
      if (o.model.kind == "torchscript")
        out << "; `pipestudio-cli profile` measures the built-in models only: for a TorchScript model give "
               "--profile with times of your own";
      else
        out << "; calibrate it in seconds: pipestudio-cli profile --model "
            << engine::modelSpecToString(o.model) << " --microbatch-size " << o.microbatchSize
            << " --workers "
            << (o.distributed.worldSize > 1 ? std::max(1, o.distributed.localWorldSize)
                                            : r.schedule->pipeline.devices)
            << " -o profile.json" << (o.optimizer.empty() ? "" : " --optimizer " + o.optimizer)
            << ", then run with --profile profile.json";
    }
    // With --optimizer the run's steps are ops of the schedule, but no cost profile the run
    // can use times them: the prediction gives them 0 ms, and the error includes their time.
    if (stepKind && !stepsTimed)
      out << "\n  prediction: the OPTIMIZER steps are predicted at 0 ms (profile '" << profile.name
          << "' gives no optimizer_step_ms); the measured makespan includes them";
    else if (stepKind && !r.profile)
      out << "\n  prediction: the OPTIMIZER steps are timed nominally (" << o.optimizer
          << " streaming its state at 10 GB/s), like the analytic profile's other times";
  }
  out << "\n";
  return true;
}

}  // namespace ps::cli
