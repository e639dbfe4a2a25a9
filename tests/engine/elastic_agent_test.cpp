// Ranks started by PyTorch's own elastic agent (the launcher behind torchrun, from the torch
// that matches the engine's libtorch: Debian's python3-torch, or the project's PyTorch 2.x
// environment): the agent hosts the store and says so with TORCHELASTIC_USE_AGENT_STORE, and
// rank 0 must join it rather than bind the same port.
#include <gtest/gtest.h>

#include <string>

#include "background_process.h"
#include "cli/cli_runner.h"
#include "pipestudio/core/io/cluster.h"
#include "pipestudio/core/planning/generators.h"

namespace {

const char* kPython = PIPESTUDIO_TEST_TORCH_PYTHON;

std::string launcher() {
  return std::string(PIPESTUDIO_SOURCE_TEST_DIR) + "/engine/elastic_launch.py";
}

}  // namespace

TEST(ElasticAgent, TwoRanksStartedByTorchsAgentGiveExactGradients) {
  auto path = ps::test::writeSchedule(ps::core::ScheduleKind::OneFOneB, 2, 4, "elastic_1f1b");
  const int port = ps::core::pickRendezvousPort();
  auto r = ps::test::runCommand("timeout 120 " + std::string(kPython) + " " + launcher() + " " +
                                std::to_string(port) + " 2 " + PIPESTUDIO_CLI + " run " + path +
                                " --model mlp:layers=4,hidden=16 --threads 1 --check-gradients --timeout 30 "
                                "--connect-timeout 30");
  EXPECT_EQ(r.exitCode, 0) << r.out;
  EXPECT_NE(r.out.find("gradient check: passed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("16 ops"), std::string::npos) << r.out;  // rank 0 gathered both devices
}
