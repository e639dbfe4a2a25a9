// Reading traces as users have them: gzipped, in torchtitan's, Megatron-LM's and
// tensorboard_trace_handler's folders, streamed with progress and cancellation, ranks from the
// trace or the file name. Gzip data is made with gzip(1), as torch.profiler's export does it
// with Python's gzip module: the same format.
#include "pipestudio/core/io/trace_files.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "fixtures/files.h"
#include "pipestudio/core/io/trace_import.h"

using namespace ps::core;
using nlohmann::json;
using ps::test::freshDir;
using ps::test::readFile;
using ps::test::writeFile;
namespace fs = std::filesystem;

namespace {

json x(const std::string& name, double ts, double dur, long long pid = 1, long long tid = 1,
       const std::string& cat = "user_annotation") {
  return json{{"ph", "X"},  {"cat", cat}, {"name", name}, {"pid", pid},
              {"tid", tid}, {"ts", ts},   {"dur", dur}};
}

// One rank's trace of a 2-stage 1F1B with one micro-batch: F then B.
std::string rankTrace(int rank, std::optional<int> traced = std::nullopt) {
  json ev = json::array({x("PP:" + std::to_string(rank) + "F0", 100 + rank * 10, 50),
                         x("aten::mm", 110, 5, 1, 1, "cpu_op"),
                         x("PP:" + std::to_string(rank) + "B0", 300 - rank * 10, 80)});
  json top{{"traceEvents", ev}};
  if (traced) top["distributedInfo"] = {{"rank", *traced}, {"world_size", 2}};
  return top.dump(1);
}

// gzip -c of `text`, written to `path`.
void writeGzip(const std::string& path, const std::string& text) {
  const std::string plain = path + ".plain";
  writeFile(plain, text);
  ASSERT_EQ(std::system(("gzip -c -n '" + plain + "' > '" + path + "'").c_str()), 0);
  fs::remove(plain);
}

std::string names(const std::vector<std::string>& files) {
  std::string s;
  for (const auto& f : files) s += (s.empty() ? "" : " ") + fs::path(f).filename().string();
  return s;
}

bool hasNote(const Diagnostics& ds, const std::string& text) {
  for (const auto& d : ds)
    if (d.message.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(TraceFiles, GzipFilesImportLikePlainOnes) {
  auto dir = freshDir();
  writeGzip(dir.file("rank0.json.gz"), rankTrace(0));
  writeFile(dir.file("rank1.json"), rankTrace(1));
  auto r = importTraceFiles({dir.file("rank0.json.gz"), dir.file("rank1.json")});
  ASSERT_TRUE(r.ok()) << formatDiagnostics(r.errors());
  EXPECT_EQ(r->trace.timeline.devices, 2);
  EXPECT_EQ(r->trace.timeline.ops.size(), 4u);
  EXPECT_EQ(r->trace.bytesRead, rankTrace(0).size() + rankTrace(1).size());
  // In memory as well: TraceFile::text may hold gzip.
  auto gz = readFile(dir.file("rank0.json.gz"));
  ASSERT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);
  auto m = importChromeTrace(gz, "rank0.json.gz");
  ASSERT_TRUE(m.ok()) << formatDiagnostics(m.errors());
  EXPECT_EQ(m->timeline.ops.size(), 2u);
}

TEST(TraceFiles, ConcatenatedGzipMembersAreOneFile) {
  auto dir = freshDir();
  const std::string text = rankTrace(0);
  writeGzip(dir.file("a.gz"), text.substr(0, text.size() / 2));
  writeGzip(dir.file("b.gz"), text.substr(text.size() / 2));
  writeFile(dir.file("rank0.json.gz"), readFile(dir.file("a.gz")) + readFile(dir.file("b.gz")));
  auto r = importTraceFiles({dir.file("rank0.json.gz")});
  ASSERT_TRUE(r.ok()) << formatDiagnostics(r.errors());
  EXPECT_EQ(r->trace.timeline.ops.size(), 2u);
}

TEST(TraceFiles, TruncatedOrCorruptGzipIsAnErrorNamingTheFile) {
  auto dir = freshDir();
  // Big enough that the cut falls inside the compressed stream, not in its trailer alone.
  json ev = json::array();
  for (int i = 0; i < 2000; ++i) ev.push_back(x("aten::mm", i, 1, 1, 1, "cpu_op"));
  ev.push_back(x("PP:0F0", 5000, 10));
  writeGzip(dir.file("whole.json.gz"), json{{"traceEvents", ev}}.dump());
  const std::string gz = readFile(dir.file("whole.json.gz"));
  ASSERT_GT(gz.size(), 200u);
  for (size_t keep : {gz.size() - 4, gz.size() / 2, size_t{10}, size_t{2}}) {
    writeFile(dir.file("rank0_trace.json.gz"), gz.substr(0, keep));
    auto r = importTraceFiles({dir.file("rank0_trace.json.gz")});
    ASSERT_FALSE(r.ok()) << keep;
    EXPECT_EQ(r.error().code, "trace.gzip") << keep << ": " << r.error().message;
    EXPECT_NE(r.error().message.find("rank0_trace.json.gz"), std::string::npos);
    EXPECT_NE(r.error().message.find("truncated"), std::string::npos) << r.error().message;
  }
  std::string bad = gz;
  for (size_t i = 20; i < 60 && i < bad.size(); ++i) bad[i] = static_cast<char>(bad[i] ^ 0x5a);
  writeFile(dir.file("rank0_trace.json.gz"), bad);
  auto r = importTraceFiles({dir.file("rank0_trace.json.gz")});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "trace.gzip") << r.error().message;
  EXPECT_NE(r.error().message.find("rank0_trace.json.gz"), std::string::npos);
  // Trailing bytes that are no gzip member.
  writeFile(dir.file("rank0_trace.json.gz"), gz + "garbage");
  auto t = importTraceFiles({dir.file("rank0_trace.json.gz")});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().code, "trace.gzip");
}

