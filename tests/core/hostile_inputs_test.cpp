// Hostile numbers in files (docs/limits.md): every reader bounds what it reads before it sizes
// memory or enters arithmetic, and refuses with an error that names the place.
#include <gtest/gtest.h>

#include <chrono>
#include <climits>
#include <string>

#include "fixtures/diagnostics.h"
#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/io/run_events.h"
#include "pipestudio/core/io/trace_import.h"
#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/core/model/limits.h"

using namespace ps::core;

namespace {

bool hasCode(const Diagnostics& ds, const std::string& code) {
  for (const auto& d : ds)
    if (d.code == code) return true;
  return false;
}

std::string trace(const std::string& top, const std::string& events) {
  return "{" + top + "\"traceEvents\":[" + events + "]}";
}

const std::string kEvent = R"({"ph":"X","name":"PP:0F0","pid":1,"tid":1,"ts":0,"dur":5})";

}  // namespace

TEST(Limits, CheckedArithmeticRefusesOverflow) {
  std::int64_t acc = limits::kMaxBytes;
  EXPECT_TRUE(limits::addBytes(acc, 5));
  EXPECT_EQ(acc, limits::kMaxBytes + 5);
  acc = INT64_MAX - 1;
  EXPECT_FALSE(limits::addBytes(acc, 2));
  EXPECT_EQ(acc, INT64_MAX - 1);
  EXPECT_FALSE(limits::checkedMul(INT64_MAX / 2, 3).has_value());
  double t = 1e308;
  EXPECT_FALSE(limits::addTime(t, 1e308));
  EXPECT_FALSE(limits::scaleBytes(INT64_MAX / 2, 4.0).has_value());
  EXPECT_FALSE(limits::toInt64(9.3e18).has_value());
  EXPECT_FALSE(limits::toInt64(std::nan("")).has_value());
  EXPECT_EQ(*limits::toInt64(-12.7), -12);
  EXPECT_FALSE(limits::wholeInRange(1e30, 0, limits::kMaxRank).has_value());
  EXPECT_FALSE(limits::wholeInRange(2.5, 0, 10).has_value());
  EXPECT_EQ(*limits::wholeInRange(7, 0, 10), 7);
}

// --- Trace import --------------------------------------------------------------------------

TEST(HostileTrace, DistributedInfoRankAtIntMaxIsRefusedWithItsLine) {
  std::string text = "{\n\"distributedInfo\": {\"rank\": 2147483647},\n\"traceEvents\": [" + kEvent + "]}";
  auto r = importChromeTrace(text, "t.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "trace.rank");
  EXPECT_EQ(r.error().location.file, "t.json");
  EXPECT_EQ(r.error().location.line, 2);
  EXPECT_GT(r.error().location.column, 0);
  EXPECT_NE(r.error().message.find("2147483647"), std::string::npos);
}

TEST(HostileTrace, LargeRanksFromEverySourceAreRefusedQuickly) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"t.json", trace(R"("distributedInfo":{"rank":200000000},)", kEvent)},
      {"t.json",
       trace("", R"({"ph":"X","name":"PP:0F0","pid":1,"tid":1,"ts":0,"dur":5,"args":{"rank":200000000}})")},
      {"t.json",
       trace("", R"({"ph":"M","name":"process_name","pid":1,"args":{"name":"Rank 200000000"}},)" + kEvent)},
      {"t.json", trace("", R"({"ph":"M","name":"process_labels","pid":1,"args":{"rank":1e30}},)" + kEvent)},
      {"x.rank200000000.json", trace("", kEvent)},
      {"t.json", trace(R"("distributedInfo":{"rank":1e30},)", kEvent)},
      {"t.json", trace(R"("distributedInfo":{"rank":"nan"},)", kEvent)},
  };
  for (const auto& [name, text] : cases) {
    auto t0 = std::chrono::steady_clock::now();
    auto r = importChromeTrace(text, name);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_FALSE(r.ok()) << name << ": " << text;
    EXPECT_EQ(r.error().code, "trace.rank") << text;
    EXPECT_EQ(r.error().location.file, name);
    EXPECT_LT(s, 1.0) << text;
  }
}

