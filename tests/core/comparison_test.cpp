// Matching measured ops to planned ops, deviations and error tables on a hand-built case:
// 1F1B on 2 devices with 2 micro-batches, planned F = 1 ms, B = 2 ms, no communication
// (makespan (M + D - 1)(F + B) = 9 ms); measured: stage 1's backward takes 3 ms and every
// cross-device hand-over 0.2 ms, so the measured makespan is 11.4 ms (worked out below).
#include "pipestudio/core/analysis/comparison.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "fixtures/schedules.h"

using namespace ps::core;

namespace {

using ps::test::B;
using ps::test::F;
using ps::test::oneFOneB;

TimelineOp op(int device, int step, Op o, double start, double end) {
  return TimelineOp{device, step, o, false, start, end};
}

Timeline planned() {
  Timeline t;
  t.source = TimelineSource::Simulated;
  t.label = "plan";
  t.devices = 2;
  t.ops = {op(0, 0, F(0, 0), 0, 1), op(0, 1, F(0, 1), 1, 2), op(0, 2, B(0, 0), 4, 6),
           op(0, 3, B(0, 1), 7, 9), op(1, 0, F(1, 0), 1, 2), op(1, 1, B(1, 0), 2, 4),
           op(1, 2, F(1, 1), 4, 5), op(1, 3, B(1, 1), 5, 7)};
  return t;
}

// dev1: F(1,0) waits F(0,0) (ends 1) + 0.2 -> [1.2, 2.2]; B(1,0) 3 ms -> [2.2, 5.2];
// F(1,1) [5.2, 6.2]; B(1,1) [6.2, 9.2]. dev0: B(0,0) waits 5.2 + 0.2 -> [5.4, 7.4];
// B(0,1) waits 9.2 + 0.2 -> [9.4, 11.4].
Timeline measured() {
  Timeline t = ps::test::measuredOneFOneB();
  t.source = TimelineSource::Imported;
  t.label = "trace";
  return t;
}

const OpMatch* matchOf(const Comparison& c, Op o) {
  for (const auto& m : c.matches)
    if (m.op == o) return &m;
  return nullptr;
}

}  // namespace

TEST(Comparison, MatchesEveryOpAndComputesDeviations) {
  Schedule plan = oneFOneB();
  Timeline p = planned(), m = measured();
  Comparison c = compareTimelines(plan, p, m);
  EXPECT_EQ(c.matches.size(), 8u);
  EXPECT_TRUE(c.unmatchedPlanned.empty());
  EXPECT_TRUE(c.unmatchedMeasured.empty());
  EXPECT_DOUBLE_EQ(c.plannedMakespan, 9.0);
  EXPECT_NEAR(c.measuredMakespan, 11.4, 1e-12);
  EXPECT_NEAR(c.relativeError, 2.4 / 9.0, 1e-12);
  EXPECT_EQ(c.scale, 1.0);

  const OpMatch* b10 = matchOf(c, B(1, 0));
  ASSERT_NE(b10, nullptr);
  EXPECT_EQ(b10->device, 1);
  EXPECT_EQ(p.ops[b10->planned].op, B(1, 0));
  EXPECT_EQ(m.ops[b10->measured].op, B(1, 0));
  ASSERT_TRUE(b10->deviation.has_value());
  EXPECT_NEAR(*b10->deviation, 1.5, 1e-12);
  EXPECT_DOUBLE_EQ(b10->plannedStart, 2.0);
  EXPECT_NEAR(b10->measuredStart, 2.2, 1e-12);
  const OpMatch* f01 = matchOf(c, F(0, 1));
  ASSERT_NE(f01, nullptr);
  EXPECT_NEAR(*f01->deviation, 1.0, 1e-12);
}

TEST(Comparison, ErrorTablesPerKindAndDevice) {
  Schedule plan = oneFOneB();
  Comparison c = compareTimelines(plan, planned(), measured());
  ASSERT_EQ(c.byKind.size(), 2u);
  const ErrorStats& f = c.byKind[0];
  const ErrorStats& b = c.byKind[1];
  EXPECT_EQ(f.label, "F");
  EXPECT_EQ(f.count, 4u);
  EXPECT_NEAR(f.ratio, 1.0, 1e-12);
  EXPECT_NEAR(f.meanAbsError, 0.0, 1e-12);
  EXPECT_EQ(b.label, "B");
  EXPECT_EQ(b.count, 4u);
  EXPECT_NEAR(b.plannedMs, 8.0, 1e-12);
  EXPECT_NEAR(b.measuredMs, 10.0, 1e-12);
  EXPECT_NEAR(b.ratio, 1.25, 1e-12);
  EXPECT_NEAR(b.meanAbsError, 0.25, 1e-12);  // (0.5 + 0.5 + 0 + 0) / 4
  EXPECT_NEAR(b.minDeviation, 1.0, 1e-12);
  EXPECT_NEAR(b.maxDeviation, 1.5, 1e-12);

  ASSERT_EQ(c.byDevice.size(), 2u);
  EXPECT_EQ(c.byDevice[0].device, 0);
  EXPECT_NEAR(c.byDevice[0].ratio, 1.0, 1e-12);
  EXPECT_EQ(c.byDevice[1].label, "device 1");
  EXPECT_NEAR(c.byDevice[1].ratio, 8.0 / 6.0, 1e-12);
  EXPECT_EQ(c.overall.count, 8u);
  EXPECT_NEAR(c.overall.ratio, 14.0 / 12.0, 1e-12);
}

