#pragma once
// Ranks on several hosts, started over ssh (the system's OpenSSH client, BatchMode) with
// torchrun's variables; the ranks meet through c10d (the store on the first host's rank 0,
// Gloo or NCCL between them), never through a channel of ours. No torch here.
//
// Before the run every host is checked (`CLI --version`: reachable, key accepted, CLI and
// engine present, same run-event protocol) and the schedule (and a model file) is staged in a
// temporary folder there, which one more ssh per host (its janitor) removes when its channel
// ends: at the end of the run, or when the launcher dies, even by SIGKILL. Each rank's ssh
// channel is its lifeline (PIPESTUDIO_LIFELINE_FD=0): when the launcher closes it, or dies, or
// the connection drops, the rank cancels and exits.
#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipestudio/core/io/cluster.h"
#include "pipestudio/core/model/result.h"

namespace ps::engine {

struct ClusterFile {
  std::string name;  // file name in the staged folder
  std::string content;
};

struct ClusterRankEnd {
  int rank = -1;
  int host = -1;      // index in hosts
  int exitCode = -1;  // the ssh client's exit status (the remote one; 255: ssh failed)
  bool endedByLauncher = false;
};

struct ClusterLaunchOptions {
  std::vector<core::ClusterHost> hosts;
  std::vector<ClusterFile> files;  // staged on every host; files[0] is the schedule
  // The rank's arguments after `CLI run`; "{dir}" in an argument becomes the staged folder.
  std::vector<std::string> args;
  // Only rank 0 gets these in addition (e.g. --events jsonl); the others send their events
  // to stdout through PIPESTUDIO_EVENT_FD=1.
  std::vector<std::string> rank0Args;
  // Variables every rank gets besides torchrun's (name, value).
  std::vector<std::pair<std::string, std::string>> environment;
  double connectTimeoutSeconds = 10;  // ssh ConnectTimeout, and the bound of each check
  double deathGraceSeconds = 2;       // rank 0's time to report a lost peer before all are ended
  double cancelGraceSeconds = 5;      // rank 0's time to report a cancel before all are ended
  std::atomic<bool>* cancel = nullptr;
  std::function<void(int rank, const std::string& line)> onEvent;   // a rank's stdout line
  std::function<void(int rank, const std::string& line)> onStderr;  // a rank's stderr line
  std::function<void(const std::string& message)> onPhase;          // "checking 2 hosts", ...
  // A rank ended badly on its own (first, or a lost rank after a peer that failed on it).
  std::function<void(const ClusterRankEnd& end, const std::string& message)> onRankFailed;
};

struct ClusterLaunchResult {
  std::vector<ClusterRankEnd> ends;
  std::optional<int> failedRank;  // the first rank that ended badly on its own
  std::string failure;            // names the host and the rank; empty when none failed
  bool cancelled = false;
  int exitStatus = 0;                 // rank 0's, else the first failing rank's
  std::vector<std::string> versions;  // each host's `--version` first line
};

// Checks, stages, starts, watches, ends and cleans up. Errors (nothing ran): a host that
// cannot be reached, refuses the key, lacks the CLI or speaks another protocol, named.
core::Result<ClusterLaunchResult> launchClusterRanks(const ClusterLaunchOptions& options);

// The ssh command line (argv) that runs `remoteCommand` on `host`: "ssh", core::sshArguments
// (with keep-alive), the command.
std::vector<std::string> sshCommand(const core::ClusterHost& host, double connectTimeoutSeconds,
                                    const std::string& remoteCommand);

}  // namespace ps::engine
