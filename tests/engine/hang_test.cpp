// Hangs and how a launched run ends: a run whose ranks wait on each other ends at --timeout with
// every rank's place and the wait cycle named, printed, streamed and stored; a stopped rank ends
// the run at --timeout naming it (exit 1, the failed run recorded); SIGTERM and SIGINT end a
// launched run within seconds in every phase (exit 130); a launcher killed under its ranks is
// recorded as what happened. Every process a test starts is waited for with a deadline and
// killed by its pid when it overstays.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "background_process.h"
#include "cli/cli_runner.h"
#include "pipestudio/core/planning/generators.h"

namespace {

using namespace ps::test;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

const char* kModel = "--model mlp:layers=4,hidden=16 --threads 1";

std::vector<nlohmann::json> events(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object()) out.push_back(j);
  }
  return out;
}

std::string freshSessionPath(const std::string& tag) {
  const std::string db = ::testing::TempDir() + tag + "_" + std::to_string(getpid()) + ".pssession";
  std::filesystem::remove(db);
  return db;
}

nlohmann::json onlyRun(const std::string& db, const std::string& target) {
  auto r = runCli("session list '" + db + "' --json", Stderr::Drop);
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  if (!j.is_object()) return {};
  for (const auto& run : j["runs"])
    if (run.value("target", "") == target) return run;
  return {};
}

pid_t rankPid(pid_t launcher, int rank) {
  for (pid_t c : Background::children(launcher))
    if (rankOf(c) == rank) return c;
  return -1;
}

// Waits (bounded) for the run to end; kills what is left of it when it does not.
bool endsWithin(Background& b, std::chrono::seconds limit) {
  if (b.waitFor(limit)) return true;
  b.killTree();
  return false;
}

}  // namespace

TEST(Hang, WaitCycleIsNamedPrintedStreamedAndStored) {
  // Rank 0's F0 output is dropped: rank 1 waits in F0 for it; rank 0 goes on and waits in B0 for
  // rank 1's gradient, which rank 1 sends only after F0. Each waits on the other.
  auto path = writeSchedule(ps::core::ScheduleKind::GPipe, 2, 2, "hang_cycle");
  const std::string db = freshSessionPath("hang_cycle");
  auto b = Background::start(
      "run " + path + " " + kModel +
          " --nproc 2 --timeout 3 --inject-fault drop:F0@s0 --events jsonl --session '" + db + "'",
      "hang_cycle");
  const auto t0 = Clock::now();
  ASSERT_TRUE(endsWithin(b, 60s)) << b.stderrText();
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(b.exitCode(), 1) << b.stderrText();
  EXPECT_LT(seconds, 30.0);
  const std::string cycle =
      "wait cycle: rank 1 waits in 1F0 for 0F0 on rank 0, which ran 0F0 (what it sent never arrived) and "
      "waits "
      "in 0B0 for 1B0 on rank 1, which rank 1 reaches only after 1F0, closing the cycle";
  const std::string err = b.stderrText();
  EXPECT_NE(err.find(cycle), std::string::npos) << err;
  // Every rank's place, one line each.
  EXPECT_NE(err.find("  rank 0: waits in 0B0 for 1B0 on rank 1 ("), std::string::npos) << err;
  EXPECT_NE(err.find("  rank 1: waits in 1F0 for 0F0 on rank 0 ("), std::string::npos) << err;
  // The stream: a `stuck` event per rank, then the error with the stuck steps as related ops.
  std::vector<nlohmann::json> stuck;
  std::optional<nlohmann::json> error, finished;
  for (const auto& e : events(b.stdoutText())) {
    if (e["type"] == "stuck") stuck.push_back(e);
    if (e["type"] == "error") error = e;
    if (e["type"] == "finished") finished = e;
  }
  ASSERT_EQ(stuck.size(), 2u) << b.stdoutText();
  EXPECT_EQ(stuck[0]["state"], "waiting");
  EXPECT_EQ(stuck[1]["action"], "1F0");
  EXPECT_EQ(stuck[1]["waits_for"], "0F0");
  EXPECT_EQ(stuck[1]["waits_on_device"], 0);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ((*error)["code"], "engine.timeout");
  EXPECT_NE((*error)["message"].get<std::string>().find(cycle), std::string::npos) << error->dump();
  EXPECT_EQ((*error)["related"], nlohmann::json::parse("[[1, 0], [0, 2]]")) << error->dump();
  ASSERT_TRUE(finished.has_value());
  EXPECT_EQ((*finished)["status"], "failed");
  // Stored: the failed run, its error naming the cycle, and where every rank stood.
  const auto run = onlyRun(db, "gloo");
  ASSERT_FALSE(run.is_null()) << db;
  EXPECT_EQ(run.value("status", ""), "failed") << run.dump();
  EXPECT_NE(run.value("error", "").find(cycle), std::string::npos) << run.dump();
}

