#pragma once
// One call that files a finished timeline in a session: what `pipestudio-cli simulate
// --session FILE` (and later `run --session`) does. The schedule is stored as a new version
// only when its text differs from the newest version of the same name (running the same
// schedule ten times gives ten runs of one version); the profile only when no stored profile
// of that name and source has the same JSON.
#include <optional>
#include <string>

#include "pipestudio/core/cost_profile.h"
#include "pipestudio/core/result.h"
#include "pipestudio/core/schedule.h"
#include "pipestudio/core/timeline.h"
#include "pipestudio/sessions/session_store.h"

namespace ps::sessions {

struct RunRecordingRequest {
  std::string scheduleName;  // required
  std::string pipeText;      // the schedule as .pipe text
  std::string profileName;   // empty: no profile is stored
  std::string profileJson;
  ProfileSource profileSource = ProfileSource::Manual;
  RunInfo run;  // scheduleId / profileId are filled in
};

struct RecordedRun {
  Id runId = 0;
  Id scheduleId = 0;
  std::optional<Id> profileId;
  bool newScheduleVersion = false;
  bool newProfileVersion = false;
};

core::Result<RecordedRun> recordRun(SessionStore& store, const RunRecordingRequest& request,
                                    const core::Timeline& timeline);
// Opens (creating when missing) the session file and records the run.
core::Result<RecordedRun> recordRun(const std::string& sessionPath, const RunRecordingRequest& request,
                                    const core::Timeline& timeline);

// What `simulate --session FILE` records: the schedule (its .pipe text), the cost profile used
// and the simulated timeline.
struct SimulationRecording {
  std::string sessionPath;
  const core::Schedule* schedule = nullptr;  // required
  std::string scheduleName;  // default: the schedule's name, else "schedule"
  std::string pipeText;      // default: the canonical explicit form (printDsl)
  const core::CostProfile* profile = nullptr;  // optional
  std::string profileName;   // default: the profile's name, else "profile"
  ProfileSource profileSource = ProfileSource::Manual;
  std::string model;              // e.g. the model zoo preset
  std::string configJson = "{}";  // the simulation's options, a JSON object
};

core::Result<RecordedRun> recordSimulation(const SimulationRecording& recording, const core::Timeline& timeline);

}  // namespace ps::sessions
