// `pipestudio-cli compare PLAN DB:ID`: a measured run of a session against its plan, with the
// profile and partition its prediction used unless given.
#include <sys/wait.h>

#include <cstdio>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/sessions/recording.h"
#include "pipestudio/sessions/session_store.h"
#include "session_test_util.h"
#include "../cli_runner.h"

using namespace ps::sessions;
using namespace ps::sessions::test;

namespace {

using ps::test::CliResult;

CliResult runCli(const std::string& args, bool withStderr = false) {
  return ps::test::runCli(args, withStderr ? ps::test::Stderr::Merge : ps::test::Stderr::Drop);
}

const char* kPipe =
    "name \"1f1b\"\n"
    "devices 2\n"
    "stages 2\n"
    "microbatches 4\n"
    "placement linear\n"
    "\n"
    "device 0: F0 F1 B0 F2 B1 F3 B2 B3\n"
    "device 1: F0 B0 F1 B1 F2 B2 F3 B3\n";

// Four layers of F = 1, I = 1, W = 1 ms.
const char* kProfile = R"({"name": "uniform", "layers": [
  {"name": "l0", "forward_ms": 1, "backward_input_ms": 1, "backward_weight_ms": 1},
  {"name": "l1", "forward_ms": 1, "backward_input_ms": 1, "backward_weight_ms": 1},
  {"name": "l2", "forward_ms": 1, "backward_input_ms": 1, "backward_weight_ms": 1},
  {"name": "l3", "forward_ms": 1, "backward_input_ms": 1, "backward_weight_ms": 1}]})";

ps::core::Timeline simulated(const std::vector<int>& partition, const char* profileJson = kProfile) {
  auto plan = ps::core::parseDsl(kPipe);
  EXPECT_TRUE(plan);
  auto profile = ps::core::parseCostProfile(profileJson);
  EXPECT_TRUE(profile);
  auto model = ps::core::makeSimulationModel(*plan, *profile, partition);
  EXPECT_TRUE(model);
  auto t = ps::core::simulate(*plan, *model);
  EXPECT_TRUE(t);
  return *t;
}

// A session holding one measured run whose ops each took 1.25 x the prediction, recorded with
// partition 1,3 (stage 0: one layer, stage 1: three).
struct Fixture {
  std::string db;
  Id measured = 0;
  double predictedMakespan = 0;
};

Fixture makeSession(const std::filesystem::path& dir) {
  Fixture f;
  f.db = (dir / "s.db").string();
  MeasuredRunRecording r;
  r.scheduleName = "1f1b";
  r.pipeText = kPipe;
  r.profileName = "uniform";
  r.profileJson = kProfile;
  r.profileSource = ProfileSource::Profiled;
  r.predicted = simulated({1, 3});
  f.predictedMakespan = r.predicted->metrics.makespan;
  r.measured = *r.predicted;
  r.measured.source = ps::core::TimelineSource::Measured;
  for (auto& op : r.measured.ops) {
    op.start *= 1.25;
    op.end *= 1.25;
  }
  for (auto& t : r.measured.transfers) {
    t.start *= 1.25;
    t.end *= 1.25;
  }
  r.measured.metrics = ps::core::computeMetrics(r.measured);
  r.configJson = R"({"partition": [1, 3]})";
  auto rec = recordMeasuredRun(f.db, r);
  EXPECT_TRUE(rec) << (rec ? "" : rec.error().message);
  if (rec) f.measured = rec->measuredRunId;
  return f;
}

TEST(CompareSessionCli, UsesThePredictionsProfileAndTheRunsPartition) {
  auto dir = freshDir();
  auto f = makeSession(dir);
  writeBytes(dir / "plan.pipe", kPipe);
  auto r = runCli("compare " + (dir / "plan.pipe").string() + " " + f.db + ":" + std::to_string(f.measured) + " --json");
  ASSERT_EQ(r.exitCode, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  // Stage 0 has F = 1, B = 2; stage 1 F = 3, B = 6: not the balanced 2,2 split.
  EXPECT_EQ(j["partition"], nlohmann::json::array({1, 3}));
  EXPECT_NEAR(j["makespan_predicted"].get<double>(), f.predictedMakespan, 1e-6);
  EXPECT_NEAR(j["makespan_measured"].get<double>(), 1.25 * f.predictedMakespan, 1e-6);
  EXPECT_NEAR(j["relative_error"].get<double>(), 0.25, 1e-6);
  EXPECT_NE(j["profile"].get<std::string>().find("uniform"), std::string::npos);
  ASSERT_EQ(j["error_by_device"].size(), 2u);
  ASSERT_FALSE(j["error_by_kind"].empty());
  for (const auto& k : j["error_by_kind"]) EXPECT_NEAR(k["ratio"].get<double>(), 1.25, 1e-6) << k.dump();
  for (const auto& d : j["error_by_device"]) EXPECT_NEAR(d["ratio"].get<double>(), 1.25, 1e-6) << d.dump();
  EXPECT_EQ(j["matched"], 16);
}

TEST(CompareSessionCli, GivenProfileAndPartitionOverrideTheSessions) {
  auto dir = freshDir();
  auto f = makeSession(dir);
  writeBytes(dir / "plan.pipe", kPipe);
  // Twice as slow everywhere: F = 2, I = W = 2 per layer.
  std::string slow = kProfile;
  for (size_t pos; (pos = slow.find(": 1,")) != std::string::npos || (pos = slow.find(": 1}")) != std::string::npos;)
    slow.replace(pos, 3, ": 2");
  writeBytes(dir / "slow.json", slow);
  auto r = runCli("compare " + (dir / "plan.pipe").string() + " " + f.db + ":" + std::to_string(f.measured) +
                  " --profile " + (dir / "slow.json").string() + " --partition 2,2 --json");
  ASSERT_EQ(r.exitCode, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["partition"], nlohmann::json::array({2, 2}));
  EXPECT_NEAR(j["makespan_predicted"].get<double>(), simulated({2, 2}, slow.c_str()).metrics.makespan, 1e-6);
  EXPECT_NE(j["profile"].get<std::string>().find("slow.json"), std::string::npos);
}

TEST(CompareSessionCli, TextOutputNamesTheSessionRun) {
  auto dir = freshDir();
  auto f = makeSession(dir);
  writeBytes(dir / "plan.pipe", kPipe);
  const std::string run = f.db + ":" + std::to_string(f.measured);
  auto r = runCli("compare " + (dir / "plan.pipe").string() + " " + run);
  ASSERT_EQ(r.exitCode, 0) << r.out;
  EXPECT_NE(r.out.find("measured:  " + run + " (session run"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("error +25.0%"), std::string::npos) << r.out;
}

TEST(CompareSessionCli, MissingRunAndMixedInputsAreRefused) {
  auto dir = freshDir();
  auto f = makeSession(dir);
  writeBytes(dir / "plan.pipe", kPipe);
  auto r = runCli("compare " + (dir / "plan.pipe").string() + " " + f.db + ":999 --json", true);
  EXPECT_EQ(r.exitCode, 1) << r.out;
  EXPECT_NE(r.out.find("no run 999"), std::string::npos) << r.out;
  r = runCli("compare " + (dir / "plan.pipe").string() + " " + f.db + ":" + std::to_string(f.measured) + " " +
             (dir / "plan.pipe").string());
  EXPECT_EQ(r.exitCode, 2) << r.out;
}

}  // namespace
