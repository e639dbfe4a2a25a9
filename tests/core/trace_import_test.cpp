// Import of torch.profiler-style and PipeStudio Chrome traces. The traces are written here
// from the documented format (docs/debugger.md): "X" complete events and "B"/"E" pairs,
// ts/dur in microseconds, PP:<action> range names, metadata events, unrelated events.
#include "pipestudio/core/io/trace_import.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <tuple>

#include "fixtures/schedules.h"
#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/io/chrome_trace.h"
#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/core/planning/generators.h"

using namespace ps::core;
using nlohmann::json;

namespace {

json x(const std::string& name, const std::string& cat, long long pid, long long tid, double ts, double dur) {
  return json{{"ph", "X"},  {"name", name}, {"cat", cat}, {"pid", pid},
              {"tid", tid}, {"ts", ts},     {"dur", dur}};
}

json meta(const std::string& what, long long pid, json args) {
  return json{{"ph", "M"}, {"name", what}, {"pid", pid}, {"tid", 0}, {"args", std::move(args)}};
}

const TimelineOp* findOp(const Timeline& t, OpKind k, int stage, int mb) {
  for (const auto& o : t.ops)
    if (o.op.kind == k && o.op.stage == stage && o.op.microbatch == mb) return &o;
  return nullptr;
}

// One rank of a 2-stage run as torch.profiler writes it: CPU-side user_annotation ranges
// on the host process (pid 4242), their GPU-side projections on the GPU "process" (pid =
// the CUDA device), kernels and cpu_ops that are no pipeline actions, and metadata.
json torchRankTrace(int rank, double cpuShiftUs) {
  json ev = json::array();
  const long long host = 4242 + rank;
  ev.push_back(meta("process_name", host, {{"name", "python " + std::to_string(host)}}));
  ev.push_back(meta("process_name", rank, {{"name", "GPU " + std::to_string(rank)}}));
  ev.push_back(meta("thread_name", host, {{"name", "thread 1 (python)"}}));
  ev.push_back(x("ProfilerStep#3", "user_annotation", host, 1, 900, 5000));
  ev.push_back(x("aten::mm", "cpu_op", host, 1, 1010, 5));
  ev.push_back(x("ampere_sgemm_128x64_nn", "kernel", rank, 7, 1120, 40));
  if (rank == 0) {
    // CPU side: 0F0 at [1000, 1100], 0F1 at [1200,1300], 0B0 at [2000, 2300], 0B1 at [2400, 2700]
    ev.push_back(x("PP:0F0", "user_annotation", host, 1, 1000 + cpuShiftUs, 100));
    ev.push_back(x("PP:0F1", "user_annotation", host, 1, 1200 + cpuShiftUs, 100));
    ev.push_back(x("PP:0B0", "user_annotation", host, 1, 2000 + cpuShiftUs, 300));
    ev.push_back(x("PP:0B1", "user_annotation", host, 1, 2400 + cpuShiftUs, 300));
    // GPU side (what the device really did): a bit later and longer
    ev.push_back(x("PP:0F0", "gpu_user_annotation", rank, 7, 1010, 150));
    ev.push_back(x("PP:0F1", "gpu_user_annotation", rank, 7, 1210, 150));
    ev.push_back(x("PP:0B0", "gpu_user_annotation", rank, 7, 2010, 350));
    ev.push_back(x("PP:0B1", "gpu_user_annotation", rank, 7, 2410, 350));
    ev.push_back(x("PP:0SEND_F0", "user_annotation", host, 1, 1101 + cpuShiftUs, 2));
  } else {
    ev.push_back(x("PP:1RECV_F0", "user_annotation", host, 1, 1102 + cpuShiftUs, 2));
    ev.push_back(x("PP:1F0", "gpu_user_annotation", rank, 7, 1300, 200));
    ev.push_back(x("PP:1B0", "gpu_user_annotation", rank, 7, 1600, 380));
    ev.push_back(x("PP:1F1", "gpu_user_annotation", rank, 7, 1990, 200));
    ev.push_back(x("PP:1B1", "gpu_user_annotation", rank, 7, 2200, 400));
    ev.push_back(x("PP:1F0", "user_annotation", host, 1, 1290, 10));
  }
  return json{{"schemaVersion", 1},
              {"distributedInfo", {{"backend", "nccl"}, {"rank", rank}, {"world_size", 2}}},
              {"deviceProperties", json::array()},
              {"traceEvents", ev},
              {"traceName", "rank" + std::to_string(rank) + ".pt.trace.json"},
              {"displayTimeUnit", "ms"}};
}

// The traces of ranks 0 and 1 (no clock shift), imported from the given side.
Result<ImportedTrace> importTwoRanks(TraceSide side) {
  std::vector<TraceFile> files = {{"a.json", torchRankTrace(0, 0).dump(), std::nullopt},
                                  {"b.json", torchRankTrace(1, 0).dump(), std::nullopt}};
  TraceImportOptions o;
  o.side = side;
  return importChromeTraces(files, o);
}

}  // namespace