TEST(TraceFiles, MalformedJsonInsideGzipNamesLineAndColumn) {
  auto dir = freshDir();
  writeGzip(dir.file("rank1.json.gz"), "{\"traceEvents\": [\n  {\"ph\": \"X\", \"name\": \"PP:0F0\",,}\n]}");
  auto r = importTraceFiles({dir.file("rank1.json.gz")});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "trace.json");
  EXPECT_EQ(r.error().location.line, 2);
  EXPECT_EQ(r.error().location.column,
            static_cast<int>(std::string("  {\"ph\": \"X\", \"name\": \"PP:0F0\",").size()) + 1);
  EXPECT_NE(r.error().message.find("rank1.json.gz"), std::string::npos);
  // A missing file is named too.
  auto missing = importTraceFiles({dir.file("rank9.json.gz")});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, "trace.open");
  EXPECT_NE(missing.error().message.find("rank9.json.gz"), std::string::npos);
}

TEST(TraceFiles, TorchtitanFolderNewestStepByDefaultAnotherOnRequest) {
  auto dir = freshDir();
  // <dump>/profiling/traces/iteration_<N>/rank<R>_trace.json.gz, steps 10, 20 and 100.
  for (int step : {10, 100, 20}) {
    const fs::path it = dir / "profiling" / "traces" / ("iteration_" + std::to_string(step));
    fs::create_directories(it);
    for (int r : {0, 1, 2, 3, 10, 11})
      writeGzip((it / ("rank" + std::to_string(r) + "_trace.json.gz")).string(), "{}");
  }
  for (const fs::path& given : {fs::path(dir), dir / "profiling", dir / "profiling" / "traces"}) {
    auto sel = findTraceFiles({given.string()});
    ASSERT_TRUE(sel.ok()) << formatDiagnostics(sel.errors());
    EXPECT_EQ(sel->layout, TraceLayout::Torchtitan);
    EXPECT_EQ(sel->steps, (std::vector<long long>{10, 20, 100}));
    ASSERT_TRUE(sel->step.has_value());
    EXPECT_EQ(*sel->step, 100);
    EXPECT_EQ(names(sel->files),
              "rank0_trace.json.gz rank1_trace.json.gz rank2_trace.json.gz rank3_trace.json.gz "
              "rank10_trace.json.gz rank11_trace.json.gz");
    EXPECT_NE(sel->files.front().find("iteration_100"), std::string::npos);
  }
  TraceDiscoveryOptions o;
  o.step = 20;
  auto twenty = findTraceFiles({dir.string()}, o);
  ASSERT_TRUE(twenty.ok());
  EXPECT_NE(twenty->files.front().find("iteration_20"), std::string::npos);
  o.step = 30;
  auto none = findTraceFiles({dir.string()}, o);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, "trace.folder");
  EXPECT_NE(none.error().message.find("iteration_10, iteration_20, iteration_100"), std::string::npos)
      << none.error().message;
}

