// Ranks on several hosts over ssh (cluster_launcher.h). Every remote action is one `ssh`
// child with pipes; one poll loop reads them all, so a host that fails is noticed at once.
#include "pipestudio/engine/cluster_launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

#include "launch/child_process.h"
#include "pipestudio/core/io/run_events.h"

namespace ps::engine {

namespace {

using Clock = std::chrono::steady_clock;

// The remote shell sees one string: every word quoted; a leading ~/ stays expandable.
std::string remoteWord(const std::string& word) {
  if (word.rfind("~/", 0) == 0) return "\"$HOME\"/" + core::shellQuoteWord(word.substr(2));
  return core::shellQuoteWord(word);
}

// One ssh child: stdin (kept open while wanted), stdout and stderr pipes.
struct Child {
  pid_t pid = -1;
  int in = -1, out = -1, err = -1;
  std::string stdoutText, stderrText;  // whole (checks) or the unfinished line (ranks)
  std::string pendingIn;               // still to write to stdin
  bool closeInWhenWritten = true;
  bool reaped = false;
  int exitCode = -1;
};

using detail::closeFd;

bool spawn(Child& c, const std::vector<std::string>& argv) {
  detail::Pipe in, out, err;
  if (!detail::openPipe(in)) return false;
  if (!detail::openPipe(out) || !detail::openPipe(err)) {
    for (int* fd : {&in.read, &in.write, &out.read, &out.write, &err.read, &err.write}) closeFd(*fd);
    return false;
  }
  detail::ChildSpec spec;
  spec.argv = argv;
  spec.searchPath = true;
  spec.fds = {{0, in.read}, {1, out.write}, {2, err.write}};
  // The ssh client ends with the launcher (killed or crashed): the channel closes and the
  // remote rank's lifeline ends it there. A Ctrl-C at the terminal goes to the launcher,
  // which cancels in order; not to ssh.
  spec.ownProcessGroup = true;
  spec.defaultSigpipe = true;
  spec.execFailedMessage = "cannot start ssh\n";
  const pid_t pid = detail::startChild(spec);
  closeFd(in.read);
  closeFd(out.write);
  closeFd(err.write);
  if (pid < 0) {
    for (int* fd : {&in.write, &out.read, &err.read}) closeFd(*fd);
    return false;
  }
  c.pid = pid;
  c.in = in.write;
  c.out = out.read;
  c.err = err.read;
  fcntl(c.in, F_SETFL, fcntl(c.in, F_GETFL) | O_NONBLOCK);
  return true;
}

// Reads what is there; false at the end of the pipe.
bool drain(int& fd, std::string& into) {
  char buf[65536];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) {
    closeFd(fd);
    return false;
  }
  into.append(buf, static_cast<size_t>(n));
  return true;
}

void writeSome(Child& c) {
  while (c.in >= 0 && !c.pendingIn.empty()) {
    const ssize_t n = ::write(c.in, c.pendingIn.data(), c.pendingIn.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0) {
      closeFd(c.in);
      return;
    }
    c.pendingIn.erase(0, static_cast<size_t>(n));
  }
  if (c.in >= 0 && c.pendingIn.empty() && c.closeInWhenWritten) closeFd(c.in);
}

void reap(Child& c, bool block) {
  if (c.reaped || c.pid <= 0) return;
  int st = 0;
  const pid_t r = waitpid(c.pid, &st, block ? 0 : WNOHANG);
  if (r != c.pid) return;
  c.reaped = true;
  c.exitCode = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// Runs one short ssh command per host at once (checks, staging, cleanup), bounded in time;
// a child still running at the deadline is killed (exit code -1).
void runAll(std::vector<Child>& children, const std::vector<std::vector<std::string>>& commands,
            double seconds) {
  for (size_t i = 0; i < children.size(); ++i)
    if (!spawn(children[i], commands[i])) children[i].reaped = true;
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<long>(seconds * 1000));
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<std::pair<Child*, int>> who;
    bool running = false;
    for (auto& c : children) {
      writeSome(c);
      if (c.out >= 0) fds.push_back({c.out, POLLIN, 0}), who.emplace_back(&c, 1);
      if (c.err >= 0) fds.push_back({c.err, POLLIN, 0}), who.emplace_back(&c, 2);
      if (c.in >= 0) fds.push_back({c.in, POLLOUT, 0}), who.emplace_back(&c, 0);
      reap(c, false);
      running = running || !c.reaped || c.out >= 0 || c.err >= 0;
    }
    if (!running) break;
    if (Clock::now() >= deadline) {
      for (auto& c : children)
        if (!c.reaped && c.pid > 0) {
          kill(c.pid, SIGKILL);
          reap(c, true);
          c.exitCode = -1;
        }
      for (auto& c : children) closeFd(c.in), closeFd(c.out), closeFd(c.err);
      break;
    }
    if (fds.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    if (poll(fds.data(), fds.size(), 50) <= 0) continue;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR | POLLOUT))) continue;
      auto [c, which] = who[i];
      if (which == 1)
        drain(c->out, c->stdoutText);
      else if (which == 2)
        drain(c->err, c->stderrText);
    }
  }
}

}  // namespace

