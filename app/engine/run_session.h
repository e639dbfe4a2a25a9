#pragma once
// `run --session DB [--profile P.json]`: after a real run, the run filed in the session with its
// prediction (sessions::planMeasuredRun, the rule the GUI's Run dialog records by too).
// Kept out of run.cpp so that the run command itself stays small.
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "common/text.h"
#include "pipestudio/core/analysis/comm_semantics.h"
#include "pipestudio/core/io/cluster.h"
#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/core/model/result.h"
#include "pipestudio/core/model/schedule.h"
#include "pipestudio/engine/engine.h"
#include "pipestudio/sessions/measured_run.h"

namespace ps::cli {

using sessions::PredictionProfile;

// The --profile file, read and checked before the run starts (a bad file stops it early).
core::Result<PredictionProfile> loadPredictionProfile(const std::string& path);
// The engine's analytic profile of the model for micro-batches of b samples.
PredictionProfile analyticPredictionProfile(const engine::ModelSpec& model, int microbatchSize);

struct RunSessionRecording {
  std::string sessionPath;
  const core::Schedule* schedule = nullptr;
  std::string pipeText;
  std::string place = std::string(core::kThisMachine);  // where it ran (MeasuredRun::place)
  const engine::RunOptions* options = nullptr;
  const engine::RunReport* report = nullptr;
  std::optional<PredictionProfile> profile;  // none: the analytic one
  std::int64_t startedMs = 0;                // when the run started (Unix ms); 0: now
  core::CommOptions comm;                    // how the prediction treats explicit SEND/RECV (--comm)
  std::string host = "localhost";            // MeasuredRun::host
  int worldSize = 0;                         // processes of a run this process launched; 0: the options'
  // (What a report without a `started` event is recorded with: a launcher's that took over.)
};

// Records the run and its prediction; prints one summary line to `out`, errors to stderr.
bool recordRunInSession(const RunSessionRecording& r, std::ostream& out);

}  // namespace ps::cli