TEST(TraceFiles, TorchtitanReplicaFoldersMustBeChosen) {
  auto dir = freshDir();
  const fs::path it = dir / "iteration_5";
  for (const char* replica : {"replica_0", "replica_1"}) {
    fs::create_directories(it / replica);
    writeGzip((it / replica / "rank0_trace.json.gz").string(), "{}");
  }
  auto sel = findTraceFiles({dir.string()});
  ASSERT_FALSE(sel.ok());
  EXPECT_NE(sel.error().message.find("replica_0, replica_1"), std::string::npos) << sel.error().message;
  fs::remove_all(it / "replica_1");
  auto one = findTraceFiles({dir.string()});
  ASSERT_TRUE(one.ok()) << formatDiagnostics(one.errors());
  EXPECT_EQ(one->files.size(), 1u);
}

TEST(TraceFiles, MegatronFolderIsItsTorchProfileNotItsChakraTraces) {
  auto dir = freshDir();
  fs::create_directories(dir / "torch_profile");
  fs::create_directories(dir / "chakra");
  fs::create_directories(dir / "tensorboard");
  for (int r = 0; r < 2; ++r) {
    writeGzip((dir / "torch_profile" / ("rank-" + std::to_string(r) + ".json.gz")).string(), rankTrace(r, r));
    writeGzip((dir / "chakra" / ("rank-" + std::to_string(r) + ".json.gz")).string(), "{\"nodes\": []}");
  }
  for (const fs::path& given : {fs::path(dir), dir / "torch_profile"}) {
    auto r = importTraceFiles({given.string()});
    ASSERT_TRUE(r.ok()) << formatDiagnostics(r.errors());
    EXPECT_EQ(r->selection.layout, TraceLayout::Megatron);
    EXPECT_EQ(names(r->selection.files), "rank-0.json.gz rank-1.json.gz");
    EXPECT_EQ(r->trace.timeline.devices, 2);
  }
}

TEST(TraceFiles, TensorboardHandlerFilesTakeTheirRankFromTheTraceNewestDumpPerWorker) {
  auto dir = freshDir();
  // <host>_<pid>.<ns>.pt.trace.json.gz: no rank in the name; worker 222 is rank 0.
  writeGzip(dir.file("gpu-node-1_222.1790000000000000100.pt.trace.json.gz"), rankTrace(0, 0));
  writeGzip(dir.file("gpu-node-1_111.1790000000000000200.pt.trace.json.gz"), rankTrace(1, 1));
  // An older profiling cycle of worker 111 (an earlier time in its name): left out.
  writeGzip(dir.file("gpu-node-1_111.1790000000000000050.pt.trace.json.gz"), "not even json");
  auto r = importTraceFiles({dir.string()});
  ASSERT_TRUE(r.ok()) << formatDiagnostics(r.errors());
  EXPECT_EQ(r->selection.layout, TraceLayout::TensorBoard);
  EXPECT_EQ(r->selection.files.size(), 2u);
  EXPECT_TRUE(hasNote(r->trace.timeline.diagnostics, "older profiling dump"))
      << formatDiagnostics(r->trace.timeline.diagnostics);
  const Timeline& t = r->trace.timeline;
  ASSERT_EQ(t.devices, 2);
  for (const auto& op : t.ops) EXPECT_EQ(op.device, op.op.stage);
}

