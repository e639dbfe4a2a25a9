#pragma once
// `run FILE --hosts hosts.txt`: the run's ranks on several hosts, started over ssh
// (engine::launchClusterRanks), rank 0's events streamed back and the run recorded here;
// `--print-launch torchrun|slurm`: the commands for the same run without ssh fan-out.
// Kept out of run.cpp so that the run command itself stays small.
#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "pipestudio/core/model/schedule.h"
#include "pipestudio/engine/engine.h"
#include "run_session.h"

namespace ps::cli {

// How a rank names a schedule its launcher staged for it (the user's name for the file), so
// that its messages never show a temporary path.
inline constexpr const char* kScheduleNameVariable = "PIPESTUDIO_SCHEDULE_NAME";

struct ClusterRun {
  std::string hostsPath;                     // --hosts
  std::string printLaunch;                   // --print-launch: "", "torchrun" or "slurm"
  std::vector<std::string> argv;             // run's arguments as given (without "run")
  std::vector<std::string> valueFlags;       // run's flags that take a value
  std::string path;                          // the FILE argument as given
  std::string format;                        // "pipe" or "csv"
  std::string text;                          // the schedule as read
  std::string name;                          // how the schedule is named
  const core::Schedule* executed = nullptr;  // as run (with optimizer steps)
  std::string sessionText;                   // the schedule text a session stores
  const engine::RunOptions* options = nullptr;
  bool events = false;
  std::atomic<bool>* cancel = nullptr;
  double connectTimeoutSeconds = 10;
  std::string sessionPath;  // --session; empty: none
  std::string tracePath;    // --trace; empty: none
  std::optional<PredictionProfile> prediction;
};

// The exit status of `run` (0 finished, 1 failed, 2 usage, 130 cancelled).
int runOnCluster(const ClusterRun& c);

}  // namespace ps::cli