std::vector<std::string> sshCommand(const core::ClusterHost& h, double connectTimeoutSeconds,
                                    const std::string& remoteCommand) {
  std::vector<std::string> a{"ssh"};
  for (std::string& word : core::sshArguments(h, core::SshCall{connectTimeoutSeconds, true}))
    a.push_back(std::move(word));
  a.push_back(remoteCommand);
  return a;
}

namespace {

// A host that drops while its stdin is written must not take the launcher down with SIGPIPE.
struct IgnorePipe {
  struct sigaction old {};
  IgnorePipe() {
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ign, &old);
  }
  ~IgnorePipe() { sigaction(SIGPIPE, &old, nullptr); }
  IgnorePipe(const IgnorePipe&) = delete;
  IgnorePipe& operator=(const IgnorePipe&) = delete;
};

// 1. Every host: reachable, key accepted, the CLI and its engine there, our protocol. What each
// host's CLI printed for --version goes into `versions`.
core::Status checkHosts(const ClusterLaunchOptions& o, double bound, std::vector<std::string>& versions) {
  const auto& hosts = o.hosts;
  const size_t H = hosts.size();
  std::vector<Child> checks(H);
  std::vector<std::vector<std::string>> cmds;
  cmds.reserve(H);
  for (const auto& h : hosts)
    cmds.push_back(sshCommand(h, o.connectTimeoutSeconds, remoteWord(h.cli) + " --version"));
  runAll(checks, cmds, bound);
  core::Diagnostics errors;
  for (size_t i = 0; i < H; ++i) {
    const auto& h = hosts[i];
    const Child& c = checks[i];
    std::string why;
    if (c.exitCode == -1) {
      why = "host " + h.label() + " did not answer within " + std::to_string(static_cast<int>(bound)) + " s";
    } else if (c.exitCode == 127 && c.stderrText.rfind("cannot start ssh", 0) == 0) {
      why = "cannot start the ssh client ('ssh'); install openssh-client";
    } else if (std::string ssh = core::describeSshFailure(h, c.exitCode, c.stderrText); !ssh.empty()) {
      why = ssh;
    } else if (c.exitCode == 127 || c.stderrText.find("not found") != std::string::npos ||
               c.stderrText.find("No such file") != std::string::npos) {
      why = "pipestudio-cli not found on " + h.label() + " at '" + h.cli +
            "': " + std::string(core::lastLine(c.stderrText));
    } else if (auto v = core::parseCliVersion(c.stdoutText); !v) {
      why = "'" + h.cli + "' on " + h.label() + " does not look like pipestudio-cli (--version printed '" +
            std::string(core::lastLine(c.stdoutText)).substr(0, 120) + "')";
    } else if (v->protocol != core::kRunEventProtocolVersion) {
      why = "version mismatch on " + h.label() + ": pipestudio-cli " + v->program +
            " speaks run-event protocol " + std::to_string(v->protocol) + ", this one " +
            std::to_string(core::kRunEventProtocolVersion) + ": install the matching pipestudio-cli there";
    } else if (c.exitCode != 0) {
      // The CLI is there but its engine is not (or is another build's).
      why = "pipestudio-cli on " + h.label() + " cannot run: " + std::string(core::lastLine(c.stderrText));
    } else {
      versions.push_back(c.stdoutText.substr(0, c.stdoutText.find('\n')));
    }
    if (!why.empty()) errors.push_back(core::makeError("cluster.host", why, h.location));
  }
  if (!errors.empty()) return errors;
  for (size_t i = 1; i < H; ++i)
    if (versions[i] != versions[0])
      return core::makeError("cluster.version",
                             "hosts run different PipeStudio builds: '" + versions[0] + "' on " +
                                 hosts[0].label() + ", '" + versions[i] + "' on " + hosts[i].label(),
                             hosts[i].location);
  return core::okStatus();
}