TEST(TraceFiles, RankConflictsAreErrorsNamingBoth) {
  auto dir = freshDir();
  // The trace says rank 1, the name rank 0.
  writeFile(dir.file("rank0_trace.json"), rankTrace(1, 1));
  auto r = importTraceFiles({dir.file("rank0_trace.json")});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "trace.rank");
  EXPECT_NE(r.error().message.find("rank0_trace.json: the trace says rank 1"), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("file name says rank 0"), std::string::npos);
  EXPECT_GT(r.error().location.line, 0);
  // Two files of one rank.
  writeFile(dir.file("a.json"), rankTrace(0, 0));
  writeFile(dir.file("b.json"), rankTrace(0, 0));
  auto two = importTraceFiles({dir.file("a.json"), dir.file("b.json")});
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.error().code, "trace.rank");
  EXPECT_NE(two.error().message.find("rank 0 is in two files"), std::string::npos) << two.error().message;
  EXPECT_NE(two.error().message.find("a.json"), std::string::npos);
  EXPECT_NE(two.error().message.find("b.json"), std::string::npos);
  // Agreeing is fine, and a word that merely contains "rank" names none.
  writeFile(dir.file("frank-7.rank1.json"), rankTrace(1, 1));
  EXPECT_TRUE(importTraceFiles({dir.file("frank-7.rank1.json")}).ok());
}

TEST(TraceFiles, PlainFolderAndBothFormsOfOneTrace) {
  auto dir = freshDir();
  writeFile(dir.file("rank0.json"), rankTrace(0));
  writeGzip(dir.file("rank0.json.gz"), rankTrace(0));
  writeFile(dir.file("rank1.json"), rankTrace(1));
  writeFile(dir.file("notes.txt"), "not a trace");
  auto sel = findTraceFiles({dir.string()});
  ASSERT_TRUE(sel.ok());
  EXPECT_EQ(sel->layout, TraceLayout::Folder);
  EXPECT_EQ(names(sel->files), "rank0.json rank1.json");
  EXPECT_TRUE(hasNote(sel->notes, "uncompressed"));
  auto empty = freshDir("ps_empty");
  auto none = findTraceFiles({empty.string()});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, "trace.folder");
  EXPECT_NE(none.error().message.find(empty.string()), std::string::npos);
}

TEST(TraceFiles, SymlinkLoopsAreReportedNotThrown) {
  auto dir = freshDir();
  writeFile(dir.file("rank0.json"), rankTrace(0));
  fs::create_symlink("loop_b.json", dir / "loop_a.json");
  fs::create_symlink("loop_a.json", dir / "loop_b.json");
  fs::create_symlink("self", dir / "self");
  auto sel = findTraceFiles({dir.string()});
  ASSERT_TRUE(sel.ok()) << formatDiagnostics(sel.errors());
  EXPECT_EQ(names(sel->files), "rank0.json");
  EXPECT_TRUE(hasNote(sel->notes, "loop_a.json: skipped")) << formatDiagnostics(sel->notes);
  EXPECT_TRUE(hasNote(sel->notes, "self: skipped"));
}

TEST(TraceFiles, ProgressIsReportedAndCancelStopsTheImport) {
  auto dir = freshDir();
  json ev = json::array();
  for (int i = 0; i < 20000; ++i) ev.push_back(x("aten::mm", i, 1, 1, 1, "cpu_op"));
  ev.push_back(x("PP:0F0", 1e6, 10));
  const std::string text = json{{"traceEvents", ev}}.dump(1);
  ASSERT_GT(text.size(), size_t{1} << 20);
  writeGzip(dir.file("rank0.json.gz"), text);
  writeFile(dir.file("rank1.json"), rankTrace(1));
  TraceImportOptions o;
  std::vector<TraceProgress> seen;
  o.progress = [&](const TraceProgress& p) {
    seen.push_back(p);
    return true;
  };
  auto r = importTraceFiles({dir.string()}, o);
  ASSERT_TRUE(r.ok()) << formatDiagnostics(r.errors());
  ASSERT_GE(seen.size(), 3u);
  const std::uint64_t total = fs::file_size(dir / "rank0.json.gz") + fs::file_size(dir / "rank1.json");
  for (size_t i = 1; i < seen.size(); ++i) EXPECT_GE(seen[i].bytesRead, seen[i - 1].bytesRead);
  EXPECT_EQ(seen.back().bytesTotal, total);
  EXPECT_EQ(seen.back().bytesRead, total);
  EXPECT_EQ(seen.back().file, 1u);
  EXPECT_EQ(seen.back().files, 2u);

  int calls = 0;
  o.progress = [&](const TraceProgress&) { return ++calls < 2; };
  auto cancelled = importTraceFiles({dir.string()}, o);
  ASSERT_FALSE(cancelled.ok());
  EXPECT_EQ(cancelled.error().code, "trace.cancelled");
  EXPECT_EQ(calls, 2);
}