TEST(HostileTrace, OwnTraceDeviceArgOutOfRangeIsRefused) {
  std::string text =
      trace(R"("otherData":{"generator":"PipeStudio"},)",
            R"({"ph":"X","name":"F0@s0","pid":1,"tid":1,"ts":0,"dur":5,"args":{"device":70000}})");
  auto r = importChromeTrace(text, "own.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "trace.rank");
}

TEST(HostileTrace, HugePidAndBaseTimeAreNoUndefinedCasts) {
  // A pid beyond int64 is treated as absent (the event still imports on rank 0).
  auto ok = importChromeTrace(trace("", R"({"ph":"X","name":"PP:0F0","pid":1e19,"tid":1,"ts":0,"dur":5})"),
                              "p.json");
  ASSERT_TRUE(ok.ok()) << formatDiagnostics(ok.errors());
  EXPECT_EQ(ok->timeline.devices, 1);
  auto bad = importChromeTrace(trace(R"("baseTimeNanoseconds":9.4e18,)", kEvent), "b.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, "trace.time");
  EXPECT_GT(bad.error().location.line, 0);
}

TEST(HostileTrace, StageOrMicrobatchBeyondLimitsIsRefused) {
  auto r = importChromeTrace(
      trace("", R"({"ph":"X","name":"PP:2147483647F0","pid":1,"tid":1,"ts":0,"dur":5})"), "s.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "trace.limit");
  EXPECT_EQ(r.error().location.line, 1);
  EXPECT_EQ(r.error().location.column, 35);  // the slice name's first character
  auto m = importChromeTrace(
      trace("", R"({"ph":"X","name":"PP:0F2000000000","pid":1,"tid":1,"ts":0,"dur":5})"), "m.json");
  // 2e9 does not even read as an int: an unreadable action, ignored, so nothing is left.
  ASSERT_FALSE(m.ok());
  auto a = parsePipelineAction("3F16777216");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().code, "trace.limit");
}

TEST(HostileTrace, InfiniteTimesAreIgnoredNotImported) {
  auto r = importChromeTrace(
      trace("", kEvent + R"(,{"ph":"X","name":"PP:0B0","pid":1,"tid":1,"ts":1e300,"dur":1e300})"), "i.json");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->timeline.ops.size(), 1u);
  EXPECT_TRUE(std::isfinite(r->timeline.metrics.makespan));
}

TEST(HostileTrace, ScheduleFromTimelineBoundsStagesAndDevices) {
  Timeline t;
  t.devices = 1;
  TimelineOp op;
  op.device = 0;
  op.op = Op{OpKind::F, INT_MAX, 0};
  t.ops.push_back(op);
  auto r = scheduleFromTimeline(t);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("out of range"), std::string::npos);
  t.ops[0].op = Op{OpKind::F, 0, INT_MAX};
  EXPECT_FALSE(scheduleFromTimeline(t).ok());
  t.ops[0].op = Op{OpKind::F, 0, 0};
  t.devices = INT_MAX;
  EXPECT_FALSE(scheduleFromTimeline(t).ok());
  t.devices = 1;
  EXPECT_TRUE(scheduleFromTimeline(t).ok());
}

// --- Run events ----------------------------------------------------------------------------

TEST(HostileRunEvents, StartedDevicesIsBounded) {
  RunEventReader r("events.jsonl");
  r.feed("{\"type\":\"started\",\"protocol_version\":" + std::to_string(kRunEventProtocolVersion) +
         ",\"devices\":2147483647}\n");
  r.feed("{\"type\":\"started\",\"protocol_version\":1,\"devices\":1e300,\"stages\":-4}\n");
  r.end();
  Timeline t = r.timeline();
  EXPECT_LE(t.devices, limits::kMaxDevices);
  EXPECT_LE(t.memory.size(), static_cast<size_t>(limits::kMaxDevices));
  bool named = false;
  for (const auto& w : r.warnings()) named = named || w.message.find("2147483647") != std::string::npos;
  EXPECT_TRUE(named);
}

