// pipestudio-cli validate: exit codes, and diagnostics that name the file, line and column (of
// a .pipe or of a PyTorch CSV cell).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli/cli_runner.h"
#include "fixtures/files.h"

namespace fs = std::filesystem;
using ps::test::CliResult;
using ps::test::runCli;

namespace {

std::string data(const std::string& name) {
  return std::string(PIPESTUDIO_TEST_DATA_DIR) + "/" + name;
}

}  // namespace

TEST(ValidateCli, ValidCsvExitsZero) {
  // PyTorch 2.11's own lowering of 1F1B (tests/data/pytorch): valid under nccl, the default.
  CliResult r = runCli("validate " + data("pytorch/1F1B_pp2_mb2_spr1_compute_comms.csv"));
  EXPECT_EQ(r.exitCode, 0) << r.out;
  EXPECT_NE(r.out.find("valid (2 devices, 2 stages, 2 micro-batches"), std::string::npos) << r.out;
  // A hand-made order that posts 1RECV_F1 after 1SEND_B0: runs where sends are posted (Gloo)...
  r = runCli("validate --comm posted " + data("synthetic_1f1b_compute_comms.csv"));
  EXPECT_EQ(r.exitCode, 0) << r.out;
  EXPECT_NE(r.out.find("valid (2 devices, 2 stages, 2 micro-batches"), std::string::npos) << r.out;
  // ...and hangs on one NCCL stream per rank, the cycle named.
  r = runCli("validate " + data("synthetic_1f1b_compute_comms.csv"));
  EXPECT_EQ(r.exitCode, 1) << r.out;
  EXPECT_NE(r.out.find("deadlock under nccl: rank 0 waits in 0SEND_F1 for 1RECV_F1"), std::string::npos)
      << r.out;
}

TEST(ValidateCli, DeadlockExitsOneWithTheCycle) {
  CliResult r = runCli("validate " + data("synthetic_deadlock.csv"));
  EXPECT_EQ(r.exitCode, 1) << r.out;
  // Pointed at the cell of the stuck op (row 1, cell 0B0 at column 5).
  EXPECT_NE(r.out.find(
                "synthetic_deadlock.csv:1:5: error: deadlock: device 0 waits at B0@s0 for B0@s1 on device 1"),
            std::string::npos)
      << r.out;
}

TEST(ValidateCli, ParseErrorsExitOneAndUsageExitsTwo) {
  CliResult bad = runCli("validate " + data("synthetic_bad_action.csv"));
  EXPECT_EQ(bad.exitCode, 1) << bad.out;
  EXPECT_NE(bad.out.find("synthetic_bad_action.csv:1:11: error:"), std::string::npos) << bad.out;
  EXPECT_EQ(runCli("validate").exitCode, 2);
  EXPECT_EQ(runCli("validate /nonexistent/file.pipe").exitCode, 2);
  EXPECT_EQ(runCli("validate --bogus x.pipe").exitCode, 2);
}

TEST(PytorchFidelity, CliNamesCellsAndRowsOfCsvErrors) {
  const auto dir = ps::test::freshDir("ps_fidelity");
  const fs::path sharded = dir / "sharded.csv";
  std::ofstream(sharded) << "0F0,0F1,0B0,0B1\n1UNSHARD,1F0,1RESHARD,1B0,1F1,1B1\n";
  auto r = ps::test::runCli("validate '" + sharded.string() + "'");
  EXPECT_EQ(r.exitCode, 1) << r.out;
  // The op's own cell: line 2 (rank 1), column of "1B0".
  EXPECT_NE(r.out.find("sharded.csv:2:23: error: device 1 step 3: B0@s1 runs after RESHARD@s1"),
            std::string::npos)
      << r.out;
  const fs::path missing = dir / "missing.csv";
  std::ofstream(missing) << "0F0,0F1,0B0,0B1\n1F0,1B0,1F1\n";
  r = ps::test::runCli("validate '" + missing.string() + "'");
  EXPECT_EQ(r.exitCode, 1) << r.out;
  // A missing op has no cell: the rank's row.
  EXPECT_NE(r.out.find("missing.csv:2: error: B1@s1 (or I1@s1 and W1@s1) is missing (stage 1 on device 1)"),
            std::string::npos)
      << r.out;
}
