#include "pipestudio/sessions/recording.h"

#include "pipestudio/core/dsl.h"

namespace ps::sessions {

core::Result<RecordedRun> recordRun(SessionStore& store, const RunRecordingRequest& request,
                                    const core::Timeline& timeline) {
  RecordedRun out;
  auto latest = store.latestSchedule(request.scheduleName);
  if (latest && latest->pipeText == request.pipeText) {
    out.scheduleId = latest->info.id;
  } else {
    if (!latest && latest.error().code != "session.not-found") return latest.errors();
    std::optional<Id> parent;
    if (latest) parent = latest->info.id;
    auto id = store.addSchedule(request.scheduleName, request.pipeText, parent);
    if (!id) return id.errors();
    out.scheduleId = *id;
    out.newScheduleVersion = true;
  }

  if (!request.profileName.empty()) {
    auto profiles = store.listProfiles();
    if (!profiles) return profiles.errors();
    // Any stored profile of that name and source with the same JSON is reused (runs often
    // alternate between a few profiles); otherwise it becomes a new one.
    for (auto it = profiles->rbegin(); it != profiles->rend() && !out.profileId; ++it) {
      if (it->name != request.profileName || it->source != request.profileSource) continue;
      auto p = store.profile(it->id);
      if (!p) return p.errors();
      if (p->json == request.profileJson) out.profileId = it->id;
    }
    if (!out.profileId) {
      auto id = store.addProfile(request.profileName, request.profileJson, request.profileSource);
      if (!id) return id.errors();
      out.profileId = *id;
      out.newProfileVersion = true;
    }
  }

  RunInfo info = request.run;
  info.scheduleId = out.scheduleId;
  info.profileId = out.profileId;
  if (info.label.empty()) info.label = request.scheduleName;
  auto run = store.recordTimeline(info, timeline);
  if (!run) return run.errors();
  out.runId = *run;
  return out;
}

core::Result<RecordedRun> recordRun(const std::string& sessionPath, const RunRecordingRequest& request,
                                    const core::Timeline& timeline) {
  auto store = SessionStore::open(sessionPath);
  if (!store) return store.errors();
  return recordRun(*store, request, timeline);
}

core::Result<RecordedRun> recordSimulation(const SimulationRecording& recording, const core::Timeline& timeline) {
  if (!recording.schedule)
    return core::makeError("session.invalid", "cannot record the simulation: no schedule given",
                           core::SourceLocation{recording.sessionPath, 0, 0});
  RunRecordingRequest request;
  request.scheduleName = !recording.scheduleName.empty()   ? recording.scheduleName
                         : !recording.schedule->name.empty() ? recording.schedule->name
                                                             : "schedule";
  request.pipeText = recording.pipeText.empty() ? core::printDsl(*recording.schedule) : recording.pipeText;
  if (recording.profile) {
    request.profileName = !recording.profileName.empty()   ? recording.profileName
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

}  // namespace ps::sessions
