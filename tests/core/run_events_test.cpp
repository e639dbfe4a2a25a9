#include "pipestudio/core/io/run_events.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <string>

using namespace ps::core;

namespace {

// One "op" event line of iteration 0 (times as written, e.g. "1.5").
std::string opLine(int device, int step, const std::string& kind, int stage, int mb, const std::string& start,
                   const std::string& end) {
  const std::string name = kind + std::to_string(mb) + "@s" + std::to_string(stage);
  return R"({"type":"op","iteration":0,"device":)" + std::to_string(device) + R"(,"step":)" +
         std::to_string(step) + R"(,"op":")" + name + R"(","kind":")" + kind + R"(","stage":)" +
         std::to_string(stage) + R"(,"microbatch":)" + std::to_string(mb) +
         R"(,"overlapped":false,"start_ms":)" + start + R"(,"end_ms":)" + end + "}\n";
}

// A 2-device 1F1B run with 2 micro-batches, as `pipestudio-cli run --events jsonl` writes it
// (field order and extra fields included: readers must ignore fields they do not know).
const std::string kStream =
    R"({"type":"started","protocol_version":1,"schedule":"tiny","model":"mlp:layers=2,hidden=8","device":"cpu","devices":2,"stages":2,"microbatches":2,"microbatch_size":2,"iterations":1,"warmup":0,"partition":[1,1],"rank":0,"world_size":1,"extra":{"x":1}})"
    "\n"
    R"({"type":"progress","iteration":0,"iterations":1,"warmup":false})"
    "\n" +
    opLine(0, 0, "F", 0, 0, "0.0", "1.0") +
    R"({"type":"memory","iteration":0,"device":0,"time_ms":1.0,"bytes":4096})"
    "\n" +
    opLine(0, 1, "F", 0, 1, "1.0", "2.0") + opLine(1, 0, "F", 1, 0, "1.5", "2.5") +
    opLine(1, 1, "B", 1, 0, "2.5", "4.5") +
    R"({"type":"memory","iteration":0,"device":0,"time_ms":2.0,"bytes":8192})"
    "\n" +
    opLine(0, 2, "B", 0, 0, "4.6", "6.0") +
    R"({"type":"finished","status":"finished","losses":[0.75],"iteration_ms":[6.5],"makespan_ms":6.0,"bubble_ratio":0.4,"gradient_check":{"passed":true,"max_relative_error":1e-7,"worst_parameter":"layer0.weight","loss_relative_error":0.0,"tolerance":1e-5}})"
    "\n";

// Everything a reader learned, in a comparable form.
std::string summary(const RunEventReader& r) {
  std::string s;
  s += "events " + std::to_string(r.events()) + " lines " + std::to_string(r.lines()) + " warnings " +
       std::to_string(r.warningCount());
  s += r.started() ? " started v" + std::to_string(r.started()->protocolVersion) : " no-start";
  s += " progress " + std::to_string(r.progress().iteration) + "/" + std::to_string(r.progress().iterations);
  s += r.finished() ? " finished " + r.finished()->status : " unfinished";
  Timeline t = r.timeline();
  for (const auto& op : t.ops)
    s += " [" + std::to_string(op.device) + ":" + std::to_string(op.step) + " " +
         std::string(builtinKindName(op.op.kind)) + std::to_string(op.op.microbatch) + "@" +
         std::to_string(op.op.stage) + " " + std::to_string(op.start) + "-" + std::to_string(op.end) + "]";
  for (size_t d = 0; d < t.memory.size(); ++d)
    for (const auto& m : t.memory[d])
      s += " m" + std::to_string(d) + "@" + std::to_string(m.time) + "=" + std::to_string(m.bytes);
  return s;
}

bool hasWarning(const RunEventReader& r, const std::string& code, const std::string& text) {
  for (const auto& w : r.warnings())
    if (w.code == code && w.message.find(text) != std::string::npos && w.severity == Severity::Warning)
      return true;
  return false;
}

}  // namespace

