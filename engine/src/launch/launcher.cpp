// Fork/exec of local ranks. The parent starts them, forwards signals, reads their run events
// and notices a rank's death at once; the ranks find each other through the TCPStore that
// the launcher hosts on MASTER_PORT (hosted_store.h), as torchrun's agent does.
#include "pipestudio/engine/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>

#include "launch/child_process.h"
#include "transport/hosted_store.h"

namespace ps::engine {

namespace {
std::vector<pid_t> g_children;
volatile sig_atomic_t g_forwarded = 0;

void forwardSignal(int sig) {
  g_forwarded = sig;
  for (pid_t p : g_children)
    if (p > 0) kill(p, sig);
}

std::optional<int> envInt(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end != '\0') return -1;
  return static_cast<int>(x);
}

// The first host of a Slurm node list: "gpu[03-04,07],cpu1" -> "gpu03", "a,b" -> "a".
std::string firstSlurmHost(const std::string& list) {
  // Slurm's hostlist syntax: comma-separated names, each with any number of bracketed ranges
  // ("rack[1-2]-node[01-04]-ib"); the first host takes the first value of every range.
  std::string host;
  for (size_t i = 0; i < list.size(); ++i) {
    const char c = list[i];
    if (c == ',') break;
    if (c == '[') {
      size_t j = i + 1;
      while (j < list.size() && std::isdigit(static_cast<unsigned char>(list[j]))) host += list[j++];
      const size_t close = list.find(']', j);
      if (close == std::string::npos) break;
      i = close;
      continue;
    }
    host += c;
  }
  return host;
}

// SLURM_NTASKS_PER_NODE / SLURM_TASKS_PER_NODE look like "4" or "2(x3),1": this node's count
// is not known from them alone, the first group's is used.
std::optional<int> slurmTasksPerNode() {
  for (const char* name : {"SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
    const char* v = std::getenv(name);
    if (!v || !*v) continue;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (end != v && n >= 1) return static_cast<int>(n);
  }
  return std::nullopt;
}
}  // namespace

core::Result<std::optional<DistributedOptions>> distributedFromEnvironment() {
  auto rank = envInt("RANK"), world = envInt("WORLD_SIZE");
  // torchrun's variables first; under srun (no torchrun) Slurm's.
  const bool slurm = (!rank || !world) && envInt("SLURM_PROCID") && envInt("SLURM_NTASKS");
  if (slurm) {
    rank = envInt("SLURM_PROCID");
    world = envInt("SLURM_NTASKS");
  }
  if (!rank || !world) return std::optional<DistributedOptions>{};
  DistributedOptions d;
  d.rank = *rank;
  d.worldSize = *world;
  const std::string names = slurm ? "SLURM_PROCID " : "RANK ";
  if (d.worldSize < 1 || d.rank < 0 || d.rank >= d.worldSize)
    return core::makeError("engine.distributed", names + std::to_string(d.rank) + " / " +
                                                     (slurm ? "SLURM_NTASKS " : "WORLD_SIZE ") +
                                                     std::to_string(d.worldSize) + " do not make a rank");
  if (const char* a = std::getenv("MASTER_ADDR"); a && *a) {
    d.masterAddr = a;
  } else if (const char* nodes = std::getenv("SLURM_JOB_NODELIST"); slurm && nodes && *nodes) {
    d.masterAddr = firstSlurmHost(nodes);
  } else if (const char* nodes2 = std::getenv("SLURM_NODELIST"); slurm && nodes2 && *nodes2) {
    d.masterAddr = firstSlurmHost(nodes2);
  }
  if (auto p = envInt("MASTER_PORT")) d.masterPort = *p;
  // Ranks on this host share its cores: LOCAL_WORLD_SIZE (torchrun), Slurm's tasks per node,
  // else every rank when the store is on this host (ranks started by hand on one machine).
  if (auto l = envInt("LOCAL_WORLD_SIZE"); l && *l >= 1) {
    d.localWorldSize = *l;
  } else if (auto t = slurmTasksPerNode(); slurm && t) {
    d.localWorldSize = *t;
  } else if (d.masterAddr == "127.0.0.1" || d.masterAddr == "localhost") {
    d.localWorldSize = d.worldSize;
  }
  if (d.masterPort <= 0 || d.masterPort > 65535)
    return core::makeError("engine.distributed", "MASTER_PORT is not a port number");
  return std::optional<DistributedOptions>{d};
}

bool processStopped(int pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "r");
  if (!f) return false;
  char buf[512];
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  // "PID (COMM) STATE ...": COMM may hold spaces and parentheses, so look after the last ')'.
  const char* close = std::strrchr(buf, ')');
  return close && close[1] == ' ' && (close[2] == 'T' || close[2] == 't');
}

std::string signalName(int signal) {
  switch (signal) {
    case SIGKILL:
      return "SIGKILL";
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGILL:
      return "SIGILL";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "signal " + std::to_string(signal);
  }
}