TEST(PipelineAction, ParsesPyTorchActionFormat) {
  auto a = parsePipelineAction("0F1");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->op, (Op{OpKind::F, 0, 1}));
  EXPECT_FALSE(a->overlapped());

  auto b = parsePipelineAction("12I30");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->op, (Op{OpKind::I, 12, 30}));

  auto send = parsePipelineAction("1SEND_F0");
  ASSERT_TRUE(send.ok());
  EXPECT_EQ(send->op, (Op{OpKind::SendF, 1, 0}));

  auto recvb = parsePipelineAction("3RECV_B7");
  ASSERT_TRUE(recvb.ok());
  EXPECT_EQ(recvb->op, (Op{OpKind::RecvB, 3, 7}));

  auto unshard = parsePipelineAction("2UNSHARD");
  ASSERT_TRUE(unshard.ok());
  EXPECT_EQ(unshard->op, (Op{OpKind::Unshard, 2, -1}));

  auto pair = parsePipelineAction("(0F7;7B3)OVERLAP_F_B");
  ASSERT_TRUE(pair.ok());
  EXPECT_EQ(pair->op, (Op{OpKind::F, 0, 7}));
  ASSERT_TRUE(pair->overlapped());
  EXPECT_EQ(*pair->second, (Op{OpKind::B, 7, 3}));
}

TEST(PipelineAction, RejectsMalformedActions) {
  for (const char* bad :
       {"", "F1", "0X1", "0F", "0F1x", "(0F1)OVERLAP_F_B", "(0F1;1B0", "0UNSHARD3", "(0F1;1B0)SOMETHING"}) {
    auto a = parsePipelineAction(bad);
    EXPECT_FALSE(a.ok()) << bad;
    if (!a.ok()) {
      EXPECT_EQ(a.error().code, "trace.action");
    }
  }
}

TEST(TraceImport, TorchProfilerPerRankFilesPreferGpuRanges) {
  std::vector<TraceFile> files = {
      {"/tmp/run/rank0.pt.trace.json", torchRankTrace(0, 0).dump(), std::nullopt},
      {"/tmp/run/rank1.pt.trace.json", torchRankTrace(1, 0).dump(), std::nullopt}};
  auto r = importChromeTraces(files);
  ASSERT_TRUE(r.ok()) << formatDiagnostics(r.errors());
  const Timeline& t = r->timeline;
  EXPECT_EQ(r->format, TraceFormat::TorchProfiler);
  EXPECT_EQ(t.source, TimelineSource::Imported);
  EXPECT_EQ(t.devices, 2);
  ASSERT_EQ(r->deviceSides.size(), 2u);
  EXPECT_EQ(r->deviceSides[0], TraceSide::Gpu);
  EXPECT_EQ(r->deviceSides[1], TraceSide::Gpu);
  // The 8 GPU-side compute ranges, and the SEND/RECV that only the host recorded; the
  // CPU-side twins of GPU ranges, kernels, cpu_ops and ProfilerStep are dropped.
  ASSERT_EQ(t.ops.size(), 10u);
  ASSERT_NE(findOp(t, OpKind::SendF, 0, 0), nullptr);
  ASSERT_NE(findOp(t, OpKind::RecvF, 1, 0), nullptr);
  EXPECT_EQ(t.transfers.size(), 1u);
  // Origin at the first op (GPU 0F0 at 1010 us); us -> ms.
  const TimelineOp* f0 = findOp(t, OpKind::F, 0, 0);
  ASSERT_NE(f0, nullptr);
  EXPECT_EQ(f0->device, 0);
  EXPECT_DOUBLE_EQ(f0->start, 0.0);
  EXPECT_DOUBLE_EQ(f0->end, 0.150);
  const TimelineOp* b1 = findOp(t, OpKind::B, 1, 1);
  ASSERT_NE(b1, nullptr);
  EXPECT_EQ(b1->device, 1);
  EXPECT_NEAR(b1->start, (2200 - 1010) / 1000.0, 1e-12);
  EXPECT_NEAR(b1->duration(), 0.400, 1e-12);
  EXPECT_EQ(b1->step, -1);
  // Sorted by (device, start).
  EXPECT_TRUE(std::is_sorted(t.ops.begin(), t.ops.end(), [](const TimelineOp& a, const TimelineOp& b) {
    return std::tie(a.device, a.start) < std::tie(b.device, b.start);
  }));
  EXPECT_GT(r->ignoredEvents, 0u);
  EXPECT_EQ(t.label, "rank0.pt.trace.json, rank1.pt.trace.json");
  // Metrics filled: makespan from GPU 0F0 start (1010 us) to GPU 0B1 end (2410 + 350 us).
  EXPECT_NEAR(t.metrics.makespan, 1.750, 1e-9);
  ASSERT_EQ(t.metrics.devices.size(), 2u);
}

TEST(TraceImport, GpuSideOnlyOnRequest) {
  auto r = importTwoRanks(TraceSide::Gpu);
  ASSERT_TRUE(r.ok()) << formatDiagnostics(r.errors());
  EXPECT_EQ(r->timeline.ops.size(), 8u);
  EXPECT_EQ(findOp(r->timeline, OpKind::SendF, 0, 0), nullptr);
}

TEST(TraceImport, CpuSideOnRequestAndTransfersFromSendRecv) {
  auto r = importTwoRanks(TraceSide::Cpu);
  ASSERT_TRUE(r.ok()) << formatDiagnostics(r.errors());
  const Timeline& t = r->timeline;
  // Rank 0: 4 compute + SEND_F; rank 1: RECV_F + F0 (the only CPU-side compute range).
  EXPECT_EQ(t.ops.size(), 7u);
  const TimelineOp* f0 = findOp(t, OpKind::F, 0, 0);
  ASSERT_NE(f0, nullptr);
  EXPECT_DOUBLE_EQ(f0->start, 0.0);
  EXPECT_DOUBLE_EQ(f0->end, 0.1);
  ASSERT_EQ(t.transfers.size(), 1u);
  const Transfer& tr = t.transfers[0];
  EXPECT_EQ(tr.srcDevice, 0);
  EXPECT_EQ(tr.dstDevice, 1);
  EXPECT_EQ(tr.producer, (Op{OpKind::F, 0, 0}));
  EXPECT_EQ(tr.consumer, (Op{OpKind::F, 1, 0}));
  EXPECT_NEAR(tr.start, 0.101, 1e-12);
  EXPECT_NEAR(tr.end, 0.104, 1e-12);
}

