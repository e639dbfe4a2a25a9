// pipestudio-cli simulate: metrics as text and JSON, the profile and partition a .pipe names,
// exit codes of deadlocks and memory limits, iterations, and hostile inputs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_runner.h"
#include "cli/hostile_cli.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/planning/generators.h"

using namespace ps::core;
using namespace ps::test;

namespace {

CliResult cli(const std::string& args) {
  return ps::test::runCli(args, ps::test::Stderr::Separate);
}
std::filesystem::path tempDir() {
  auto dir = std::filesystem::temp_directory_path() / ("ps_sim_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

std::string writeTemp(const std::string& name, const std::string& text) {
  const auto path = tempDir() / name;
  std::ofstream(path) << text;
  return path.string();
}

}  // namespace

TEST(SimulateCommand, JsonMetricsOfAPipeFile) {
  std::string pipe = writeTemp("g.pipe",
                               "devices 2\nstages 2\nmicrobatches 3\nplacement linear\n"
                               "device 0: F0 F1 F2 B0 B1 B2\ndevice 1: F0 F1 F2 B0 B1 B2\n");
  CliResult r = cli("simulate " + pipe + " --cost F=1,I=1,W=1,act=10 --json");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_DOUBLE_EQ(j["makespan"].get<double>(), (3 + 2 - 1) * 3.0);
  EXPECT_DOUBLE_EQ(j["lower_bound"].get<double>(), 9);
  EXPECT_NEAR(j["bubble_ratio"].get<double>(), 1 - 18.0 / 24.0, 1e-12);
  EXPECT_NEAR(j["efficiency"].get<double>(), 9.0 / 12.0, 1e-12);
  EXPECT_EQ(j["ops"], 12);
  EXPECT_EQ(j["valid"], true);
  ASSERT_EQ(j["devices"].size(), 2u);
  EXPECT_EQ(j["devices"][1]["device"], 1);
  EXPECT_DOUBLE_EQ(j["devices"][1]["busy"].get<double>(), 9);
  EXPECT_DOUBLE_EQ(j["devices"][1]["span"].get<double>(), 9);
  EXPECT_EQ(j["devices"][0]["peak_memory_bytes"], 30);
  EXPECT_EQ(j["devices"][0]["peak_inflight_microbatches"], 3);
  EXPECT_TRUE(j["diagnostics"].empty());
}

TEST(SimulateCommand, HeaderProfileAndPartitionRelativeToThePipeFile) {
  writeTemp("p4.json", R"({"name": "four", "layers": [
      {"forward_ms": 1, "backward_ms": 2}, {"forward_ms": 1, "backward_ms": 2},
      {"forward_ms": 1, "backward_ms": 2}, {"forward_ms": 1, "backward_ms": 2}]})");
  std::string pipe = writeTemp("h.pipe",
                               "profile \"p4.json\"\npartition 3, 1\ndevices 2\nstages 2\nmicrobatches 1\n"
                               "placement linear\ndevice 0: F0 B0\ndevice 1: F0 B0\n");
  CliResult r = cli("simulate " + pipe + " --json");
  ASSERT_EQ(r.exitCode, 0) << r.err << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_DOUBLE_EQ(j["makespan"].get<double>(), 3 + 1 + 2 + 6);  // stage 0 has 3 layers
  // --partition overrides the header's.
  r = cli("simulate " + pipe + " --partition 2,2 --json");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(r.out)["makespan"].get<double>(), 12);
  // --comm adds a fixed time per transfer (two transfers on the critical path).
  r = cli("simulate " + pipe + " --comm 0.5 --json");
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(r.out)["makespan"].get<double>(), 13);
}

