// Ranks meeting at the rendezvous: they must run the same thing (a fingerprint compared through
// the store), and they find their place from torchrun's or Slurm's variables, sharing the
// host's cores by the number of ranks on it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../../engine/src/transport/hosted_store.h"
#include "background_process.h"
#include "cli/cli_runner.h"
#include "pipestudio/core/io/cluster.h"
#include "pipestudio/engine/launcher.h"

namespace {

using namespace ps::test;
using Env = std::vector<std::pair<std::string, std::string>>;

const char* kModel = "--model mlp:layers=4,hidden=16 --threads 1";

// Two ranks started by hand with their own arguments and variables; both are waited for.
struct Pair {
  Background r0, r1;
  bool done = false;
};
Pair runPair(const std::string& args0, const std::string& args1, const Env& env0, const Env& env1,
             const std::string& tag) {
  Pair p{Background::start(args0, tag + "_r0", env0), Background::start(args1, tag + "_r1", env1)};
  p.done = p.r0.waitFor(std::chrono::seconds(90)) && p.r1.waitFor(std::chrono::seconds(30));
  if (!p.done) {
    p.r0.killTree();
    p.r1.killTree();
  }
  return p;
}

Env torchrunEnv(int rank, int port) {
  return {{"RANK", std::to_string(rank)},
          {"WORLD_SIZE", "2"},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(port)}};
}

nlohmann::json startedEvent(const std::string& out) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("type", "") == "started") return j;
  }
  return {};
}