TEST(HostileRunEvents, OutOfRangeNumbersOfOpAndMemoryEventsAreIgnored) {
  RunEventReader r("events.jsonl");
  r.feed(R"({"type":"op","device":0,"kind":"F","stage":2147483647,"microbatch":0,"start_ms":0,"end_ms":1})"
         "\n");
  r.feed(R"({"type":"op","device":1e300,"kind":"F","stage":0,"microbatch":0,"start_ms":0,"end_ms":1})"
         "\n");
  r.feed(R"({"type":"op","device":0,"kind":"F","stage":0,"microbatch":0,"start_ms":0,"end_ms":1e300})"
         "\n");
  r.feed(R"({"type":"memory","device":0,"time_ms":0,"bytes":1e300})"
         "\n");
  r.feed(R"({"type":"memory","device":0,"time_ms":0,"bytes":18446744073709551615})"
         "\n");
  r.end();
  Timeline t = r.timeline();
  EXPECT_TRUE(t.ops.empty());
  for (const auto& curve : t.memory) EXPECT_TRUE(curve.empty());
  EXPECT_EQ(r.warnings().size(), 5u);
}

// --- Cost profiles -------------------------------------------------------------------------

TEST(HostileProfile, HugeForwardTimeIsRefusedWithItsLine) {
  std::string text =
      "{\"layers\": [\n  {\"forward_ms\": 1, \"backward_ms\": 2},\n  {\"forward_ms\": 1e308, "
      "\"backward_ms\": 2}\n]}";
  auto p = parseCostProfile(text, "p.json");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().location.line, 3);
  EXPECT_NE(p.error().message.find("layers[1].forward_ms"), std::string::npos);
  EXPECT_NE(p.error().message.find("too large"), std::string::npos);
}

TEST(HostileProfile, ByteSumsThatOverflowAreRefused) {
  // Each value within the per-value limit; their sum over one stage is not.
  std::string layers;
  for (int i = 0; i < 9000; ++i)
    layers += std::string(i ? "," : "") + R"({"forward_ms":1,"backward_ms":2,"activation_bytes":1.1e15})";
  auto p = parseCostProfile("{\"layers\":[" + layers + "]}", "sum.json");
  ASSERT_TRUE(p.ok()) << formatDiagnostics(p.errors());
  auto c = stageCosts(*p, 1);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, "profile.overflow");

  // Weights times the optimizer factor: 1e15 x 1e6 does not fit int64.
  auto q = parseCostProfile(
      R"({"optimizer_bytes_per_weight_byte":1e6,"layers":[{"forward_ms":1,"backward_ms":2,"weight_bytes":1e15}]})",
      "w.json");
  ASSERT_TRUE(q.ok()) << formatDiagnostics(q.errors());
  auto cq = stageCosts(*q, 1);
  ASSERT_FALSE(cq.ok());
  EXPECT_EQ(cq.error().code, "profile.overflow");
}

TEST(HostileProfile, OutOfRangeBytesAndFactorsAndBandwidthAreRefused) {
  EXPECT_FALSE(
      parseCostProfile(R"({"layers":[{"forward_ms":1,"backward_ms":2,"activation_bytes":9e18}]})").ok());
  EXPECT_FALSE(
      parseCostProfile(R"({"overlap_factor":1e300,"layers":[{"forward_ms":1,"backward_ms":2}]})").ok());
  EXPECT_FALSE(
      parseCostProfile(
          R"({"link":{"bandwidth_bytes_per_ms":1e-300},"layers":[{"forward_ms":1,"backward_ms":2}]})")
          .ok());
  EXPECT_FALSE(uniformCostProfile("F=1,act=1e300", 2).ok());
  EXPECT_FALSE(uniformCostProfile("F=1e308", 2).ok());
}

TEST(HostileProfile, InfiniteCostsInCodeMakeTheSimulationInvalid) {
  // A profile built in code is not bounded by the parser: the simulator refuses inf times.
  CostProfile p;
  LayerCost l;
  l.forwardMs = 1e308;
  l.backwardInputMs = 1e308;
  p.layers = {l, l};
  auto s = parseDsl("devices 2\nstages 2\nmicrobatches 1\ndevice 0: F0 B0\ndevice 1: F0 B0\n");
  ASSERT_TRUE(s.ok()) << formatDiagnostics(s.errors());
  auto m = makeSimulationModel(*s, p);
  if (!m.ok()) {
    EXPECT_EQ(m.error().code, "profile.overflow");
    return;
  }
  auto t = simulate(*s, *m);
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(hasCode(t->diagnostics, "simulate.overflow"));
}

