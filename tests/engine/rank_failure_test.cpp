// Multi-process runs when a process goes away: kill -9 of one rank (launched or started by
// hand), the launcher killed under its ranks, rendezvous bounds, cancel. Every process the
// tests start is waited for with a deadline and killed (by its pid) when it overstays.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "background_process.h"
#include "cli/cli_runner.h"
#include "pipestudio/core/io/cluster.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/planning/generators.h"
#include "pipestudio/engine/launcher.h"

namespace {

using namespace ps::test;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::vector<nlohmann::json> events(const std::string& text, bool& allLinesWhole) {
  std::vector<nlohmann::json> out;
  allLinesWhole = true;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      allLinesWhole = false;
      continue;
    }
    out.push_back(j);
  }
  if (!text.empty() && text.back() != '\n') allLinesWhole = false;
  return out;
}

nlohmann::json sessionRuns(const std::string& db) {
  auto r = ps::test::runCli("session list '" + db + "' --json", ps::test::Stderr::Drop);
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  return j.is_object() ? j["runs"] : nlohmann::json::array();
}

const char* kModel = "--model mlp:layers=4,hidden=16 --threads 1";

// Starts a long --nproc 4 run and returns once rank 0 streams measured ops.
Background startLongRun(const std::string& tag, const std::string& db) {
  auto path = writeSchedule(ps::core::ScheduleKind::OneFOneB, 4, 8, tag);
  auto b = Background::start("run " + path + " " + kModel +
                                 " --nproc 4 --iterations 100000 --timeout 60 --events jsonl --session '" +
                                 db + "'",
                             tag);
  const bool running =
      waitUntil([&] { return b.stdoutText().find("\"type\":\"op\"") != std::string::npos; }, 90s);
  EXPECT_TRUE(running) << b.stderrText();
  return b;
}

pid_t rankPid(pid_t launcher, int rank) {
  for (pid_t c : Background::children(launcher))
    if (rankOf(c) == rank) return c;
  return -1;
}

void expectFailedRunInSession(const std::string& db) {
  auto runs = sessionRuns(db);
  bool found = false;
  for (const auto& r : runs)
    if (r.value("target", "") == "gloo") {
      found = true;
      EXPECT_EQ(r.value("status", ""), "failed") << r.dump();
      EXPECT_GT(r.value("opCount", 0), 0) << r.dump();  // the partial timeline
    }
  EXPECT_TRUE(found) << runs.dump();
}

// A session file of this process that does not exist yet.
std::string freshSessionPath(const std::string& tag) {
  const std::string db = ::testing::TempDir() + tag + "_" + std::to_string(getpid()) + ".pssession";
  std::filesystem::remove(db);
  return db;
}

// SIGKILLs `victim` and waits (30 s at most) for the run to end: the seconds that took, or
// nothing when it did not end (the run is then killed).
std::optional<double> killAndWait(Background& b, pid_t victim) {
  const auto t0 = Clock::now();
  kill(victim, SIGKILL);
  const bool done = b.waitFor(30s);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!done) {
    b.killTree();
    return std::nullopt;
  }
  return seconds;
}

}  // namespace

TEST(RankFailure, KillNineOfOneRankFailsTheRunAtOnceNamingRankDeviceAndSignal) {
  const std::string db = freshSessionPath("kill_rank2");
  auto b = startLongRun("kill_rank2", db);
  const pid_t victim = rankPid(b.pid, 2);
  ASSERT_GT(victim, 0);
  const auto seconds = killAndWait(b, victim);
  ASSERT_TRUE(seconds) << b.stderrText();
  EXPECT_EQ(b.exitCode(), 1) << b.stderrText();
  EXPECT_LT(*seconds, 10.0);  // not the 60 s --timeout
  const std::string err = b.stderrText();
  EXPECT_NE(err.find("rank 2 (device 2) was killed by SIGKILL (signal 9)"), std::string::npos) << err;
  EXPECT_EQ(err.find("Connection reset by peer"), std::string::npos) << err;
  EXPECT_EQ(err.find("  loss:"), std::string::npos) << err;  // no partial loss for a failed run
  EXPECT_EQ(err.find("%"), std::string::npos) << err;        // nor a prediction error of a partial makespan
  bool whole = false;
  auto evs = events(b.stdoutText(), whole);
  EXPECT_TRUE(whole) << b.stdoutText();
  bool error = false, failed = false;
  for (const auto& e : evs) {
    if (e["type"] == "error") error = true;
    if (e["type"] == "finished") failed = e["status"] == "failed";
  }
  EXPECT_TRUE(error);
  EXPECT_TRUE(failed);
  expectFailedRunInSession(db);
}

