#pragma once
// pipestudio-cli processes started in the background for the multi-process tests, with their
// stdout and stderr in files; each test waits for them with a deadline and kills (by pid) what
// it started when it overstays.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fixtures/files.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/planning/generators.h"

namespace ps::test {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

inline std::string writeSchedule(ps::core::ScheduleKind kind, int devices, int micro,
                                 const std::string& name) {
  auto s = ps::core::generateSchedule(kind, {devices, micro, 0});
  EXPECT_TRUE(s.ok());
  std::string path = ::testing::TempDir() + name + ".pipe";
  std::ofstream(path) << ps::core::printDsl(*s);
  return path;
}

// A pipestudio-cli started in the background, stdout and stderr into files.
// Move-only: whatever it started and did not see end is killed with it, so that a test that
// stops early (a failed assertion) leaves no run behind.
struct Background {
  pid_t pid = -1;
  std::string out, err;
  std::optional<int> status;  // raw wait status once reaped

  Background() = default;
  Background(Background&& o) noexcept
      : pid(std::exchange(o.pid, -1)), out(std::move(o.out)), err(std::move(o.err)), status(o.status) {}
  Background& operator=(Background&& o) noexcept {
    if (this != &o) {
      killTree();
      pid = std::exchange(o.pid, -1);
      out = std::move(o.out);
      err = std::move(o.err);
      status = o.status;
    }
    return *this;
  }
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;
  ~Background() { killTree(); }

  static Background start(const std::string& args, const std::string& tag,
                          const std::vector<std::pair<std::string, std::string>>& env = {}) {
    Background b;
    b.out = ::testing::TempDir() + tag + "_" + std::to_string(getpid()) + ".out";
    b.err = ::testing::TempDir() + tag + "_" + std::to_string(getpid()) + ".err";
    // A file left by an earlier process of the same pid would be read before the shell
    // truncates it (an old run's events taken for this one's).
    std::remove(b.out.c_str());
    std::remove(b.err.c_str());
    const std::string cmd = "exec '" + std::string(PIPESTUDIO_CLI) + "' " + args + " >'" + b.out + "' 2>'" +
                            b.err + "' </dev/null";
    b.pid = fork();
    if (b.pid == 0) {
      for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    return b;
  }
  std::string stdoutText() const { return readFile(out); }
  std::string stderrText() const { return readFile(err); }
  bool waitFor(std::chrono::milliseconds limit) {
    const auto until = Clock::now() + limit;
    while (Clock::now() < until) {
      int st = 0;
      if (waitpid(pid, &st, WNOHANG) == pid) {
        status = st;
        return true;
      }
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }
  int exitCode() const { return status && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1; }
  // Test cleanup: the process and the ranks it started, by pid.
  void killTree() {
    if (status || pid <= 0) return;
    for (pid_t c : children(pid)) kill(c, SIGKILL);
    kill(pid, SIGKILL);
    waitFor(5s);
  }
  static std::vector<pid_t> children(pid_t parent) {
    std::vector<pid_t> out;
    std::ifstream in("/proc/" + std::to_string(parent) + "/task/" + std::to_string(parent) + "/children");
    for (pid_t c; in >> c;) out.push_back(c);
    return out;
  }
};

// RANK of a process from its environment (-1 when unreadable).
inline int rankOf(pid_t pid) {
  std::string env = readFile("/proc/" + std::to_string(pid) + "/environ");
  std::istringstream in(env);
  for (std::string kv; std::getline(in, kv, '\0');)
    if (kv.rfind("RANK=", 0) == 0) return std::atoi(kv.c_str() + 5);
  return -1;
}

// Gone: no such process, or a zombie nobody reaps yet.
inline bool ended(pid_t pid) {
  std::string stat = readFile("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return true;
  const auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
}

inline bool waitUntil(const std::function<bool()>& cond, std::chrono::milliseconds limit) {
  const auto until = Clock::now() + limit;
  while (Clock::now() < until) {
    if (cond()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return cond();
}

}  // namespace ps::test