TEST(TraceImport, RankFromFileNameAndBaseTimeAlignsFiles) {
  // No distributedInfo: ranks from the file names. Each file counts ts from its own
  // baseTimeNanoseconds; rank 1's base is 2 ms later.
  auto mk = [](const std::string& action, double ts, long long base) {
    json ev = json::array({x("PP:" + action, "user_annotation", 77, 1, ts, 500)});
    return json{{"traceEvents", ev}, {"baseTimeNanoseconds", base}}.dump();
  };
  std::vector<TraceFile> files = {
      {"dir/trace_rank_1.json", mk("1F0", 100, 1'700'000'002'000'000LL), std::nullopt},
      {"dir/trace_rank_0.json", mk("0F0", 100, 1'700'000'000'000'000LL), std::nullopt}};
  auto r = importChromeTraces(files);
  ASSERT_TRUE(r.ok()) << formatDiagnostics(r.errors());
  const Timeline& t = r->timeline;
  ASSERT_EQ(t.ops.size(), 2u);
  EXPECT_EQ(t.ops[0].device, 0);
  EXPECT_EQ(t.ops[0].op, (Op{OpKind::F, 0, 0}));
  EXPECT_DOUBLE_EQ(t.ops[0].start, 0.0);
  EXPECT_EQ(t.ops[1].device, 1);
  EXPECT_NEAR(t.ops[1].start, 2.0, 1e-9);
  EXPECT_NEAR(t.ops[1].end, 2.5, 1e-9);
}

TEST(TraceImport, MergedFileWithBeginEndPairsRanksFromProcessMetadata) {
  json ev = json::array();
  ev.push_back(meta("process_name", 11, {{"name", "Rank 1"}}));
  ev.push_back(meta("process_name", 10, {{"name", "Rank 0"}}));
  auto be = [&](const std::string& ph, const std::string& name, long long pid, double ts) {
    json e{{"ph", ph}, {"pid", pid}, {"tid", 3}, {"ts", ts}, {"cat", "user_annotation"}};
    if (!name.empty()) e["name"] = name;
    ev.push_back(e);
  };
  be("B", "PP:(0F2;1B0)OVERLAP_F_B", 10, 5000);
  be("B", "aten::linear", 10, 5010);  // nested unrelated range
  be("E", "", 10, 5020);
  be("E", "", 10, 5800);
  be("B", "PP:1W0", 11, 6000);
  be("E", "PP:1W0", 11, 6250);
  ev.push_back(json{{"ph", "i"}, {"name", "marker"}, {"pid", 10}, {"tid", 3}, {"ts", 5100}});
  auto r = importChromeTrace(json{{"traceEvents", ev}}.dump(), "merged.json");
  ASSERT_TRUE(r.ok()) << formatDiagnostics(r.errors());
  const Timeline& t = r->timeline;
  EXPECT_EQ(t.devices, 2);
  ASSERT_EQ(t.ops.size(), 3u);
  const TimelineOp* f = findOp(t, OpKind::F, 0, 2);
  const TimelineOp* b = findOp(t, OpKind::B, 1, 0);
  const TimelineOp* w = findOp(t, OpKind::W, 1, 1 - 1);
  ASSERT_TRUE(f && b && w);
  EXPECT_TRUE(f->overlapped);
  EXPECT_TRUE(b->overlapped);
  EXPECT_EQ(f->device, 0);
  EXPECT_EQ(b->device, 0);
  EXPECT_DOUBLE_EQ(f->start, 0.0);
  EXPECT_DOUBLE_EQ(f->end, 0.8);
  EXPECT_DOUBLE_EQ(b->end, 0.8);
  EXPECT_EQ(w->device, 1);
  EXPECT_FALSE(w->overlapped);
  EXPECT_DOUBLE_EQ(w->start, 1.0);
  EXPECT_DOUBLE_EQ(w->end, 1.25);
}

TEST(TraceImport, SeveralIterationsImportsTheLastByDefault) {
  json ev = json::array();
  for (int it = 0; it < 3; ++it) {
    double base = it * 10000.0;
    ev.push_back(x("PP:0F0", "user_annotation", 1, 1, base + 0, 100 + it * 10));
    ev.push_back(x("PP:0B0", "user_annotation", 1, 1, base + 200, 300));
  }
  std::string text = json{{"traceEvents", ev}, {"distributedInfo", {{"rank", 0}}}}.dump();
  auto last = importChromeTrace(text, "t.json");
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->iterations, 3);
  EXPECT_EQ(last->iteration, 2);
  ASSERT_EQ(last->timeline.ops.size(), 2u);
  EXPECT_DOUBLE_EQ(last->timeline.ops[0].start, 0.0);
  EXPECT_DOUBLE_EQ(last->timeline.ops[0].end, 0.120);
  EXPECT_DOUBLE_EQ(last->timeline.ops[1].start, 0.200);
  bool noted = std::any_of(last->timeline.diagnostics.begin(), last->timeline.diagnostics.end(),
                           [](const Diagnostic& d) { return d.code == "trace.iterations"; });
  EXPECT_TRUE(noted);

  TraceImportOptions o;
  o.iteration = 0;
  auto first = importChromeTrace(text, "t.json", o);
  ASSERT_TRUE(first.ok());
  EXPECT_DOUBLE_EQ(first->timeline.ops[0].end, 0.100);

  o.iteration = 3;
  auto none = importChromeTrace(text, "t.json", o);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, "trace.iteration");
}

TEST(TraceImport, RepeatedStageActionsBelongToTheirIteration) {
  // PyTorch's runtime unshards and reshards a stage again within one step when its window of
  // three stages moves on (four stages on a rank): 0UNSHARD twice per step here, and the
  // step's first UNSHARD comes before its first F, its last RESHARD and REDUCE_GRAD after its
  // last W.
  json ev = json::array();
  for (int it = 0; it < 2; ++it) {
    const double base = it * 10000.0;
    ev.push_back(x("PP:0UNSHARD", "user_annotation", 1, 1, base + 0, 5));
    ev.push_back(x("PP:0F0", "user_annotation", 1, 1, base + 10, 100));
    ev.push_back(x("PP:0RESHARD", "user_annotation", 1, 1, base + 120, 5));
    ev.push_back(x("PP:0UNSHARD", "user_annotation", 1, 1, base + 130, 5));
    ev.push_back(x("PP:0B0", "user_annotation", 1, 1, base + 140, 200));
    ev.push_back(x("PP:0REDUCE_GRAD", "user_annotation", 1, 1, base + 350, 5));
    ev.push_back(x("PP:0RESHARD", "user_annotation", 1, 1, base + 360, 5));
  }
  std::string text = json{{"traceEvents", ev}, {"distributedInfo", {{"rank", 0}}}}.dump();
  for (int k : {0, 1}) {
    TraceImportOptions o;
    o.iteration = k;
    auto r = importChromeTrace(text, "t.json", o);
    ASSERT_TRUE(r.ok()) << formatDiagnostics(r.errors());
    EXPECT_EQ(r->iterations, 2);
    ASSERT_EQ(r->timeline.ops.size(), 7u) << "iteration " << k;
    EXPECT_EQ(r->timeline.ops.front().op.kind, OpKind::Unshard);
    EXPECT_DOUBLE_EQ(r->timeline.ops.front().start, 0.0);
    EXPECT_EQ(r->timeline.ops.back().op.kind, OpKind::Reshard);
    EXPECT_DOUBLE_EQ(r->timeline.ops.back().end, 0.365);
  }
}

TEST(TraceImport, RealTorchTraceOfFourStagesPerRankIsOneIteration) {
  // tests/data/traces/torch-2.11.0: torch.profiler in PyTorch's runtime, 4 stages per rank.
  const std::string dir =
      std::string(PIPESTUDIO_TEST_DATA_DIR) + "/traces/torch-2.11.0/interleaved-1f1b_d2_v4_m2/";
  std::vector<TraceFile> files;
  for (const char* f : {"rank0.json", "rank1.json"}) {
    std::ifstream in(dir + f, std::ios::binary);
    files.push_back(TraceFile{dir + f, std::string(std::istreambuf_iterator<char>(in), {}), std::nullopt});
    ASSERT_FALSE(files.back().text.empty()) << f;
  }
  auto r = importChromeTraces(files);
  ASSERT_TRUE(r.ok()) << formatDiagnostics(r.errors());
  EXPECT_EQ(r->iterations, 1);
  EXPECT_EQ(r->timeline.devices, 2);
  auto count = [&](OpKind k) {
    return std::count_if(r->timeline.ops.begin(), r->timeline.ops.end(),
                         [&](const TimelineOp& o) { return o.op.kind == k; });
  };
  EXPECT_EQ(count(OpKind::F), 16);  // 8 stages x 2 micro-batches
  EXPECT_EQ(count(OpKind::B), 16);
  EXPECT_GT(count(OpKind::Unshard), 8);  // some stage is unsharded twice
  EXPECT_EQ(count(OpKind::Unshard), count(OpKind::Reshard));
  EXPECT_EQ(count(OpKind::ReduceGrad), 8);
}

TEST(TraceImport, MalformedJsonNamesFileAndPosition) {
  std::string text = "{\"traceEvents\": [\n  {\"ph\": \"X\", \"name\": \"PP:0F0\",,}\n]}";
  auto r = importChromeTrace(text, "broken_rank0.json");
  ASSERT_FALSE(r.ok());
  const Diagnostic& d = r.error();
  EXPECT_EQ(d.code, "trace.json");
  EXPECT_EQ(d.location.file, "broken_rank0.json");
  EXPECT_EQ(d.location.line, 2);
  EXPECT_EQ(d.location.column,
            static_cast<int>(std::string("  {\"ph\": \"X\", \"name\": \"PP:0F0\",").size()) + 1);
  EXPECT_NE(d.message.find("broken_rank0.json"), std::string::npos);
  EXPECT_NE(d.message.find("byte"), std::string::npos);
}

TEST(TraceImport, JsonNumbersOutOfRangeAsNlohmannReadsThem) {
  // The streaming reader's grammar is nlohmann's: a number too large for a double is an error
  // (with or without an exponent), one too small reads as 0; strings decode escapes and UTF-8.
  const std::string events = R"("traceEvents": [{"ph": "X", "cat": "user_annotation", "name": "PP:0F0",
      "pid": 1, "tid": 1, "ts": 0, "dur": 5, "args": {"s": "\u00e9\ud83d\ude00\n", "u": 1e-400}}])";
  for (const std::string& big :
       std::vector<std::string>{std::string("1e400"), "-2.5E+309", "1" + std::string(400, '0') + ".5"}) {
    auto r = importChromeTrace(std::string("{\"x\": ").append(big).append(", ").append(events).append("}"),
                               "big.json");
    ASSERT_FALSE(r.ok()) << big;
    EXPECT_EQ(r.error().code, "trace.json") << big;
    EXPECT_NE(r.error().message.find("overflow"), std::string::npos) << r.error().message;
    EXPECT_EQ(r.error().location.column, 7) << big;
  }
  for (const std::string& small :
       std::vector<std::string>{std::string("1e-400"), "0.000e999999", "-0." + std::string(400, '0') + "1"}) {
    auto r = importChromeTrace(std::string("{\"x\": ").append(small).append(", ").append(events).append("}"),
                               "small.json");
    ASSERT_TRUE(r.ok()) << small << ": " << formatDiagnostics(r.errors());
    EXPECT_EQ(r->timeline.ops.size(), 1u);
  }
  for (const std::string& bad :
       std::vector<std::string>{std::string("01"), "1.", "-", ".5", "1e", "+1", "0x10", "1.5e+"}) {
    auto r = importChromeTrace(std::string("{\"x\": ").append(bad).append(", ").append(events).append("}"),
                               "bad.json");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, "trace.json") << bad;
  }
}

