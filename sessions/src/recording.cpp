#include "pipestudio/sessions/recording.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <span>

#include "pipestudio/core/io/dsl.h"

namespace ps::sessions {

namespace {

// The schedule version and profile a run refers to: reused when an identical one is stored.
core::Status storeScheduleAndProfile(SessionStore& store, const std::string& scheduleName,
                                     const std::string& pipeText, const std::string& profileName,
                                     const std::string& profileJson, ProfileSource profileSource,
                                     RecordedRun& out) {
  auto latest = store.latestSchedule(scheduleName);
  if (latest && latest->pipeText == pipeText) {
    out.scheduleId = latest->info.id;
  } else {
    if (!latest && latest.error().code != "session.not-found") return latest.errors();
    std::optional<Id> parent;
    if (latest) parent = latest->info.id;
    auto id = store.addSchedule(scheduleName, pipeText, parent);
    PS_TRY(id);
    out.scheduleId = *id;
    out.newScheduleVersion = true;
  }

  if (!profileName.empty()) {
    auto profiles = store.listProfiles();
    PS_TRY(profiles);
    // Any stored profile of that name and source with the same JSON is reused (runs often
    // alternate between a few profiles); otherwise it becomes a new one.
    for (auto it = profiles->rbegin(); it != profiles->rend() && !out.profileId; ++it) {
      if (it->name != profileName || it->source != profileSource) continue;
      auto p = store.profile(it->id);
      PS_TRY(p);
      if (p->json == profileJson) out.profileId = it->id;
    }
    if (!out.profileId) {
      auto id = store.addProfile(profileName, profileJson, profileSource);
      PS_TRY(id);
      out.profileId = *id;
      out.newProfileVersion = true;
    }
  }
  return core::okStatus();
}

}  // namespace

core::Result<RecordedRun> recordRun(SessionStore& store, const RunRecordingRequest& request,
                                    const core::Timeline& timeline) {
  RecordedRun out;
  if (auto st = storeScheduleAndProfile(store, request.scheduleName, request.pipeText, request.profileName,
                                        request.profileJson, request.profileSource, out);
      !st)
    return st.errors();

  RunInfo info = request.run;
  info.scheduleId = out.scheduleId;
  info.profileId = out.profileId;
  if (info.label.empty()) info.label = request.scheduleName;
  auto run = store.recordTimeline(info, timeline);
  PS_TRY(run);
  out.runId = *run;
  return out;
}

core::Result<RecordedRun> recordRun(const std::string& sessionPath, const RunRecordingRequest& request,
                                    const core::Timeline& timeline) {
  auto store = SessionStore::open(sessionPath);
  PS_TRY(store);
  return recordRun(*store, request, timeline);
}

core::Result<RecordedRun> recordSimulation(const SimulationRecording& recording,
                                           const core::Timeline& timeline) {
  if (!recording.schedule)
    return core::makeError("session.invalid", "cannot record the simulation: no schedule given",
                           core::SourceLocation{recording.sessionPath, 0, 0});
  RunRecordingRequest request;
  request.scheduleName = !recording.scheduleName.empty()     ? recording.scheduleName
                         : !recording.schedule->name.empty() ? recording.schedule->name
                                                             : "schedule";
  request.pipeText = recording.pipeText.empty() ? core::printDsl(*recording.schedule) : recording.pipeText;
  if (recording.profile) {
    request.profileName = !recording.profileName.empty()     ? recording.profileName
                          : !recording.profile->name.empty() ? recording.profile->name
                                                             : "profile";
    request.profileJson = core::costProfileToJson(*recording.profile);
    request.profileSource = recording.profileSource;
  }
  request.run.target = "simulator";
  request.run.devices = recording.schedule->pipeline.devices;
  request.run.model = recording.model;
  request.run.configJson = recording.configJson.empty() ? "{}" : recording.configJson;
  request.run.source = core::TimelineSource::Simulated;
  return recordRun(recording.sessionPath, request, timeline);
}

// --- measured runs ---------------------------------------------------------------------

namespace {

constexpr size_t kChunk = 65536;
constexpr size_t kStderrKeep = size_t{64} * 1024;

core::Diagnostic invalid(const SessionStore& store, const std::string& message) {
  return core::makeError("session.invalid", message, core::SourceLocation{store.path(), 0, 0});
}

// Every op, transfer and memory sample of `timeline` into the open run.
core::Status appendTimeline(SessionStore& store, Id runId, const core::Timeline& timeline) {
  std::span<const core::TimelineOp> ops(timeline.ops);
  for (size_t i = 0; i < ops.size(); i += kChunk)
    if (auto st = store.appendRunOps(runId, ops.subspan(i, std::min(kChunk, ops.size() - i))); !st) return st;
  std::span<const core::Transfer> transfers(timeline.transfers);
  for (size_t i = 0; i < transfers.size(); i += kChunk)
    if (auto st = store.appendTransfers(runId, transfers.subspan(i, std::min(kChunk, transfers.size() - i)));
        !st)
      return st;
  for (size_t d = 0; d < timeline.memory.size(); ++d) {
    std::span<const core::MemorySample> samples(timeline.memory[d]);
    for (size_t i = 0; i < samples.size(); i += kChunk)
      if (auto st = store.appendMemory(runId, static_cast<int>(d),
                                       samples.subspan(i, std::min(kChunk, samples.size() - i)));
          !st)
        return st;
  }
  return core::okStatus();
}

std::optional<Id> idField(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<Id>();
}

}  // namespace

core::Result<RecordedMeasuredRun> recordMeasuredRun(SessionStore& store, const MeasuredRunRecording& rec) {
  const std::string what = "cannot record the measured run";
  if (rec.scheduleName.empty()) return invalid(store, what + ": no schedule name given");
  if (rec.status == core::RunState::Queued || rec.status == core::RunState::Running)
    return invalid(store, what + ": the status must be succeeded, failed or cancelled, not " +
                              std::string(ps::core::runStateName(rec.status)));
  auto config =
      nlohmann::json::parse(rec.configJson.empty() ? std::string("{}") : rec.configJson, nullptr, false);
  if (config.is_discarded() || !config.is_object())
    return invalid(store, what + ": the run configuration is not a JSON object");

  RecordedRun ids;
  if (auto st = storeScheduleAndProfile(store, rec.scheduleName, rec.pipeText, rec.profileName,
                                        rec.profileJson, rec.profileSource, ids);
      !st)
    return st.errors();
  RecordedMeasuredRun out;
  out.scheduleId = ids.scheduleId;
  out.profileId = ids.profileId;
  out.newScheduleVersion = ids.newScheduleVersion;
  out.newProfileVersion = ids.newProfileVersion;
  const std::string label = rec.label.empty() ? rec.scheduleName : rec.label;

  // The prediction first, so the measured run can name it from its start; the predicted run
  // learns the measured run's id once that exists.
  nlohmann::json predictedConfig = nlohmann::json::object();
  if (rec.predicted) {
    predictedConfig = {{"role", "predicted"}, {"model", rec.model}, {"measured_target", rec.target}};
    RunInfo p;
    p.scheduleId = out.scheduleId;
    p.profileId = out.profileId;
    p.target = "simulator";
    p.devices = rec.predicted->devices;
    p.model = rec.model;
    p.label = label + " (predicted)";
    p.configJson = predictedConfig.dump();
    p.source = core::TimelineSource::Simulated;
    p.startedMs = rec.startedMs;  // the prediction of the run that started then
    core::Timeline predicted = *rec.predicted;
    predicted.source = core::TimelineSource::Simulated;
    auto id = store.recordTimeline(p, predicted);
    PS_TRY(id);
    out.predictedRunId = *id;
  }

  nlohmann::json measuredConfig = config;
  measuredConfig["role"] = "measured";
  if (out.predictedRunId) measuredConfig["predicted_run"] = *out.predictedRunId;
  if (!rec.stderrText.empty())
    measuredConfig["stderr"] = rec.stderrText.size() <= kStderrKeep
                                   ? rec.stderrText
                                   : rec.stderrText.substr(rec.stderrText.size() - kStderrKeep);
  RunInfo m;
  m.scheduleId = out.scheduleId;
  m.profileId = out.profileId;
  m.target = rec.target;
  m.devices = rec.devices > 0 ? rec.devices : rec.measured.devices;
  m.model = rec.model;
  m.label = label;
  // Measured text may hold arbitrary bytes (stderr): dump replaces invalid UTF-8.
  m.configJson = measuredConfig.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  m.source = core::TimelineSource::Measured;
  m.status = core::RunState::Running;
  m.startedMs = rec.startedMs;
  auto mid = store.beginRun(m);
  PS_TRY(mid);
  out.measuredRunId = *mid;
  if (auto st = appendTimeline(store, *mid, rec.measured); !st) {
    (void)store.finishRun(*mid, core::RunState::Failed, st.error().message);
    return st.errors();
  }
  std::optional<core::TimelineMetrics> metrics;
  if (rec.measured.metrics.makespan > 0 || rec.measured.ops.empty()) metrics = rec.measured.metrics;
  std::string error = rec.error;
  if (error.empty() && rec.status != core::RunState::Succeeded) {
    error = rec.status == core::RunState::Cancelled ? "cancelled" : "failed";
    for (const auto& d : rec.measured.diagnostics)
      if (d.severity == core::Severity::Error) {
        error = d.message;
        break;
      }
  }
  PS_TRY(store.finishRun(*mid, rec.status, error, metrics, rec.measured.diagnostics));

  if (out.predictedRunId) {
    predictedConfig["measured_run"] = out.measuredRunId;
    PS_TRY(store.setRunConfig(*out.predictedRunId, predictedConfig.dump()));
  }
  return out;
}

core::Result<RecordedMeasuredRun> recordMeasuredRun(const std::string& sessionPath,
                                                    const MeasuredRunRecording& recording) {
  auto store = SessionStore::open(sessionPath);
  PS_TRY(store);
  return recordMeasuredRun(*store, recording);
}

namespace {

core::Result<PredictionLink> linkFrom(const SessionStore& store, Id runId, bool fromMeasured) {
  auto run = store.run(runId);
  PS_TRY(run);
  auto config = nlohmann::json::parse(run->configJson, nullptr, false);
  const char* key = fromMeasured ? "predicted_run" : "measured_run";
  std::optional<Id> other;
  if (!config.is_discarded() && config.is_object()) other = idField(config, key);
  if (!other)
    return core::makeError(
        "session.not-found",
        "run " + std::to_string(runId) +
            (fromMeasured ? " has no recorded prediction" : " is not the prediction of a measured run"),
        core::SourceLocation{store.path(), 0, 0});
  auto peer = store.run(*other);
  PS_TRY(peer);
  PredictionLink link;
  link.measuredRunId = fromMeasured ? runId : *other;
  link.predictedRunId = fromMeasured ? *other : runId;
  const RunRecord& predicted = fromMeasured ? *peer : *run;
  link.scheduleId = predicted.summary.scheduleId;
  link.profileId = predicted.summary.profileId;
  return link;
}

}  // namespace

core::Result<PredictionLink> predictionFor(const SessionStore& store, Id measuredRunId) {
  return linkFrom(store, measuredRunId, true);
}

core::Result<PredictionLink> measurementFor(const SessionStore& store, Id predictedRunId) {
  return linkFrom(store, predictedRunId, false);
}

}  // namespace ps::sessions