TEST(RunEvents, WholeStreamBuildsTheMeasuredTimeline) {
  RunEventReader r("test");
  EXPECT_EQ(r.feed(kStream), 10u);
  r.end();
  EXPECT_EQ(r.warningCount(), 0u);
  ASSERT_TRUE(r.started());
  EXPECT_EQ(r.started()->protocolVersion, kRunEventProtocolVersion);
  EXPECT_EQ(r.started()->devices, 2);
  EXPECT_EQ(r.started()->model, "mlp:layers=2,hidden=8");
  EXPECT_EQ(r.started()->partition, (std::vector<int>{1, 1}));
  EXPECT_EQ(r.progress().iteration, 0);
  EXPECT_EQ(r.progress().iterations, 1);
  ASSERT_TRUE(r.finished());
  EXPECT_EQ(r.finished()->status, "finished");
  EXPECT_EQ(r.losses(), std::vector<double>{0.75});
  ASSERT_TRUE(r.finished()->gradientCheck);
  EXPECT_TRUE(r.finished()->gradientCheck->passed);
  EXPECT_EQ(r.finished()->gradientCheck->worstParameter, "layer0.weight");

  Timeline t = r.timeline();
  EXPECT_EQ(t.source, TimelineSource::Measured);
  EXPECT_EQ(t.label, "tiny");
  EXPECT_EQ(t.devices, 2);
  EXPECT_TRUE(t.complete);
  EXPECT_TRUE(t.diagnostics.empty());
  ASSERT_EQ(t.ops.size(), 5u);
  // Sorted by (device, start): device 0 has F0, F1, B0; device 1 F0, B0.
  EXPECT_EQ(t.ops[2].device, 0);
  EXPECT_EQ(t.ops[2].op.kind, OpKind::B);
  EXPECT_EQ(t.ops[3].device, 1);
  EXPECT_EQ(t.ops[3].op.stage, 1);
  ASSERT_EQ(t.memory.size(), 2u);
  ASSERT_EQ(t.memory[0].size(), 2u);
  EXPECT_EQ(t.memory[0][1].bytes, 8192);
  EXPECT_TRUE(t.memory[1].empty());
  // Makespan: first start 0 to last end 6.0.
  EXPECT_DOUBLE_EQ(t.metrics.makespan, 6.0);
}

TEST(RunEvents, EverySplitPointGivesTheSameResult) {
  RunEventReader whole;
  whole.feed(kStream);
  whole.end();
  const std::string expected = summary(whole);
  for (size_t k = 0; k <= kStream.size(); ++k) {
    RunEventReader r;
    r.feed(std::string_view(kStream).substr(0, k));
    r.feed(std::string_view(kStream).substr(k));
    r.end();
    ASSERT_EQ(summary(r), expected) << "split at byte " << k;
  }
}

TEST(RunEvents, ByteByByteAndRandomChunks) {
  RunEventReader whole;
  whole.feed(kStream);
  whole.end();
  RunEventReader bytes;
  for (char c : kStream) bytes.feed(std::string_view(&c, 1));
  bytes.end();
  EXPECT_EQ(summary(bytes), summary(whole));

  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    RunEventReader r;
    size_t pos = 0;
    while (pos < kStream.size()) {
      size_t n = std::uniform_int_distribution<size_t>(0, 40)(rng);
      r.feed(std::string_view(kStream).substr(pos, n));
      pos += n;
    }
    r.end();
    ASSERT_EQ(summary(r), summary(whole)) << "trial " << trial;
  }
}

TEST(RunEvents, PartialLineWaitsForItsNewline) {
  RunEventReader r;
  const std::string op =
      R"({"type":"op","iteration":0,"device":0,"step":0,"op":"F0@s0","kind":"F","stage":0,"microbatch":0,"start_ms":0,"end_ms":1})";
  EXPECT_EQ(r.feed(op.substr(0, 30)), 0u);
  EXPECT_EQ(r.opEvents(), 0u);
  EXPECT_EQ(r.feed(op.substr(30)), 0u);  // still no newline
  EXPECT_EQ(r.feed("\n"), 1u);
  EXPECT_EQ(r.opEvents(), 1u);
  EXPECT_EQ(r.warningCount(), 0u);
}

