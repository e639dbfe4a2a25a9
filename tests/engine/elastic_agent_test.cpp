// Ranks started by PyTorch's own elastic agent (the launcher behind torchrun, from the torch
// that matches the engine's libtorch: Debian's python3-torch, or the project's PyTorch 2.x
// environment): the agent hosts the store and says so with TORCHELASTIC_USE_AGENT_STORE, and
// rank 0 must join it rather than bind the same port.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "background_process.h"
#include "cli/cli_runner.h"
#include "fixtures/torchrun_shim.h"
#include "pipestudio/core/io/cluster.h"
#include "pipestudio/core/io/dsl.h"
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

// `run --print-launch`: the printed commands run as printed. PyTorch's own torchrun (the shim
// below only lets Debian's 1.13 torchrun start workers under Python 3.11) starts the ranks;
// `ssh` and `scp` are stand-ins that run the printed copy instructions on this machine, where
// every "host" of the host file is.
namespace {

struct PrintLaunch {
  std::string dir;    // a folder with a blank in its name: every printed path must be quoted
  std::string shims;  // torchrun, ssh, scp and pipestudio-cli, first on PATH
  std::string pipe, model, batch;

  PrintLaunch() {
    const std::string tag = std::to_string(::getpid());
    dir = ::testing::TempDir() + "print launch " + tag;
    shims = ::testing::TempDir() + "print_launch_shims_" + tag;
    std::filesystem::create_directories(dir);
    std::filesystem::create_directories(shims);
    // The user's files, under names of their own (the staged copies keep them).
    pipe = dir + "/s-" + tag + ".pipe";
    model = dir + "/chain-" + tag + ".pt";
    batch = dir + "/batch-" + tag + ".pt";
    auto s = ps::core::generateSchedule(ps::core::ScheduleKind::OneFOneB, {2, 4, 0});
    std::ofstream(pipe) << ps::core::printDsl(*s);
    std::filesystem::copy_file(std::string(PIPESTUDIO_TEST_DATA_DIR) + "/torchscript/chain.pt", model);
    std::filesystem::copy_file(std::string(PIPESTUDIO_TEST_DATA_DIR) + "/inputs/chain_batch.pt", batch);
    std::ofstream(shims + "/torchrun") << "#!" << kPython << "\n" << ps::test::kTorchrunShimBody;
    // ssh [-p P] [--] HOST COMMAND...: the remote shell runs the words joined, as ssh's does.
    std::ofstream(shims + "/ssh") << "#!/bin/sh\nif [ \"$1\" = -p ]; then shift 2; fi\n"
                                     "if [ \"$1\" = -- ]; then shift; fi\nshift\nexec sh -c \"$*\"\n";
    // scp [-P P] [--] LOCAL HOST:PATH
    std::ofstream(shims + "/scp") << "#!/bin/sh\nif [ \"$1\" = -P ]; then shift 2; fi\n"
                                     "if [ \"$1\" = -- ]; then shift; fi\nexec cp \"$1\" \"${2#*:}\"\n";
    for (const char* f : {"torchrun", "ssh", "scp"})
      std::filesystem::permissions(shims + "/" + f, std::filesystem::perms::owner_all);
    std::filesystem::create_symlink(PIPESTUDIO_CLI, shims + "/pipestudio-cli");
  }
  ~PrintLaunch() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    std::filesystem::remove_all(shims, ec);
  }
  // `pipestudio-cli run ARGS --print-launch torchrun` with MASTER_PORT=port: the printed text.
  ps::test::CliResult print(const std::string& args, int port) const {
    return ps::test::runCommand("MASTER_PORT=" + std::to_string(port) + " " + std::string(PIPESTUDIO_CLI) +
                                    " run " + ps::core::shellQuoteWord(pipe) + " " + args +
                                    " --print-launch torchrun",
                                ps::test::Stderr::Separate);
  }
  // A printed line run by the shell, with the shims first on PATH.
  ps::test::CliResult shell(const std::string& line) const {
    return ps::test::runCommand("cd / && PATH=" + ps::core::shellQuoteWord(shims) +
                                ":\"$PATH\" timeout 120 sh -c " + ps::core::shellQuoteWord(line));
  }
};