// The streaming reader is PipeStudio's own (core/src/io/json_stream.cpp); nlohmann::json is the
// reference for what is JSON. Mutated traces get the same verdict, and a trace read across the
// reader's 256 KiB chunk boundary at every position imports the same, errors at the same place.
const char* const kReaderSeed = R"({"distributedInfo": {"rank": 0, "backend": "gloo"},
"deviceProperties": [{"id": 0, "name": "caf\u00e9 \ud83d\ude00", "totalGlobalMem": 85e9}],
"traceEvents": [
{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1.5, "dur": 2,
 "args": {"Input Dims": [[4096, 4096], []], "Input type": ["float", "\"q\"\\\/\b\f\n\r\t"], "x": -0.25e-3}},
{"ph": "X", "cat": "user_annotation", "name": "PP:0F0", "pid": 1, "tid": 1, "ts": 10, "dur": 5,
 "args": {"s": "é😀", "n": null, "t": true, "f": false, "big": 18446744073709551615}},
{"ph": "X", "cat": "user_annotation", "name": "PP:0B0", "pid": 1, "tid": 1, "ts": 20, "dur": 7},
{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python3"}}
], "traceName": "rank0.pt.trace.json", "baseTimeNanoseconds": 1700000000000000000}
)";

TEST(TraceImport, StreamingReaderAgreesWithNlohmannOnMutatedTraces) {
  const std::string seed = kReaderSeed;
  ASSERT_TRUE(json::accept(seed));
  ASSERT_TRUE(importChromeTrace(seed, "seed.json").ok());
  const std::string alphabet = "{}[]\",:\\/u09aefnlrstx.eE+- \n\t\x01\x7f\xc3\xa9\xed\xa0\xf0\x9f\xf5";
  std::mt19937 rng(26);
  int valid = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string s = seed;
    for (int m = 1 + static_cast<int>(rng() % 3); m > 0; --m) {
      const size_t at = rng() % s.size();
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0:
          s.insert(at, 1, c);
          break;
        case 1:
          s.erase(at, 1);
          break;
        default:
          s[at] = c;
      }
    }
    const bool ok = json::accept(s);
    valid += ok;
    auto r = importChromeTrace(s, "mutated.json");
    if (ok)
      EXPECT_TRUE(r.ok() || r.error().code != "trace.json") << s << "\n" << r.error().message;
    else
      EXPECT_TRUE(!r.ok() && (r.error().code == "trace.json" || r.error().code == "trace.format")) << s;
  }
  EXPECT_GT(valid, 100);  // the mutations leave some traces valid: both verdicts are compared

  const auto ops = [](const ImportedTrace& t) {
    std::vector<std::tuple<int, Op, double, double>> v;
    for (const TimelineOp& o : t.timeline.ops) v.emplace_back(o.device, o.op, o.start, o.end);
    return v;
  };
  const auto plain = importChromeTrace(seed, "seed.json");
  std::string broken = seed;
  broken.insert(broken.find("\"dur\": 7"), "\"dur\" 7, ");  // a missing ':' on line 8
  const auto brokenPlain = importChromeTrace(broken, "seed.json");
  ASSERT_FALSE(brokenPlain.ok());
  EXPECT_EQ(brokenPlain.error().location.line, 8);
  const size_t chunk = size_t{1} << 18;
  for (size_t k = 0; k < seed.size(); ++k) {
    // A line of padding puts byte k of the trace (from its second line on) at a chunk's start.
    const std::string pad = std::string(chunk - k - 1, ' ') + "\n";
    auto r = importChromeTrace(pad + seed, "seed.json");
    ASSERT_TRUE(r.ok()) << k << ": " << formatDiagnostics(r.errors());
    EXPECT_EQ(ops(*r), ops(*plain)) << k;
    EXPECT_EQ(r->timeline.diagnostics.size(), plain->timeline.diagnostics.size()) << k;
    auto b = importChromeTrace(pad + broken, "seed.json");
    ASSERT_FALSE(b.ok()) << k;
    EXPECT_EQ(b.error().location.line, brokenPlain.error().location.line + 1) << k;
    EXPECT_EQ(b.error().location.column, brokenPlain.error().location.column) << k;
  }
}