TEST(RunEvents, TruncatedLastLineIsAWarningAndKeepsTheRest) {
  // The process died while writing its fifth line.
  size_t cut = 0;
  for (int i = 0; i < 4; ++i) cut = kStream.find('\n', cut) + 1;
  const std::string stream = kStream.substr(0, cut + 25);
  RunEventReader r("ssh gpu1");
  r.feed(stream);
  EXPECT_EQ(r.opEvents(), 1u);
  r.end();
  EXPECT_EQ(r.warningCount(), 1u);
  EXPECT_TRUE(hasWarning(r, "run-events.truncated", "line 5")) << formatDiagnostics(r.warnings());
  EXPECT_EQ(r.warnings()[0].location.file, "ssh gpu1");
  EXPECT_EQ(r.warnings()[0].location.line, 5);
  Timeline t = r.timeline();
  EXPECT_EQ(t.ops.size(), 1u);
  EXPECT_FALSE(t.complete);
  ASSERT_FALSE(t.diagnostics.empty());
  EXPECT_EQ(t.diagnostics[0].code, "run.incomplete");
}

TEST(RunEvents, LastLineWithoutNewlineButWholeIsAccepted) {
  std::string stream = kStream;
  stream.pop_back();
  RunEventReader r;
  r.feed(stream);
  EXPECT_FALSE(r.finished());  // not before end(): more bytes could still come
  r.end();
  EXPECT_EQ(r.warningCount(), 0u);
  ASSERT_TRUE(r.finished());
  EXPECT_TRUE(r.timeline().complete);
}

TEST(RunEvents, GarbageLinesAreWarningsNamingTheLine) {
  std::string stream = kStream;
  // Insert garbage after line 2 and 4 (1-based line numbers shift accordingly).
  size_t p2 = 0;
  for (int i = 0; i < 2; ++i) p2 = stream.find('\n', p2) + 1;
  stream.insert(p2, "Segmentation fault\n{\"type\":\"op\",\"device\":\n[1,2,3]\n\n{\"no_type\":1}\n");
  RunEventReader r;
  r.feed(stream);
  r.end();
  EXPECT_EQ(r.events(), 10u);
  EXPECT_EQ(r.warningCount(), 4u) << formatDiagnostics(r.warnings());
  EXPECT_TRUE(hasWarning(r, "run-events.garbage", "line 3 is not a JSON object: 'Segmentation fault'"));
  EXPECT_TRUE(hasWarning(r, "run-events.garbage", "line 4"));
  EXPECT_TRUE(hasWarning(r, "run-events.garbage", "line 5"));
  // line 6 is blank: ignored without a warning
  EXPECT_TRUE(hasWarning(r, "run-events.no-type", "line 7"));
  EXPECT_TRUE(r.timeline().complete);
  EXPECT_EQ(r.timeline().ops.size(), 5u);
}

TEST(RunEvents, UnknownEventTypesAndBadFieldsAreWarnings) {
  RunEventReader r;
  r.feed(R"({"type":"telemetry","gpu_util":0.9})"
         "\n"
         R"({"type":"op","device":"zero","start_ms":0,"end_ms":1,"stage":0,"kind":"F"})"
         "\n"
         R"({"type":"op","device":0,"start_ms":0,"end_ms":1,"stage":0,"kind":"ALLREDUCE"})"
         "\n"
         R"({"type":"op","device":0,"start_ms":0,"end_ms":1,"stage":0,"microbatch":2,"kind":"W"})"
         "\n");
  r.end();
  EXPECT_TRUE(hasWarning(r, "run-events.unknown-type", "line 1: unknown event type 'telemetry'"));
  EXPECT_TRUE(hasWarning(r, "run-events.bad-field", "line 2"));
  EXPECT_TRUE(hasWarning(r, "run-events.bad-field", "line 3: op event has kind 'ALLREDUCE'"));
  EXPECT_EQ(r.warningCount(), 3u);
  ASSERT_EQ(r.timeline().ops.size(), 1u);
  EXPECT_EQ(r.timeline().ops[0].op.kind, OpKind::W);
  EXPECT_EQ(r.timeline().ops[0].op.microbatch, 2);
}