TEST(Comparison, ScaledAlignmentMapsMeasuredMakespanOntoPlanned) {
  ComparisonOptions o;
  o.alignment = Alignment::Scaled;
  Timeline m = measured();
  for (auto& x : m.ops) {  // a trace with an arbitrary origin
    x.start += 100;
    x.end += 100;
  }
  Comparison c = compareTimelines(oneFOneB(), planned(), m, o);
  EXPECT_NEAR(c.scale, 9.0 / 11.4, 1e-12);
  const OpMatch* last = matchOf(c, B(0, 1));
  ASSERT_NE(last, nullptr);
  EXPECT_NEAR(last->measuredEnd, 9.0, 1e-9);
  EXPECT_NEAR(last->measuredStart, 9.4 * 9.0 / 11.4, 1e-9);
  // Deviation compares real durations, not scaled ones.
  EXPECT_NEAR(*last->deviation, 1.0, 1e-12);

  ComparisonOptions a;
  Comparison abs = compareTimelines(oneFOneB(), planned(), m, a);
  EXPECT_NEAR(matchOf(abs, B(0, 1))->measuredStart, 9.4, 1e-9);
}

TEST(Comparison, UnmatchedOpsAndOpsOnAnotherDevice) {
  Timeline m = measured();
  m.ops.erase(m.ops.begin() + 3);  // B(0,1) never measured
  m.ops.push_back(op(0, -1, Op{OpKind::SendF, 0, 0}, 1.0, 1.05));
  m.ops[0].device = 1;  // F(0,0) ran on device 1
  Comparison c = compareTimelines(oneFOneB(), planned(), m);
  EXPECT_EQ(c.matches.size(), 7u);
  ASSERT_EQ(c.unmatchedPlanned.size(), 1u);
  EXPECT_EQ(planned().ops[c.unmatchedPlanned[0]].op, B(0, 1));
  ASSERT_EQ(c.unmatchedMeasured.size(), 1u);
  EXPECT_EQ(m.ops[c.unmatchedMeasured[0]].op.kind, OpKind::SendF);
  bool moved = false, missing = false;
  for (const auto& d : c.diagnostics) {
    if (d.code == "compare.device" && d.message.find("F0@s0") != std::string::npos) moved = true;
    if (d.code == "compare.missing" && d.message.find("B1@s0") != std::string::npos) missing = true;
  }
  EXPECT_TRUE(moved);
  EXPECT_TRUE(missing);
  ASSERT_NE(matchOf(c, F(0, 0)), nullptr);
  EXPECT_EQ(matchOf(c, F(0, 0))->device, 0);
}

TEST(Comparison, JsonHoldsTheTablesPathAndBubbles) {
  Schedule plan = oneFOneB();
  Timeline p = planned(), m = measured();
  Comparison c = compareTimelines(plan, p, m);
  auto j = nlohmann::json::parse(comparisonToJson(c, plan, p, m));
  EXPECT_DOUBLE_EQ(j["makespan_predicted"].get<double>(), 9.0);
  EXPECT_DOUBLE_EQ(j["makespan_measured"].get<double>(), 11.4);
  EXPECT_EQ(j["error_by_kind"].size(), 2u);
  EXPECT_EQ(j["error_by_kind"][1]["kind"], "B");
  EXPECT_EQ(j["error_by_device"][1]["device"], 1);
  EXPECT_EQ(j["matches"].size(), 8u);
  EXPECT_EQ(j["critical_path"]["steps"].back()["op"], "B1@s0");
  EXPECT_EQ(j["bubbles"].size(), 2u);
  EXPECT_EQ(j["alignment"], "absolute");
}

TEST(Comparison, AlignmentNames) {
  EXPECT_EQ(alignmentFromName("scaled"), Alignment::Scaled);
  EXPECT_EQ(alignmentFromName("absolute"), Alignment::Absolute);
  EXPECT_FALSE(alignmentFromName("relative").has_value());
  EXPECT_EQ(alignmentName(Alignment::Scaled), "scaled");
}

TEST(Comparison, PlanLoweredForATraceOfPyTorchsRuntime) {
  const Schedule plan = oneFOneB(2, 2);
  auto withKinds = [](const std::vector<OpKind>& kinds) {
    Timeline t = measured();
    for (OpKind k : kinds) t.ops.push_back(op(0, -1, Op{k, 0, isStageLevelKind(k) ? -1 : 0}, 0, 0));
    return t;
  };
  auto count = [](const Schedule& s, OpKind k) {
    size_t n = 0;
    for (const auto& dev : s.devices)
      for (const auto& st : dev) n += !st.second && st.first.kind == k;
    return n;
  };
  // No runtime actions measured: the plan as it is.
  auto none = loweredPlanFor(plan, measured());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(*none);
  // SEND/RECV measured (an older PyTorch, or a trace without stage actions): the lowering's
  // SEND/RECV, none of its UNSHARD/RESHARD/REDUCE_GRAD.
  auto comms = loweredPlanFor(plan, withKinds({OpKind::SendF, OpKind::RecvF}));
  ASSERT_TRUE(comms.ok());
  ASSERT_TRUE(*comms);
  EXPECT_EQ(count(**comms, OpKind::SendF), 2u);
  EXPECT_EQ(count(**comms, OpKind::RecvB), 2u);
  EXPECT_EQ(count(**comms, OpKind::Unshard), 0u);
  EXPECT_EQ(count(**comms, OpKind::ReduceGrad), 0u);
  // Everything PyTorch 2.11 adds.
  auto all =
      loweredPlanFor(plan, withKinds({OpKind::SendF, OpKind::Unshard, OpKind::Reshard, OpKind::ReduceGrad}));
  ASSERT_TRUE(all.ok());
  ASSERT_TRUE(*all);
  EXPECT_EQ(count(**all, OpKind::Unshard), 2u);
  EXPECT_EQ(count(**all, OpKind::ReduceGrad), 2u);
  // A plan that already holds them is compared as it is.
  auto again = loweredPlanFor(**all, withKinds({OpKind::SendF}));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
}