int cores() {
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace

TEST(Rendezvous, DifferentSeedOnOneRankIsRefusedNamingTheFieldAndRanks) {
  auto path = writeSchedule(ps::core::ScheduleKind::OneFOneB, 2, 4, "fp_seed");
  const int port = ps::core::pickRendezvousPort();
  const std::string args = "run " + path + " " + kModel + " --timeout 30";
  auto p =
      runPair(args + " --seed 1", args + " --seed 2", torchrunEnv(0, port), torchrunEnv(1, port), "fp_seed");
  ASSERT_TRUE(p.done);
  EXPECT_EQ(p.r0.exitCode(), 1) << p.r0.stderrText();
  EXPECT_EQ(p.r1.exitCode(), 1) << p.r1.stderrText();
  const std::string err = p.r0.stderrText();
  EXPECT_NE(err.find("seed differs (rank 0 has 1, rank 1 has 2)"), std::string::npos) << err;
}

TEST(Rendezvous, DifferentScheduleIsRefusedAtOnceNotAfterTheTimeout) {
  auto a = writeSchedule(ps::core::ScheduleKind::OneFOneB, 2, 4, "fp_sched_a");
  auto b = writeSchedule(ps::core::ScheduleKind::GPipe, 2, 4, "fp_sched_b");
  const int port = ps::core::pickRendezvousPort();
  const auto t0 = std::chrono::steady_clock::now();
  auto p = runPair("run " + a + " " + kModel + " --timeout 60", "run " + b + " " + kModel + " --timeout 60",
                   torchrunEnv(0, port), torchrunEnv(1, port), "fp_sched");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(p.done);
  EXPECT_EQ(p.r0.exitCode(), 1);
  EXPECT_LT(seconds, 45.0);
  EXPECT_NE(p.r0.stderrText().find("schedule differs"), std::string::npos) << p.r0.stderrText();
  EXPECT_NE(p.r1.stderrText().find("schedule differs"), std::string::npos) << p.r1.stderrText();
}

TEST(Rendezvous, SlurmVariablesPlaceTheRanksAndShareTheCores) {
  auto path = writeSchedule(ps::core::ScheduleKind::OneFOneB, 2, 4, "slurm_env");
  const int port = ps::core::pickRendezvousPort();
  auto slurm = [&](int rank) {
    return Env{{"SLURM_PROCID", std::to_string(rank)},  {"SLURM_NTASKS", "2"},
               {"SLURM_LOCALID", std::to_string(rank)}, {"SLURM_NTASKS_PER_NODE", "2"},
               {"SLURM_JOB_NODELIST", "127.0.0.1"},     {"MASTER_PORT", std::to_string(port)}};
  };
  // No --threads: each rank takes cores / ranks on the host.
  const std::string args =
      "run " + path + " --model mlp:layers=4,hidden=16 --events jsonl --check-gradients --timeout 30";
  auto p = runPair(args, args, slurm(0), slurm(1), "slurm_env");
  ASSERT_TRUE(p.done);
  EXPECT_EQ(p.r0.exitCode(), 0) << p.r0.stderrText();
  EXPECT_EQ(p.r1.exitCode(), 0) << p.r1.stderrText();
  auto started = startedEvent(p.r0.stdoutText());
  ASSERT_TRUE(started.is_object()) << p.r0.stdoutText();
  EXPECT_EQ(started["world_size"], 2);
  EXPECT_EQ(started["local_world_size"], 2);
  EXPECT_EQ(started["threads"], std::max(1, cores() / 2));
}

TEST(Rendezvous, RanksOnOneHostShareItsCores) {
  // Rank 0 without LOCAL_WORLD_SIZE and the store on this host: both ranks are here, so each
  // takes half the cores (not all of them, which made a 2-rank run 15x slower); rank 1 says
  // LOCAL_WORLD_SIZE=1 and takes them all (it does not stream events; only rank 0 is checked).
  auto path = writeSchedule(ps::core::ScheduleKind::OneFOneB, 2, 4, "lws_env");
  const int port = ps::core::pickRendezvousPort();
  Env e1 = torchrunEnv(1, port);
  e1.push_back({"LOCAL_WORLD_SIZE", "1"});
  const std::string args = "run " + path + " --model mlp:layers=4,hidden=16 --events jsonl --timeout 30";
  auto p = runPair(args, args, torchrunEnv(0, port), e1, "lws_env");
  ASSERT_TRUE(p.done);
  ASSERT_EQ(p.r0.exitCode(), 0) << p.r0.stderrText();
  auto started = startedEvent(p.r0.stdoutText());
  EXPECT_EQ(started["local_world_size"], 2) << p.r0.stdoutText();
  EXPECT_EQ(started["threads"], std::max(1, cores() / 2)) << p.r0.stdoutText();
}

TEST(Rendezvous, TorchrunAgentStoreIsJoinedAsAClientByEveryRank) {
  // torchrun's agent hosts the store on MASTER_PORT and says so with
  // TORCHELASTIC_USE_AGENT_STORE=True: rank 0 must join it, not try to bind the same port.
  auto store = ps::engine::detail::hostLocalStore(2);
  ASSERT_TRUE(store.ok()) << store.error().message;
  const int port = (*store)->port();
  ASSERT_GT(port, 0);
  auto path = writeSchedule(ps::core::ScheduleKind::OneFOneB, 2, 4, "agent_store");
  auto env = [&](int rank) {
    Env e = torchrunEnv(rank, port);
    e.push_back({ps::engine::detail::kAgentStoreVariable, "True"});
    return e;
  };
  const std::string args =
      "run " + path + " " + kModel + " --check-gradients --connect-timeout 20 --timeout 30";
  auto p = runPair(args, args, env(0), env(1), "agent_store");
  ASSERT_TRUE(p.done);
  EXPECT_EQ(p.r0.exitCode(), 0) << p.r0.stderrText();
  EXPECT_EQ(p.r1.exitCode(), 0) << p.r1.stderrText();
  EXPECT_NE(p.r0.stdoutText().find("gradient check: passed"), std::string::npos) << p.r0.stdoutText();
}

TEST(Rendezvous, ConcurrentLocalLaunchesNeverMeetEachOthersRanks) {
  // Each --nproc launch hosts its own store on a port the store itself bound: launches started
  // together (as ctest -j runs them) never share a port, so no rank joins another run.
  auto a = writeSchedule(ps::core::ScheduleKind::OneFOneB, 2, 4, "conc_a");
  auto b = writeSchedule(ps::core::ScheduleKind::GPipe, 2, 4, "conc_b");
  std::vector<Background> runs;
  for (int i = 0; i < 4; ++i)
    runs.push_back(Background::start("run " + (i % 2 ? a : b) + " " + kModel + " --nproc 2 --iterations " +
                                         std::to_string(1 + i % 2) + " --timeout 30",
                                     "conc_" + std::to_string(i), {}));
  for (auto& r : runs) {
    ASSERT_TRUE(r.waitFor(std::chrono::seconds(90)));
    EXPECT_EQ(r.exitCode(), 0) << r.stderrText();
  }
}

TEST(Rendezvous, SlurmNodeListsGiveTheirFirstHostAsTheMasterAddress) {
  for (const char* v : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "LOCAL_WORLD_SIZE", "SLURM_LAUNCH_NODE_IPADDR"})
    unsetenv(v);
  setenv("SLURM_PROCID", "1", 1);
  setenv("SLURM_NTASKS", "8", 1);
  setenv("SLURM_NTASKS_PER_NODE", "4", 1);
  const std::pair<const char*, const char*> cases[] = {
      {"gpu07", "gpu07"},
      {"gpu[03-04,07],cpu1", "gpu03"},
      {"node[1-2]-ib", "node1-ib"},
      {"rack[1-2]-node[01-04]-ib,login", "rack1-node01-ib"},
      {"a,b[0-1]", "a"},
  };
  for (const auto& [list, first] : cases) {
    setenv("SLURM_JOB_NODELIST", list, 1);
    auto d = ps::engine::distributedFromEnvironment();
    ASSERT_TRUE(d.ok()) << list << ": " << d.error().message;
    ASSERT_TRUE(d->has_value()) << list;
    EXPECT_EQ((*d)->masterAddr, first) << list;
    EXPECT_EQ((*d)->rank, 1);
    EXPECT_EQ((*d)->worldSize, 8);
  }
}

