// pipestudio-cli compare: a plan against torch.profiler traces (the hand-computed case of
// tests/core/comparison_test.cpp), against a measured run of a session (`PLAN DB:ID`, with the
// profile and partition its prediction used unless given), and against hostile traces.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_runner.h"
#include "cli/hostile_cli.h"
#include "fixtures/schedules.h"
#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/sessions/recording.h"
#include "pipestudio/sessions/session_store.h"
#include "sessions/session_test_util.h"

using namespace ps::sessions;
using namespace ps::sessions::test;
using namespace ps::test;

namespace {

CliResult cli(const std::string& args, bool withStderr = false) {
  return runCli(args, withStderr);
}

const char* kPipe = ps::test::kOneFOneBPipe;

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
  auto r = cli("compare " + (dir / "plan.pipe").string() + " " + f.db + ":" + std::to_string(f.measured) +
               " --json");
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
  for (size_t pos;
       (pos = slow.find(": 1,")) != std::string::npos || (pos = slow.find(": 1}")) != std::string::npos;)
    slow.replace(pos, 3, ": 2");
  writeBytes(dir / "slow.json", slow);
  auto r = cli("compare " + (dir / "plan.pipe").string() + " " + f.db + ":" + std::to_string(f.measured) +
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
  auto r = cli("compare " + (dir / "plan.pipe").string() + " " + run);
  ASSERT_EQ(r.exitCode, 0) << r.out;
  EXPECT_NE(r.out.find("measured:  " + run + " (session run"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("error +25.0%"), std::string::npos) << r.out;
}

TEST(CompareSessionCli, MissingRunAndMixedInputsAreRefused) {
  auto dir = freshDir();
  auto f = makeSession(dir);
  writeBytes(dir / "plan.pipe", kPipe);
  auto r = cli("compare " + (dir / "plan.pipe").string() + " " + f.db + ":999 --json", true);
  EXPECT_EQ(r.exitCode, 1) << r.out;
  EXPECT_NE(r.out.find("no run 999"), std::string::npos) << r.out;
  r = cli("compare " + (dir / "plan.pipe").string() + " " + f.db + ":" + std::to_string(f.measured) + " " +
          (dir / "plan.pipe").string());
  EXPECT_EQ(r.exitCode, 2) << r.out;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// pipestudio-cli compare on the same case: tests/data/traces/synthetic_* hold the plan and,
// hand-written in torch.profiler's format, the traces of the measured run of
// tests/core/comparison_test.cpp (one file per rank, GPU-side PP: ranges, host-side twins and
// SEND/RECV, kernels, cpu_ops, memory events, metadata). Real traces: tests/data/traces/torch-2.11.0.

namespace {

std::string traces() {
  std::string d = std::string(PIPESTUDIO_TEST_DATA_DIR) + "/traces/";
  return d + "synthetic_1f1b_d2_m2.pipe --cost F=1,B=2 " + d + "synthetic_1f1b_d2_m2_rank0.pt.trace.json " +
         d + "synthetic_1f1b_d2_m2_rank1.pt.trace.json";
}

}  // namespace

TEST(CompareCli, TextReportsMakespansTablesPathAndBubbles) {
  CliResult r = cli("compare " + traces());
  ASSERT_EQ(r.exitCode, 0) << r.out;
  EXPECT_NE(r.out.find("predicted 9.000 ms, measured 11.400 ms, error +26.7%"), std::string::npos) << r.out;
  // The trace's SEND/RECV make the plan the runtime's lowering of it: the data a consumer waits
  // for leaves with its SEND.
  EXPECT_NE(r.out.find("critical path: 8 ops"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("waiting for SEND_B0@s1 on device 1 before B0@s0"), std::string::npos) << r.out;
}

TEST(CompareCli, JsonMatchesTheHandComputedCase) {
  CliResult r = cli("compare " + traces() + " --json");
  ASSERT_EQ(r.exitCode, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j["makespan_predicted"].get<double>(), 9.0, 1e-6);
  EXPECT_NEAR(j["makespan_measured"].get<double>(), 11.4, 1e-6);
  EXPECT_NEAR(j["relative_error"].get<double>(), 2.4 / 9.0, 1e-6);
  // The host-side SEND/RECV are matched: the plan is compared as PyTorch lowers it (the trace
  // has no UNSHARD/RESHARD/REDUCE_GRAD, so neither has the plan).
  EXPECT_EQ(j["matched"], 16);
  EXPECT_EQ(j["unmatched_planned"].size(), 0u);
  EXPECT_EQ(j["unmatched_measured"].size(), 0u);
  ASSERT_EQ(j["error_by_kind"].size(), 6u);
  EXPECT_EQ(j["error_by_kind"][1]["kind"], "B");
  EXPECT_NEAR(j["error_by_kind"][1]["ratio"].get<double>(), 1.25, 1e-6);
  // SEND/RECV take no planned time; their 0.02 ms each counts in the measured sums.
  EXPECT_NEAR(j["error_by_device"][1]["ratio"].get<double>(), 8.08 / 6.0, 1e-5);
  const auto& steps = j["critical_path"]["steps"];
  ASSERT_EQ(steps.size(), 8u);
  EXPECT_EQ(steps[0]["op"], "F0@s0");
  EXPECT_EQ(steps[1]["op"], "SEND_F0@s0");
  EXPECT_EQ(steps[4]["via"], "device");
  EXPECT_EQ(steps[7]["op"], "B1@s0");
  EXPECT_NEAR(j["bubbles"][0]["idle_ms"].get<double>(), 5.4, 1e-6);
  // A wait ends with the SEND that carries the data, 0.08 ms before its B ends on device 1.
  EXPECT_NEAR(j["bubbles"][0]["dependency_ms"].get<double>(), 4.84, 1e-6);
  EXPECT_EQ(j["bubbles"][0]["waited_on"][0]["device"], 1);
  EXPECT_NEAR(j["bubbles"][1]["tail_ms"].get<double>(), 2.2, 1e-6);
}

TEST(CompareCli, DirectoryOfRankFiles) {
  // tests/data/traces/synthetic_run_dir holds copies of the two rank files (nothing else).
  std::string d = std::string(PIPESTUDIO_TEST_DATA_DIR) + "/traces/";
  CliResult r =
      cli("compare " + d + "synthetic_1f1b_d2_m2.pipe --cost F=1,B=2 --json " + d + "synthetic_run_dir");
  ASSERT_EQ(r.exitCode, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j["makespan_measured"].get<double>(), 11.4, 1e-6);
  EXPECT_EQ(j["matched"], 16);
}

TEST(CompareCli, RealTorchTracesMatchEveryAction) {
  // tests/data/traces/torch-2.11.0: PipeStudio's schedules run in PyTorch's runtime under
  // torch.profiler. Against the plan as designed (compare lowers it as the runtime did) and
  // against the CSV that ran, every action matches: none planned and not measured, none
  // measured and not planned.
  const std::string root = std::string(PIPESTUDIO_TEST_DATA_DIR) + "/traces/torch-2.11.0/";
  int compared = 0;
  for (const char* run : {"zb-v_d2_m4", "interleaved-1f1b_d2_v4_m2", "1f1b_d4_m4"}) {
    const std::string dir = root + run + "/";
    std::string csv = dir + "plan_compute_only.csv";
    if (!std::filesystem::exists(csv)) csv = dir + "plan_compute_comms.csv";
    for (const std::string& plan : {dir + "plan.pipe", csv}) {
      SCOPED_TRACE(plan);
      std::string args = "compare " + plan;
      args += " " + dir + " --cost F=1,I=1,W=1 --json";
      CliResult r = cli(args, false);
      ASSERT_EQ(r.exitCode, 0) << r.out;
      auto j = nlohmann::json::parse(r.out);
      EXPECT_EQ(j["unmatched_planned"].size(), 0u) << j["unmatched_planned"].dump();
      EXPECT_EQ(j["unmatched_measured"].size(), 0u) << j["unmatched_measured"].dump();
      EXPECT_EQ(j["matched"], j["measured"]["ops"]);
      EXPECT_GT(j["matched"].get<int>(), 40);
      EXPECT_GT(j["makespan_measured"].get<double>(), 0.0);
      ++compared;
    }
  }
  EXPECT_EQ(compared, 6);
}

TEST(CompareCli, ActionsPlannedToTakeNoTimeHaveNoRatioOrDeviation) {
  // Posted (--comm posted, no transfer time) the CSV's SEND/RECV are planned at 0 ms: their rows
  // print "-" for the ratio and the deviations, not 0 and 0.0% (there is nothing to divide by).
  const std::string dir = std::string(PIPESTUDIO_TEST_DATA_DIR) + "/traces/torch-2.11.0/1f1b_d4_m4/";
  CliResult r =
      cli("compare " + dir + "plan_compute_comms.csv " + dir + " --cost F=1,B=2 --comm posted", false);
  ASSERT_EQ(r.exitCode, 0) << r.out;
  bool sawSend = false, sawF = false;
  std::istringstream lines(r.out);
  for (std::string l; std::getline(lines, l);) {
    std::istringstream words(l);
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    if (w.size() != 8) continue;
    if (w[0] == "SEND_F" || w[0] == "RECV_F" || w[0] == "SEND_B" || w[0] == "RECV_B") {
      sawSend = true;
      EXPECT_EQ(w[1], "12") << l;
      EXPECT_GT(std::stod(w[3]), 0.0) << l;  // measured
      for (size_t i = 4; i < 8; ++i) EXPECT_EQ(w[i], "-") << l;
    }
    if (w[0] == "F") {
      sawF = true;
      EXPECT_NE(w[4], "-") << l;
      EXPECT_NE(w[5], "-") << l;
    }
  }
  EXPECT_TRUE(sawSend) << r.out;
  EXPECT_TRUE(sawF) << r.out;
}

TEST(CompareCli, ScaledAlignment) {
  CliResult r = cli("compare " + traces() + " --json --align scaled");
  ASSERT_EQ(r.exitCode, 0);
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["alignment"], "scaled");
  EXPECT_NEAR(j["scale"].get<double>(), 9.0 / 11.4, 1e-6);
  double lastEnd = 0;
  for (const auto& m : j["matches"]) lastEnd = std::max(lastEnd, m["measured_end"].get<double>());
  EXPECT_NEAR(lastEnd, 9.0, 1e-5);
}

TEST(CompareCli, MalformedTraceAndUsageErrors) {
  std::string d = std::string(PIPESTUDIO_TEST_DATA_DIR) + "/traces/";
  CliResult bad =
      cli("compare " + d + "synthetic_1f1b_d2_m2.pipe --cost F=1,B=2 " + d + "synthetic_malformed_rank0.json",
          true);
  EXPECT_EQ(bad.exitCode, 1);
  EXPECT_NE(bad.out.find("synthetic_malformed_rank0.json:3:"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("not valid JSON"), std::string::npos) << bad.out;

  EXPECT_EQ(
      cli("compare " + d + "synthetic_1f1b_d2_m2.pipe " + d + "synthetic_1f1b_d2_m2_rank0.pt.trace.json")
          .exitCode,
      2);  // no profile
  EXPECT_EQ(cli("compare " + traces() + " --align sideways").exitCode, 2);
  EXPECT_EQ(cli("compare " + d + "synthetic_1f1b_d2_m2.pipe --cost F=1 " + d + "missing.json").exitCode, 2);
}

// ---- hostile traces

TEST_F(HostileCli, CompareRefusesAnIntMaxRankWithItsLine) {
  auto plan = write("plan.pipe", kHostilePlan);
  auto trace = write("t.json",
                     "{\n\"distributedInfo\":{\"rank\":2147483647},\n\"traceEvents\":[\n"
                     "{\"ph\":\"X\",\"name\":\"PP:0F0\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":5}]}\n");
  auto r = runCli("compare " + plan + " " + trace + " --cost F=1", Stderr::Separate);
  expectRefused(r, trace + ":2:", "out of range");
}

TEST_F(HostileCli, CompareRefusesAHugeRankInTheFileName) {
  auto plan = write("plan.pipe", kHostilePlan);
  auto trace = write("x.rank200000000.json",
                     "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"PP:0F0\",\"pid\":1,\"tid\":1,"
                     "\"ts\":0,\"dur\":5}]}");
  auto r = runCli("compare " + plan + " " + trace + " --cost F=1", Stderr::Separate);
  expectRefused(r, "x.rank200000000.json", "200000000");
}

TEST_F(HostileCli, HostileTracesAreRefusedWithinTwoGigabytes) {
  // Each once sized per-rank arrays from its rank (gigabytes, or bad_alloc): under a 2 GiB
  // address-space limit the CLI must still answer with exit 1 and the reason.
  auto plan = write("plan.pipe", kHostilePlan);
  const std::string event = R"({"ph":"X","name":"PP:0F0","pid":1,"tid":1,"ts":0,"dur":5)";
  const std::vector<std::pair<std::string, std::string>> traces = {
      {"a.json", "{\"traceEvents\":[" + event + ",\"args\":{\"rank\":200000000}}]}"},
      {"b.json",
       "{\"traceEvents\":[{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":1,\"args\":{\"name\":\"rank "
       "2000000000\"}}," +
           event + "}]}"},
      {"c.json", "{\"distributedInfo\":{\"rank\":1e30},\"traceEvents\":[" + event + "}]}"},
      {"d.json",
       "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"PP:2147483647F0\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":5}]"
       "}"},
  };
  for (const auto& [name, text] : traces) {
    auto trace = write(name, text);
    std::string command(kMemoryLimit);
    command.append("'").append(PIPESTUDIO_CLI).append("' compare ").append(plan).append(" ").append(trace);
    command += " --cost F=1";
    auto r = ps::test::runCommand(command, Stderr::Separate);
    expectRefused(r, trace, "out of range");
  }
}
