// Host files of cluster runs (`run --hosts`): the format, file:line:col errors, the round trip
// the GUI relies on, and the torchrun / Slurm commands printed for the same run.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "fixtures/files.h"
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
  EXPECT_NE(t.find("#   ssh -- n1 mkdir -p /tmp && scp -- SCHEDULE n1:/tmp/s.pipe\n"), std::string::npos)
      << t;
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
  EXPECT_NE(u.find("printf '%s\\n' n0 n0 n0 n1 > pipestudio.hosts\n"), std::string::npos) << u;
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

TEST(ClusterHosts, UserOrHostStartingWithDashIsRefusedNotAnSshOption) {
  for (const char* text :
       {"gpu1 user=-oProxyCommand=touch${IFS}pwned\n", "-oProxyCommand=x@gpu1\n", "gpu1 addr=-x\n", "-gpu1\n",
        "gpu1 user=a;b\n", "\"a b\"@gpu1\n", "\"gpu$(id)\"\n", "\"gpu`id`\"\n", "\"g'p\"\n"}) {
    auto h = parseHostFile(text, "h.txt");
    EXPECT_FALSE(h) << text;
    if (!h) {
      EXPECT_EQ(h.error().code, "hosts.syntax") << text;
    }
  }
  auto ok = parseHostFile("gpu1 user=ana.b-c_d\nbob@gpu2\nsvc@REALM.ORG@gpu3\n", "h.txt");
  ASSERT_TRUE(ok) << formatDiagnostics(ok.errors());
  EXPECT_EQ((*ok)[2].user, "svc@REALM.ORG");
  EXPECT_EQ((*ok)[2].host, "gpu3");
}

TEST(ClusterHosts, AHundredThousandHostLinesParseInLinearTime) {
  std::string text;
  for (int i = 0; i < 100000; ++i) text += "node" + std::to_string(i) + " ranks=1\n";
  const auto t0 = std::chrono::steady_clock::now();
  auto h = parseHostFile(text, "h.txt");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(h);
  EXPECT_EQ(h->size(), 100000u);
  EXPECT_LT(s, 5.0);
  text += "node99999 ranks=2\n";
  auto dup = parseHostFile(text, "h.txt");
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().code, "hosts.duplicate");
  EXPECT_NE(dup.error().message.find("line 100000"), std::string::npos) << dup.error().message;
}

// Every host list the parser accepts is written so that it reads back the same (the GUI saves
// its list this way): users with '@', IPv6 addresses in brackets, quoted '#' and blanks.
TEST(ClusterHosts, WrittenHostListsReadBackTheSame) {
  auto cases = parseHostFile(
      "gpu1 user=a@b\n[a:80]\n[::1]:2200 user=x\ngpu2 key=\"/k #1\" cli=\"/o p/c\\\"q\" "
      "ssh=\"ProxyJump=j#1\" addr=10.0.0.9\n",
      "h.txt");
  ASSERT_TRUE(cases) << formatDiagnostics(cases.errors());
  auto same = [](const ClusterHost& a, const ClusterHost& b) {
    return a.host == b.host && a.user == b.user && a.port == b.port && a.ranks == b.ranks && a.key == b.key &&
           a.cli == b.cli && a.addr == b.addr && a.sshOptions == b.sshOptions;
  };
  auto back = parseHostFile(formatHostFile(*cases), "again");
  ASSERT_TRUE(back) << formatHostFile(*cases) << formatDiagnostics(back.errors());
  ASSERT_EQ(back->size(), cases->size());
  for (size_t i = 0; i < back->size(); ++i)
    EXPECT_TRUE(same((*back)[i], (*cases)[i])) << formatHostFile(*cases);
  // Random lists of accepted values: written, read back, equal.
  std::mt19937 rng(29);
  const std::string hostChars = "abcXYZ019.-_:%";
  const std::string userChars = "ab09._-+@";
  const std::string anyChars = "aZ9 #\"\\'$`;=@:[]-./~\t";
  auto pick = [&](const std::string& from, size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i) s += from[rng() % from.size()];
    return s;
  };
  int tried = 0;
  for (int round = 0; round < 2000; ++round) {
    ClusterHost h;
    h.host = "h" + pick(hostChars, rng() % 6);
    if (rng() % 2) h.user = "u" + pick(userChars, rng() % 5);
    h.port = 1 + static_cast<int>(rng() % 65535);
    h.ranks = 1 + static_cast<int>(rng() % 8);
    if (rng() % 2) h.key = pick(anyChars, 1 + rng() % 8);
    if (rng() % 2) h.cli = pick(anyChars, 1 + rng() % 8);
    if (rng() % 2) h.addr = "a" + pick(hostChars, rng() % 4);
    for (unsigned o = rng() % 3; o > 0; --o) h.sshOptions.push_back(pick(anyChars, 1 + rng() % 8));
    auto back1 = parseHostFile(formatHostFile({h}), "again");
    ASSERT_TRUE(back1) << formatHostFile({h}) << formatDiagnostics(back1.errors());
    EXPECT_TRUE(same((*back1)[0], h)) << formatHostFile({h});
    ++tried;
  }
  EXPECT_EQ(tried, 2000);
}

