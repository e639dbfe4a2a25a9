#pragma once
// Local multi-process launch: starts N ranks of the same program with torchrun-style
// environment variables and waits for them. No torch here.
#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "pipestudio/engine/engine.h"

namespace ps::engine {

// torchrun-style variables (RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) when
// RANK and WORLD_SIZE are set, else Slurm's (SLURM_PROCID, SLURM_NTASKS, SLURM_NTASKS_PER_NODE,
// the first host of SLURM_JOB_NODELIST as MASTER_ADDR unless it is set); nullopt otherwise.
// Ranks per host (threads per rank = cores / ranks per host): LOCAL_WORLD_SIZE, else Slurm's
// tasks per node, else the world size when MASTER_ADDR is this host, else 1. Bad values are errors.
core::Result<std::optional<DistributedOptions>> distributedFromEnvironment();

// How a rank process ended: exitCode >= 0 when it exited, signal > 0 when a signal ended it.
struct RankEnd {
  int rank = -1;
  int exitCode = -1;
  int signal = 0;
  bool killedByLauncher = false;  // the launcher ended it (after another rank died or failed)
};

// The environment variables a launched rank finds (set by launchLocalRanks).
inline constexpr const char* kEventFdVariable = "PIPESTUDIO_EVENT_FD";        // its run events go here
inline constexpr const char* kLifelineFdVariable = "PIPESTUDIO_LIFELINE_FD";  // EOF: the launcher is gone

struct LaunchOptions {
  std::string program;            // argv[0] of every rank
  std::vector<std::string> args;  // the rest of the command line
  int nproc = 2;
  // When a rank fails (and says so), the others get graceSeconds to end on their own; when
  // one dies (a signal), at most deathGraceSeconds (rank 0 names the lost peer and writes its
  // report meanwhile). Then they are killed.
  double graceSeconds = 10;
  double deathGraceSeconds = 4;
  // After a rank failed, rank 0 (which gathers every rank's report and writes the outcome) gets
  // this long before it is killed; once it has ended, the ranks still running are killed within
  // a second (nothing is left for them to report to). A rank 0 found stopped (SIGSTOP) is not
  // waited for beyond graceSeconds.
  double reportSeconds = 40;
  // After SIGINT/SIGTERM (forwarded: the ranks cancel at their next op), ranks still running
  // this long after are killed, whatever phase they are in (starting, meeting, running).
  double cancelSeconds = 5;
  // Set before the launch (a signal caught before it began): no rank is started.
  const std::atomic<bool>* cancelled = nullptr;
  // Every complete line a rank writes to its event pipe (fd kEventFdVariable), in order.
  std::function<void(int rank, const std::string& line)> onEvent;
  // Once, as soon as a rank is found ended by a signal it was not sent by the launcher.
  std::function<void(const RankEnd&)> onRankDied;
};

struct LaunchResult {
  std::vector<RankEnd> ends;     // per rank
  std::optional<RankEnd> death;  // the first rank ended by a signal (kill -9, crash)
  int exitStatus = 0;            // rank 0's exit status, else the first failing rank's
  int cancelSignal = 0;          // SIGINT or SIGTERM received (and forwarded), else 0
  std::vector<int> stopped;      // ranks found stopped (SIGSTOP, a debugger) while the run ended
};

// Whether process `pid` is stopped (SIGSTOP/SIGTSTP, or a debugger's trace stop): its
// /proc/PID/stat state.
bool processStopped(int pid);

// Starts `nproc` copies of the program with RANK 0..N-1 and the torchrun variables set, ranks
// above 0 with stdout sent to /dev/null; each rank gets a pipe for its run events and a
// lifeline (a pipe whose end tells it that the launcher is gone) and the parent-death signal
// SIGTERM. SIGINT and SIGTERM received meanwhile are forwarded. A rank that dies is noticed at
// once (waitpid every 20 ms): rank 0's death kills the others at once, another rank's gives
// them graceSeconds to report (rank 0: reportSeconds). SIGINT/SIGTERM end every rank within
// cancelSeconds. Errors: nothing could be started.
core::Result<LaunchResult> launchLocalRanks(const LaunchOptions& options);

// "SIGKILL", "SIGSEGV", ... ("signal N" for others).
std::string signalName(int signal);

}  // namespace ps::engine
