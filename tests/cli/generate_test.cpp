// pipestudio-cli generate: every built-in kind, both output formats, and clear size errors.
#include <gtest/gtest.h>

#include <string>

#include "cli/cli_runner.h"

using ps::test::CliResult;
using ps::test::runCli;

TEST(GenerateCli, EveryKindGeneratesAPipeFileThatValidates) {
  for (const char* kind : {"gpipe", "1f1b", "interleaved-1f1b", "looped-bfs", "zb-h1", "zb-h2", "zb-v",
                           "dualpipe-v", "dualpipe"}) {
    CliResult r = runCli(std::string("generate ") + kind + " --devices 4 --microbatches 8 | " +
                         PIPESTUDIO_CLI + " validate -");
    EXPECT_EQ(r.exitCode, 0) << kind << ": " << r.out;
    EXPECT_NE(r.out.find("valid (4 devices"), std::string::npos) << kind << ": " << r.out;
  }
}

TEST(GenerateCli, CsvByExtensionAndClearSizeErrors) {
  std::string out = ::testing::TempDir() + "gen_cli_test.csv";
  CliResult r = runCli("generate 1f1b --devices 2 --microbatches 3 -o " + out);
  ASSERT_EQ(r.exitCode, 0) << r.out;
  CliResult v = runCli("validate " + out);
  EXPECT_EQ(v.exitCode, 0) << v.out;
  CliResult c = runCli("generate 1f1b --devices 2 --microbatches 2 --format csv --csv-format compute_comms");
  EXPECT_EQ(c.exitCode, 0);
  // PyTorch 2.11's lowering of the order (tests/core/pytorch_orders_test.cpp).
  EXPECT_EQ(c.out,
            "0UNSHARD,0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1,0REDUCE_GRAD,0RESHARD\r\n"
            "1UNSHARD,1RECV_F0,1F0,1RECV_F1,1B0,1SEND_B0,1F1,1B1,1SEND_B1,1REDUCE_GRAD,1RESHARD\r\n");
  CliResult bad = runCli("generate interleaved-1f1b --devices 4 --microbatches 9");
  EXPECT_EQ(bad.exitCode, 2);
  EXPECT_NE(bad.out.find("9 is not a multiple of max(1, 9 / 4) = 2 rounds"), std::string::npos) << bad.out;
  EXPECT_EQ(runCli("generate 3f3b --devices 2 --microbatches 2").exitCode, 2);
  EXPECT_EQ(runCli("generate 1f1b --devices two --microbatches 2").exitCode, 2);
}

TEST(GenerateCli, DualPipeValidatesSimulatesAndHasNoCsv) {
  for (int d : {2, 4, 8})
    for (int m : {2 * d, 3 * d, 4 * d, 20}) {
      const std::string gen =
          "generate dualpipe --devices " + std::to_string(d) + " --microbatches " + std::to_string(m);
      CliResult v = runCli(gen + " | " + PIPESTUDIO_CLI + " validate -");
      EXPECT_EQ(v.exitCode, 0) << gen << ": " << v.out;
      // F = 2, B = 4 per block: busy 6 per micro-batch, DeepSeek's bubble (D/2 - 1)(F&B + B - 3W).
      CliResult sim = runCli(gen + " | " + PIPESTUDIO_CLI + " simulate - --cost F=2,B=4");
      EXPECT_EQ(sim.exitCode, 0) << gen << ": " << sim.out;
      const int makespan = 6 * m + (d / 2 - 1) * 4;
      EXPECT_NE(sim.out.find("makespan " + std::to_string(makespan) + " ms"), std::string::npos)
          << gen << ": " << sim.out;
    }
  CliResult csv = runCli("generate dualpipe --devices 2 --microbatches 4 --format csv");
  EXPECT_EQ(csv.exitCode, 2);
  EXPECT_NE(csv.out.find("route groups"), std::string::npos) << csv.out;
  CliResult odd = runCli("generate dualpipe --devices 3 --microbatches 6");
  EXPECT_EQ(odd.exitCode, 2);
  EXPECT_NE(odd.out.find("an even number of devices, got 3"), std::string::npos) << odd.out;
}