namespace {

// Runs `script` with bash in `dir`, with stand-ins for srun, torchrun, ssh and scp first on
// PATH that only log their arguments (one line per call) to dir/calls.
std::string runWithStandIns(const std::filesystem::path& dir, const std::string& script) {
  namespace fs = std::filesystem;
  fs::create_directories(dir / "bin");
  for (const char* tool : {"srun", "torchrun", "ssh", "scp", "pipestudio-cli"}) {
    const fs::path p = dir / "bin" / tool;
    ps::test::writeFile(p,
                        std::string("#!/bin/sh\nprintf '%s' '") + tool +
                            "' >> \"$PS_CALLS\"; for a in \"$@\"; do printf ' [%s]' \"$a\" >> \"$PS_CALLS\"; "
                            "done; echo >> \"$PS_CALLS\"\n");
    fs::permissions(p, fs::perms::owner_all);
  }
  ps::test::writeFile(dir / "script.sh", script);
  const std::string d = dir.string();
  const std::string check = "bash -n '" + d + "/script.sh'";
  EXPECT_EQ(std::system(check.c_str()), 0) << script;
  const std::string cmd = "cd '" + d + "' && PS_CALLS='" + d + "/calls' PATH='" + d +
                          "/bin':\"$PATH\" bash '" + d + "/script.sh' >/dev/null 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << script;
  return ps::test::readFile(dir / "calls");
}

}  // namespace

// A host file (and run arguments) written to attack whoever pastes the printed commands: a
// host named EOF, $(...) and backticks in cli=, a schedule path with quotes. The printed
// Slurm and torchrun text, run by bash with harmless stand-ins on PATH, calls srun / torchrun
// with exactly the values given and runs nothing else.
TEST(ClusterHosts, PrintedLaunchTextOfAHostileHostFileRunsNothingElse) {
  const ps::test::TempDir dir = ps::test::freshDir("ps_hostile_launch");
  const std::string pwned = (dir / "pwned").string();
  const std::string hostile = "$(touch " + pwned + ")`touch " + pwned + "`;touch " + pwned + "'\"";
  auto h = parseHostFile(
      "EOF ranks=2 cli=\"" + std::string("/opt/x$(touch ") + pwned + ")`touch " + pwned + "`\"\nn1 ranks=1\n",
      "h.txt");
  ASSERT_TRUE(h) << formatDiagnostics(h.errors());
  const std::vector<std::string> args{"/tmp/" + hostile + ".pipe", "--model", hostile};
  const std::vector<StagedFile> files{{hostile + ".pipe", "/tmp/" + hostile + ".pipe", "the schedule"}};
  // Uneven ranks: the Slurm host-file form.
  const std::string slurm = printLaunchCommands(*h, LaunchKind::Slurm, args, files, 29500);
  const std::string calls = runWithStandIns(dir / "slurm", slurm);
  EXPECT_FALSE(std::filesystem::exists(pwned)) << slurm;
  EXPECT_EQ(ps::test::readFile(dir / "slurm" / "pipestudio.hosts"), "EOF\nEOF\nn1\n") << slurm;
  EXPECT_EQ(calls,
            "srun [--nodes=2] [--ntasks=3] [--distribution=arbitrary] [--nodelist=EOF,n1] "
            "[--kill-on-bad-exit=1] [/opt/x$(touch " +
                pwned + ")`touch " + pwned + "`] [run] [/tmp/" + hostile + ".pipe] [--model] [" + hostile +
                "]\n")
      << slurm;
  // Torchrun: one command per host.
  const std::string torchrun = printLaunchCommands(*h, LaunchKind::Torchrun, args, files, 29500);
  const std::string tcalls = runWithStandIns(dir / "torchrun", torchrun);
  EXPECT_FALSE(std::filesystem::exists(pwned)) << torchrun;
  std::istringstream lines(tcalls);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    ++n;
    EXPECT_EQ(line.rfind("torchrun [--nnodes] [2]", 0), 0u) << line;
    const std::string expected =
        std::string("[run] [/tmp/").append(hostile).append(".pipe] [--model] [").append(hostile).append("]");
    EXPECT_NE(line.find(expected), std::string::npos) << line;
  }
  EXPECT_EQ(n, 2) << torchrun;
  // The copy instructions (comments to paste): ssh and scp get "--" before the destination.
  std::string copies;
  std::istringstream all(torchrun);
  while (std::getline(all, line))
    if (line.rfind("#   ", 0) == 0) copies += line.substr(4) + "\n";
  const std::string ccalls = runWithStandIns(dir / "copies", copies);
  EXPECT_FALSE(std::filesystem::exists(pwned)) << copies;
  EXPECT_NE(ccalls.find("ssh [--] [EOF] [mkdir]"), std::string::npos) << ccalls;
  EXPECT_NE(ccalls.find("scp [--] [" + hostile + ".pipe] [EOF:/tmp/" + hostile + ".pipe]"), std::string::npos)
      << ccalls;
}