TEST(Hang, StoppedRankEndsTheRunAtTimeoutNamedAndRecorded) {
  // kill -STOP of rank 2 of 4: its neighbours wait for it until --timeout, then the run fails,
  // naming the silent rank, with the error and finished events and the failed run recorded.
  // (Before, the launcher killed rank 0 while it gathered the reports: exit 137, nothing said.)
  auto path = writeSchedule(ps::core::ScheduleKind::OneFOneB, 4, 8, "hang_stopped");
  const std::string db = freshSessionPath("hang_stopped");
  auto b = Background::start("run " + path + " " + kModel +
                                 " --nproc 4 --iterations 100000 --timeout 5 --events jsonl --session '" +
                                 db + "'",
                             "hang_stopped");
  const bool running =
      waitUntil([&] { return b.stdoutText().find("\"type\":\"op\"") != std::string::npos; }, 90s);
  const pid_t victim = rankPid(b.pid, 2);
  if (!running || victim <= 0) {
    b.killTree();
    FAIL() << b.stderrText();
  }
  kill(victim, SIGSTOP);
  const auto t0 = Clock::now();
  const bool done = endsWithin(b, 60s);
  if (!done) kill(victim, SIGKILL);
  ASSERT_TRUE(done) << b.stderrText();
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(b.exitCode(), 1) << b.stderrText();
  EXPECT_LT(seconds, 5 + 15.0) << b.stderrText();  // the timeout, the reports, the ends
  EXPECT_TRUE(waitUntil([&] { return ended(victim); }, 5s));
  const std::string err = b.stderrText();
  EXPECT_NE(err.find("rank 2 (device 2) was stopped (SIGSTOP, or a debugger)"), std::string::npos) << err;
  EXPECT_NE(err.find("on rank 2, which is silent"), std::string::npos) << err;
  bool error = false, failed = false;
  for (const auto& e : events(b.stdoutText())) {
    if (e["type"] == "error") error = true;
    if (e["type"] == "finished") failed = e["status"] == "failed";
  }
  EXPECT_TRUE(error) << b.stdoutText();
  EXPECT_TRUE(failed) << b.stdoutText();
  const auto run = onlyRun(db, "gloo");
  EXPECT_EQ(run.value("status", ""), "failed") << run.dump();
  EXPECT_NE(run.value("error", "").find("rank 2"), std::string::npos) << run.dump();
}

TEST(LaunchedRun, SigtermAndSigintEndItWithinSecondsInEveryPhase) {
  // While the ranks start (loading, meeting) and while they run: exit 130 within seconds.
  auto path = writeSchedule(ps::core::ScheduleKind::OneFOneB, 4, 8, "cancel_phases");
  struct Phase {
    const char* name;
    int signal;
    bool waitForOps;
  };
  for (const Phase& ph : {Phase{"starting", SIGTERM, false}, Phase{"running", SIGTERM, true},
                          Phase{"starting", SIGINT, false}, Phase{"running", SIGINT, true}}) {
    SCOPED_TRACE(std::string(ph.name) + " " + (ph.signal == SIGTERM ? "SIGTERM" : "SIGINT"));
    auto b = Background::start(
        "run " + path + " " + kModel + " --nproc 4 --iterations 100000 --timeout 60 --events jsonl",
        "cancel_phases");
    if (ph.waitForOps) {
      if (!waitUntil([&] { return b.stdoutText().find("\"type\":\"op\"") != std::string::npos; }, 90s)) {
        b.killTree();
        FAIL() << b.stderrText();
      }
    } else {
      // The ranks exist but have not met yet.
      waitUntil([&] { return !Background::children(b.pid).empty(); }, 10s);
    }
    const std::vector<pid_t> ranks = Background::children(b.pid);
    kill(b.pid, ph.signal);
    const auto t0 = Clock::now();
    ASSERT_TRUE(endsWithin(b, 30s)) << b.stderrText();
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    EXPECT_EQ(b.exitCode(), 130) << b.stderrText();
    EXPECT_LT(seconds, 10.0);
    for (pid_t r : ranks) EXPECT_TRUE(waitUntil([&] { return ended(r); }, 5s)) << r;
  }
}

TEST(LaunchedRun, KilledLauncherIsRecordedAsLauncherLost) {
  // kill -9 of the launcher: its ranks cancel (the parent-death signal, the lifeline) and rank 0
  // records the run as cancelled because the launcher was lost, not as a failure blaming a rank.
  auto path = writeSchedule(ps::core::ScheduleKind::OneFOneB, 2, 4, "launcher_lost");
  const std::string db = freshSessionPath("launcher_lost");
  auto b = Background::start("run " + path + " " + kModel +
                                 " --nproc 2 --iterations 100000 --timeout 60 --events jsonl --session '" +
                                 db + "'",
                             "launcher_lost");
  const bool running =
      waitUntil([&] { return b.stdoutText().find("\"type\":\"op\"") != std::string::npos; }, 90s);
  const std::vector<pid_t> ranks = Background::children(b.pid);
  if (!running || ranks.size() != 2u) {
    b.killTree();
    FAIL() << b.stderrText();
  }
  kill(b.pid, SIGKILL);
  b.waitFor(5s);
  const bool gone = waitUntil([&] { return ended(ranks[0]) && ended(ranks[1]); }, 20s);
  for (pid_t r : ranks)
    if (!ended(r)) kill(r, SIGKILL);
  ASSERT_TRUE(gone);
  const auto run = onlyRun(db, "gloo");
  ASSERT_FALSE(run.is_null()) << "no run recorded in " << db;
  EXPECT_EQ(run.value("status", ""), "cancelled") << run.dump();
  EXPECT_NE(run.value("error", "").find("launcher lost"), std::string::npos) << run.dump();
  EXPECT_EQ(run.value("error", "").find("rank 1"), std::string::npos) << run.dump();
}