TEST(TraceImport, NotATraceAndNoActionsAreErrors) {
  auto obj = importChromeTrace("{\"foo\": 1}", "x.json");
  ASSERT_FALSE(obj.ok());
  EXPECT_EQ(obj.error().code, "trace.format");
  EXPECT_NE(obj.error().message.find("x.json"), std::string::npos);

  auto empty = importChromeTrace(
      json{{"traceEvents", json::array({x("aten::mm", "cpu_op", 1, 1, 0, 5)})}}.dump(), "y.json");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().code, "trace.empty");

  auto none = importChromeTraces({});
  EXPECT_FALSE(none.ok());
}

TEST(TraceImport, BadActionNamesAndBadEventsAreWarningsNotErrors) {
  json ev = json::array();
  ev.push_back(x("PP:0F0", "user_annotation", 1, 1, 0, 10));
  ev.push_back(x("PP:zzz", "user_annotation", 1, 1, 20, 10));
  ev.push_back(json{{"ph", "X"}, {"name", "PP:0B0"}, {"pid", 1}, {"tid", 1}, {"ts", "oops"}});
  ev.push_back(json{{"ph", "E"}, {"name", "PP:0W0"}, {"pid", 1}, {"tid", 1}, {"ts", 40}});
  ev.push_back(17);
  auto r = importChromeTrace(json{{"traceEvents", ev}}.dump(), "w.json");
  ASSERT_TRUE(r.ok()) << formatDiagnostics(r.errors());
  EXPECT_EQ(r->timeline.ops.size(), 1u);
  int warnings = 0;
  for (const auto& d : r->timeline.diagnostics)
    if (d.severity == Severity::Warning && d.location.file == "w.json") ++warnings;
  EXPECT_EQ(warnings, 3);
}

