// pipestudio-cli compare on traces as users have them (docs/debugger.md, "Importing traces"):
// real torch.profiler traces of PyTorch 2.11 runs in torchtitan's, Megatron-LM's and
// tensorboard_trace_handler's gzipped layouts (tests/data/traces/torch-2.11.0, written by
// tests/pytorch/make_traces.py), gzip errors, progress, and a large trace streamed in bounded
// memory (the child's peak resident set, from wait4).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"
#include "fixtures/files.h"

using namespace ps::test;
namespace fs = std::filesystem;

namespace {

const std::string kRoot = std::string(PIPESTUDIO_TEST_DATA_DIR) + "/traces/torch-2.11.0/";

CliResult compare(const std::string& dir, const std::string& extra = {}) {
  return runCli("compare " + kRoot + dir + "/plan.pipe --cost F=1,I=1,W=1 --json " + extra, Stderr::Separate);
}

// Every measured action has its planned one and the other way round.
void expectEveryActionMatched(const CliResult& r, int ops) {
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["unmatched_planned"].size(), 0u) << j["unmatched_planned"].dump();
  EXPECT_EQ(j["unmatched_measured"].size(), 0u) << j["unmatched_measured"].dump();
  EXPECT_EQ(j["matched"], ops);
  EXPECT_EQ(j["measured"]["ops"], ops);
}