// Removes the staged folders `dirs` still names (one rm over ssh per host, bounded in time).
void removeStaged(const ClusterLaunchOptions& o, double bound, const std::vector<std::string>& dirs) {
  std::vector<std::vector<std::string>> cmds;
  for (size_t i = 0; i < dirs.size(); ++i)
    if (!dirs[i].empty())
      cmds.push_back(
          sshCommand(o.hosts[i], o.connectTimeoutSeconds, "rm -rf " + core::shellQuoteWord(dirs[i])));
  std::vector<Child> rm(cmds.size());
  if (!cmds.empty()) runAll(rm, cmds, std::min(10.0, bound));
}

// 2. The files in a fresh folder on every host (its path into `dirs`); host 0 also names a free
// port for the rendezvous. A failure removes what was staged.
core::Status stageFiles(const ClusterLaunchOptions& o, double bound, std::vector<std::string>& dirs,
                        int& masterPort) {
  const auto& hosts = o.hosts;
  const size_t H = hosts.size();
  std::vector<Child> stage(H);
  std::vector<std::vector<std::string>> cmds;
  for (size_t i = 0; i < H; ++i) {
    std::string script = "d=$(mktemp -d \"${TMPDIR:-/tmp}/pipestudio-cluster.XXXXXX\") && cat > \"$d\"/" +
                         core::shellQuoteWord(o.files[0].name) + " && echo \"$d\"";
    if (i == 0) script += " && " + remoteWord(hosts[0].cli) + " free-port";
    cmds.push_back(sshCommand(hosts[i], o.connectTimeoutSeconds, script));
    stage[i].pendingIn = o.files[0].content;
  }
  runAll(stage, cmds, bound);
  std::string why;
  for (size_t i = 0; i < H; ++i) {
    const Child& c = stage[i];
    std::string out = c.stdoutText;
    const size_t nl = out.find('\n');
    if (c.exitCode == 0 && nl != std::string::npos && out.rfind('/', 0) == 0) dirs[i] = out.substr(0, nl);
    if (i == 0 && c.exitCode == 0 && nl != std::string::npos) masterPort = std::atoi(out.c_str() + nl + 1);
    if (why.empty() && (c.exitCode != 0 || dirs[i].empty())) {
      why = core::describeSshFailure(hosts[i], c.exitCode, c.stderrText);
      if (why.empty())
        why =
            "cannot stage the schedule on " + hosts[i].label() + ": " +
            (c.exitCode == -1 ? std::string("no answer in time") : std::string(core::lastLine(c.stderrText)));
    }
  }
  if (why.empty() && (masterPort <= 0 || masterPort > 65535))
    why = "no free port on " + hosts[0].label() + " for the rendezvous ('" + hosts[0].cli +
          " free-port' failed)";
  // More files (a TorchScript model): one more copy each.
  for (size_t f = 1; why.empty() && f < o.files.size(); ++f) {
    std::vector<Child> copy(H);
    std::vector<std::vector<std::string>> more;
    for (size_t i = 0; i < H; ++i) {
      more.push_back(sshCommand(hosts[i], o.connectTimeoutSeconds,
                                "cat > " + core::shellQuoteWord(dirs[i] + "/" + o.files[f].name)));
      copy[i].pendingIn = o.files[f].content;
    }
    runAll(copy, more, bound + 60);
    for (size_t i = 0; i < H && why.empty(); ++i)
      if (copy[i].exitCode != 0) {
        why = core::describeSshFailure(hosts[i], copy[i].exitCode, copy[i].stderrText);
        if (why.empty())
          why = "cannot copy " + o.files[f].name + " to " + hosts[i].label() + ": " +
                std::string(core::lastLine(copy[i].stderrText));
      }
  }
  if (why.empty()) return core::okStatus();
  removeStaged(o, bound, dirs);
  return core::makeError("cluster.stage", why);
}