TEST(TraceImport, OwnTraceRecognisedByMetadata) {
  // PipeStudio export (docs/formats.md): a process per device named "device N", op slices
  // named in action notation with stage/microbatch/kind args, transfers on link tracks
  // (cat "comm"), a memory counter, and otherData naming the generator.
  json ev = json::array();
  ev.push_back(meta("process_name", 0, {{"name", "device 0"}}));
  ev.push_back(meta("process_name", 1, {{"name", "device 1"}}));
  ev.push_back(json{
      {"ph", "X"},
      {"name", "0F0"},
      {"cat", "compute"},
      {"pid", 0},
      {"tid", 0},
      {"ts", 0},
      {"dur", 1000},
      {"args", {{"kind", "F"}, {"stage", 0}, {"microbatch", 0}, {"mb", 0}, {"device", 0}, {"step", 0}}}});
  ev.push_back(json{
      {"ph", "X"}, {"name", "1F0"}, {"cat", "compute"}, {"pid", 1}, {"tid", 0}, {"ts", 1500}, {"dur", 1000}});
  ev.push_back(json{{"ph", "X"},
                    {"name", "0F0->1"},
                    {"cat", "comm"},
                    {"pid", 0},
                    {"tid", 101},
                    {"ts", 1000},
                    {"dur", 500},
                    {"args",
                     {{"src", 0},
                      {"dst", 1},
                      {"bytes", 4096},
                      {"producer_op", {{"kind", "F"}, {"stage", 0}, {"microbatch", 0}}},
                      {"consumer_op", {{"kind", "F"}, {"stage", 1}, {"microbatch", 0}}}}}});
  ev.push_back(json{{"ph", "C"}, {"name", "memory"}, {"pid", 0}, {"ts", 0}, {"args", {{"bytes", 500}}}});
  ev.push_back(json{{"ph", "C"}, {"name", "memory"}, {"pid", 0}, {"ts", 1000}, {"args", {{"bytes", 700}}}});
  json top{{"traceEvents", ev},
           {"otherData", {{"generator", "PipeStudio"}, {"label", "1f1b run 7"}, {"complete", false}}}};
  auto r = importChromeTrace(top.dump(), "plan.trace.json");
  ASSERT_TRUE(r.ok()) << formatDiagnostics(r.errors());
  EXPECT_EQ(r->format, TraceFormat::PipeStudio);
  const Timeline& t = r->timeline;
  ASSERT_EQ(t.ops.size(), 2u);
  EXPECT_EQ(t.ops[0].device, 0);
  EXPECT_EQ(t.ops[1].device, 1);
  EXPECT_EQ(t.ops[1].op, (Op{OpKind::F, 1, 0}));
  EXPECT_DOUBLE_EQ(t.ops[1].start, 1.5);
  ASSERT_EQ(t.transfers.size(), 1u);
  EXPECT_EQ(t.transfers[0].srcDevice, 0);
  EXPECT_EQ(t.transfers[0].dstDevice, 1);
  EXPECT_EQ(t.transfers[0].bytes, 4096);
  EXPECT_EQ(t.transfers[0].consumer, (Op{OpKind::F, 1, 0}));
  EXPECT_DOUBLE_EQ(t.transfers[0].end, 1.5);
  ASSERT_EQ(t.memory.size(), 2u);
  ASSERT_EQ(t.memory[0].size(), 2u);
  EXPECT_DOUBLE_EQ(t.memory[0][1].time, 1.0);
  EXPECT_EQ(t.memory[0][1].bytes, 700);
  EXPECT_FALSE(t.complete);
  EXPECT_EQ(t.label, "1f1b run 7");
}

