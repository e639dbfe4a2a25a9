#include "pipestudio/core/analysis/iterations.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/analysis/validator.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/planning/generators.h"

using namespace ps::core;

namespace {

// F = I = W = 1 ms per stage, one layer per stage; 1000 bytes of activations of which W keeps
// half after I.
CostProfile uniform(int stages, double stepMs = 0) {
  auto p = uniformCostProfile("F=1,I=1,W=1,act=1000", stages);
  EXPECT_TRUE(p.ok());
  for (auto& l : p->layers) l.optimizerStepMs = stepMs;
  return *p;
}

struct Built {
  Schedule schedule;
  SimulationModel model;
  Timeline one;  // a single iteration
};

Built build(ScheduleKind kind, int D, int M, double stepMs = 0) {
  GeneratorOptions g;
  g.devices = D;
  g.microbatches = M;
  auto s = generateSchedule(kind, g);
  EXPECT_TRUE(s.ok());
  auto m = makeSimulationModel(*s, uniform(s->pipeline.stages, stepMs));
  EXPECT_TRUE(m.ok());
  auto t = simulate(*s, *m);
  EXPECT_TRUE(t.ok() && t->complete);
  return Built{*s, *m, *t};
}

IterationResult iterate(const Built& r, int K, IterationBoundary b, bool timeline = true) {
  IterationOptions o;
  o.iterations = K;
  o.boundary = b;
  o.buildTimeline = timeline;
  auto it = simulateIterations(r.schedule, r.model, o);
  EXPECT_TRUE(it.ok()) << (it.ok() ? "" : it.error().message);
  EXPECT_TRUE(it->complete);
  return *it;
}

}  // namespace

// ZB-H1 with F = I = W = 1 on p devices and m micro-batches. Device 0 runs p forwards (the
// 1F1B warm-up depth that ZB-H1 keeps, so its memory is 1F1B's), done at t = p; the first
// input gradient needs the forward chain to the last stage (ends at p) and the I chain back
// (p more), so I(0,0) ends at 2p and device 0 waits p - 1 inside its span with nothing it may
// run (no W before the first I). Every other op of device 0 packs (ZB-H1 fills the rest with
// W), so its span is 3m + p - 1, the longest: stage i starts i later and ends no later. With the
// overlap boundary each device restarts after its own step, so a long run pays the longest
// span, 3m + p - 1 = 27 ms for p = 4, m = 8; with a sync boundary the makespan, which for ZB-H1
// is the same 3m + (p - 1)(F + I - W) = 27 ms.
TEST(Iterations, ZbH1SteadyStateIsTheLongestStageSpan) {
  const int p = 4, m = 8;
  Built r = build(ScheduleKind::ZBH1, p, m);
  EXPECT_DOUBLE_EQ(r.one.metrics.makespan, 3.0 * m + p - 1);
  auto ov = iterate(r, 4, IterationBoundary::Overlap);
  EXPECT_DOUBLE_EQ(ov.devices[0].firstSpan, 3.0 * m + p - 1);
  EXPECT_DOUBLE_EQ(ov.maxFirstSpan, 3.0 * m + p - 1);
  EXPECT_DOUBLE_EQ(ov.steadyStateMs, 3.0 * m + p - 1);
  auto sy = iterate(r, 4, IterationBoundary::Sync);
  EXPECT_DOUBLE_EQ(sy.steadyStateMs, 3.0 * m + p - 1);
}

// ZB-H2 ("ZB-2p": up to 2p micro-batches in flight) with F = I = W = 1: device 0's extra
// warm-up forwards fill the p - 1 wait of ZB-H1, and every device's span is its busy time 3m
// (zero bubble inside a span). Its makespan is still 3m + p - 1 (stage p - 1 cannot start before
// p - 1 forwards), which a sync boundary pays every iteration; the overlap boundary lets stage
// p - 1's late start hide behind the previous iteration, so a long run pays 3m = 24 ms.
TEST(Iterations, ZbH2OverlapReachesZeroBubble) {
  const int p = 4, m = 8;
  Built r = build(ScheduleKind::ZBH2, p, m);
  EXPECT_DOUBLE_EQ(r.one.metrics.makespan, 3.0 * m + p - 1);
  auto ov = iterate(r, 4, IterationBoundary::Overlap);
  for (const auto& d : ov.devices) EXPECT_DOUBLE_EQ(d.firstSpan, 3.0 * m) << "device " << d.device;
  EXPECT_DOUBLE_EQ(ov.steadyStateMs, 3.0 * m);
  auto sy = iterate(r, 4, IterationBoundary::Sync);
  EXPECT_DOUBLE_EQ(sy.steadyStateMs, 3.0 * m + p - 1);
  // Nothing of a device's iteration outlives its own step, so K iterations peak where one does.
  for (int d = 0; d < p; ++d)
    EXPECT_EQ(ov.devices[static_cast<size_t>(d)].peakMemoryBytes,
              r.one.metrics.devices[static_cast<size_t>(d)].peakMemoryBytes);
}