// One ssh call for the GUI's remote target and the cluster launcher (core::sshArguments).
TEST(SshCall, ArgumentsNameTheHostAfterDoubleDash) {
  ClusterHost h;
  h.host = "-oProxyCommand=evil";
  h.user = "ana";
  h.port = 2222;
  h.key = "/home/ana/my keys/id";
  h.sshOptions = {"  UserKnownHostsFile=/tmp/k h ", "   "};
  const std::vector<std::string> withAlive = sshArguments(h, SshCall{0.2, true});
  const std::vector<std::string> expected{
      "-o",
      "BatchMode=yes",
      "-o",
      "ConnectTimeout=1",  // at least one second
      "-o",
      "ServerAliveInterval=5",
      "-o",
      "ServerAliveCountMax=2",
      "-p",
      "2222",
      "-i",
      "/home/ana/my keys/id",
      "-o",
      "IdentitiesOnly=yes",
      "-o",
      "UserKnownHostsFile=/tmp/k h",  // trimmed; the blank option left out
      "--",
      "ana@-oProxyCommand=evil"};
  EXPECT_EQ(withAlive, expected);
  const std::vector<std::string> quiet = sshArguments(h, SshCall{7, false});
  EXPECT_EQ(quiet.size(), expected.size() - 4);
  EXPECT_EQ(quiet[3], "ConnectTimeout=7");
  EXPECT_EQ(quiet[4], "-p");
}

// One description of ssh's failures: what the GUI and the cluster launcher both say.
TEST(SshCall, FailuresAreNamedFromWhatSshSaid) {
  ClusterHost h;
  h.host = "gpu1.example.org";
  h.user = "ana";
  h.port = 2222;
  EXPECT_EQ(describeSshFailure(h, 255, "ana@gpu1.example.org: Permission denied (publickey).\n"),
            "authentication refused by ana@gpu1.example.org on port 2222: ana@gpu1.example.org: Permission "
            "denied (publickey). (check the user and the identity file)");
  EXPECT_EQ(describeSshFailure(h, 255, "Received disconnect: Too many authentication failures\n")
                .rfind("authentication refused by ana@gpu1.example.org on port 2222: ", 0),
            0u);
  EXPECT_EQ(describeSshFailure(h, 255, "@@@ WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! @@@\nmore\n")
                .rfind("the host key of gpu1.example.org is unknown or changed: more (", 0),
            0u);
  // Case and the many ways ssh says "unreachable".
  for (const char* said : {"ssh: connect to host gpu1.example.org port 2222: Connection refused",
                           "ssh: connect to host gpu1.example.org port 2222: Connection timed out",
                           "ssh: Could not resolve hostname gpu1.example.org: Name or service not known",
                           "kex_exchange_identification: read: Connection reset by peer",
                           "Connection closed by 10.0.0.5 port 2222", "CONNECTION REFUSED"})
    EXPECT_EQ(describeSshFailure(h, 255, std::string(said) + "\r\n"),
              "cannot reach gpu1.example.org on port 2222: " + std::string(said))
        << said;
  EXPECT_EQ(describeSshFailure(h, 255, ""),
            "the connection to ana@gpu1.example.org on port 2222 failed (ssh exit status 255)");
  EXPECT_EQ(describeSshFailure(h, 255, "something else\n"),
            "the connection to ana@gpu1.example.org on port 2222 failed: something else");
  EXPECT_EQ(describeSshFailure(h, 1, "Permission denied"), "");  // the remote command's own exit
  EXPECT_EQ(describeSshFailure(h, 0, ""), "");
}