// Runs the CLI with `args` (stdout and stderr to /dev/null) and returns its exit status and peak
// resident set in KiB.
std::pair<int, long> peakOf(const std::vector<std::string>& args) {
  pid_t pid = fork();
  if (pid == 0) {
    FILE* null = std::freopen("/dev/null", "w", stdout);
    (void)null;
    null = std::freopen("/dev/null", "w", stderr);
    (void)null;
    // Under AddressSanitizer (make asan-test) freed memory waits in a quarantine of 256 MiB by
    // default, which would count as resident here: keep it small.
    const char* asan = std::getenv("ASAN_OPTIONS");
    std::string opts = std::string(asan ? asan : "") + (asan ? ":" : "") +
                       "quarantine_size_mb=1:thread_local_quarantine_size_kb=64";
    setenv("ASAN_OPTIONS", opts.c_str(), 1);
    std::vector<char*> argv;
    std::string cli = PIPESTUDIO_CLI;
    argv.push_back(cli.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(cli.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  struct rusage ru {};
  wait4(pid, &status, 0, &ru);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ru.ru_maxrss};
}

std::string gunzip(const std::string& path) {
  std::string out;
  FILE* p = popen(("gzip -dc '" + path + "'").c_str(), "r");
  if (!p) return out;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

}  // namespace

TEST(TraceLayoutsCli, GpipeTensorboardHandlerFilesMatchEveryAction) {
  // ScheduleGPipe's "Forward i" / "Backward i" ranges, files named by
  // tensorboard_trace_handler(use_gzip=True): the rank only inside the trace.
  auto r = compare("gpipe_d2_m4_tensorboard", kRoot + "gpipe_d2_m4_tensorboard");
  expectEveryActionMatched(r, 16);
}

TEST(TraceLayoutsCli, OneFOneBWithTraceRangesInTorchtitanFoldersMatchesEveryAction) {
  // Schedule1F1B records no range; pipestudio.trace_ranges added them. torchtitan's folders of
  // two profiled steps: the newest unless --trace-step picks another.
  const std::string dir = kRoot + "1f1b_d2_m4_torchtitan";
  auto r = compare("1f1b_d2_m4_torchtitan", dir);
  expectEveryActionMatched(r, 18);  // F and B of 4 micro-batches on 2 ranks, a REDUCE_GRAD each
  EXPECT_NE(r.err.find("torchtitan's traces of step 20 (the newest of iteration_10, iteration_20)"),
            std::string::npos)
      << r.err;
  for (const std::string& given : {dir, dir + "/profiling", dir + "/profiling/traces"}) {
    auto ten = compare("1f1b_d2_m4_torchtitan", given + " --trace-step 10");
    expectEveryActionMatched(ten, 18);
    EXPECT_NE(ten.err.find("step 10 (chosen"), std::string::npos) << ten.err;
  }
  auto none = compare("1f1b_d2_m4_torchtitan", dir + " --trace-step 30");
  EXPECT_EQ(none.exitCode, 2);
  EXPECT_NE(none.err.find("no iteration_30 folder (there are iteration_10, iteration_20)"), std::string::npos)
      << none.err;
  // The files themselves, given one by one.
  const std::string it = dir + "/profiling/traces/iteration_10/";
  expectEveryActionMatched(
      compare("1f1b_d2_m4_torchtitan", it + "rank1_trace.json.gz " + it + "rank0_trace.json.gz"), 18);
}

TEST(TraceLayoutsCli, InterleavedRuntimeClassInMegatronFolderMatchesEveryAction) {
  // ScheduleInterleaved1F1B (the runtime's own PP: ranges, pipestudio.trace_ranges' nested in
  // them), traced where Megatron-LM writes: <tensorboard>/../torch_profile/rank-<r>.json.gz.
  const std::string dir = kRoot + "interleaved-1f1b_d2_v2_m4_megatron";
  for (const std::string& given : {dir, dir + "/torch_profile"}) {
    auto r = compare("interleaved-1f1b_d2_v2_m4_megatron", given);
    expectEveryActionMatched(r, 92);
  }
}

TEST(TraceLayoutsCli, BrokenGzipIsAnErrorNamingTheFile) {
  auto dir = freshDir();
  const std::string good = kRoot + "interleaved-1f1b_d2_v2_m4_megatron/torch_profile/rank-0.json.gz";
  const std::string gz = readFile(good);
  ASSERT_GT(gz.size(), 1000u);
  fs::create_directories(dir / "torch_profile");
  writeFile(dir / "torch_profile" / "rank-0.json.gz", gz.substr(0, gz.size() / 2));
  auto r = compare("interleaved-1f1b_d2_v2_m4_megatron", dir.string());
  EXPECT_EQ(r.exitCode, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("rank-0.json.gz: truncated gzip data"), std::string::npos) << r.err;
  std::string bad = gz;
  for (size_t i = 100; i < 400; ++i) bad[i] = static_cast<char>(bad[i] ^ 0x33);
  writeFile(dir / "torch_profile" / "rank-0.json.gz", bad);
  auto c = compare("interleaved-1f1b_d2_v2_m4_megatron", dir.string());
  EXPECT_EQ(c.exitCode, 1);
  EXPECT_NE(c.err.find("rank-0.json.gz: not valid gzip data"), std::string::npos) << c.err;
}

TEST(TraceLayoutsCli, ProgressOnRequest) {
  auto r =
      compare("interleaved-1f1b_d2_v2_m4_megatron", kRoot + "interleaved-1f1b_d2_v2_m4_megatron --progress");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  // Not a terminal: a line per tenth reached (these small files reach several at once).
  EXPECT_NE(r.err.find("reading traces: 100%\n"), std::string::npos) << r.err;
  // Not asked for and not a terminal: nothing.
  auto quiet = compare("interleaved-1f1b_d2_v2_m4_megatron", kRoot + "interleaved-1f1b_d2_v2_m4_megatron");
  EXPECT_EQ(quiet.err.find("reading traces"), std::string::npos);
}

TEST(TraceLayoutsCli, ALargeTraceIsStreamedInBoundedMemory) {
  // A real rank trace (record_shapes, as torchtitan profiles) repeated to ~48 MiB of JSON, as
  // bench/make_big_trace.py does for the multi-GB benchmark: each copy shifted past the last.
  // The import keeps the pipeline actions, not the file: the CLI's peak resident set grows by
  // far less than the file (read whole, it would grow by several times the file).
  auto dir = freshDir();
  const std::string source =
      kRoot + "1f1b_d2_m4_torchtitan/profiling/traces/iteration_20/rank1_trace.json.gz";
  auto top = nlohmann::json::parse(gunzip(source));
  ASSERT_TRUE(top.contains("traceEvents"));
  nlohmann::json events = std::move(top["traceEvents"]);
  top.erase("traceEvents");
  double first = 1e300, last = -1e300;
  for (const auto& e : events)
    if (e.contains("ts") && e["ts"].is_number() && e.value("ph", "") != "M") {
      first = std::min(first, e["ts"].get<double>());
      last = std::max(last, e["ts"].get<double>() + e.value("dur", 0.0));
    }
  const std::string big = (dir / "rank1_trace.json").string();
  size_t bytes = 0;
  int copies = 0;
  {
    std::ofstream out(big, std::ios::binary);
    std::string head = top.dump();
    head.pop_back();
    out << head << ",\"traceEvents\":[\n";
    bool comma = false;
    for (; bytes < (size_t{48} << 20); ++copies) {
      const double shift = copies * ((last - first) * 1.1 + 1000.0);
      for (auto e : events) {
        if (e.value("ph", "") == "M" && copies > 0) continue;
        if (e.contains("ts") && e["ts"].is_number()) e["ts"] = e["ts"].get<double>() + shift;
        std::string line = (comma ? ",\n" : "") + e.dump(1);
        comma = true;
        bytes += line.size();
        out << line;
      }
    }
    out << "\n]}\n";
  }
  ASSERT_EQ(std::system(("gzip -1 -k '" + big + "'").c_str()), 0);
  const std::string plan = kRoot + "1f1b_d2_m4_torchtitan/plan.pipe";
  auto [okSmall, small] = peakOf({"compare", plan, "--cost", "F=1", source});
  ASSERT_EQ(okSmall, 0);
  for (const std::string& trace : {big, big + ".gz"}) {
    SCOPED_TRACE(trace);
    auto [code, peak] = peakOf({"compare", plan, "--cost", "F=1", trace});
    ASSERT_EQ(code, 0);
    const long grewKb = peak - small;
    // ~48 MiB read; what grows is the actions of every copy (copies x 9 ranges), a few MiB.
    EXPECT_LT(grewKb, static_cast<long>(bytes / 1024 / 4))
        << "peak " << peak << " KiB against " << small << " KiB for one copy; " << copies << " copies, "
        << bytes / 1024 << " KiB of JSON";
  }
}
