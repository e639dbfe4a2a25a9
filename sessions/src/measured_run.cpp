#include "pipestudio/sessions/measured_run.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

namespace ps::sessions {

using nlohmann::json;

core::Result<PredictionProfile> predictionProfileFromJson(const std::string& text, const std::string& where,
                                                          const std::string& fallbackName,
                                                          ProfileSource fallbackSource) {
  auto p = core::parseCostProfile(text, where);
  PS_TRY(p);
  ProfileSource source = fallbackSource;
  // "source" is not a cost-profile field (the loader ignores it): read it from the JSON itself.
  auto j = json::parse(text, nullptr, false);
  if (j.is_object()) {
    auto it = j.find("source");
    if (it != j.end() && it->is_string())
      if (auto s = profileSourceFromName(it->get<std::string>())) source = *s;
  }
  PredictionProfile out = predictionProfile(std::move(p).value(), fallbackName, source);
  out.json = text;
  return out;
}

PredictionProfile predictionProfile(core::CostProfile profile, const std::string& fallbackName,
                                    ProfileSource source) {
  PredictionProfile out;
  out.name = profile.name.empty() ? fallbackName : profile.name;
  out.profile = std::move(profile);
  out.source = source;
  return out;
}

std::string runConfigToJson(const RunConfig& c) {
  json j = {{"device", c.device},
            {"microbatch_size", c.microbatchSize},
            {"iterations", c.iterations},
            {"warmup", c.warmup},
            {"threads", c.threads},
            {"seed", c.seed},
            {"partition", c.partition},
            {"world_size", c.worldSize},
            {"iteration_ms", c.iterationMs},
            {"parameters", c.parameters},
            {"losses", c.losses},
            {"optimizer", c.optimizer},
            {"lr", c.learningRate},
            {"comm", c.comm},
            {"host", c.host}};
  if (c.loss) j["loss"] = *c.loss;
  if (c.gradientCheck)
    j["gradient_check"] = {{"passed", c.gradientCheck->passed},
                           {"max_relative_error", c.gradientCheck->maxRelativeError},
                           {"worst_parameter", c.gradientCheck->worstParameter},
                           {"loss_relative_error", c.gradientCheck->lossRelativeError},
                           {"tolerance", c.gradientCheck->tolerance}};
  if (!c.stuck.empty()) j["stuck"] = c.stuck;
  return j.dump();
}

namespace {

template <class T>
void read(const json& j, const char* key, T& out) {
  auto it = j.find(key);
  if (it == j.end()) return;
  if constexpr (std::is_same_v<T, std::string>) {
    if (it->is_string()) out = it->get<std::string>();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (it->is_boolean()) out = it->get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    if (it->is_number_integer()) out = it->get<T>();
  } else if constexpr (std::is_floating_point_v<T>) {
    if (it->is_number()) out = it->get<T>();
  } else {  // a vector
    if (!it->is_array()) return;
    T v;
    for (const auto& e : *it) {
      typename T::value_type x{};
      if constexpr (std::is_same_v<typename T::value_type, std::string>) {
        if (!e.is_string()) return;
      } else if constexpr (std::is_integral_v<typename T::value_type>) {
        if (!e.is_number_integer()) return;
      } else if (!e.is_number()) {
        return;
      }
      x = e.get<typename T::value_type>();
      v.push_back(std::move(x));
    }
    out = std::move(v);
  }
}

}  // namespace

RunConfig runConfigFromJson(std::string_view text) {
  RunConfig c;
  auto j = json::parse(text, nullptr, false);
  if (!j.is_object()) return c;
  read(j, "device", c.device);
  read(j, "microbatch_size", c.microbatchSize);
  read(j, "iterations", c.iterations);
  read(j, "warmup", c.warmup);
  read(j, "threads", c.threads);
  read(j, "seed", c.seed);
  read(j, "partition", c.partition);
  read(j, "world_size", c.worldSize);
  read(j, "iteration_ms", c.iterationMs);
  read(j, "parameters", c.parameters);
  read(j, "losses", c.losses);
  read(j, "optimizer", c.optimizer);
  read(j, "lr", c.learningRate);
  read(j, "comm", c.comm);
  read(j, "host", c.host);
  read(j, "stuck", c.stuck);
  if (auto it = j.find("loss"); it != j.end() && it->is_number()) c.loss = it->get<double>();
  if (auto it = j.find("gradient_check"); it != j.end() && it->is_object()) {
    core::RunGradientCheck g;
    read(*it, "passed", g.passed);
    read(*it, "max_relative_error", g.maxRelativeError);
    read(*it, "worst_parameter", g.worstParameter);
    read(*it, "loss_relative_error", g.lossRelativeError);
    read(*it, "tolerance", g.tolerance);
    c.gradientCheck = g;
  }
  return c;
}

std::string runTarget(const core::RunStartedInfo& started) {
  if (started.worldSize <= 1) return started.device.empty() ? std::string("cpu") : started.device;
  return started.device == "cuda" ? "nccl" : "gloo";
}

MeasuredRunPlan planMeasuredRun(const MeasuredRun& run) {
  MeasuredRunPlan out;
  MeasuredRunRecording& rec = out.recording;
  rec.scheduleName = run.scheduleName.empty() ? "schedule" : run.scheduleName;
  rec.pipeText = run.pipeText;
  if (!run.place.empty()) rec.label = rec.scheduleName + " on " + run.place;
  if (run.profile) {
    rec.profileName = run.profile->name;
    rec.profileJson =
        run.profile->json.empty() ? core::costProfileToJson(run.profile->profile) : run.profile->json;
    rec.profileSource = run.profile->source;
    if (run.executed) {
      const std::vector<int> partition = run.started ? run.started->partition : std::vector<int>{};
      auto predicted = core::predictRun(*run.executed, run.profile->profile, partition, run.comm);
      if (predicted) {
        out.prediction = std::move(predicted).value();
        rec.predicted = out.prediction->timeline;
        rec.predicted->label = rec.scheduleName + " (predicted)";
      } else {
        out.predictionErrors = predicted.errors();
      }
    }
  }

  const bool ranks = run.started && run.started->worldSize > 1;
  rec.measured = run.measured;
  rec.measured.source = core::TimelineSource::Measured;
  if (run.status != core::RunState::Succeeded) rec.measured.complete = false;
  // A hang: where each device stood, kept with the timeline for the GUI (hang_report.h).
  for (const auto& d : run.stuck) {
    if (d.device < 0) continue;
    core::Diagnostic note = core::stuckNote(d, ranks ? "rank" : "device");
    const bool there = std::any_of(rec.measured.diagnostics.begin(), rec.measured.diagnostics.end(),
                                   [&](const core::Diagnostic& x) { return x.message == note.message; });
    if (!there) rec.measured.diagnostics.push_back(std::move(note));
  }
  rec.status = run.status;
  rec.error = run.error;
  rec.stderrText = run.stderrText;
  rec.startedMs = run.started && run.started->startedMs > 0 ? run.started->startedMs : run.startedMs;

  RunConfig c;
  if (run.started) {
    const core::RunStartedInfo& s = *run.started;
    rec.target = runTarget(s);
    rec.devices = s.devices;
    rec.model = s.model;
    c.device = s.device;
    c.microbatchSize = s.microbatchSize;
    c.iterations = s.iterations;
    c.warmup = s.warmup;
    c.threads = s.threads;
    c.seed = s.seed;
    c.partition = s.partition;
    c.worldSize = s.worldSize;
    c.parameters = s.parameters;
    c.optimizer = s.optimizer;
    c.learningRate = s.learningRate;
  }
  if (run.finished) {
    const core::RunFinishedInfo& f = *run.finished;
    c.iterationMs = f.iterationMs;
    c.losses = f.losses;
    if (!f.losses.empty() && run.status == core::RunState::Succeeded) c.loss = f.losses.back();
    c.gradientCheck = f.gradientCheck;
  }
  c.comm = std::string(core::commSemanticsName(run.comm.semantics));
  c.host = run.host;
  for (const auto& d : run.stuck)
    if (d.device >= 0) c.stuck.push_back(core::describeStuckDevice(d, ranks ? "rank" : "device"));
  rec.configJson = runConfigToJson(c);
  return out;
}

}  // namespace ps::sessions