std::vector<std::string> linesOf(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace

TEST(PrintLaunch, WithoutHostsTheSingleHostTorchrunCommandRunsAsPrinted) {
  PrintLaunch p;
  const int port = ps::core::pickRendezvousPort();
  const std::string args = "--model " + ps::core::shellQuoteWord("torchscript:path=" + p.model) +
                           " --inputs " + ps::core::shellQuoteWord(p.batch) +
                           " --threads 1 --check-gradients --nproc 2";
  auto printed = p.print(args, port);
  ASSERT_EQ(printed.exitCode, 0) << printed.out << printed.err;
  EXPECT_EQ(printed.out.find("--hosts"), std::string::npos) << printed.out;
  std::vector<std::string> commands;
  for (const auto& l : linesOf(printed.out))
    if (l.rfind("torchrun ", 0) == 0) commands.push_back(l);
  ASSERT_EQ(commands.size(), 1u) << printed.out;
  EXPECT_EQ(
      commands[0].rfind("torchrun --nnodes 1 --nproc_per_node 2 --master_addr 127.0.0.1 --master_port " +
                            std::to_string(port) + " --no_python pipestudio-cli run '" + p.pipe + "'",
                        0),
      0u)
      << commands[0];
  // The files stay where they are (one host): nothing to copy, nothing staged.
  EXPECT_EQ(printed.out.find("scp"), std::string::npos) << printed.out;
  auto r = p.shell(commands[0]);
  EXPECT_EQ(r.exitCode, 0) << r.out;
  EXPECT_NE(r.out.find("gradient check: passed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("data: " + p.batch + ": samples 0..7 of 8, targets from the file"), std::string::npos)
      << r.out;

  // srun: one node, as many tasks as devices.
  auto slurm = ps::test::runCommand(std::string(PIPESTUDIO_CLI) + " run " + ps::core::shellQuoteWord(p.pipe) +
                                        " --model mlp:layers=4,hidden=16 --print-launch slurm",
                                    ps::test::Stderr::Separate);
  ASSERT_EQ(slurm.exitCode, 0) << slurm.err;
  EXPECT_NE(slurm.out.find(" srun --nodes=1 --ntasks=2 --kill-on-bad-exit=1 pipestudio-cli run '" + p.pipe +
                           "' --model mlp:layers=4,hidden=16 --format pipe\n"),
            std::string::npos)
      << slurm.out;
}

TEST(PrintLaunch, WithHostsTheCopyInstructionsStageEveryFileTheCommandsRead) {
  PrintLaunch p;
  const std::string hosts = p.dir + "/hosts.txt";
  std::ofstream(hosts) << "127.0.0.1 ranks=1\n127.0.0.2 ranks=1\n";
  const int port = ps::core::pickRendezvousPort();
  const std::string args = "--hosts " + ps::core::shellQuoteWord(hosts) + " --model " +
                           ps::core::shellQuoteWord("torchscript:path=" + p.model) + " --inputs " +
                           ps::core::shellQuoteWord(p.batch) + " --threads 1 --check-gradients";
  auto printed = p.print(args, port);
  ASSERT_EQ(printed.exitCode, 0) << printed.out << printed.err;
  const std::string tag = std::to_string(::getpid());
  const std::string staged = "/tmp/pipestudio-run/";
  std::vector<std::string> copies, nodes;
  for (const auto& l : linesOf(printed.out)) {
    if (l.rfind("#   ssh ", 0) == 0) copies.push_back(l.substr(4));
    if (l.rfind("torchrun ", 0) == 0 && l.find("--node_rank") != std::string::npos) nodes.push_back(l);
  }
  // Schedule, model and batch, each to both hosts; the commands read them there, by the user's names.
  ASSERT_EQ(copies.size(), 6u) << printed.out;
  ASSERT_EQ(nodes.size(), 2u) << printed.out;
  for (const std::string& file : {"s-" + tag + ".pipe", "chain-" + tag + ".pt", "batch-" + tag + ".pt"})
    EXPECT_NE(nodes[1].find(staged + file), std::string::npos) << file << "\n" << nodes[1];
  for (const auto& c : copies) {
    auto r = p.shell(c);
    ASSERT_EQ(r.exitCode, 0) << c << "\n" << r.out;
  }
  for (const std::string& file : {"s-" + tag + ".pipe", "chain-" + tag + ".pt", "batch-" + tag + ".pt"})
    EXPECT_TRUE(std::filesystem::exists(staged + file)) << file;
  // Both "nodes" at once, as printed.
  std::vector<std::string> outs;
  for (size_t i = 0; i < nodes.size(); ++i)
    outs.push_back(::testing::TempDir() + "print_launch_node" + std::to_string(i));
  std::vector<pid_t> pids;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      const std::string cmd = "PATH=" + ps::core::shellQuoteWord(p.shims) + ":\"$PATH\" timeout 120 sh -c " +
                              ps::core::shellQuoteWord(nodes[i]) + " >" + ps::core::shellQuoteWord(outs[i]) +
                              " 2>&1";
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes;
  for (pid_t pid : pids) {
    int st = 0;
    waitpid(pid, &st, 0);
    codes.push_back(WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  }
  const std::string out0 = ps::test::readFile(outs[0]), out1 = ps::test::readFile(outs[1]);
  for (const std::string& file : {"s-" + tag + ".pipe", "chain-" + tag + ".pt", "batch-" + tag + ".pt"})
    std::remove((staged + file).c_str());
  for (const auto& o : outs) std::remove(o.c_str());
  EXPECT_EQ(codes[0], 0) << out0;
  EXPECT_EQ(codes[1], 0) << out1;
  EXPECT_NE(out0.find("gradient check: passed"), std::string::npos) << out0;
}
