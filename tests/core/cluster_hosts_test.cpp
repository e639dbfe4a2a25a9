// Host files of cluster runs (`run --hosts`): the format, file:line:col errors, the round trip
// the GUI relies on, and the torchrun / Slurm commands printed for the same run.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "pipestudio/core/io/cluster.h"

using namespace ps::core;

namespace {

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    out.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

}  // namespace

TEST(ClusterHosts, ParsesHostsWithTheirKeys) {
  auto h = parseHostFile(
      "# two nodes\n"
      "alice@gpu1:2222 ranks=4 key=~/.ssh/id_ed25519 cli=/opt/ps/bin/pipestudio-cli  # the first\n"
      "\n"
      "  gpu2 ranks=4 user=bob port=22 addr=10.0.0.2 ssh=StrictHostKeyChecking=accept-new "
      "ssh=Compression=no\n"
      "[::1]:2200\n",
      "hosts.txt");
  ASSERT_TRUE(h) << formatDiagnostics(h.errors());
  ASSERT_EQ(h->size(), 3u);
  const ClusterHost& a = (*h)[0];
  EXPECT_EQ(a.user, "alice");
  EXPECT_EQ(a.host, "gpu1");
  EXPECT_EQ(a.port, 2222);
  EXPECT_EQ(a.ranks, 4);
  EXPECT_EQ(a.key, "~/.ssh/id_ed25519");
  EXPECT_EQ(a.cli, "/opt/ps/bin/pipestudio-cli");
  EXPECT_EQ(a.address(), "gpu1");
  EXPECT_EQ(a.location.line, 2);
  const ClusterHost& b = (*h)[1];
  EXPECT_EQ(b.destination(), "bob@gpu2");
  EXPECT_EQ(b.address(), "10.0.0.2");
  EXPECT_EQ(b.cli, "pipestudio-cli");
  EXPECT_EQ(b.sshOptions, (std::vector<std::string>{"StrictHostKeyChecking=accept-new", "Compression=no"}));
  EXPECT_EQ(b.location.line, 4);
  EXPECT_EQ(b.location.column, 3);
  EXPECT_EQ((*h)[2].host, "::1");
  EXPECT_EQ((*h)[2].port, 2200);
  EXPECT_EQ((*h)[2].ranks, 1);
  EXPECT_EQ(clusterWorldSize(*h), 9);
}

TEST(ClusterHosts, BadLinesNameFileLineAndColumn) {
  auto h = parseHostFile("gpu1 ranks=2\ngpu2 ranks=0\ngpu3 color=blue\ngpu4:99999\nranks=2\ngpu5 ranks\n",
                         "h.txt");
  ASSERT_FALSE(h);
  const auto& e = h.errors();
  ASSERT_EQ(e.size(), 5u);
  EXPECT_EQ(e[0].location.line, 2);
  EXPECT_EQ(e[0].location.column, 12);
  EXPECT_NE(e[0].message.find("ranks= needs a positive number"), std::string::npos);
  EXPECT_EQ(e[1].location.line, 3);
  EXPECT_EQ(e[1].location.column, 6);
  EXPECT_NE(e[1].message.find("unknown key 'color'"), std::string::npos);
  EXPECT_EQ(e[2].location.line, 4);
  EXPECT_EQ(e[2].location.column, 6);
  EXPECT_NE(e[2].message.find("bad port '99999'"), std::string::npos);
  EXPECT_EQ(e[3].location.line, 5);
  EXPECT_EQ(e[4].location.line, 6);
  EXPECT_EQ(e[4].location.column, 6);
  EXPECT_EQ(formatDiagnostic(e[0]).rfind("h.txt:2:12: error: ", 0), 0u) << formatDiagnostic(e[0]);
}

TEST(ClusterHosts, EmptyAndDuplicateFilesAreRefused) {
  auto empty = parseHostFile("# nothing\n\n", "h.txt");
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().code, "hosts.empty");
  auto dup = parseHostFile("gpu1 ranks=2\ngpu1 ranks=2\n", "h.txt");
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().code, "hosts.duplicate");
  EXPECT_EQ(dup.error().location.line, 2);
}

TEST(ClusterHosts, FormatRoundTrips) {
  auto h = parseHostFile("u@a:2200 ranks=3 key=/k cli=/c addr=10.0.0.1 ssh=X=1\nb\n", "h.txt");
  ASSERT_TRUE(h);
  auto again = parseHostFile(formatHostFile(*h), "again");
  ASSERT_TRUE(again);
  ASSERT_EQ(again->size(), 2u);
  EXPECT_EQ(formatHostFile(*again), formatHostFile(*h));
  EXPECT_EQ((*again)[0].port, 2200);
  EXPECT_EQ((*again)[0].sshOptions, std::vector<std::string>{"X=1"});
}