// A TorchScript model is compared by its bytes: each host of a --hosts run stages it in a
// folder of its own, and torchrun or Slurm ranks may read copies at other paths.
TEST(Rendezvous, TorchScriptCopiesAtOtherPathsAreTheSameModelOtherBytesAreNot) {
  auto path = writeSchedule(ps::core::ScheduleKind::OneFOneB, 2, 4, "fp_model");
  const std::string data = PIPESTUDIO_TEST_DATA_DIR;
  const std::string copy = ::testing::TempDir() + "fp_model_copy_" + std::to_string(getpid()) + ".pt";
  {
    std::ifstream in(data + "/torchscript/chain.pt", std::ios::binary);
    std::ofstream(copy, std::ios::binary) << in.rdbuf();
  }
  const std::string args =
      "run " + path + " --threads 1 --timeout 30 --check-gradients --model torchscript:path=";
  int port = ps::core::pickRendezvousPort();
  auto same = runPair(args + data + "/torchscript/chain.pt", args + copy, torchrunEnv(0, port),
                      torchrunEnv(1, port), "fp_model_same");
  ASSERT_TRUE(same.done);
  EXPECT_EQ(same.r0.exitCode(), 0) << same.r0.stderrText() << same.r0.stdoutText();
  EXPECT_EQ(same.r1.exitCode(), 0) << same.r1.stderrText();
  EXPECT_NE(same.r0.stdoutText().find("gradient check: passed"), std::string::npos) << same.r0.stdoutText();

  // Other bytes (chain.pt as torch 2.11 saves it) are another file, refused as --inputs files
  // of other bytes are: the ranks compare content, not what it might mean.
  port = ps::core::pickRendezvousPort();
  auto other =
      runPair(args + data + "/torchscript/chain.pt", args + data + "/torchscript/torch-2.11/chain.pt",
              torchrunEnv(0, port), torchrunEnv(1, port), "fp_model_other");
  ASSERT_TRUE(other.done);
  EXPECT_EQ(other.r0.exitCode(), 1) << other.r0.stderrText();
  const std::string err = other.r0.stderrText();
  EXPECT_NE(err.find("model file differs"), std::string::npos) << err;
  EXPECT_EQ(err.find("model differs"), std::string::npos) << err;
  std::remove(copy.c_str());
}