TEST(RankFailure, KillNineOfRankZeroLeavesTheLauncherToReport) {
  const std::string db = freshSessionPath("kill_rank0");
  auto b = startLongRun("kill_rank0", db);
  const pid_t victim = rankPid(b.pid, 0);
  const std::vector<pid_t> ranks = Background::children(b.pid);
  ASSERT_GT(victim, 0);
  const auto seconds = killAndWait(b, victim);
  ASSERT_TRUE(seconds) << b.stderrText();
  EXPECT_EQ(b.exitCode(), 1) << b.stderrText();
  EXPECT_LT(*seconds, 10.0);
  EXPECT_NE(b.stderrText().find("rank 0 (device 0) was killed by SIGKILL (signal 9)"), std::string::npos)
      << b.stderrText();
  bool whole = false;
  auto evs = events(b.stdoutText(), whole);
  EXPECT_TRUE(whole) << b.stdoutText();
  ASSERT_GE(evs.size(), 2u);
  EXPECT_EQ(evs[evs.size() - 2]["type"], "error");
  EXPECT_EQ(evs[evs.size() - 2]["code"], "engine.rank-died");
  EXPECT_EQ(evs[evs.size() - 2]["device"], 0);
  EXPECT_EQ(evs.back()["type"], "finished");
  EXPECT_EQ(evs.back()["status"], "failed");
  expectFailedRunInSession(db);
  // The survivors were ended too.
  EXPECT_EQ(ranks.size(), 4u);
  for (pid_t c : ranks) EXPECT_TRUE(ended(c)) << c;
}

TEST(RankFailure, RanksStartedByHandBlameTheDeadPeer) {
  auto path = writeSchedule(ps::core::ScheduleKind::OneFOneB, 2, 4, "hand_kill");
  const int port = ps::core::pickRendezvousPort();
  ASSERT_GT(port, 0);
  auto env = [&](int rank) {
    return std::vector<std::pair<std::string, std::string>>{{"RANK", std::to_string(rank)},
                                                            {"WORLD_SIZE", "2"},
                                                            {"MASTER_ADDR", "127.0.0.1"},
                                                            {"MASTER_PORT", std::to_string(port)}};
  };
  const std::string args = "run " + path + " " + kModel + " --iterations 100000 --timeout 60 --events jsonl";
  auto r0 = Background::start(args, "hand_kill_r0", env(0));
  auto r1 = Background::start(args, "hand_kill_r1", env(1));
  const bool running =
      waitUntil([&] { return r0.stdoutText().find("\"type\":\"op\"") != std::string::npos; }, 90s);
  if (!running) {
    r0.killTree();
    r1.killTree();
    FAIL() << r0.stderrText() << r1.stderrText();
  }
  kill(r1.pid, SIGKILL);
  r1.waitFor(5s);
  const auto t0 = Clock::now();
  const bool done = r0.waitFor(30s);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!done) r0.killTree();
  ASSERT_TRUE(done);
  EXPECT_EQ(r0.exitCode(), 1);
  EXPECT_LT(seconds, 10.0);
  const std::string err = r0.stderrText();
  EXPECT_NE(err.find("rank 1 (device 1) ended without reporting an error"), std::string::npos) << err;
  EXPECT_EQ(err.find("Connection reset by peer"), std::string::npos) << err;
}

TEST(RankFailure, RanksEndWhenTheirLauncherIsKilled) {
  auto path = writeSchedule(ps::core::ScheduleKind::OneFOneB, 2, 4, "kill_launcher");
  auto b = Background::start(
      "run " + path + " " + kModel + " --nproc 2 --iterations 100000 --timeout 60 --events jsonl",
      "kill_launcher");
  const bool running =
      waitUntil([&] { return b.stdoutText().find("\"type\":\"op\"") != std::string::npos; }, 90s);
  std::vector<pid_t> ranks = Background::children(b.pid);
  if (!running || ranks.size() != 2u) {
    b.killTree();
    FAIL() << b.stderrText();
  }
  kill(b.pid, SIGKILL);
  b.waitFor(5s);
  const bool gone = waitUntil([&] { return ended(ranks[0]) && ended(ranks[1]); }, 15s);
  for (pid_t r : ranks)
    if (!ended(r)) kill(r, SIGKILL);
  EXPECT_TRUE(gone);
}