// A janitor per host: a shell that waits for the end of its stdin and then removes the
// staged folder. The launcher closes that stdin at the end; if the launcher is killed (even
// by SIGKILL), its ssh clients die with it (parent-death signal), the channels close and the
// janitors clean up all the same.
std::vector<Child> startJanitors(const ClusterLaunchOptions& o, const std::vector<std::string>& dirs) {
  std::vector<Child> janitors(o.hosts.size());
  for (size_t i = 0; i < janitors.size(); ++i) {
    const std::string q = core::shellQuoteWord(dirs[i]);
    janitors[i].closeInWhenWritten = false;
    if (!spawn(janitors[i],
               sshCommand(o.hosts[i], o.connectTimeoutSeconds,
                          "trap 'rm -rf " + q +
                              "' EXIT; trap 'exit 129' HUP; trap 'exit 143' TERM; cat >/dev/null")))
      janitors[i].reaped = true;
  }
  return janitors;
}

// The janitors remove the folders as their stdin ends; a folder one removed is cleared from
// `dirs`, and a host whose janitor did not (it never started, or its connection had dropped)
// is left there for an rm of its own.
void stopJanitors(std::vector<Child>& janitors, std::vector<std::string>& dirs) {
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  for (auto& j : janitors) closeFd(j.in);
  for (bool waiting = true; waiting && Clock::now() < deadline;) {
    waiting = false;
    for (auto& j : janitors) {
      for (int* fd : {&j.out, &j.err})
        if (*fd >= 0) {
          std::string ignored;
          pollfd p{*fd, POLLIN, 0};
          if (poll(&p, 1, 0) > 0) drain(*fd, ignored);
        }
      reap(j, false);
      waiting = waiting || !j.reaped;
    }
    if (waiting) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (size_t i = 0; i < janitors.size(); ++i) {
    Child& j = janitors[i];
    if (!j.reaped && j.pid > 0) {
      kill(j.pid, SIGKILL);
      reap(j, true);
      j.exitCode = -1;
    }
    closeFd(j.out), closeFd(j.err);
    if (j.exitCode == 0) dirs[i].clear();  // removed
  }
}

struct Rank {
  Child child;
  int host = 0, localRank = 0;
  bool endedByLauncher = false;
};

// What rank r runs on its host, in its staged folder: torchrun's environment, the lifeline on
// stdin, events on stdout (rank 0 writes the whole stream), then `pipestudio-cli run ARGS`.
std::string rankCommand(const ClusterLaunchOptions& o, int r, int world, const Rank& k,
                        const std::string& dir, int masterPort) {
  const auto& h = o.hosts[static_cast<size_t>(k.host)];
  std::string cmd = "cd " + core::shellQuoteWord(dir) + " && exec env RANK=" + std::to_string(r) +
                    " WORLD_SIZE=" + std::to_string(world) + " LOCAL_RANK=" + std::to_string(k.localRank) +
                    " LOCAL_WORLD_SIZE=" + std::to_string(h.ranks) +
                    " MASTER_ADDR=" + core::shellQuoteWord(o.hosts[0].address()) +
                    " MASTER_PORT=" + std::to_string(masterPort) + " PIPESTUDIO_LIFELINE_FD=0";
  if (r != 0) cmd += " PIPESTUDIO_EVENT_FD=1";
  for (const auto& [name, value] : o.environment) cmd += " " + name + "=" + core::shellQuoteWord(value);
  cmd += " " + remoteWord(h.cli) + " run";
  for (std::string a : o.args) {
    for (size_t p; (p = a.find("{dir}")) != std::string::npos;) a.replace(p, 5, dir);
    cmd += " " + core::shellQuoteWord(a);
  }
  if (r == 0)
    for (const auto& a : o.rank0Args) cmd += " " + core::shellQuoteWord(a);
  return cmd;
}

// 3. The ranks' ssh clients, read in one poll loop until every one has ended: their event and
// stderr lines go to the options' callbacks as they come, a cancel ends rank 0 first, and the
// first rank that fails (and why) goes into the result, which ends the others.
class RankSupervisor {
 public:
  RankSupervisor(const ClusterLaunchOptions& o, std::vector<Rank>& ranks, ClusterLaunchResult& result)
      : o_(o),
        ranks_(ranks),
        result_(result),
        world_(static_cast<int>(ranks.size())),
        stderrTail_(ranks.size()) {
    result_.ends.resize(ranks.size());
  }

  // Every rank's lifeline closed: each ends within 5 s, else it is terminated, then killed.
  void closeLifelines() {
    if (lifelinesClosed_) return;
    lifelinesClosed_ = true;
    for (auto& k : ranks_) {
      if (!k.child.reaped) k.endedByLauncher = true;
      closeFd(k.child.in);
    }
    killAt_ = Clock::now() + std::chrono::seconds(8);  // the lifeline ends a rank within 5 s
  }

  void run() {
    for (;;) {
      const auto now = Clock::now();
      enforceDeadlines(now);
      std::vector<pollfd> fds;
      std::vector<std::pair<int, int>> who;
      bool running = false;
      for (int r = 0; r < world_; ++r) {
        Rank& k = ranks_[static_cast<size_t>(r)];
        if (k.child.out >= 0) fds.push_back({k.child.out, POLLIN, 0}), who.emplace_back(r, 1);
        if (k.child.err >= 0) fds.push_back({k.child.err, POLLIN, 0}), who.emplace_back(r, 2);
        const bool was = k.child.reaped;
        reap(k.child, false);
        if (!was && k.child.reaped) rankEnded(r, now);
        running = running || !k.child.reaped;
      }
      if (!running) break;
      if (fds.empty()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      if (poll(fds.data(), fds.size(), 20) <= 0) continue;
      for (size_t i = 0; i < fds.size(); ++i)
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) read(who[i].first, who[i].second == 2);
    }
  }

  // Whatever is left in the pipes (descendants may hold them: do not wait).
  void drainRest() {
    for (int r = 0; r < world_; ++r) {
      Child& c = ranks_[static_cast<size_t>(r)].child;
      for (int* fd : {&c.out, &c.err}) {
        if (*fd < 0) continue;
        fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) | O_NONBLOCK);
        std::string& acc = fd == &c.out ? c.stdoutText : c.stderrText;
        while (*fd >= 0 && drain(*fd, acc)) {
          pollfd p{*fd, POLLIN, 0};
          if (poll(&p, 1, 0) <= 0) break;
        }
        if (!acc.empty()) acc += "\n";
        emitLines(r, acc, fd == &c.err);
        closeFd(*fd);
      }
      closeFd(c.in);
    }
  }

 private:
  std::string rankName(int r) const {
    const Rank& k = ranks_[static_cast<size_t>(r)];
    return "rank " + std::to_string(r) + " (device " + std::to_string(r) + ") on host " +
           o_.hosts[static_cast<size_t>(k.host)].label();
  }

  // A cancel, the end after a failure or rank 0's, and the signals after the lifelines.
  void enforceDeadlines(Clock::time_point now) {
    if (o_.cancel && *o_.cancel && !cancelSeen_) {
      // Rank 0 first: its cancel ends the peers in order and it reports "cancelled".
      cancelSeen_ = true;
      result_.cancelled = true;
      closeFd(ranks_[0].child.in);
      cancelAt_ = now + std::chrono::milliseconds(static_cast<long>(o_.cancelGraceSeconds * 1000));
    }
    if ((cancelAt_ && now >= *cancelAt_) || (endAt_ && now >= *endAt_)) closeLifelines();
    if (killAt_ && now >= *killAt_) {
      for (auto& k : ranks_)
        if (!k.child.reaped && k.child.pid > 0) kill(k.child.pid, termSent_ ? SIGKILL : SIGTERM);
      termSent_ = true;
      killAt_ = now + std::chrono::seconds(2);
    }
  }

  void endNoLaterThan(Clock::time_point at) {
    if (!endAt_ || at < *endAt_) endAt_ = at;
  }

  // Rank r's ssh client ended: what it left is read, its end recorded and judged.
  void rankEnded(int r, Clock::time_point now) {
    Rank& k = ranks_[static_cast<size_t>(r)];
    // Read what it left before judging its end (rank 0's report comes first).
    while (k.child.out >= 0 && drain(k.child.out, k.child.stdoutText)) {
      emitLines(r, k.child.stdoutText, false);
      if (k.child.out >= 0) {
        pollfd p{k.child.out, POLLIN, 0};
        if (poll(&p, 1, 0) <= 0) break;
      }
    }
    ClusterRankEnd& e = result_.ends[static_cast<size_t>(r)];
    e.rank = r;
    e.host = k.host;
    e.exitCode = k.child.exitCode;
    e.endedByLauncher = k.endedByLauncher;
    closeFd(k.child.in);
    const bool bad = k.child.exitCode != 0 && !k.endedByLauncher && !cancelSeen_;
    // A rank that vanished (ssh's 255: killed, host gone) is the cause; a peer that failed
    // on the loss just before it was noticed is not.
    const bool lost = k.child.exitCode == 255;
    const bool replaces =
        result_.failedRank && lost && result_.ends[static_cast<size_t>(*result_.failedRank)].exitCode != 255;
    const auto grace = std::chrono::milliseconds(static_cast<long>(o_.deathGraceSeconds * 1000));
    if (bad && (!result_.failedRank || replaces)) {
      result_.failedRank = r;
      const auto& h = o_.hosts[static_cast<size_t>(k.host)];
      const std::string& tailText = stderrTail_[static_cast<size_t>(r)];
      std::string ssh = core::describeSshFailure(h, k.child.exitCode, tailText);
      std::string why = !ssh.empty() && ssh.rfind("the connection", 0) != 0 ? ssh
                        : k.child.exitCode == 255 ? "it was killed or its host " + h.label() + " went away"
                                                  : "exit status " + std::to_string(k.child.exitCode);
      const std::string tail = std::string(core::lastLine(tailText));
      result_.failure = rankName(r) + " ended: " + why;
      if (!tail.empty() && ssh.empty() && k.child.exitCode != 255) result_.failure += " (" + tail + ")";
      if (o_.onRankFailed) o_.onRankFailed(e, result_.failure);
      // Rank 0 gone: nobody reports, end the rest now; else rank 0 may name the loss first.
      endNoLaterThan(r == 0 ? now : now + grace);
    }
    // Rank 0 done (its report is in): the others have no reason to stay; after a failure
    // none of them can finish, so they are ended at once.
    if (r == 0) endNoLaterThan(result_.failedRank || k.child.exitCode != 0 ? now : now + grace);
  }

  void read(int r, bool err) {
    Child& c = ranks_[static_cast<size_t>(r)].child;
    if (!err) {
      drain(c.out, c.stdoutText);
      emitLines(r, c.stdoutText, false);
      return;
    }
    const size_t before = c.stderrText.size();
    drain(c.err, c.stderrText);
    std::string& tail = stderrTail_[static_cast<size_t>(r)];
    tail += c.stderrText.substr(before);
    if (tail.size() > 8192) tail.erase(0, tail.size() - 8192);
    emitLines(r, c.stderrText, true);
  }

  // The whole lines of `acc` to the callbacks (events from stdout, stderr lines), the rest kept.
  void emitLines(int r, std::string& acc, bool err) {
    size_t start = 0;
    for (size_t nl; (nl = acc.find('\n', start)) != std::string::npos; start = nl + 1) {
      std::string line = acc.substr(start, nl - start);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (err) {
        if (o_.onStderr) o_.onStderr(r, line);
      } else if (o_.onEvent) {
        o_.onEvent(r, line);
      }
    }
    acc.erase(0, start);
  }

  const ClusterLaunchOptions& o_;
  std::vector<Rank>& ranks_;
  ClusterLaunchResult& result_;
  const int world_;
  std::vector<std::string> stderrTail_;  // the last 8 KiB of each rank's stderr
  std::optional<Clock::time_point> endAt_, killAt_, cancelAt_;
  bool lifelinesClosed_ = false, cancelSeen_ = false, termSent_ = false;
};

}  // namespace

