// pipestudio-cli profile-model: the analytic profile of a preset or of a model described on
// the command line.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

#include "cli/cli_runner.h"
#include "pipestudio/core/model/cost_profile.h"

using namespace ps::core;
using ps::test::CliResult;

namespace {

CliResult cli(const std::string& args) {
  return ps::test::runCli(args, ps::test::Stderr::Separate);
}

}  // namespace

TEST(ProfileModelCommand, PresetMatchesTheBundledProfile) {
  CliResult r = cli("profile-model --preset gpt3-1.3b");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  std::ifstream in(std::string(PIPESTUDIO_RESOURCES_DIR) + "/profiles/gpt3-1.3b.json");
  std::string bundled((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(r.out, bundled);
  r = cli(
      "profile-model --layers 2 --hidden 64 --heads 4 --seq 16 --vocab 100 --microbatch-size 2 --dtype bf16 "
      "--gpu-tflops 100 --hbm-gbps 1000 --link-gbps 10 --memory-gb 16 --name tiny");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto p = parseCostProfile(r.out);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->name, "tiny");
  EXPECT_EQ(p->layers.size(), 4u);
  EXPECT_EQ(p->deviceMemoryBytes, 16LL << 30);
  EXPECT_EQ(cli("profile-model --layers 2").exitCode, 2);
  EXPECT_EQ(cli("profile-model --preset nope").exitCode, 2);
}
