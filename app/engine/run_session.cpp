// `run --session`: the run's prediction and measurement filed in a session (run_session.h).
#include "run_session.h"

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "common/command.h"
#include "pipestudio/core/analysis/iterations.h"
#include "pipestudio/sessions/recording.h"

namespace ps::cli {

core::Result<PredictionProfile> loadPredictionProfile(const std::string& path) {
  std::string text, error;
  if (!readInput(path, text, error))
    return core::makeError("cli.read", error, core::SourceLocation{path, 0, 0});
  return sessions::predictionProfileFromJson(text, path, std::filesystem::path(path).stem().string(),
                                             sessions::ProfileSource::Manual);
}

PredictionProfile analyticPredictionProfile(const engine::ModelSpec& model, int microbatchSize) {
  const std::string name =
      "analytic " + engine::modelSpecToString(model) + " b=" + std::to_string(microbatchSize);
  core::CostProfile p = engine::modelCostProfile(model, microbatchSize);
  p.name = name;
  return sessions::predictionProfile(std::move(p), name, sessions::ProfileSource::Analytic);
}

namespace {

// What the `started` event says of a run, for a report that has none (a launcher that took over
// from a rank 0 that never started).
core::RunStartedInfo startedFromOptions(const core::Schedule& s, const engine::RunOptions& o,
                                        const engine::RunReport& rep, int worldSize) {
  core::RunStartedInfo st;
  st.protocolVersion = core::kRunEventProtocolVersion;
  st.schedule = s.name;
  st.model = engine::modelSpecToString(o.model);
  st.device = engine::deviceName(o.device);
  st.devices = s.pipeline.devices;
  st.stages = s.pipeline.stages;
  st.microbatches = s.pipeline.microbatches;
  st.microbatchSize = o.microbatchSize;
  st.iterations = o.iterations;
  st.warmup = o.warmup;
  st.partition = rep.partition;
  st.worldSize = worldSize > 0 ? worldSize : std::max(1, o.distributed.worldSize);
  st.threads = o.threads;
  st.optimizer = engine::optimizerName(o.optimizer);
  st.learningRate = o.learningRate;
  st.parameters = rep.parameterCount;
  st.seed = static_cast<std::int64_t>(o.seed);
  return st;
}

core::RunFinishedInfo finishedFromReport(const engine::RunReport& rep) {
  core::RunFinishedInfo f;
  f.state = rep.status;
  f.status = std::string(core::runEventStatusToken(rep.status));
  f.losses = rep.losses;
  f.iterationMs = rep.iterationMs;
  f.makespanMs = rep.timeline.metrics.makespan;
  f.bubbleRatio = rep.timeline.metrics.bubbleRatio;
  if (rep.gradients.ran)
    f.gradientCheck = core::RunGradientCheck{rep.gradients.passed, rep.gradients.maxRelativeError,
                                             rep.gradients.worstParameter, rep.gradients.lossRelativeError,
                                             rep.gradients.tolerance};
  return f;
}

}  // namespace

bool recordRunInSession(const RunSessionRecording& r, std::ostream& out) {
  const engine::RunOptions& o = *r.options;
  const engine::RunReport& rep = *r.report;
  const bool stepKind = r.schedule->kindFromName(std::string(core::kOptimizerStepKind)).has_value();
  PredictionProfile profile = r.profile ? *r.profile : analyticPredictionProfile(o.model, o.microbatchSize);
  if (stepKind && !r.profile) engine::addNominalOptimizerStepCosts(profile.profile, o.optimizer);

  sessions::MeasuredRun run;
  run.scheduleName = r.schedule->name;
  run.pipeText = r.pipeText;
  run.executed = r.schedule;
  run.profile = profile;
  run.comm = r.comm;
  run.started = rep.started ? *rep.started : startedFromOptions(*r.schedule, o, rep, r.worldSize);
  run.finished = rep.finished ? *rep.finished : finishedFromReport(rep);
  run.measured = rep.timeline;
  run.stuck = rep.stuck;
  run.status = rep.status;
  for (const auto& d : rep.diagnostics)
    if (d.severity == core::Severity::Error) {
      run.error = d.message;
      break;
    }
  run.startedMs = r.startedMs;
  run.place = r.place;
  run.host = r.host;
  const sessions::MeasuredRunPlan plan = sessions::planMeasuredRun(run);
  if (!plan.predictionErrors.empty())
    std::cerr << "pipestudio-cli run: no prediction recorded (profile " << profile.name << "):\n"
              << core::formatDiagnostics(plan.predictionErrors);
  const sessions::MeasuredRunRecording& rec = plan.recording;
  const bool stepsTimed = plan.prediction && plan.prediction->optimizerStepsTimed;

  auto stored = sessions::recordMeasuredRun(r.sessionPath, rec);
  if (!stored) {
    std::cerr << "pipestudio-cli run: cannot record the run in the session:\n"
              << core::formatDiagnostics(stored.errors());
    return false;
  }
  out << "  session " << r.sessionPath << ": measured run " << stored->measuredRunId;
  if (stored->predictedRunId) {
    const double predicted = rec.predicted->metrics.makespan, measured = rep.timeline.metrics.makespan;
    const bool analytic = profile.source == sessions::ProfileSource::Analytic;
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
      if (o.model.kind == engine::ModelKind::TorchScript)
        out << "; `pipestudio-cli profile` measures the built-in models only: for a TorchScript model give "
               "--profile with times of your own";
      else
        out << "; calibrate it in seconds: pipestudio-cli profile --model "
            << engine::modelSpecToString(o.model) << " --microbatch-size " << o.microbatchSize
            << " --workers "
            << (o.distributed.worldSize > 1 ? std::max(1, o.distributed.localWorldSize)
                                            : r.schedule->pipeline.devices)
            << " -o profile.json"
            << (o.optimizer == engine::Optimizer::None
                    ? ""
                    : " --optimizer " + std::string(engine::optimizerName(o.optimizer)))
            << ", then run with --profile profile.json";
    }
    // With --optimizer the run's steps are ops of the schedule, but no cost profile the run
    // can use times them: the prediction gives them 0 ms, and the error includes their time.
    if (stepKind && !stepsTimed)
      out << "\n  prediction: the OPTIMIZER steps are predicted at 0 ms (profile '" << profile.name
          << "' gives no optimizer_step_ms); the measured makespan includes them";
    else if (stepKind && !r.profile)
      out << "\n  prediction: the OPTIMIZER steps are timed nominally (" << engine::optimizerName(o.optimizer)
          << " streaming its state at 10 GB/s), like the analytic profile's other times";
  }
  out << "\n";
  return true;
}

}  // namespace ps::cli
