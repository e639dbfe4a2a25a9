#pragma once
// One typed record of a real run, filled alike by the CLI's `run --session` (from the engine's
// report) and by the GUI's Run dialog (from the run's event stream), and one function that turns
// it into what a session stores: the measured run, its configuration and its prediction. The two
// recorders share the rule, so the same run recorded from either gives the same session rows.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipestudio/core/analysis/comm_semantics.h"
#include "pipestudio/core/analysis/run_prediction.h"
#include "pipestudio/core/io/run_events.h"
#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/core/model/hang_report.h"
#include "pipestudio/core/model/result.h"
#include "pipestudio/core/model/schedule.h"
#include "pipestudio/core/model/timeline.h"
#include "pipestudio/sessions/recording.h"
#include "pipestudio/sessions/session_store.h"

namespace ps::sessions {

// The cost profile a prediction used, as the session files it.
struct PredictionProfile {
  core::CostProfile profile;
  std::string name;
  ProfileSource source = ProfileSource::Manual;
  std::string json;  // as given (a file's text), stored as it is; empty: written from `profile`
};

// A profile given as cost-profile JSON `text` (a file's, `where` naming it in errors): named by its
// own "name", else `fallbackName`; of the source its "source" field names (`pipestudio-cli
// profile` writes "profiled"), else `fallbackSource`.
core::Result<PredictionProfile> predictionProfileFromJson(const std::string& text, const std::string& where,
                                                          const std::string& fallbackName,
                                                          ProfileSource fallbackSource);
// An in-memory profile (the GUI document's, the engine's analytic one): its name, else `fallbackName`.
PredictionProfile predictionProfile(core::CostProfile profile, const std::string& fallbackName,
                                    ProfileSource source);

// A measured run's configuration (its configuration JSON in the session), typed: one writer and
// one reader, so what `compare` reads back (the partition) is there whoever recorded the run.
struct RunConfig {
  std::string device;  // "cpu" / "cuda"
  int microbatchSize = 0;
  int iterations = 0;
  int warmup = 0;
  int threads = 0;
  std::int64_t seed = 0;
  std::vector<int> partition;  // layers per stage (per model block with block copies)
  int worldSize = 1;           // processes
  std::vector<double> iterationMs;
  std::int64_t parameters = 0;
  std::vector<double> losses;  // warm-up included
  std::optional<double> loss;  // a finished run's last loss
  std::optional<core::RunGradientCheck> gradientCheck;
  std::string optimizer = "none";
  double learningRate = 0;
  std::string comm;                // how the prediction treats SEND/RECV (commSemanticsName)
  std::string host;                // "localhost", user@host (a remote run), a cluster's host file
  std::vector<std::string> stuck;  // a hang's post-mortem, one line per device
};
std::string runConfigToJson(const RunConfig& c);
// Lenient: a field that is missing or of another type keeps its default (older sessions, runs
// imported from elsewhere). Keys it does not know are ignored.
RunConfig runConfigFromJson(std::string_view json);

// A real run as its recorder saw it.
struct MeasuredRun {
  std::string scheduleName;  // default "schedule"
  std::string pipeText;      // the schedule as executed, .pipe text
  // The schedule the engine executed (OPTIMIZER ops included): the prediction simulates it.
  const core::Schedule* executed = nullptr;
  std::optional<PredictionProfile> profile;       // none: no profile stored and no prediction
  core::CommOptions comm;                         // how the prediction treats explicit SEND/RECV
  std::optional<core::RunStartedInfo> started;    // the run's `started` event
  std::optional<core::RunFinishedInfo> finished;  // its `finished` event
  core::Timeline measured;                        // complete or partial
  std::vector<core::StuckDevice> stuck;           // a hang: where each device stood
  core::RunState status = core::RunState::Failed;
  std::string error;           // why it failed or was cancelled
  std::string stderrText;      // what the recorder captured of the run's stderr
  std::int64_t startedMs = 0;  // when `started` carries none
  // Where it ran, as the recorder names it (core::kThisMachine, a host, clusterTargetName): the
  // label is "SCHEDULE on PLACE"; empty: the schedule's name.
  std::string place;
  std::string host = "localhost";  // RunConfig::host
};

struct MeasuredRunPlan {
  MeasuredRunRecording recording;
  std::optional<core::RunPrediction> prediction;
  core::Diagnostics predictionErrors;  // why there is no prediction (profile given)
};
// What recording `run` stores, without storing it.
MeasuredRunPlan planMeasuredRun(const MeasuredRun& run);
// "cpu", "cuda", or the multi-process transport ("gloo", "nccl"): the session's target column.
std::string runTarget(const core::RunStartedInfo& started);

}  // namespace ps::sessions