TEST(ClusterHosts, QuotedValuesKeepBlanksAndHashes) {
  auto h =
      parseHostFile("gpu1 cli=\"/opt/my tools/pipestudio-cli\" key=\"/k#1\" ranks=2 # comment\n", "h.txt");
  ASSERT_TRUE(h) << formatDiagnostics(h.errors());
  EXPECT_EQ((*h)[0].cli, "/opt/my tools/pipestudio-cli");
  EXPECT_EQ((*h)[0].key, "/k#1");
  EXPECT_EQ((*h)[0].ranks, 2);
  ClusterHost odd = (*h)[0];
  odd.sshOptions = {"ProxyCommand=ssh -W %h:%p \"jump\\host\""};
  auto again = parseHostFile(formatHostFile({odd}), "again");
  ASSERT_TRUE(again) << formatHostFile({odd});
  EXPECT_EQ((*again)[0].cli, odd.cli);
  EXPECT_EQ((*again)[0].sshOptions, odd.sshOptions);
  auto hash = parseHostFile("gpu1 ranks=2#two\n", "h.txt");
  ASSERT_TRUE(hash);
  EXPECT_EQ((*hash)[0].ranks, 2);
  auto open = parseHostFile("gpu1 cli=\"/opt/x\n", "h.txt");
  ASSERT_FALSE(open);
  EXPECT_EQ(open.error().location.column, 6);
}

TEST(ClusterHosts, TorchrunCommandsPerNodeAndRendezvous) {
  auto h = parseHostFile("n0 ranks=2 addr=10.0.0.1\nn1 ranks=2 cli=/opt/pipestudio-cli\n", "h.txt");
  ASSERT_TRUE(h);
  const std::string t = printLaunchCommands(*h, LaunchKind::Torchrun,
                                            {"/tmp/s.pipe", "--model", "gpt:layers=2"}, "/tmp/s.pipe", 29500);
  std::vector<std::string> cmds;
  for (const auto& l : lines(t))
    if (l.rfind("torchrun ", 0) == 0) cmds.push_back(l);
  ASSERT_EQ(cmds.size(), 3u) << t;
  EXPECT_EQ(cmds[0],
            "torchrun --nnodes 2 --nproc_per_node 2 --node_rank 0 --master_addr 10.0.0.1 --master_port 29500 "
            "--no_python pipestudio-cli run /tmp/s.pipe --model gpt:layers=2");
  EXPECT_EQ(cmds[1],
            "torchrun --nnodes 2 --nproc_per_node 2 --node_rank 1 --master_addr 10.0.0.1 --master_port 29500 "
            "--no_python /opt/pipestudio-cli run /tmp/s.pipe --model gpt:layers=2");
  EXPECT_NE(cmds[2].find(
                "--rdzv_backend c10d --rdzv_endpoint 10.0.0.1:29500 --rdzv_id pipestudio-29500 --no_python"),
            std::string::npos);
  EXPECT_NE(t.find("#   ssh n1 mkdir -p /tmp && scp SCHEDULE n1:/tmp/s.pipe\n"), std::string::npos) << t;
}

TEST(ClusterHosts, SlurmCommandsAndUnevenNodes) {
  auto h = parseHostFile("n0 ranks=2\nn1 ranks=2\n", "h.txt");
  ASSERT_TRUE(h);
  const std::string s =
      printLaunchCommands(*h, LaunchKind::Slurm, {"/tmp/s.pipe", "--model", "it's"}, "/tmp/s.pipe", 29501);
  EXPECT_NE(s.find("#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=2\n#SBATCH --nodelist=n0,n1\nexport "
                   "MASTER_PORT=29501\n"
                   "srun --kill-on-bad-exit=1 pipestudio-cli run /tmp/s.pipe --model 'it'\\''s'\n"),
            std::string::npos)
      << s;
  auto uneven = parseHostFile("n0 ranks=3\nn1 ranks=1\n", "h.txt");
  ASSERT_TRUE(uneven);
  const std::string u =
      printLaunchCommands(*uneven, LaunchKind::Slurm, {"/tmp/s.pipe"}, "/tmp/s.pipe", 29501);
  EXPECT_NE(u.find("cat > pipestudio.hosts <<'EOF'\nn0\nn0\nn0\nn1\nEOF\n"), std::string::npos) << u;
  EXPECT_NE(u.find("--ntasks=4 --distribution=arbitrary"), std::string::npos);
  // Uneven nodes have no single torchrun rendezvous command (each node's --nproc_per_node differs).
  const std::string tu =
      printLaunchCommands(*uneven, LaunchKind::Torchrun, {"/tmp/s.pipe"}, "/tmp/s.pipe", 29501);
  EXPECT_NE(tu.find("--nproc_per_node 3 --node_rank 0"), std::string::npos);
  EXPECT_NE(tu.find("--nproc_per_node 1 --node_rank 1"), std::string::npos);
  EXPECT_EQ(tu.find("--rdzv_backend"), std::string::npos);
}

TEST(ClusterHosts, RendezvousPortsComeFromBelowTheEphemeralRange) {
  // Below the range the kernel hands out for port 0 (stores, connections), so nothing else
  // can take the port between the pick and rank 0's bind.
  int low = 32768;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low;
  std::set<int> seen;
  for (int i = 0; i < 20; ++i) {
    const int port = ps::core::pickRendezvousPort();
    ASSERT_GT(port, 0);
    if (low - 10000 >= 1000) {
      EXPECT_GE(port, 10000);
      EXPECT_LT(port, low);
    }
    seen.insert(port);
  }
  EXPECT_GT(seen.size(), 10u);  // random, not one port for every caller
}