// A profile the header names by file name alone is looked up in the bundled data relative to
// the CLI itself (../share/pipestudio/profiles from bin/), as installed; never in the source tree
// the CLI was built from.
TEST(SimulateCommand, HeaderProfileFromTheDataBesideTheExecutable) {
  namespace fs = std::filesystem;
  const fs::path root = tempDir() / "installed";
  fs::remove_all(root);
  const std::string pipe = writeTemp("named.pipe",
                                     "profile \"relocated.json\"\ndevices 2\nstages 2\nmicrobatches 1\n"
                                     "placement linear\ndevice 0: F0 B0\ndevice 1: F0 B0\n");
  auto install = [&](const fs::path& prefix) {
    fs::create_directories(prefix / "bin");
    fs::copy_file(PIPESTUDIO_CLI, prefix / "bin" / "pipestudio-cli", fs::copy_options::overwrite_existing);
    return (prefix / "bin" / "pipestudio-cli").string();
  };
  const std::string cliAt = install(root / "usr");
  fs::create_directories(root / "usr" / "share" / "pipestudio" / "profiles");
  std::ofstream(root / "usr" / "share" / "pipestudio" / "profiles" / "relocated.json")
      << R"({"name": "relocated", "layers": [{"forward_ms": 1, "backward_ms": 2},
                                            {"forward_ms": 1, "backward_ms": 2}]})";
  CliResult r = runCommand("'" + cliAt + "' simulate '" + pipe + "' --json", Stderr::Separate);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(r.out)["makespan"].get<double>(), 1 + 1 + 2 + 2);

  // A CLI with no data beside it does not find the source tree's profiles.
  const std::string bare = install(root / "bare");
  const std::string shipped = writeTemp("shipped.pipe",
                                        "profile \"llama2-7b.json\"\ndevices 2\nmicrobatches 1\n"
                                        "device 0: F0 B0\ndevice 1: F0 B0\n");
  r = runCommand("'" + bare + "' simulate '" + shipped + "'", Stderr::Separate);
  EXPECT_EQ(r.exitCode, 2) << r.out;
  EXPECT_NE(r.err.find("llama2-7b.json"), std::string::npos) << r.err;
  // The build tree's CLI finds it: build/share/pipestudio mirrors /usr/share/pipestudio.
  // (Exit 1 would be a memory verdict: the profile was read either way.)
  r = cli("simulate '" + shipped + "' --json");
  EXPECT_TRUE(r.exitCode == 0 || r.exitCode == 1) << r.err;
  EXPECT_GT(nlohmann::json::parse(r.out)["makespan"].get<double>(), 0) << r.out;
  fs::remove_all(root);
}

TEST(SimulateCommand, DeadlockAndMemoryExitOne) {
  std::string pipe = writeTemp("d.pipe",
                               "devices 2\nstages 2\nmicrobatches 1\nplacement linear\n"
                               "device 0: B0 F0\ndevice 1: F0 B0\n");
  CliResult r = cli("simulate " + pipe + " --cost F=1");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("deadlock"), std::string::npos) << r.err;
  std::string ok =
      writeTemp("m.pipe", "devices 1\nstages 1\nmicrobatches 2\nplacement linear\ndevice 0: F0 F1 B0 B1\n");
  r = cli("simulate " + ok + " --cost F=1,act=100 --memory-limit 150 --json");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("device 0 exceeds its memory limit at 1 ms during F1@s0"), std::string::npos) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["valid"], false);
  EXPECT_EQ(cli("simulate " + ok).exitCode, 2);  // no profile at all
  EXPECT_EQ(cli("simulate " + ok + " --cost F=1 --profile x.json").exitCode, 2);
}

TEST(SimulateCommand, PyTorchCsvAndTrace) {
  std::string csv = writeTemp("s.csv", "0F0,0F1,0B0,0B1\n,1F0,1B0,1F1,1B1\n");
  std::string trace = (tempDir() / "t.json").string();
  CliResult r = cli("simulate " + csv + " --cost F=1,B=2 --trace " + trace);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("makespan"), std::string::npos);
  std::ifstream in(trace);
  auto j = nlohmann::json::parse(in);
  EXPECT_TRUE(j["traceEvents"].is_array());
}

