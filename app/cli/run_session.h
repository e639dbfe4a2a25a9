#pragma once
// `run --session DB [--profile P.json]`: after a real run, the schedule simulated with the cost
// profile used for the prediction, and both timelines filed in the session (recordMeasuredRun).
// Kept out of run.cpp so that the run command itself stays small.
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "common/text.h"
#include "pipestudio/core/analysis/comm_semantics.h"
#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/core/model/result.h"
#include "pipestudio/core/model/schedule.h"
#include "pipestudio/engine/engine.h"

namespace ps::cli {

struct PredictionProfile {
  core::CostProfile profile;
  std::string json;  // as stored in the session
  std::string name;
  std::string source;  // "manual", "analytic" or "profiled"
};

// The --profile file, read and checked before the run starts (a bad file stops it early).
core::Result<PredictionProfile> loadPredictionProfile(const std::string& path);
// The engine's analytic profile of the model for micro-batches of b samples.
PredictionProfile analyticPredictionProfile(const engine::ModelSpec& model, int microbatchSize);

struct RunSessionRecording {
  std::string sessionPath;
  const core::Schedule* schedule = nullptr;
  std::string pipeText;
  std::string target;  // "cpu", "cuda" or "gloo"
  const engine::RunOptions* options = nullptr;
  const engine::RunReport* report = nullptr;
  std::optional<PredictionProfile> profile;  // none: the analytic one
  std::int64_t startedMs = 0;                // when the run started (Unix ms); 0: now
  core::CommOptions comm;                    // how the prediction treats explicit SEND/RECV (--comm)
};

// Records the run and its prediction; prints one summary line to `out`, errors to stderr.
bool recordRunInSession(const RunSessionRecording& r, std::ostream& out);

}  // namespace ps::cli