// --- DSL -----------------------------------------------------------------------------------

TEST(HostileDsl, HugeMemoryDeltaIsRefusedAtItsPlace) {
  auto r = parseDsl("devices 1\nkind BIG memory delta 9000000000000000000\ndevice 0: F0 BIG0 B0\n",
                    DslOptions{"big.pipe"});
  ASSERT_FALSE(r.ok());
  ps::test::expectErrorAt(r.error(), "big.pipe", 2, 23, "too large");
}

TEST(HostileDsl, RunningMemoryOverflowIsAnErrorNotAWrappedPeak) {
  // 10000 ops each adding 1e15 bytes (under the per-value limit) overflow int64 together.
  auto s = parseDsl(
      "devices 1\nmicrobatches 1\nkind BIG memory delta 1000000GB\n"
      "device 0 { F0\n for i in 0..10000 { BIG0 }\n B0 }\n");
  ASSERT_TRUE(s.ok()) << formatDiagnostics(s.errors());
  auto p = uniformCostProfile("F=1", 1);
  ASSERT_TRUE(p.ok());
  auto m = makeSimulationModel(*s, *p);
  ASSERT_TRUE(m.ok()) << formatDiagnostics(m.errors());
  auto t = simulate(*s, *m);
  ASSERT_TRUE(t.ok()) << formatDiagnostics(t.errors());
  EXPECT_TRUE(hasCode(t->diagnostics, "simulate.overflow")) << formatDiagnostics(t->diagnostics);
  for (const auto& d : t->metrics.devices) EXPECT_GT(d.peakMemoryBytes, 0);
}

TEST(HostileDsl, UserKindDurationThatIsNotFiniteIsAnError) {
  std::string product = "1000000000000000.0";  // 1e15 ms: finite, past the bound
  std::string infinite = product;
  for (int i = 0; i < 21; ++i) infinite += " * 1000000000000000.0";  // 1e330: inf
  for (const std::string& expr : {product, infinite}) {
    auto s =
        parseDsl("devices 1\nmicrobatches 1\nkind SLOW duration = " + expr + "\ndevice 0: F0 SLOW0 B0\n");
    ASSERT_TRUE(s.ok()) << formatDiagnostics(s.errors());
    auto p = uniformCostProfile("F=1", 1);
    ASSERT_TRUE(p.ok());
    auto m = makeSimulationModel(*s, *p);
    ASSERT_TRUE(m.ok());
    auto t = simulate(*s, *m);
    ASSERT_FALSE(t.ok()) << expr;
    EXPECT_EQ(t.error().code, "simulate.overflow");
  }
}

TEST(HostileDsl, LargeExpansionWarnsOnceWithItsPlaceBeforeFinishing) {
  DslOptions o{"large.pipe"};
  o.largeOps = 1000;
  std::vector<Diagnostic> warnings;
  o.onLargeExpansion = [&](const Diagnostic& d) { warnings.push_back(d); };
  auto s = parseDsl(
      "devices 1\nmicrobatches 4000\ndevice 0 {\n  for m in 0..4000 { F(m) }\n  for m in 0..4000 { B(m) "
      "}\n}\n",
      o);
  ASSERT_TRUE(s.ok()) << formatDiagnostics(s.errors());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].code, "dsl.large");
  EXPECT_EQ(warnings[0].severity, Severity::Warning);
  EXPECT_EQ(warnings[0].location.file, "large.pipe");
  EXPECT_EQ(warnings[0].location.line, 4);
  EXPECT_NE(warnings[0].message.find("1000"), std::string::npos);
  // The cap itself stays.
  DslOptions capped;
  capped.maxOps = 5000;
  auto c = parseDsl(
      "devices 1\nmicrobatches 4000\ndevice 0 {\n  for m in 0..4000 { F(m) }\n  for m in 0..4000 { B(m) "
      "}\n}\n",
      capped);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, "dsl.limit");
}
