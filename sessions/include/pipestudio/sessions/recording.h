#pragma once
// One call that files a finished timeline in a session: what `pipestudio-cli simulate
// --session FILE`, `run --session FILE` and the GUI's Run dialog do. The schedule is stored as a new version
// only when its text differs from the newest version of the same name (running the same
// schedule ten times gives ten runs of one version); the profile only when no stored profile
// of that name and source has the same JSON.
#include <optional>
#include <string>

#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/core/model/result.h"
#include "pipestudio/core/model/schedule.h"
#include "pipestudio/core/model/timeline.h"
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
  const core::Schedule* schedule = nullptr;    // required
  std::string scheduleName;                    // default: the schedule's name, else "schedule"
  std::string pipeText;                        // default: the canonical explicit form (printDsl)
  const core::CostProfile* profile = nullptr;  // optional
  std::string profileName;                     // default: the profile's name, else "profile"
  ProfileSource profileSource = ProfileSource::Manual;
  std::string model;              // e.g. the model zoo preset
  std::string configJson = "{}";  // the simulation's options, a JSON object
};

core::Result<RecordedRun> recordSimulation(const SimulationRecording& recording,
                                           const core::Timeline& timeline);

// --- Measured runs with their prediction ------------------------------------------------
//
// What `pipestudio-cli run --session FILE` and the GUI's Run dialog record after a real run:
// the schedule, the cost profile the prediction used, the predicted (simulated) timeline as a
// run of source "simulated" and target "simulator", and the measured timeline as a run of
// source "measured". The two runs name each other in their configuration JSON:
// the measured run's "predicted_run" and the predicted run's "measured_run" hold the other's
// id (and "role" is "measured" / "predicted"). A failed or cancelled run keeps its partial
// timeline, its status, the error and the captured stderr ("stderr" in its configuration).
struct MeasuredRunRecording {
  std::string scheduleName;  // required
  std::string pipeText;      // the schedule as .pipe text
  std::string profileName;   // empty: no profile is stored (the prediction is still recorded)
  std::string profileJson;   // cost-profile JSON (docs/formats.md)
  ProfileSource profileSource = ProfileSource::Analytic;
  // The schedule simulated with that profile; none: only the measured run is recorded.
  std::optional<core::Timeline> predicted;
  core::Timeline measured;        // complete or partial
  std::string target = "cpu";     // "cpu", "cuda", "gloo", ...
  int devices = 0;                // 0: the measured timeline's
  std::string model;              // e.g. "gpt:layers=8,hidden=256,heads=4,seq=128,vocab=1000"
  std::string label;              // default: the schedule name
  std::string configJson = "{}";  // the run's options (a JSON object); the links are added
  core::RunState status = core::RunState::Succeeded;  // Succeeded, Failed or Cancelled
  std::string error;                                  // why it failed or was cancelled
  std::string stderrText;                             // the run's stderr, kept with the run (last 64 KiB)
  std::int64_t startedMs = 0;  // when the run started (Unix ms); 0: when it is recorded
};

struct RecordedMeasuredRun {
  Id measuredRunId = 0;
  std::optional<Id> predictedRunId;
  Id scheduleId = 0;
  std::optional<Id> profileId;
  bool newScheduleVersion = false;
  bool newProfileVersion = false;
};

core::Result<RecordedMeasuredRun> recordMeasuredRun(SessionStore& store,
                                                    const MeasuredRunRecording& recording);
// Opens (creating when missing) the session file and records the run.
core::Result<RecordedMeasuredRun> recordMeasuredRun(const std::string& sessionPath,
                                                    const MeasuredRunRecording& recording);

// A measured run and the prediction stored with it.
struct PredictionLink {
  Id measuredRunId = 0;
  Id predictedRunId = 0;
  std::optional<Id> scheduleId;
  std::optional<Id> profileId;  // the profile the prediction used
};

// The prediction recorded with measured run `measuredRunId`; session.not-found when the run
// does not exist or has no recorded prediction.
core::Result<PredictionLink> predictionFor(const SessionStore& store, Id measuredRunId);
// The other direction: the measured run a predicted run was recorded for.
core::Result<PredictionLink> measurementFor(const SessionStore& store, Id predictedRunId);

}  // namespace ps::sessions
