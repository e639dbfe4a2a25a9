#pragma once
// A cluster target: the hosts a run spans, read from a host file (`pipestudio-cli run FILE
// --hosts hosts.txt`, docs/cli.md), and the torchrun / Slurm commands for the same run
// (`--print-launch`). Torch-free and Qt-free: the engine's ssh launcher, the CLI and the GUI
// share it.
#include <string>
#include <string_view>
#include <vector>

#include "pipestudio/core/model/result.h"

namespace ps::core {

struct ClusterHost {
  std::string host;                     // ssh destination host name or address
  std::string user;                     // empty: ssh's default
  int port = 22;                        // ssh port
  int ranks = 1;                        // processes (devices) on this host
  std::string key;                      // ssh identity file; empty: ssh's default keys / agent
  std::string cli = "pipestudio-cli";   // the CLI on this host (PATH or absolute)
  std::string addr;                     // how the other hosts reach this one; empty: host
  std::vector<std::string> sshOptions;  // extra `ssh -o` values
  SourceLocation location;              // its line in the host file
  std::string destination() const { return user.empty() ? host : user + "@" + host; }
  std::string address() const { return addr.empty() ? host : addr; }
  // "127.0.0.2" or "127.0.0.2:2222" (the port when not 22): how messages name the host.
  std::string label() const;
};

// One host a line:   [user@]host[:port] [ranks=N] [user=U] [port=P] [key=PATH] [cli=PATH]
//                    [addr=A] [ssh=OPTION]...
// '#' starts a comment; blank lines are skipped; a value in double quotes may hold blanks and
// '#' (\" and \\ inside). Errors name file:line:col.
Result<std::vector<ClusterHost>> parseHostFile(std::string_view text, const std::string& filename);
// The host file text for `hosts` (what parseHostFile reads back; values quoted where needed).
std::string formatHostFile(const std::vector<ClusterHost>& hosts);
int clusterWorldSize(const std::vector<ClusterHost>& hosts);
// Where a run took place, as PipeStudio names it to people and in a session run's label
// ("tiny on this machine"): this machine, a host's name, or a cluster of hosts.
inline constexpr std::string_view kThisMachine = "this machine";
std::string clusterTargetName(const std::vector<ClusterHost>& hosts);  // "cluster (2 hosts, 4 ranks)"
// ranks= of one host: 1..kMaxRanksPerHost.
inline constexpr int kMaxRanksPerHost = 4096;

// `--print-launch torchrun|slurm`: shell commands for the same run without ssh fan-out.
// `cliArgs` are the run's arguments after `pipestudio-cli run` with the schedule as
// `stagedSchedule` (the path where the schedule must be on every host). `masterPort` is the
// rendezvous port on the first host; `localSchedule` names the file to copy there. Flags are
// spelled as every torchrun version accepts them (--nproc_per_node, --node_rank, ...).
enum class LaunchKind { Torchrun, Slurm };
std::string printLaunchCommands(const std::vector<ClusterHost>& hosts, LaunchKind kind,
                                const std::vector<std::string>& cliArgs, const std::string& stagedSchedule,
                                int masterPort, const std::string& localSchedule = "SCHEDULE");
// A file the ranks read, as the printed instructions copy it: `local` (as the user named it)
// to `staged` on every host. `what` names it in the instructions ("the TorchScript model").
struct StagedFile {
  std::string local;
  std::string staged;
  std::string what;
};
// The same, with every file to copy: files[0] is the schedule, then a TorchScript model or an
// --inputs batch. Every value that reaches a command is shell-quoted.
std::string printLaunchCommands(const std::vector<ClusterHost>& hosts, LaunchKind kind,
                                const std::vector<std::string>& cliArgs, const std::vector<StagedFile>& files,
                                int masterPort);
// `--print-launch` without --hosts: `nproc` ranks on this host, reading the files where the run
// would (nothing to copy): torchrun's static rendezvous on 127.0.0.1, or one srun of nproc
// tasks on one node.
std::string printLocalLaunchCommands(LaunchKind kind, int nproc, const std::vector<std::string>& cliArgs,
                                     int masterPort, const std::string& cli = "pipestudio-cli");
// POSIX shell quoting of one word.
std::string shellQuoteWord(std::string_view word);

// How PipeStudio calls ssh, for the GUI's remote target and the cluster launcher alike: the
// arguments after "ssh" and before the remote command: -o BatchMode=yes (never a prompt),
// -o ConnectTimeout=N (at least 1), with keepAlive -o ServerAliveInterval=5
// -o ServerAliveCountMax=2 (a host that vanishes mid-run ends ssh within ~15 s), -p PORT,
// -i KEY -o IdentitiesOnly=yes when the host names a key, -o OPTION for each of its ssh options
// (trimmed; blank ones left out), then "--" and the destination, so that no user or host name
// is ever read as an ssh option.
struct SshCall {
  double connectTimeoutSeconds = 10;
  bool keepAlive = true;
};
std::vector<std::string> sshArguments(const ClusterHost& host, const SshCall& call);
// Why ssh failed, named from its exit status 255 and what it said on stderr ("" for any other
// exit status: then the remote command itself failed). Authentication ("Permission denied",
// "Too many authentication failures", "no supported authentication"): "authentication refused
// by USER@HOST on port P"; a host key ("Host key verification failed", "IDENTIFICATION HAS
// CHANGED"): "the host key of HOST is unknown or changed"; reachability ("Connection refused",
// timeouts, "No route to host", "Could not resolve", "Name or service not known", "Network is
// unreachable", "Connection closed", "Connection reset"): "cannot reach HOST on port P"; else "the
// connection to USER@HOST on port P failed". Matched without regard to case; ssh's last line
// follows after ": " and, for the first two, what to do about it.
std::string describeSshFailure(const ClusterHost& host, int exitCode, std::string_view stderrText);

// A TCP port free on this host for a rendezvous store that binds it later (a MASTER_PORT for
// ranks started by hand or over ssh). Picked at random below the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range, from port 10000), so that no port the kernel hands
// out meanwhile (another run's store bound to port 0, the local end of any connection) can
// take it before the store binds; checked bindable on every address. Where that range leaves
// no room below it, the kernel's own choice. 0 when no port could be bound.
int pickRendezvousPort();

}  // namespace ps::core
