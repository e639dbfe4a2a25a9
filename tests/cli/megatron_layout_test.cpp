// pipestudio-cli megatron-layout: the Megatron-LM flags for a partition given on the command
// line or by a schedule, and the refusals.
#include <gtest/gtest.h>

#include <string>

#include "cli/cli_runner.h"
#include "fixtures/files.h"

using namespace ps::test;

TEST(MegatronLayoutCli, PartitionOnTheCommandLine) {
  CliResult r = runCli("megatron-layout --partition 1,4,4,3", Stderr::Separate);
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_EQ(
      r.out,
      "--pipeline-model-parallel-size 4 --num-layers 10 --pipeline-model-parallel-layout 'E|t*4|t*4|t*2L'\n");
  EXPECT_NE(r.err.find("stage 3: rank 3, virtual stage 0: ttL"), std::string::npos) << r.err;
  r = runCli("megatron-layout --partition 1,4,4,4,4,4,4,3 --devices 4", Stderr::Separate);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out,
            "--pipeline-model-parallel-size 4 --num-layers 26 --pipeline-model-parallel-layout "
            "'E|(t*4|)*6,t*2L'\n");
  // gpt3-1.3b: 26 layers, embedding .. lm_head.
  r = runCli("megatron-layout --partition 1,4,4,4,4,4,4,1 --devices 4 --profile " +
                 std::string(PIPESTUDIO_RESOURCES_DIR) + "/profiles/gpt3-1.3b.json",
             Stderr::Separate);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("--num-layers 24 "), std::string::npos) << r.out;
}

TEST(MegatronLayoutCli, ScheduleWithItsPartition) {
  auto t = freshDir("ps_megatron_cli");
  const std::string pipe =
      t.file("s.pipe",
             "devices 2\nstages 4\nmicrobatches 2\nplacement interleaved\npartition 3,3,3,3\n"
             "device 0: F0@s0 F1@s0 F0@s2 F1@s2 B0@s2 B1@s2 B0@s0 B1@s0\n"
             "device 1: F0@s1 F1@s1 F0@s3 B0@s3 F1@s3 B1@s3 B0@s1 B1@s1\n");
  CliResult r = runCli("megatron-layout " + pipe, Stderr::Separate);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out,
            "--pipeline-model-parallel-size 2 --num-layers 10 --pipeline-model-parallel-layout "
            "'Et*2|t*3|t*3|t*2L'\n");
  // --partition replaces the header's.
  r = runCli("megatron-layout " + pipe + " --partition 1,2,2,1", Stderr::Separate);
  EXPECT_NE(r.out.find("'E|t*2|t*2|L'"), std::string::npos) << r.out;
}

TEST(MegatronLayoutCli, Refusals) {
  auto t = freshDir("ps_megatron_cli");
  const std::string zbv = t.file("zbv.pipe");
  ASSERT_EQ(runCli("generate zb-v --devices 2 --microbatches 4 -o " + zbv).exitCode, 0);
  // No partition.
  CliResult r = runCli("megatron-layout " + zbv);
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.out.find("the schedule has no partition"), std::string::npos) << r.out;
  // The V.
  r = runCli("megatron-layout " + zbv + " --partition 2,2,2,2");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(
      r.out.find("stage 2 is on device 1; Megatron-LM runs stage k of the layout on pipeline rank k mod 2"),
      std::string::npos)
      << r.out;
  // A hybrid model.
  r = runCli("megatron-layout --partition 27,27 --profile " + std::string(PIPESTUDIO_RESOURCES_DIR) +
             "/profiles/nemotron-h-8b.json");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.out.find("--hybrid-layer-pattern"), std::string::npos) << r.out;
  // Usage.
  EXPECT_EQ(runCli("megatron-layout").exitCode, 2);
  EXPECT_EQ(runCli("megatron-layout --partition 1,x").exitCode, 2);
  EXPECT_EQ(runCli("megatron-layout " + zbv + " --devices 2").exitCode, 2);
  EXPECT_EQ(runCli("megatron-layout --partition 1,2,3 --devices 2").exitCode, 1);
}
