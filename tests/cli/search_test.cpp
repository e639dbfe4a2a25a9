// pipestudio-cli search and partition: a valid schedule with its partition, the report of the
// built-in schedules, the objective stated, usage errors.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/cli_runner.h"
#include "fixtures/profiles.h"
#include "pipestudio/core/analysis/validator.h"
#include "pipestudio/core/io/dsl.h"

using namespace ps::core;
using ps::test::uniformLayers;

namespace {

CostProfile headHeavy(int layers) {
  return ps::test::lmHeadLayers(layers);
}

}  // namespace

TEST(SearchCli, WritesAValidScheduleWithItsPartitionAndReportsTheBuiltins) {
  const std::string dir = testing::TempDir();
  const std::string profilePath = dir + "/search_cli_profile.json";
  const std::string outPath = dir + "/search_cli_best.pipe";
  const std::string reportPath = dir + "/search_cli_report.json";
  std::ofstream(profilePath) << costProfileToJson(headHeavy(8));
  const std::string cmd = std::string(PIPESTUDIO_CLI) + " search --profile " + profilePath +
                          " --devices 2 --microbatches 4 --max-evaluations 40 --json -o " + outPath + " > " +
                          reportPath;
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream in(outPath);
  std::stringstream ss;
  ss << in.rdbuf();
  auto s = parseDsl(ss.str());
  ASSERT_TRUE(s.ok()) << ss.str();
  EXPECT_TRUE(validateSchedule(*s).valid());
  int sum = 0;
  for (int c : s->partition) sum += c;
  EXPECT_EQ(sum, 8);
  std::ifstream rin(reportPath);
  std::stringstream rs;
  rs << rin.rdbuf();
  EXPECT_NE(rs.str().find("\"builtins\""), std::string::npos);
  EXPECT_NE(rs.str().find("\"zb-h1\""), std::string::npos);

  const std::string part = std::string(PIPESTUDIO_CLI) + " partition --profile " + profilePath +
                           " --stages 3 --json > " + reportPath;
  ASSERT_EQ(std::system(part.c_str()), 0);
  // The plan covers the 8 layers once, in order, in 3 stages (each within the memory limit when
  // the profile has one), and its bottleneck is its slowest stage.
  std::ifstream pin(reportPath);
  auto pj = nlohmann::json::parse(pin);
  EXPECT_EQ(pj["stages"], 3);
  const auto& plan = pj["plan"];
  ASSERT_EQ(plan["stages"].size(), 3u) << plan.dump();
  int nextLayer = 0;
  double bottleneck = 0;
  for (const auto& st : plan["stages"]) {
    EXPECT_EQ(st["first_layer"].get<int>(), nextLayer) << st.dump();
    EXPECT_GT(st["layers"].get<int>(), 0) << st.dump();
    nextLayer += st["layers"].get<int>();
    const double limit = plan["memory_limit_bytes"].get<double>();  // 0: the profile states none
    if (limit > 0) {
      EXPECT_LE(st["peak_bytes"].get<double>(), limit) << st.dump();
    }
    bottleneck = std::max(bottleneck, st["time_ms"].get<double>());
  }
  EXPECT_EQ(nextLayer, 8);
  EXPECT_DOUBLE_EQ(plan["bottleneck_ms"].get<double>(), bottleneck);
  // Bad sizes are usage errors.
  const std::string bad = std::string(PIPESTUDIO_CLI) + " search --profile " + profilePath +
                          " --devices 0 --microbatches 4 2>/dev/null";
  EXPECT_EQ(WEXITSTATUS(std::system(bad.c_str())), 2);
}

TEST(SearchObjective, CliStatesTheObjectiveAndExplainsAbsentBuiltins) {
  const std::string path = ::testing::TempDir() + "/search_objective_profile.json";
  std::ofstream(path) << costProfileToJson(uniformLayers(8));
  // 6 micro-batches on 4 devices: interleaved 1F1B cannot be built.
  auto r = ps::test::runCli(
      "search --profile '" + path +
          "' --devices 4 --microbatches 6 --objective steady-state --max-evaluations 120 --json",
      ps::test::Stderr::Drop);
  ASSERT_EQ(r.exitCode, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["objective"], "steady-state");
  EXPECT_EQ(j["boundary"], "overlap");
  EXPECT_EQ(j["order"][1], "peak_memory_bytes");
  bool sawAbsent = false;
  for (const auto& b : j["builtins"]) {
    if (b["valid"].get<bool>()) {
      EXPECT_TRUE(b["fits_memory"].is_boolean());
      EXPECT_TRUE(b.contains("steady_state_ms"));
      continue;
    }
    sawAbsent = true;
    EXPECT_TRUE(b["fits_memory"].is_null()) << b.dump();
    EXPECT_TRUE(b["makespan_ms"].is_null());
    EXPECT_FALSE(b["absent_because"].get<std::string>().empty());
  }
  EXPECT_TRUE(sawAbsent);
  auto t = ps::test::runCli(
      "search --profile '" + path +
          "' --devices 4 --microbatches 6 --objective steady-state --boundary sync --max-evaluations 60",
      ps::test::Stderr::Drop);
  ASSERT_EQ(t.exitCode, 0) << t.out;
  EXPECT_NE(t.out.find("objective: steady-state iteration time (3 iterations, sync boundary)"),
            std::string::npos)
      << t.out;
  EXPECT_NE(t.out.find("ties go to the lower peak memory, then the lower bubble ratio"), std::string::npos);
  auto bad = ps::test::runCli("search --profile '" + path + "' --devices 4 --microbatches 6 --boundary sync");
  EXPECT_EQ(bad.exitCode, 2) << bad.out;
}
