// pipestudio-cli on hostile files (docs/limits.md): exit 1 with the place and a one-line
// reason, within seconds; never "internal error", a signal or a "valid" with overflowed numbers.
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "../cli_runner.h"

namespace fs = std::filesystem;
using ps::test::runCli;
using ps::test::Stderr;

namespace {

class HostileCli : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("ps_hostile_cli_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string write(const std::string& name, const std::string& text) {
    fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  // Exit 1, the message names the place, and nothing crashed.
  static void expectRefused(const ps::test::CliResult& r, const std::string& place, const std::string& why) {
    EXPECT_EQ(r.exitCode, 1) << r.out << r.err;
    EXPECT_NE(r.err.find(place), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
    EXPECT_LT(r.seconds, 30.0);
  }
  fs::path dir_;
};

// The sanitizer build (make asan-test) reserves terabytes of address space for its shadow
// memory, so the limit only applies to a plain build.
#if defined(__SANITIZE_ADDRESS__)
constexpr const char* kMemoryLimit = "";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr const char* kMemoryLimit = "";
#else
constexpr const char* kMemoryLimit = "ulimit -v 2097152; ";
#endif
#else
constexpr const char* kMemoryLimit = "ulimit -v 2097152; ";
#endif

const char* kPlan = "devices 2\nstages 2\nmicrobatches 1\ndevice 0: F0 B0\ndevice 1: F0 B0\n";

}  // namespace

TEST_F(HostileCli, CompareRefusesAnIntMaxRankWithItsLine) {
  auto plan = write("plan.pipe", kPlan);
  auto trace = write("t.json", "{\n\"distributedInfo\":{\"rank\":2147483647},\n\"traceEvents\":[\n"
                               "{\"ph\":\"X\",\"name\":\"PP:0F0\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":5}]}\n");
  auto r = runCli("compare " + plan + " " + trace + " --cost F=1", Stderr::Separate);
  expectRefused(r, trace + ":2:", "out of range");
}

TEST_F(HostileCli, CompareRefusesAHugeRankInTheFileName) {
  auto plan = write("plan.pipe", kPlan);
  auto trace = write("x.rank200000000.json", "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"PP:0F0\",\"pid\":1,\"tid\":1,"
                                             "\"ts\":0,\"dur\":5}]}");
  auto r = runCli("compare " + plan + " " + trace + " --cost F=1", Stderr::Separate);
  expectRefused(r, "x.rank200000000.json", "200000000");
}

TEST_F(HostileCli, SimulateRefusesAnInfiniteForwardTimeInsteadOfValid) {
  auto plan = write("plan.pipe", kPlan);
  auto profile = write("p.json", "{\"layers\":[\n{\"forward_ms\":1,\"backward_ms\":2},\n"
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
  auto plan = write("big.pipe", "devices 1\nkind BIG memory delta 9000000000000000000\ndevice 0: F0 BIG0 B0\n");
  auto r = runCli("simulate " + plan + " --cost F=1", Stderr::Separate);
  expectRefused(r, plan + ":2:23:", "too large");
}

TEST_F(HostileCli, SimulateWarnsOnStderrBeforeALargeExpansion) {
  auto plan = write("large.pipe", "devices 1\nmicrobatches 600000\ndevice 0 {\n  for m in 0..microbatches { F(m) }\n"
                                  "  for m in 0..microbatches { B(m) }\n}\n");
  auto r = runCli("simulate " + plan + " --cost F=1", Stderr::Separate);
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.err.find(plan + ":5:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("warning: the program expands to more than 1000000 ops"), std::string::npos) << r.err;
}

TEST_F(HostileCli, HostileTracesAreRefusedWithinTwoGigabytes) {
  // Each once sized per-rank arrays from its rank (gigabytes, or bad_alloc): under a 2 GiB
  // address-space limit the CLI must still answer with exit 1 and the reason.
  auto plan = write("plan.pipe", kPlan);
  const std::string event = R"({"ph":"X","name":"PP:0F0","pid":1,"tid":1,"ts":0,"dur":5)";
  const std::vector<std::pair<std::string, std::string>> traces = {
      {"a.json", "{\"traceEvents\":[" + event + ",\"args\":{\"rank\":200000000}}]}"},
      {"b.json", "{\"traceEvents\":[{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":1,\"args\":{\"name\":\"rank "
                 "2000000000\"}}," + event + "}]}"},
      {"c.json", "{\"distributedInfo\":{\"rank\":1e30},\"traceEvents\":[" + event + "}]}"},
      {"d.json", "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"PP:2147483647F0\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":5}]}"},
  };
  for (const auto& [name, text] : traces) {
    auto trace = write(name, text);
    auto r = ps::test::runCommand(std::string(kMemoryLimit) + "'" + PIPESTUDIO_CLI + "' compare " + plan + " " +
                                      trace + " --cost F=1",
                                  Stderr::Separate);
    expectRefused(r, trace, "out of range");
  }
}