TEST(RankFailure, TimeoutDoesNotBoundTheRendezvous) {
  // Rank 1 starts three seconds after rank 0; the receive timeout is one second. The
  // rendezvous has its own bound (--connect-timeout, 60 s by default), so the run succeeds.
  auto path = writeSchedule(ps::core::ScheduleKind::OneFOneB, 2, 2, "late_rank");
  const int port = ps::core::pickRendezvousPort();
  auto env = [&](int rank) {
    return std::vector<std::pair<std::string, std::string>>{
        {"RANK", std::to_string(rank)}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", std::to_string(port)}};
  };
  const std::string args = "run " + path + " " + kModel + " --timeout 2";
  auto r0 = Background::start(args, "late_rank_r0", env(0));
  std::this_thread::sleep_for(3s);
  auto r1 = Background::start(args, "late_rank_r1", env(1));
  const bool done = r0.waitFor(60s) && r1.waitFor(30s);
  if (!done) {
    r0.killTree();
    r1.killTree();
  }
  ASSERT_TRUE(done);
  EXPECT_EQ(r0.exitCode(), 0) << r0.stderrText();
  EXPECT_EQ(r1.exitCode(), 0) << r1.stderrText();
}

TEST(RankFailure, ConnectTimeoutNamesTheRendezvousInOneLine) {
  // Rank 1 never comes: rank 0 gives up after --connect-timeout, in one line.
  auto path = writeSchedule(ps::core::ScheduleKind::OneFOneB, 2, 2, "lonely_rank");
  const int port = ps::core::pickRendezvousPort();
  auto b = Background::start("run " + path + " " + kModel + " --connect-timeout 1", "lonely_rank",
                             {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", std::to_string(port)}});
  const bool done = b.waitFor(30s);
  if (!done) b.killTree();
  ASSERT_TRUE(done);
  EXPECT_EQ(b.exitCode(), 1);
  const std::string err = b.stderrText();
  EXPECT_NE(err.find("--connect-timeout 1.00 s"), std::string::npos) << err;
  EXPECT_EQ(err.find("Exception raised from"), std::string::npos) << err;
  EXPECT_EQ(err.find("frame #"), std::string::npos) << err;
}

TEST(RankFailure, TinyTimeoutGivesOneClearLineNoBacktrace) {
  auto path = writeSchedule(ps::core::ScheduleKind::OneFOneB, 2, 4, "tiny_timeout");
  auto r = ps::test::runCli("run " + path + " " + kModel + " --nproc 2 --timeout 0.001",
                            ps::test::Stderr::Separate);
  EXPECT_NE(r.exitCode, 0);
  EXPECT_EQ(r.err.find("Exception raised from"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("frame #"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("000000 s"), std::string::npos) << r.err;  // "0.001 s", not "0.001000 s"
  EXPECT_NE(r.err.find("timed out after 0.001 s"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("ended without reporting"), std::string::npos) << r.err;  // nobody died
  EXPECT_LT(r.seconds, 60.0);
}

TEST(RunCancel, CancelledRunExits130WithoutThePartialLoss) {
  auto path = writeSchedule(ps::core::ScheduleKind::OneFOneB, 2, 4, "cancel_loss");
  const std::string db = freshSessionPath("cancel_loss");
  auto b = Background::start(
      "run " + path + " " + kModel + " --iterations 100000 --events jsonl --session '" + db + "'",
      "cancel_loss");
  // Wait for the third iteration, then interrupt as Ctrl-C would.
  const bool running =
      waitUntil([&] { return b.stdoutText().find("\"iteration\":2,") != std::string::npos; }, 90s);
  if (!running) {
    b.killTree();
    FAIL() << b.stderrText();
  }
  kill(b.pid, SIGINT);
  const bool done = b.waitFor(30s);
  if (!done) b.killTree();
  ASSERT_TRUE(done);
  EXPECT_EQ(b.exitCode(), 130) << b.stderrText();
  bool whole = false;
  auto evs = events(b.stdoutText(), whole);
  int lastProgress = -1;
  std::optional<nlohmann::json> fin;
  for (const auto& e : evs) {
    if (e["type"] == "progress") lastProgress = e["iteration"].get<int>();
    if (e["type"] == "finished") fin = e;
  }
  ASSERT_TRUE(fin.has_value());
  EXPECT_EQ((*fin)["status"], "cancelled");
  // Only the iterations that completed: the cancelled one (the last progress) has no loss. A
  // cancel can also land after an iteration ends and before the next one's progress event; then
  // every started iteration completed. Without an optimizer every iteration repeats the same
  // step, so each reported loss is the whole loss, equal to the first: a partial sum of the
  // cancelled iteration would differ.
  const auto& losses = (*fin)["losses"];
  EXPECT_GE(losses.size(), static_cast<size_t>(lastProgress)) << fin->dump();
  EXPECT_LE(losses.size(), static_cast<size_t>(lastProgress) + 1) << fin->dump();
  for (const auto& l : losses)
    EXPECT_NEAR(l.get<double>(), losses[0].get<double>(), 1e-6 * std::abs(losses[0].get<double>()))
        << fin->dump();
  EXPECT_EQ(b.stderrText().find("  loss:"), std::string::npos);
}

TEST(RunSession, StartedIsTheRunStartAndWallTimeTheRunsDuration) {
  auto path = writeSchedule(ps::core::ScheduleKind::OneFOneB, 2, 4, "wall_time");
  const std::string db = freshSessionPath("wall_time");
  const auto before = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  // Starting the engine (loading libtorch) is not part of the run; on a loaded machine it can
  // take longer than the run itself, so it is measured and taken off the command's time.
  const auto help = ps::test::runCli("run --help");
  auto r = ps::test::runCli("run " + path +
                            " --model mlp:layers=4,hidden=256 --microbatch-size 64 --threads 1 "
                            "--iterations 40 --session '" +
                            db + "'");
  ASSERT_EQ(r.exitCode, 0) << r.out;
  auto runs = sessionRuns(db);
  bool found = false;
  for (const auto& run : runs)
    if (run.value("target", "") == "cpu") {
      found = true;
      const auto started = run["startedMs"].get<std::int64_t>();
      const auto endedMs = run["endedMs"].get<std::int64_t>();
      EXPECT_GE(started, before);
      // The run itself took most of the command's time; recording it takes milliseconds.
      EXPECT_GT(static_cast<double>(endedMs - started), 0.3 * (r.seconds - help.seconds) * 1000)
          << run.dump() << " " << r.seconds << " " << help.seconds;
      EXPECT_LE(static_cast<double>(endedMs - started), r.seconds * 1000 + 50)
          << run.dump() << " " << r.seconds;
    }
  EXPECT_TRUE(found) << runs.dump();
}

TEST(RunCommand, InjectFaultOnAnOpNotInTheScheduleIsAUsageError) {
  auto path = writeSchedule(ps::core::ScheduleKind::OneFOneB, 2, 2, "fault_missing_op");
  auto r = ps::test::runCli("run " + path + " " + kModel + " --inject-fault throw:F9@s0");
  EXPECT_EQ(r.exitCode, 2) << r.out;
  EXPECT_NE(r.out.find("F9@s0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no op"), std::string::npos) << r.out;
}

TEST(RunCommand, FailedRunPrintsNoLossNorPredictionError) {
  auto path = writeSchedule(ps::core::ScheduleKind::OneFOneB, 2, 4, "failed_no_loss");
  const std::string db = freshSessionPath("failed_no_loss");
  auto r = ps::test::runCli("run " + path + " " + kModel +
                            " --iterations 3 --inject-fault throw:B3@s0 --session '" + db + "'");
  EXPECT_EQ(r.exitCode, 1) << r.out;
  EXPECT_NE(r.out.find("device 0 at B3@s0: injected failure"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("  loss:"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("%"), std::string::npos) << r.out;  // no "error -100%" against the prediction
  EXPECT_NE(r.out.find("measured run"), std::string::npos) << r.out;  // still recorded
}

TEST(RunCommand, HelpMentionsTorchScriptTorchrunAndSlurm) {
  auto r = ps::test::runCli("run --help");
  EXPECT_NE(r.out.find("torchscript:path="), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("torch.jit.script"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--no-python"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("srun"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("LOCAL_WORLD_SIZE"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("SLURM_PROCID"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--connect-timeout"), std::string::npos) << r.out;
}