TEST(Iterations, CliPrintsSteadyStateAndSpans) {
  const std::string dir = ::testing::TempDir();
  auto s = generateSchedule(ScheduleKind::ZBH2, GeneratorOptions{4, 8, 0});
  ASSERT_TRUE(s.ok());
  const std::string file = dir + "/zbh2_iter.pipe";
  { std::ofstream(file) << printDsl(*s); }
  auto r =
      ps::test::runCli("simulate '" + file + "' --cost F=1,I=1,W=1 --iterations 4 --boundary overlap --json",
                       ps::test::Stderr::Drop);
  ASSERT_EQ(r.exitCode, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["iterations"]["boundary"], "overlap");
  EXPECT_DOUBLE_EQ(j["iterations"]["steady_state_ms"].get<double>(), 24.0);
  EXPECT_DOUBLE_EQ(j["iterations"]["devices"][3]["span_ms"].get<double>(), 24.0);
  auto t = ps::test::runCli(
      "simulate '" + file + "' --cost F=1,I=1,W=1 --iterations 4 --boundary sync --optimizer-step 1",
      ps::test::Stderr::Drop);
  ASSERT_EQ(t.exitCode, 0) << t.out;
  EXPECT_NE(t.out.find("sync boundary: steady-state iteration 28 ms"), std::string::npos) << t.out;
  auto bad = ps::test::runCli("simulate '" + file + "' --cost F=1,I=1,W=1 --iterations 4 --boundary later",
                              ps::test::Stderr::Merge);
  EXPECT_EQ(bad.exitCode, 2);
  EXPECT_NE(bad.out.find("--boundary: expected sync or overlap"), std::string::npos) << bad.out;
}

TEST_F(HostileCli, SimulateRefusesAnInfiniteForwardTimeInsteadOfValid) {
  auto plan = write("plan.pipe", kHostilePlan);
  auto profile = write("p.json",
                       "{\"layers\":[\n{\"forward_ms\":1,\"backward_ms\":2},\n"
                       "{\"forward_ms\":1e308,\"backward_ms\":2}]}\n");
  auto r = runCli("simulate " + plan + " --profile " + profile, Stderr::Separate);
  expectRefused(r, profile + ":3:", "forward_ms");
  EXPECT_EQ(r.out.find("valid"), std::string::npos) << r.out;
}

TEST_F(HostileCli, SimulateRefusesProfileSumsThatOverflow) {
  auto plan = write("plan.pipe", "devices 1\nstages 1\nmicrobatches 1\ndevice 0: F0 B0\n");
  std::string layers;
  for (int i = 0; i < 9000; ++i)
    layers += std::string(i ? "," : "") + "{\"forward_ms\":1,\"backward_ms\":2,\"activation_bytes\":1.1e15}";
  auto profile = write("p.json", "{\"layers\":[" + layers + "]}");
  auto r = runCli("simulate " + plan + " --profile " + profile, Stderr::Separate);
  expectRefused(r, "stage 0", "too large");
  EXPECT_EQ(r.out.find("-9223372036854775808"), std::string::npos) << r.out;
}

TEST_F(HostileCli, SimulateRefusesAHugeMemoryDeltaAtItsColumn) {
  auto plan =
      write("big.pipe", "devices 1\nkind BIG memory delta 9000000000000000000\ndevice 0: F0 BIG0 B0\n");
  auto r = runCli("simulate " + plan + " --cost F=1", Stderr::Separate);
  expectRefused(r, plan + ":2:23:", "too large");
}

TEST_F(HostileCli, SimulateWarnsOnStderrBeforeALargeExpansion) {
  auto plan = write("large.pipe",
                    "devices 1\nmicrobatches 600000\ndevice 0 {\n  for m in 0..microbatches { F(m) }\n"
                    "  for m in 0..microbatches { B(m) }\n}\n");
  auto r = runCli("simulate " + plan + " --cost F=1", Stderr::Separate);
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.err.find(plan + ":5:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("warning: the program expands to more than 1000000 ops"), std::string::npos) << r.err;
}