TEST(RunEvents, UserKindsOfTheScheduleAreKnownWhenGiven) {
  const std::string line =
      R"({"type":"op","iteration":0,"device":0,"step":3,"kind":"ALLREDUCE","stage":1,"microbatch":-1,"start_ms":5,"end_ms":5.1})"
      "\n";
  RunEventReader r;
  r.setUserKinds({"OPT", "ALLREDUCE"});
  r.feed(line);
  EXPECT_EQ(r.warningCount(), 0u);
  ASSERT_EQ(r.timeline().ops.size(), 1u);
  EXPECT_EQ(static_cast<int>(r.timeline().ops[0].op.kind), kFirstUserKind + 1);
  EXPECT_EQ(r.timeline().ops[0].op.microbatch, -1);
}

TEST(RunEvents, ErrorThenFinishedFailedKeepsThePartialTimeline) {
  RunEventReader r;
  size_t cut = 0;
  for (int i = 0; i < 6; ++i) cut = kStream.find('\n', cut) + 1;
  r.feed(kStream.substr(0, cut));
  r.feed(
      R"({"type":"error","code":"engine.nan","message":"device 1 at B0@s1: NaN in the input gradient","device":1,"step":1})"
      "\n"
      R"({"type":"finished","status":"failed","losses":[],"iteration_ms":[],"makespan_ms":2.5,"bubble_ratio":0.2})"
      "\n");
  r.end();
  EXPECT_EQ(r.warningCount(), 0u);
  ASSERT_EQ(r.errors().size(), 1u);
  EXPECT_EQ(r.errors()[0].code, "engine.nan");
  EXPECT_EQ(r.errors()[0].device, 1);
  EXPECT_EQ(r.errors()[0].step, 1);
  EXPECT_EQ(r.errors()[0].line, 7);
  ASSERT_TRUE(r.finished());
  EXPECT_EQ(r.finished()->status, "failed");
  Timeline t = r.timeline();
  EXPECT_FALSE(t.complete);
  EXPECT_EQ(t.ops.size(), 3u);
  ASSERT_EQ(t.diagnostics.size(), 1u);
  EXPECT_EQ(t.diagnostics[0].code, "engine.nan");
  ASSERT_EQ(t.diagnostics[0].related.size(), 1u);
  EXPECT_EQ(t.diagnostics[0].related[0].device, 1);
  EXPECT_EQ(t.diagnostics[0].related[0].step, 1);
}

TEST(RunEvents, RefusalCarriesTheProtocolVersion) {
  RunEventReader r;
  r.feed(
      R"({"type":"error","protocol_version":1,"code":"validate.deadlock","message":"deadlock","stage":"refused"})"
      "\n");
  r.end();
  ASSERT_EQ(r.errors().size(), 1u);
  EXPECT_EQ(r.errors()[0].stage, "refused");
  EXPECT_EQ(r.errors()[0].protocolVersion, 1);
  EXPECT_FALSE(r.timeline().complete);
  EXPECT_FALSE(r.started());
}

TEST(RunEvents, ANewIterationReplacesTheOpsOfTheLastOne) {
  RunEventReader r;
  r.feed(
      R"({"type":"op","iteration":1,"device":0,"step":0,"kind":"F","stage":0,"microbatch":0,"start_ms":0,"end_ms":1})"
      "\n"
      R"({"type":"memory","iteration":1,"device":0,"time_ms":1,"bytes":10})"
      "\n"
      R"({"type":"op","iteration":2,"device":0,"step":0,"kind":"F","stage":0,"microbatch":0,"start_ms":0,"end_ms":3})"
      "\n");
  Timeline t = r.timeline();
  ASSERT_EQ(t.ops.size(), 1u);
  EXPECT_DOUBLE_EQ(t.ops[0].end, 3.0);
  EXPECT_TRUE(t.memory[0].empty());
  EXPECT_EQ(r.timelineIteration(), 2);
  // A straggler from iteration 1 is refused with a warning rather than mixed in.
  r.feed(
      R"({"type":"op","iteration":1,"device":0,"step":1,"kind":"B","stage":0,"microbatch":0,"start_ms":1,"end_ms":2})"
      "\n");
  EXPECT_EQ(r.timeline().ops.size(), 1u);
  EXPECT_TRUE(hasWarning(r, "run-events.bad-field", "line 4"));
}

