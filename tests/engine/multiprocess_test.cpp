// pipestudio-cli run end to end: 2 local processes over c10d Gloo (launched by --nproc)
// give the unpipelined model's gradients; failures and lost transfers in one rank end the
// run within bounded time naming the op; invalid schedules are refused before starting.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/cli_runner.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/planning/generators.h"

namespace {

using ps::test::runCli;

std::string writeSchedule(ps::core::ScheduleKind kind, int devices, int micro, const std::string& name) {
  auto s = ps::core::generateSchedule(kind, {devices, micro, 0});
  EXPECT_TRUE(s.ok());
  std::string path = ::testing::TempDir() + name + ".pipe";
  std::ofstream(path) << ps::core::printDsl(*s);
  return path;
}

const char* kModel = "--model gpt:layers=2,hidden=16,heads=2,seq=4,vocab=16 --threads 1";

// How long a failing run may take from start to exit: three processes start (the launcher and two
// ranks, each loading libtorch), one fails, the others are ended. Under the sanitizers (make
// asan-test) each start takes several times longer, and a loaded 2-core machine has measured 16 s
// for the lost-transfer run there; the bound stays far below the time a missed failure would take.
constexpr double kFailedRunBoundSeconds = ps::test::kSanitized ? 60.0 : 20.0;

}  // namespace

TEST(MultiProcess, TwoGlooRanksGiveExactGradients1F1B) {
  auto path = writeSchedule(ps::core::ScheduleKind::OneFOneB, 2, 4, "mp_1f1b");
  auto r = runCli("run " + path + " " + kModel + " --nproc 2 --check-gradients --iterations 2 --timeout 30");
  EXPECT_EQ(r.exitCode, 0) << r.out;
  EXPECT_NE(r.out.find("gradient check: passed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("16 ops"), std::string::npos) << r.out;  // both ranks' ops in the timeline
}

TEST(MultiProcess, TwoGlooRanksGiveExactGradientsZeroBubble) {
  auto path = writeSchedule(ps::core::ScheduleKind::ZBH1, 2, 4, "mp_zbh1");
  auto r = runCli("run " + path + " " + kModel + " --nproc 2 --check-gradients --timeout 30");
  EXPECT_EQ(r.exitCode, 0) << r.out;
  EXPECT_NE(r.out.find("gradient check: passed"), std::string::npos) << r.out;
}

TEST(MultiProcess, EventStreamCarriesEveryRanksOpsAndMemory) {
  // Rank 0 streams the events; the other rank's ops and memory of the measured iteration must
  // reach the stream too (the GUI and remote runs read only the stream).
  auto path = writeSchedule(ps::core::ScheduleKind::OneFOneB, 2, 4, "mp_events");
  auto r = runCli("run " + path + " " + kModel +
                  " --nproc 2 --warmup 1 --iterations 1 --events jsonl --timeout 30");
  ASSERT_EQ(r.exitCode, 0) << r.out;
  std::map<int, int> opsPerDevice;
  std::map<int, int> memoryPerDevice;
  int finishedAt = -1, lastOpAt = -1, line = 0;
  std::istringstream in(r.out);
  for (std::string text; std::getline(in, text); ++line) {
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) continue;
    const std::string type = j.value("type", "");
    if (type == "op" && j.value("iteration", -1) == 1) {
      ++opsPerDevice[j.value("device", -1)];
      lastOpAt = line;
      EXPECT_LE(j.value("start_ms", 0.0), j.value("end_ms", -1.0)) << text;
    }
    if (type == "memory" && j.value("iteration", -1) == 1) ++memoryPerDevice[j.value("device", -1)];
    if (type == "finished") finishedAt = line;
  }
  // 1F1B, 4 micro-batches: 4 F and 4 B on each device, each once, before "finished".
  EXPECT_EQ(opsPerDevice[0], 8) << r.out;
  EXPECT_EQ(opsPerDevice[1], 8) << r.out;
  EXPECT_EQ(opsPerDevice.size(), 2u) << r.out;
  EXPECT_GT(memoryPerDevice[1], 0) << r.out;
  EXPECT_GT(finishedAt, lastOpAt);
}

TEST(MultiProcess, ExceptionInOneRankFailsTheRunNamingTheOp) {
  auto path = writeSchedule(ps::core::ScheduleKind::OneFOneB, 2, 4, "mp_fail");
  auto r = runCli("run " + path + " " + kModel + " --nproc 2 --timeout 120 --inject-fault throw:B1@s1");
  EXPECT_EQ(r.exitCode, 1) << r.out;
  EXPECT_NE(r.out.find("device 1 at B1@s1: injected failure"), std::string::npos) << r.out;
  EXPECT_LT(r.seconds, kFailedRunBoundSeconds);  // well under the 120 s transfer timeout
}

TEST(MultiProcess, LostTransferTimesOutNamingOpAndPeer) {
  auto path = writeSchedule(ps::core::ScheduleKind::GPipe, 2, 2, "mp_drop");
  auto r = runCli("run " + path + " " + kModel + " --nproc 2 --timeout 2 --inject-fault drop:F0@s0");
  EXPECT_EQ(r.exitCode, 1) << r.out;
  EXPECT_NE(r.out.find("device 1 at F0@s1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("from stage 0 on device 0"), std::string::npos) << r.out;
  EXPECT_LT(r.seconds, kFailedRunBoundSeconds);
}

TEST(RunCommand, ThreadsRunWritesEventsAndTrace) {
  auto path = writeSchedule(ps::core::ScheduleKind::ZBH1, 2, 2, "cli_events");
  std::string trace = ::testing::TempDir() + "cli_events_trace.json";
  auto r = runCli("run " + path + " " + kModel + " --events jsonl --check-gradients --trace " + trace);
  EXPECT_EQ(r.exitCode, 0) << r.out;
  EXPECT_NE(r.out.find("{\"device\":\"cpu\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"type\":\"started\""), std::string::npos);
  EXPECT_NE(r.out.find("\"type\":\"op\""), std::string::npos);
  EXPECT_NE(r.out.find("\"type\":\"finished\""), std::string::npos);
  EXPECT_NE(r.out.find("\"passed\":true"), std::string::npos);
  std::ifstream in(trace);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("traceEvents"), std::string::npos);
}

TEST(RunCommand, InvalidScheduleIsRefusedBeforeStarting) {
  std::string path = ::testing::TempDir() + "cli_invalid.pipe";
  auto s = ps::core::generateSchedule(ps::core::ScheduleKind::GPipe, {2, 2, 0});
  ASSERT_TRUE(s.ok());
  s->devices[1].pop_back();  // a backward goes missing
  std::ofstream(path) << ps::core::printDsl(*s);
  auto r = runCli("run " + path + " " + kModel + " --events jsonl");
  EXPECT_EQ(r.exitCode, 1) << r.out;
  EXPECT_NE(r.out.find("\"type\":\"error\""), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\"type\":\"started\""), std::string::npos) << r.out;
}

TEST(RunCommand, UsageErrors) {
  EXPECT_EQ(runCli("run").exitCode, 2);
  EXPECT_EQ(runCli("run x.pipe").exitCode, 2);  // no --model
  EXPECT_EQ(runCli("run x.pipe --model resnet").exitCode, 2);
  EXPECT_EQ(runCli("run x.pipe --model mlp --events xml").exitCode, 2);
}