// The optimizer step's cost comes from the profile (optimizer_step_ms per layer). Overlap: each
// device's period is its span plus its own step, 3m + c. Sync: everyone waits for the last
// device, then steps: makespan + c.
TEST(Iterations, OptimizerStepFromTheProfile) {
  const int p = 4, m = 8;
  const double c = 2.5;
  Built r = build(ScheduleKind::ZBH2, p, m, c);
  auto ov = iterate(r, 5, IterationBoundary::Overlap);
  for (const auto& d : ov.devices) EXPECT_DOUBLE_EQ(d.optimizerStepMs, c);
  EXPECT_DOUBLE_EQ(ov.steadyStateMs, 3.0 * m + c);
  auto sy = iterate(r, 5, IterationBoundary::Sync);
  EXPECT_DOUBLE_EQ(sy.steadyStateMs, 3.0 * m + p - 1 + c);
  for (size_t k = 1; k < sy.iterationEnds.size(); ++k)
    EXPECT_DOUBLE_EQ(sy.iterationEnds[k] - sy.iterationEnds[k - 1], 3.0 * m + p - 1 + c);
  // An override per stage replaces the profile's.
  IterationOptions o;
  o.iterations = 3;
  o.optimizerStepMs = 1.0;
  auto it = simulateIterations(r.schedule, r.model, o);
  ASSERT_TRUE(it.ok());
  EXPECT_DOUBLE_EQ(it->steadyStateMs, 3.0 * m + 1.0);
}

// 1F1B (full backward, B = 2): device 0 waits for its first gradient inside its span, so the
// overlap boundary gains nothing over the makespan (m + p - 1)(F + B).
TEST(Iterations, OneFOneBGainsNothingFromOverlap) {
  Built r = build(ScheduleKind::OneFOneB, 4, 8);
  auto ov = iterate(r, 4, IterationBoundary::Overlap);
  EXPECT_DOUBLE_EQ(ov.steadyStateMs, (8 + 4 - 1) * 3.0);
  EXPECT_DOUBLE_EQ(ov.steadyStateMs, r.one.metrics.makespan);
}

// The unrolled schedule: K copies with micro-batch ids offset by k·M and one OPTIMIZER op per
// device and iteration; it validates, and its timeline names its steps.
TEST(Iterations, UnrolledScheduleAndTimeline) {
  const int p = 4, m = 8, K = 3;
  for (auto b : {IterationBoundary::Overlap, IterationBoundary::Sync}) {
    Built r = build(ScheduleKind::ZBH1, p, m, 0.5);
    auto it = iterate(r, K, b);
    EXPECT_EQ(it.unrolled.pipeline.microbatches, m * K);
    EXPECT_TRUE(validateSchedule(it.unrolled).valid());
    EXPECT_EQ(it.timeline.ops.size(), static_cast<size_t>(K) * (r.one.ops.size() + p));
    int steps = 0;
    for (const auto& op : it.timeline.ops) {
      const Step& st = it.unrolled.devices[static_cast<size_t>(op.device)][static_cast<size_t>(op.step)];
      EXPECT_EQ(st.first, op.op) << iterationBoundaryName(b);
      if (it.unrolled.kindName(op.op.kind) == "OPTIMIZER") {
        ++steps;
        EXPECT_DOUBLE_EQ(op.duration(), 0.5);
      }
    }
    EXPECT_EQ(steps, K * p);
    // The last iteration ends where the unrolled timeline ends.
    EXPECT_DOUBLE_EQ(it.iterationEnds.back(), it.timeline.metrics.makespan);
  }
}

// Memory of every iteration is checked against the limit: a limit below one iteration's peak is
// reported by the multi-iteration run too.
TEST(Iterations, MemoryLimitAppliesToEveryIteration) {
  Built r = build(ScheduleKind::ZBH2, 4, 8);
  IterationOptions o;
  o.iterations = 3;
  o.simulation.memoryLimitBytes = r.one.metrics.devices[0].peakMemoryBytes - 1;
  auto it = simulateIterations(r.schedule, r.model, o);
  ASSERT_TRUE(it.ok());
  bool over = false;
  for (const auto& d : it->diagnostics) over |= d.code == "simulate.memory";
  EXPECT_TRUE(over);
}

TEST(Iterations, StageLevelOpsAreRefusedWithTheirPlace) {
  auto s = parseDsl(
      "devices 1\nstages 1\nmicrobatches 2\n"
      "device 0: F0 F1 B0 B1 REDUCE_GRAD\n");
  ASSERT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  auto m = makeSimulationModel(*s, uniform(1));
  ASSERT_TRUE(m.ok());
  IterationOptions o;
  auto it = simulateIterations(*s, *m, o);
  ASSERT_FALSE(it.ok());
  EXPECT_NE(it.error().message.find("device 0 step 4"), std::string::npos) << it.error().message;
  EXPECT_NE(it.error().message.find("REDUCE_GRAD"), std::string::npos);
}