TEST(RunEvents, OtherProtocolVersionIsAWarning) {
  RunEventReader r;
  r.feed(R"({"type":"started","protocol_version":7,"devices":1})"
         "\n");
  EXPECT_TRUE(hasWarning(r, "run-events.protocol", "protocol 7"));
}

TEST(RunEvents, WarningsAreCappedButCounted) {
  RunEventReader r;
  std::string junk;
  for (int i = 0; i < 500; ++i) junk += "junk\n";
  r.feed(junk);
  EXPECT_EQ(r.warningCount(), 500u);
  EXPECT_EQ(r.warnings().size(), RunEventReader::kMaxWarnings);
}

TEST(RunEvents, CliVersionLineRoundTrips) {
  auto v = parseCliVersion(cliVersionLine("0.1.0") + "\n");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->program, "0.1.0");
  EXPECT_EQ(v->protocol, kRunEventProtocolVersion);
  auto old = parseCliVersion("pipestudio-cli 0.0.9\n");
  ASSERT_TRUE(old);
  EXPECT_EQ(old->program, "0.0.9");
  EXPECT_EQ(old->protocol, 0);
  EXPECT_FALSE(parseCliVersion("bash: pipestudio-cli: command not found\n"));
  EXPECT_FALSE(parseCliVersion(""));
  auto other = parseCliVersion("pipestudio-cli 2.0.0 (run-event protocol 12)");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->protocol, 12);
}

TEST(RunEvents, PartialTimelineFromRanksKeepsEachRanksOwnDeviceOfTheNewestIteration) {
  auto op = [](int it, int device, int step, const char* name, const char* kind, int stage, double s,
               double e) {
    return std::string(R"({"type":"op","iteration":)") + std::to_string(it) + R"(,"device":)" +
           std::to_string(device) + R"(,"step":)" + std::to_string(step) + R"(,"op":")" + name +
           R"(","kind":")" + kind + R"(","stage":)" + std::to_string(stage) +
           R"(,"microbatch":0,"start_ms":)" + std::to_string(s) + R"(,"end_ms":)" + std::to_string(e) + "}\n";
  };
  std::vector<RunEventReader> readers(3);
  // Rank 0 reached iteration 1 and also relayed a copy of device 1's op: only its own counts.
  readers[0].feed(op(0, 0, 0, "F0@s0", "F", 0, 0, 1) + op(1, 0, 0, "F0@s0", "F", 0, 10, 11) +
                  op(1, 1, 0, "F0@s1", "F", 1, 11, 12));
  readers[1].feed(op(1, 1, 0, "F0@s1", "F", 1, 11.5, 12.5) + op(1, 1, 1, "B0@s1", "B", 1, 12.5, 14));
  readers[2].feed(op(0, 2, 0, "F0@s2", "F", 2, 2, 3));  // still in iteration 0: left out
  for (auto& r : readers) r.end();
  Timeline tl = partialTimelineFromRanks(readers, 3, "three");
  EXPECT_FALSE(tl.complete);
  EXPECT_EQ(tl.source, TimelineSource::Measured);
  EXPECT_EQ(tl.label, "three");
  EXPECT_EQ(tl.devices, 3);
  ASSERT_EQ(tl.ops.size(), 3u);
  EXPECT_EQ(tl.ops[0].device, 0);
  EXPECT_DOUBLE_EQ(tl.ops[0].start, 10);
  EXPECT_EQ(tl.ops[1].device, 1);
  EXPECT_DOUBLE_EQ(tl.ops[1].start, 11.5);  // rank 1's own record, not rank 0's copy
  EXPECT_EQ(tl.ops[2].op.kind, OpKind::B);
  EXPECT_EQ(tl.memory.size(), 3u);
  EXPECT_TRUE(partialTimelineFromRanks({}, 2, "none").ops.empty());
}