TEST(TraceImport, TorchMemoryEventsBecomeMemoryCurves) {
  json ev = json::array();
  auto mem = [&](double ts, long long total, int type) {
    ev.push_back(
        json{{"ph", "i"},
             {"name", "[memory]"},
             {"pid", 9},
             {"tid", 9},
             {"ts", ts},
             {"s", "t"},
             {"args", {{"Device Type", type}, {"Device Id", 0}, {"Bytes", 1}, {"Total Allocated", total}}}});
  };
  mem(50, 1000, 1);  // before the iteration: the value at its start
  mem(150, 3000, 1);
  mem(160, 99, 0);    // host memory: ignored when the rank has GPU samples
  mem(900, 2000, 1);  // after the iteration's last op: dropped
  ev.push_back(x("PP:0F0", "user_annotation", 9, 1, 100, 100));
  ev.push_back(x("PP:0B0", "user_annotation", 9, 1, 300, 200));
  auto r = importChromeTrace(json{{"traceEvents", ev}, {"distributedInfo", {{"rank", 0}}}}.dump(), "m.json");
  ASSERT_TRUE(r.ok()) << formatDiagnostics(r.errors());
  const auto& curve = r->timeline.memory[0];
  ASSERT_EQ(curve.size(), 2u);
  EXPECT_DOUBLE_EQ(curve[0].time, 0.0);
  EXPECT_EQ(curve[0].bytes, 1000);
  EXPECT_DOUBLE_EQ(curve[1].time, 0.05);
  EXPECT_EQ(curve[1].bytes, 3000);
}

TEST(TraceImport, ScheduleFromTimelineRebuildsOrderAndPairs) {
  Timeline t;
  t.devices = 2;
  t.ops = {
      TimelineOp{0, -1, Op{OpKind::F, 0, 0}, false, 0, 1}, TimelineOp{0, -1, Op{OpKind::F, 0, 1}, true, 3, 5},
      TimelineOp{0, -1, Op{OpKind::B, 0, 0}, true, 3, 5}, TimelineOp{1, -1, Op{OpKind::F, 1, 0}, false, 1, 2},
      TimelineOp{1, -1, Op{OpKind::B, 1, 0}, false, 2, 3}};
  auto s = scheduleFromTimeline(t);
  ASSERT_TRUE(s.ok()) << formatDiagnostics(s.errors());
  EXPECT_EQ(s->pipeline.stages, 2);
  EXPECT_EQ(s->pipeline.microbatches, 2);
  EXPECT_EQ(s->pipeline.stageToDevice, (std::vector<int>{0, 1}));
  ASSERT_EQ(s->devices[0].size(), 2u);
  EXPECT_TRUE(s->devices[0][1].overlapped());
  EXPECT_EQ(s->devices[1].size(), 2u);

  t.ops.push_back(TimelineOp{1, -1, Op{OpKind::W, 0, 0}, false, 6, 7});
  auto bad = scheduleFromTimeline(t);
  EXPECT_FALSE(bad.ok());
}

TEST(TraceImport, OwnExportRoundTrips) {
  Schedule s = ps::test::generatedSchedule(ScheduleKind::ZBH1, 4, 8);
  CostProfile p = uniformCostProfile("F=1,I=1,W=1", s.pipeline.stages).value();
  p.fixedCommMs = 0.25;
  for (auto& l : p.layers) l.activationBytes = 1000;
  auto model = makeSimulationModel(s, p);
  ASSERT_TRUE(model.ok());
  auto sim = simulate(s, *model);
  ASSERT_TRUE(sim.ok());
  const Timeline& t = *sim;
  auto r = importChromeTrace(exportChromeTrace(t, &s), "zbh1.trace.json");
  ASSERT_TRUE(r.ok()) << formatDiagnostics(r.errors());
  EXPECT_EQ(r->format, TraceFormat::PipeStudio);
  const Timeline& back = r->timeline;
  EXPECT_EQ(back.devices, t.devices);
  ASSERT_EQ(back.ops.size(), t.ops.size());
  for (const auto& o : t.ops) {
    const TimelineOp* b = findOp(back, o.op.kind, o.op.stage, o.op.microbatch);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->device, o.device);
    EXPECT_NEAR(b->start, o.start, 1e-9);
    EXPECT_NEAR(b->end, o.end, 1e-9);
  }
  ASSERT_EQ(back.transfers.size(), t.transfers.size());
  ASSERT_EQ(back.memory.size(), t.memory.size());
  for (size_t d = 0; d < t.memory.size(); ++d) EXPECT_EQ(back.memory[d].size(), t.memory[d].size());
  EXPECT_TRUE(back.complete);
}

TEST(TraceImport, ForwardAndBackwardRangesOfSingleStageSchedules) {
  // ScheduleGPipe's record_function names: "Forward i" / "Backward i", the stage is the rank's.
  auto rank = [](int r) {
    json ev = json::array();
    for (int m = 0; m < 2; ++m)
      ev.push_back(x("Forward " + std::to_string(m), "user_annotation", 7, 7, 100 * m, 50));
    for (int m = 0; m < 2; ++m)
      ev.push_back(x("Backward " + std::to_string(m), "user_annotation", 7, 7, 500 + 100 * m, 80));
    ev.push_back(x("Forward 1x", "user_annotation", 7, 7, 900, 1));  // not a step range
    return json{{"traceEvents", ev}, {"distributedInfo", {{"rank", r}}}}.dump();
  };
  auto r = importChromeTraces({{"a.json", rank(0), std::nullopt}, {"b.json", rank(1), std::nullopt}});
  ASSERT_TRUE(r.ok()) << formatDiagnostics(r.errors());
  const Timeline& t = r->timeline;
  ASSERT_EQ(t.ops.size(), 8u);
  for (int d = 0; d < 2; ++d)
    for (int m = 0; m < 2; ++m) {
      const TimelineOp* f = findOp(t, OpKind::F, d, m);
      const TimelineOp* b = findOp(t, OpKind::B, d, m);
      ASSERT_TRUE(f && b) << d << " " << m;
      EXPECT_EQ(f->device, d);
      EXPECT_NEAR(f->end - f->start, 0.05, 1e-12);
      EXPECT_NEAR(b->end - b->start, 0.08, 1e-12);
    }
}

