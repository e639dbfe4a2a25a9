// pipestudio-cli postmortem: flight-recorder dumps of a hung PyTorch run read against the plan.
// Real dumps of PyTorch 2.11 on Gloo (tests/data/flight-recorder/torch-2.11.0-gloo) and synthetic
// NCCL ones (synthetic_nccl_crossed, made by hand in the recorder's format).
#include <gtest/gtest.h>

#include <string>

#include "cli/cli_runner.h"

using ps::test::CliResult;
using ps::test::runCli;
using ps::test::Stderr;

namespace {

std::string data(const std::string& name) {
  return std::string(PIPESTUDIO_TEST_DATA_DIR) + "/flight-recorder/" + name;
}

}  // namespace

TEST(PostmortemCli, SyntheticNcclDumpsNameEachRanksStuckActionAndTheCycle) {
  const std::string dir = data("synthetic_nccl_crossed");
  CliResult r = runCli("postmortem " + dir + "/plan.csv " + dir, Stderr::Separate);
  EXPECT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_NE(
      r.out.find("2 flight-recorder dump(s) (format 2.10), process group 0 (default_pg), nccl: 8 sends and "
                 "receives mapped to the plan (its SEND/RECV as given)"),
      std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  rank 0: waits in 0SEND_F1 for 1RECV_F1 on rank 1: 'nccl:send 0->1' scheduled"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  rank 1: waits in 1SEND_B0 for 0RECV_B0 on rank 0"), std::string::npos) << r.out;
  EXPECT_NE(
      r.out.find("wait cycle: rank 0 waits in 0SEND_F1 for 1RECV_F1 on rank 1, which waits in 1SEND_B0"),
      std::string::npos)
      << r.out;
  // One dump file alone: the other rank is silent, and the chain ends there.
  r = runCli("postmortem " + dir + "/plan.csv " + dir + "/nccl_trace_rank_0", Stderr::Separate);
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("wait chain: rank 0 waits in 0SEND_F1 for 1RECV_F1 on rank 1, which is silent (no "
                       "flight-recorder dump)"),
            std::string::npos)
      << r.out;
}

TEST(PostmortemCli, RealGlooDumpsAreRefusedWithTheReason) {
  const std::string dir = data("torch-2.11.0-gloo");
  for (const std::string& folder : {dir, dir + "/json"}) {
    const std::string args = "postmortem " + dir + "/plan.csv ";
    CliResult r = runCli(args + folder, Stderr::Separate);
    EXPECT_EQ(r.exitCode, 1) << r.out << r.err;
    EXPECT_NE(r.err.find("no point-to-point entry in the 2 dump(s) (2 entries, backend gloo)"),
              std::string::npos)
        << r.err;
  }
}

TEST(PostmortemCli, UsageAndUnreadableDumps) {
  CliResult r = runCli("postmortem " + data("synthetic_nccl_crossed/plan.csv"), Stderr::Separate);
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("expected PLAN and at least one DUMP"), std::string::npos) << r.err;
  r = runCli("postmortem " + data("synthetic_nccl_crossed/plan.csv") + " " + data("README.md"),
             Stderr::Separate);
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("README.md: the file name does not end in the rank"), std::string::npos) << r.err;
  r = runCli("postmortem " + data("synthetic_nccl_crossed/plan.csv") + " " + data("synthetic_nccl_crossed") +
                 " --defer-recv pytorch --pytorch 2.11",
             Stderr::Separate);
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("PyTorch 2.11 has no defer_pp_recv"), std::string::npos) << r.err;
}