core::Result<LaunchResult> launchLocalRanks(const LaunchOptions& o) {
  const int nproc = o.nproc;
  auto store = detail::hostLocalStore(nproc);
  if (!store) return store.error();
  const int port = (*store)->port();
  using detail::Pipe;
  std::vector<Pipe> events(static_cast<size_t>(nproc)), lifelines(static_cast<size_t>(nproc));
  auto closeAll = [&] {
    for (auto* v : {&events, &lifelines})
      for (auto& p : *v) {
        if (p.read >= 0) ::close(p.read);
        if (p.write >= 0) ::close(p.write);
        p.read = p.write = -1;
      }
  };
  for (int r = 0; r < nproc; ++r) {
    if (!detail::openPipe(events[static_cast<size_t>(r)]) ||
        !detail::openPipe(lifelines[static_cast<size_t>(r)])) {
      const std::string why = std::strerror(errno);
      closeAll();
      return core::makeError("engine.launch", "cannot create pipes: " + why);
    }
  }
  g_children.assign(static_cast<size_t>(nproc), 0);
  g_forwarded = 0;
  struct sigaction sa {};
  sa.sa_handler = forwardSignal;
  sigemptyset(&sa.sa_mask);
  struct sigaction oldInt {
  }, oldTerm{};
  sigaction(SIGINT, &sa, &oldInt);
  sigaction(SIGTERM, &sa, &oldTerm);
  std::string startError;
  if (o.cancelled && o.cancelled->load()) g_forwarded = SIGTERM;
  for (int r = 0; r < nproc; ++r) {
    if (g_forwarded) break;  // cancelled while starting: start no more
    // The rank ends with its launcher (a cancel, like Ctrl-C; startChild's parent-death signal,
    // and the lifeline's EOF for a launcher that died before that took effect). fds 3 and 4
    // in the rank: its event pipe and its lifeline.
    detail::ChildSpec spec;
    spec.argv.push_back(o.program);
    spec.argv.insert(spec.argv.end(), o.args.begin(), o.args.end());
    spec.fds = {{3, events[static_cast<size_t>(r)].write}, {4, lifelines[static_cast<size_t>(r)].read}};
    spec.environment = {{kEventFdVariable, "3"},
                        {kLifelineFdVariable, "4"},
                        {"RANK", std::to_string(r)},
                        {"LOCAL_RANK", std::to_string(r)},
                        {"WORLD_SIZE", std::to_string(nproc)},
                        {"LOCAL_WORLD_SIZE", std::to_string(nproc)},
                        {"MASTER_ADDR", "127.0.0.1"},
                        {"MASTER_PORT", std::to_string(port)},
                        {detail::kAgentStoreVariable, "True"}};
    spec.discardStdout = r != 0;
    const pid_t pid = detail::startChild(spec);
    if (pid < 0) {
      startError = std::string("fork failed: ") + std::strerror(errno);
      forwardSignal(SIGKILL);
      break;
    }
    g_children[static_cast<size_t>(r)] = pid;
  }
  // The launcher keeps the events' read ends and the lifelines' write ends.
  for (auto& p : events) {
    ::close(p.write);
    p.write = -1;
  }
  for (auto& p : lifelines) {
    ::close(p.read);
    p.read = -1;
  }

  LaunchResult result;
  result.ends.resize(static_cast<size_t>(nproc));
  std::vector<std::string> partial(static_cast<size_t>(nproc));
  // 1: read some, 0: end of the pipe, -1: nothing now (or an error).
  auto readEvents = [&](int r) -> int {
    char buf[65536];
    const ssize_t n = ::read(events[static_cast<size_t>(r)].read, buf, sizeof buf);
    if (n < 0) return errno == EINTR ? 1 : -1;
    if (n == 0) return 0;
    std::string& acc = partial[static_cast<size_t>(r)];
    acc.append(buf, static_cast<size_t>(n));
    size_t startLine = 0;
    for (size_t nl; (nl = acc.find('\n', startLine)) != std::string::npos; startLine = nl + 1)
      if (o.onEvent) o.onEvent(r, acc.substr(startLine, nl - startLine));
    acc.erase(0, startLine);
    return 1;
  };

  int running = 0;
  for (pid_t p : g_children) running += p > 0 ? 1 : 0;
  // A signal that came while ranks were still being started reached only those started.
  if (g_forwarded) forwardSignal(g_forwarded);
  std::vector<bool> killedByUs(static_cast<size_t>(nproc), false);
  using SteadyClock = std::chrono::steady_clock;
  std::optional<SteadyClock::time_point> killAt;   // the other ranks
  std::optional<SteadyClock::time_point> rank0At;  // rank 0, which reports
  std::optional<SteadyClock::time_point> cancelAt;
  auto after = [](double seconds) {
    return SteadyClock::now() + std::chrono::milliseconds(static_cast<long>(std::max(0.0, seconds) * 1000));
  };
  auto killRank = [&](size_t r) {
    if (g_children[r] <= 0) return;
    killedByUs[r] = true;
    if (processStopped(g_children[r]) &&
        std::find(result.stopped.begin(), result.stopped.end(), static_cast<int>(r)) == result.stopped.end())
      result.stopped.push_back(static_cast<int>(r));
    kill(g_children[r], SIGKILL);
  };
  auto killRunning = [&] {
    for (size_t r = 0; r < g_children.size(); ++r) killRank(r);
  };
  while (running > 0 ||
         std::any_of(events.begin(), events.end(), [](const Pipe& p) { return p.read >= 0; })) {
    std::vector<pollfd> fds;
    std::vector<int> who;
    for (int r = 0; r < nproc; ++r)
      if (events[static_cast<size_t>(r)].read >= 0) {
        fds.push_back({events[static_cast<size_t>(r)].read, POLLIN, 0});
        who.push_back(r);
      }
    // Children that ended are noticed within 20 ms.
    if (!fds.empty()) {
      if (poll(fds.data(), fds.size(), 20) > 0)
        for (size_t i = 0; i < fds.size(); ++i)
          if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) && readEvents(who[i]) <= 0) {
            ::close(events[static_cast<size_t>(who[i])].read);
            events[static_cast<size_t>(who[i])].read = -1;
          }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (;;) {
      int st = 0;
      pid_t pid = waitpid(-1, &st, WNOHANG);
      if (pid <= 0) break;
      for (size_t r = 0; r < g_children.size(); ++r) {
        if (g_children[r] != pid) continue;
        RankEnd& e = result.ends[r];
        e.rank = static_cast<int>(r);
        e.exitCode = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        e.signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
        e.killedByLauncher = killedByUs[r];
        g_children[r] = 0;
        --running;
        // A signal the launcher forwarded (a cancel) is no death, even if it came early.
        const bool forwarded = g_forwarded != 0 && e.signal == g_forwarded;
        if (e.signal > 0 && !e.killedByLauncher && !forwarded && !result.death) {
          result.death = e;
          if (o.onRankDied) o.onRankDied(e);
          // Without rank 0 (the store and the report) nobody can finish: end the others now.
          if (r == 0) killRunning();
        }
        // A rank that failed and said so: the others get the grace to report; one that died:
        // at most deathGraceSeconds. Rank 0 gathers the reports and writes the outcome: it gets
        // reportSeconds. Once rank 0 has ended, nobody is left to report to.
        const double grace = result.death ? std::min(o.graceSeconds, o.deathGraceSeconds) : o.graceSeconds;
        if (r == 0) {
          // After a success the others are only ending (their reports are in): they get the
          // grace; after a failure a second.
          const bool ok = e.signal == 0 && e.exitCode == 0;
          const auto at = after(ok ? std::max(1.0, o.graceSeconds) : 1.0);
          if (!killAt || at < *killAt) killAt = at;
        } else if (e.signal > 0 || e.exitCode != 0) {
          const auto at = after(grace);
          if (!killAt || at < *killAt) killAt = at;
          const auto at0 = after(result.death ? grace : std::max(grace, o.reportSeconds));
          if (!rank0At || at0 < *rank0At) rank0At = at0;
        }
      }
    }
    const auto now = SteadyClock::now();
    if (g_forwarded && !cancelAt) {
      result.cancelSignal = g_forwarded;
      cancelAt = after(o.cancelSeconds);
    }
    if (cancelAt && now >= *cancelAt && running > 0) killRunning();
    if (killAt && now >= *killAt && running > 0)
      for (size_t r = 1; r < g_children.size(); ++r) killRank(r);
    // Rank 0 is killed at its own deadline, or as soon as the others are when it is stopped
    // (it will not report).
    if (g_children[0] > 0 &&
        ((rank0At && now >= *rank0At) || (killAt && now >= *killAt && processStopped(g_children[0]))))
      killRank(0);
    // Every rank ended: read what is left (a cut last line is dropped) without waiting for
    // descendants that might still hold a pipe.
    if (running == 0)
      for (int r = 0; r < nproc; ++r) {
        auto& p = events[static_cast<size_t>(r)];
        if (p.read < 0) continue;
        fcntl(p.read, F_SETFL, fcntl(p.read, F_GETFL) | O_NONBLOCK);
        while (readEvents(r) > 0) {
        }
        ::close(p.read);
        p.read = -1;
      }
  }
  closeAll();
  sigaction(SIGINT, &oldInt, nullptr);
  sigaction(SIGTERM, &oldTerm, nullptr);
  g_children.clear();
  if (!startError.empty()) return core::makeError("engine.launch", startError);
  if (g_forwarded && !result.cancelSignal) result.cancelSignal = g_forwarded;
  auto statusOf = [](const RankEnd& e) { return e.signal > 0 ? 128 + e.signal : e.exitCode; };
  result.exitStatus = statusOf(result.ends[0]);
  // Rank 0 succeeded: it had every rank's report, so a rank the launcher ended afterwards (slow
  // to exit) is no failure.
  if (result.exitStatus == 0)
    for (const auto& e : result.ends)
      if (statusOf(e) != 0 && !e.killedByLauncher) {
        result.exitStatus = statusOf(e);
        break;
      }
  return result;
}

}  // namespace ps::engine