core::Result<ClusterLaunchResult> launchClusterRanks(const ClusterLaunchOptions& o) {
  const auto& hosts = o.hosts;
  const size_t H = hosts.size();
  if (H == 0) return core::makeError("cluster.hosts", "no hosts");
  if (o.files.empty()) return core::makeError("cluster.files", "no schedule to stage");
  const double bound = o.connectTimeoutSeconds + 20;
  const IgnorePipe ignorePipe;
  auto phase = [&](const std::string& m) {
    if (o.onPhase) o.onPhase(m);
  };
  ClusterLaunchResult result;

  phase("checking pipestudio-cli on " + std::to_string(H) + " hosts");
  PS_TRY(checkHosts(o, bound, result.versions));

  phase("staging the schedule on " + std::to_string(H) + " hosts");
  std::vector<std::string> dirs(H);
  int masterPort = 0;
  PS_TRY(stageFiles(o, bound, dirs, masterPort));
  std::vector<Child> janitors = startJanitors(o, dirs);
  {
    std::string where;
    for (size_t i = 0; i < H; ++i) where += (i ? ", " : "") + dirs[i] + " on " + hosts[i].label();
    phase("staged in " + where);
  }

  // Host by host, local ranks 0..n-1; rank 0's host holds the store.
  const int world = core::clusterWorldSize(hosts);
  std::vector<Rank> ranks(static_cast<size_t>(world));
  for (size_t i = 0, r = 0; i < H; ++i)
    for (int l = 0; l < hosts[i].ranks; ++l, ++r) {
      ranks[r].host = static_cast<int>(i);
      ranks[r].localRank = l;
    }
  phase("starting " + std::to_string(world) + " ranks on " + std::to_string(H) + " hosts");
  std::string startError;
  for (int r = 0; r < world && startError.empty(); ++r) {
    Rank& k = ranks[static_cast<size_t>(r)];
    k.child.closeInWhenWritten = false;  // stdin is the lifeline
    const std::string cmd = rankCommand(o, r, world, k, dirs[static_cast<size_t>(k.host)], masterPort);
    if (!spawn(k.child, sshCommand(hosts[static_cast<size_t>(k.host)], o.connectTimeoutSeconds, cmd)))
      startError = std::string("cannot start ssh: ") + std::strerror(errno);
  }
  RankSupervisor supervisor(o, ranks, result);
  if (!startError.empty()) supervisor.closeLifelines();
  supervisor.run();
  supervisor.drainRest();

  phase("removing the staged files");
  stopJanitors(janitors, dirs);
  removeStaged(o, bound, dirs);
  if (!startError.empty()) return core::makeError("cluster.start", startError);
  result.exitStatus = result.ends[0].exitCode;
  if (result.failedRank) result.exitStatus = result.exitStatus == 0 ? 1 : result.exitStatus;
  return result;
}

}  // namespace ps::engine