TEST(TraceImport, PipelineRangesInsideStepRangesAndPairsAreReadOnce) {
  // pipestudio.trace_ranges inside ScheduleGPipe: "Forward 0" holds PP:0F0; inside the runtime's
  // OVERLAP_F_B pair the stage's own PP:0F1 and PP:1B0; and PP:0B0 inside the runtime's PP:0B0.
  json ev = json::array();
  ev.push_back(x("Forward 0", "user_annotation", 7, 7, 0, 100));
  ev.push_back(x("PP:0F0", "user_annotation", 7, 7, 10, 80));
  ev.push_back(x("PP:(0F1;1B0)OVERLAP_F_B", "user_annotation", 7, 7, 200, 300));
  ev.push_back(x("PP:0F1", "user_annotation", 7, 7, 210, 100));
  ev.push_back(x("PP:1B0", "user_annotation", 7, 7, 320, 150));
  ev.push_back(x("PP:0B0", "user_annotation", 7, 7, 600, 100));
  ev.push_back(x("PP:0B0", "user_annotation", 7, 7, 610, 80));
  auto r = importChromeTrace(json{{"traceEvents", ev}, {"distributedInfo", {{"rank", 0}}}}.dump(), "t.json");
  ASSERT_TRUE(r.ok()) << formatDiagnostics(r.errors());
  const Timeline& t = r->timeline;
  EXPECT_EQ(r->iterations, 1);
  ASSERT_EQ(t.ops.size(), 4u);
  const TimelineOp* f0 = findOp(t, OpKind::F, 0, 0);
  ASSERT_NE(f0, nullptr);
  EXPECT_NEAR(f0->end - f0->start, 0.08, 1e-12);  // the PP: range, not "Forward 0"
  const TimelineOp* f1 = findOp(t, OpKind::F, 0, 1);
  ASSERT_NE(f1, nullptr);
  EXPECT_TRUE(f1->overlapped);
  const TimelineOp* b0 = findOp(t, OpKind::B, 0, 0);
  ASSERT_NE(b0, nullptr);
  EXPECT_NEAR(b0->end - b0->start, 0.1, 1e-12);
}

TEST(TraceImport, SyntheticGpuTraceTakesGpuTimesAndKeepsCommunicationApart) {
  // tests/data/traces/synthetic_gpu_1f1b_d2_m2: hand-written (no GPU ran it), in the shape of
  // Kineto's traces: host ranges, their gpu_user_annotation projections on a compute stream (7)
  // and an NCCL stream (20), kernels on both.
  const std::string dir = std::string(PIPESTUDIO_TEST_DATA_DIR) + "/traces/synthetic_gpu_1f1b_d2_m2/";
  std::vector<TraceFile> files;
  for (const char* f : {"rank0.json", "rank1.json"}) {
    TraceFile tf;
    tf.name = f;
    tf.path = dir + f;
    files.push_back(tf);
  }
  auto r = importChromeTraces(files);
  ASSERT_TRUE(r.ok()) << formatDiagnostics(r.errors());
  const Timeline& t = r->timeline;
  EXPECT_EQ(r->deviceSides, (std::vector<TraceSide>{TraceSide::Gpu, TraceSide::Gpu}));
  EXPECT_EQ(t.ops.size(), 16u);
  // F(0,1) launched a tensor-parallel all-reduce on the NCCL stream: its time is the compute
  // stream's [1420, 1820] us, and the all-reduce [1830, 1870] us is communication.
  const TimelineOp* f01 = findOp(t, OpKind::F, 0, 1);
  ASSERT_NE(f01, nullptr);
  EXPECT_NEAR(f01->start, 0.42, 1e-9);
  EXPECT_NEAR(f01->end, 0.82, 1e-9);
  ASSERT_EQ(r->communication.size(), 1u);
  EXPECT_EQ(r->communication[0].device, 0);
  EXPECT_EQ(r->communication[0].op, (Op{OpKind::F, 0, 1}));
  EXPECT_NEAR(r->communication[0].start, 0.83, 1e-9);
  EXPECT_NEAR(r->communication[0].end, 0.87, 1e-9);
  EXPECT_EQ(r->communicationKernels, 9u);
  // SEND/RECV from their NCCL kernels: RECV_B0 waits on the GPU until rank 1's send is done.
  const TimelineOp* recv = findOp(t, OpKind::RecvB, 0, 0);
  ASSERT_NE(recv, nullptr);
  EXPECT_NEAR(recv->start, 0.94, 1e-9);
  EXPECT_NEAR(recv->end, 1.645, 1e-9);
  // Transfers pair the GPU-side sends and receives.
  ASSERT_EQ(t.transfers.size(), 4u);
  EXPECT_EQ(t.transfers[0].producer, (Op{OpKind::F, 0, 0}));
  EXPECT_NEAR(t.transfers[0].start, 0.41, 1e-9);
  EXPECT_NEAR(t.transfers[0].end, 0.465, 1e-9);
  // The host side on request: F(0,1) is its host range again, nothing set apart.
  TraceImportOptions cpu;
  cpu.side = TraceSide::Cpu;
  auto c = importChromeTraces(files, cpu);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->communication.empty());
  const TimelineOp* hostF = findOp(c->timeline, OpKind::F, 0, 1);
  ASSERT_NE(hostF, nullptr);
  EXPECT_NEAR(hostF->end - hostF->start, 0.04, 1e-9);
}
