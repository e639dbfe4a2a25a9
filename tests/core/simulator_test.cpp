#include "pipestudio/core/analysis/simulator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <type_traits>

#include "fixtures/schedules.h"
#include "pipestudio/core/analysis/validator.h"

using namespace ps::core;

namespace {

using ps::test::gpipe;
using ps::test::oneFOneB;

// "F3@1" = F of micro-batch 3 on stage 1; "F3" = on the device's own stage (stage == device);
// "(F3@1;B0@1)" = an overlapped pair; "OFFLOAD0", "RELOAD0", "R2", "X1" (user kind X).
Schedule build(int D, int S, int M, PlacementKind pk, const std::vector<std::string>& devs,
               std::vector<UserKind> userKinds = {}) {
  return ps::test::scheduleFromTokens(D, S, M, pk, devs, std::move(userKinds), [](const std::string& kind) {
    ADD_FAILURE() << "unknown op kind " << kind;
  });
}

Timeline run(const Schedule& s, const CostProfile& p, SimulationOptions o = {}) {
  auto model = makeSimulationModel(s, p);
  EXPECT_TRUE(model.ok()) << (model.ok() ? "" : formatDiagnostics(model.errors()));
  auto t = simulate(s, *model, o);
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : formatDiagnostics(t.errors()));
  return std::move(t).value();
}

CostProfile uniform(const std::string& spec, int stages) {
  return uniformCostProfile(spec, stages).value();
}

const TimelineOp& find(const Timeline& t, const Schedule& s, const std::string& name) {
  for (const auto& op : t.ops)
    if (s.opName(op.op) == name) return op;
  ADD_FAILURE() << "no op " << name;
  static TimelineOp none;
  return none;
}

// The start of each named op (e.g. "F0@s1") in `t`.
void expectStarts(const Timeline& t, const Schedule& s,
                  const std::vector<std::pair<std::string, double>>& starts) {
  for (const auto& [name, start] : starts) {
    SCOPED_TRACE(name);
    EXPECT_DOUBLE_EQ(find(t, s, name).start, start);
  }
}

}  // namespace

TEST(Simulator, OneFOneBMakespanIsClosedForm) {
  for (auto [D, M] : {std::pair{4, 8}, {4, 4}, {3, 7}, {8, 2}, {1, 5}}) {
    for (auto [F, I, W] : {std::tuple{1.0, 1.0, 1.0}, {2.0, 1.5, 0.5}}) {
      Schedule s = oneFOneB(D, M);
      std::ostringstream spec;
      spec << "F=" << F << ",I=" << I << ",W=" << W;
      Timeline t = run(s, uniform(spec.str(), D));
      EXPECT_TRUE(t.complete);
      EXPECT_DOUBLE_EQ(t.metrics.makespan, (M + D - 1) * (F + I + W)) << "D=" << D << " M=" << M;
      EXPECT_DOUBLE_EQ(t.metrics.lowerBound, M * (F + I + W));
      EXPECT_NEAR(t.metrics.bubbleRatio, 1.0 - double(M) / (M + D - 1), 1e-12);
      EXPECT_NEAR(t.metrics.efficiency, double(M) / (M + D - 1), 1e-12);
      EXPECT_EQ(t.metrics.ops, size_t(2 * D * M));
    }
  }
}

TEST(Simulator, GPipeMakespanIsClosedForm) {
  for (auto [D, M] : {std::pair{4, 8}, {2, 3}, {5, 5}}) {
    Schedule s = gpipe(D, M);
    Timeline t = run(s, uniform("F=1,B=2", D));
    EXPECT_DOUBLE_EQ(t.metrics.makespan, (M + D - 1) * 3.0);
  }
}

TEST(Simulator, PeakInflightMicrobatches) {
  for (auto [D, M] : {std::pair{4, 8}, {4, 2}, {6, 6}}) {
    Timeline a = run(oneFOneB(D, M), uniform("F=1,I=1,W=1", D));
    Timeline b = run(gpipe(D, M), uniform("F=1,I=1,W=1", D));
    for (int d = 0; d < D; ++d) {
      EXPECT_EQ(a.metrics.devices[size_t(d)].peakInflightMicrobatches, std::min(D - d, M)) << "1F1B d=" << d;
      EXPECT_EQ(b.metrics.devices[size_t(d)].peakInflightMicrobatches, M) << "GPipe d=" << d;
    }
  }
}

TEST(Simulator, TransferTakesLatencyPlusBytesOverBandwidth) {
  // Two stages on two devices, one micro-batch: F0 -> link -> F0 -> B0 -> link -> B0.
  Schedule s = build(2, 2, 1, PlacementKind::Linear, {"F0 B0", "F0 B0"});
  CostProfile p = uniform("F=1,I=1,W=1,out=1000", 2);
  p.link = LinkCost{0.5, 500};  // 0.5 ms + 1000 B / 500 B/ms = 2.5 ms
  Timeline t = run(s, p);
  EXPECT_DOUBLE_EQ(find(t, s, "F0@s1").start, 1 + 2.5);
  EXPECT_DOUBLE_EQ(find(t, s, "B0@s1").end, 3.5 + 1 + 2);
  EXPECT_DOUBLE_EQ(find(t, s, "B0@s0").start, 6.5 + 2.5);
  EXPECT_DOUBLE_EQ(t.metrics.makespan, 11);
  ASSERT_EQ(t.transfers.size(), 2u);
  EXPECT_EQ(t.transfers[0].srcDevice, 0);
  EXPECT_EQ(t.transfers[0].dstDevice, 1);
  EXPECT_EQ(t.transfers[0].bytes, 1000);
  EXPECT_DOUBLE_EQ(t.transfers[1].start, 6.5);
  EXPECT_DOUBLE_EQ(t.transfers[1].end, 9);
  EXPECT_EQ(t.transfers[1].producer, (Op{OpKind::B, 1, 0}));
  EXPECT_EQ(t.transfers[1].consumer, (Op{OpKind::B, 0, 0}));
}

TEST(Simulator, TransfersQueueOnOneChannelPerDirection) {
  // F takes 1, a transfer 2: device 0's outputs leave at 1, 2, 3 but the channel carries one
  // at a time, so they arrive at 3, 5, 7 and device 1's forwards start then.
  Schedule s = build(2, 2, 3, PlacementKind::Linear, {"F0 F1 F2 B0 B1 B2", "F0 F1 F2 B0 B1 B2"});
  CostProfile p = uniform("F=1,B=2", 2);
  p.fixedCommMs = 2;
  Timeline t = run(s, p);
  expectStarts(t, s, {{"F0@s1", 3}, {"F1@s1", 5}, {"F2@s1", 7}});
  // The backward direction has its own channel: B0@s1 ends at 10, arrives 12; B1 at 12 -> 14;
  // B2 at 14 -> 16 (it could leave at 14, the channel is free by then).
  expectStarts(t, s, {{"B0@s0", 12}, {"B2@s0", 16}});
  EXPECT_DOUBLE_EQ(t.metrics.makespan, 18);
}

TEST(Simulator, ComputeOverlapsCommunication) {
  // Device 0 keeps computing while its outputs travel.
  Schedule s = build(2, 2, 2, PlacementKind::Linear, {"F0 F1 B0 B1", "F0 B0 F1 B1"});
  CostProfile p = uniform("F=1,B=1", 2);
  p.fixedCommMs = 5;
  Timeline t = run(s, p);
  expectStarts(t, s, {{"F1@s0", 1}, {"F0@s1", 6}});
}

TEST(Simulator, OverlappedPairTakesFactorTimesSum) {
  Schedule s = build(1, 1, 2, PlacementKind::Linear, {"F0 (F1;B0) B1"});
  CostProfile p = uniform("F=1,B=2,overlap=0.75", 1);
  Timeline t = run(s, p);
  const auto& a = find(t, s, "F1@s0");
  const auto& b = find(t, s, "B0@s0");
  EXPECT_TRUE(a.overlapped);
  EXPECT_DOUBLE_EQ(a.start, 1);
  EXPECT_DOUBLE_EQ(a.end, 1 + 0.75 * 3);
  EXPECT_DOUBLE_EQ(b.end, a.end);
  EXPECT_DOUBLE_EQ(t.metrics.devices[0].busy, 1 + 2.25 + 2);
}

TEST(Simulator, ActivationsLiveFromForwardToBackward) {
  // One device, two stages (layers output 10 bytes each), activations 100 per stage.
  Schedule s = build(1, 2, 1, PlacementKind::Linear, {"F0@0 F0@1 B0@1 B0@0"});
  CostProfile p = uniform("F=1,B=2,act=100,out=10,weight=5", 2);
  Timeline t = run(s, p);
  const auto& dm = t.metrics.devices[0];
  EXPECT_EQ(dm.staticBytes, 2 * 5 * 8);  // weights x (1 + gradients 1 + optimizer 6)
  EXPECT_EQ(dm.peakMemoryBytes, 80 + 200);
  EXPECT_DOUBLE_EQ(dm.peakMemoryTime, 1);
  EXPECT_EQ(dm.peakMemoryOp.step, 1);
  ASSERT_FALSE(t.memory[0].empty());
  EXPECT_EQ(t.memory[0].back().bytes, 80);  // everything freed
}

TEST(Simulator, RecomputeKeepsOnlyTheStageInput) {
  Schedule s = build(1, 2, 1, PlacementKind::Linear, {"F0@0 F0@1 R0@1 B0@1 B0@0"});
  CostProfile p = uniform("F=1,B=2,R=1.5,act=100,out=10", 2);
  Timeline t = run(s, p);
  // F0@0 +100 at 0; F0@1 keeps its input (10) at 1; R0@1 re-materialises 100 at 2.
  std::vector<std::pair<double, std::int64_t>> curve;
  for (auto& m : t.memory[0]) curve.emplace_back(m.time, m.bytes);
  std::vector<std::pair<double, std::int64_t>> want{{0, 0},   {0, 100},   {1, 110},
                                                    {2, 210}, {5.5, 100}, {7.5, 0}};
  EXPECT_EQ(curve, want);
  EXPECT_DOUBLE_EQ(find(t, s, "R0@s1").duration(), 1.5);
  EXPECT_EQ(t.metrics.devices[0].peakMemoryBytes, 210);
  EXPECT_EQ(s.opName(s.devices[0][size_t(t.metrics.devices[0].peakMemoryOp.step)].first), "R0@s1");
}

TEST(Simulator, SplitBackwardFreesInTwoParts) {
  // I frees all but W's share (half by default), W the rest.
  Schedule s = build(1, 1, 1, PlacementKind::Linear, {"F0 I0 W0"});
  Timeline t = run(s, uniform("F=1,I=1,W=1,act=100", 1));
  std::vector<std::int64_t> bytes;
  for (auto& m : t.memory[0]) bytes.push_back(m.bytes);
  EXPECT_EQ(bytes, (std::vector<std::int64_t>{0, 100, 50, 0}));
  EXPECT_EQ(t.metrics.devices[0].peakInflightMicrobatches, 1);
}

TEST(Simulator, OffloadRunsOnTheCopyStreamAndFreesUntilReload) {
  Schedule s = build(1, 1, 2, PlacementKind::Linear, {"F0 OFFLOAD0 F1 B1 RELOAD0 B0"});
  CostProfile p = uniform("F=1,B=2,act=100", 1);
  p.hostBandwidthBytesPerMs = 100;  // a copy of 100 B takes 1 ms
  Timeline t = run(s, p);
  EXPECT_DOUBLE_EQ(find(t, s, "OFFLOAD0@s0").start, 1);
  EXPECT_DOUBLE_EQ(find(t, s, "OFFLOAD0@s0").end, 2);
  EXPECT_DOUBLE_EQ(find(t, s, "F1@s0").start, 1);       // not blocked by the copy
  EXPECT_DOUBLE_EQ(find(t, s, "RELOAD0@s0").start, 4);  // issued after B1
  EXPECT_DOUBLE_EQ(find(t, s, "B0@s0").start, 5);       // waits for the reload
  EXPECT_DOUBLE_EQ(t.metrics.makespan, 7);
  EXPECT_DOUBLE_EQ(t.metrics.devices[0].busy, 6);
  std::vector<std::pair<double, std::int64_t>> curve;
  for (auto& m : t.memory[0]) curve.emplace_back(m.time, m.bytes);
  std::vector<std::pair<double, std::int64_t>> want{{0, 0}, {0, 100}, {1, 200}, {2, 100}, {4, 100}, {7, 0}};
  // At 4: B1 frees 100 and RELOAD0 brings 100 back: one sample with the state after both.
  EXPECT_EQ(curve, want);
  // Ops stay sorted by start within the device.
  for (size_t i = 1; i < t.ops.size(); ++i) EXPECT_LE(t.ops[i - 1].start, t.ops[i].start);
}

TEST(Simulator, MemoryOverLimitNamesDeviceTimeAndOp) {
  Schedule s = build(2, 2, 2, PlacementKind::Linear, {"F0 F1 B0 B1", "F0 B0 F1 B1"});
  CostProfile p = uniform("F=1,B=2,act=100", 2);
  SimulationOptions o;
  o.memoryLimitBytes = 150;
  Timeline t = run(s, p, o);
  ASSERT_EQ(t.diagnostics.size(), 1u);
  const Diagnostic& d = t.diagnostics[0];
  EXPECT_EQ(d.code, "simulate.memory");
  EXPECT_NE(d.message.find("device 0"), std::string::npos) << d.message;
  EXPECT_NE(d.message.find("at 1 ms"), std::string::npos) << d.message;
  EXPECT_NE(d.message.find("F1@s0"), std::string::npos) << d.message;
  ASSERT_EQ(d.related.size(), 1u);
  EXPECT_EQ(d.related[0].device, 0);
  EXPECT_EQ(d.related[0].step, 1);
  // The profile's device memory is the default limit.
  p.deviceMemoryBytes = 1000;
  EXPECT_TRUE(run(s, p).diagnostics.empty());
}

TEST(Simulator, DeadlockReportsTheValidatorsCycle) {
  Schedule s = build(2, 2, 1, PlacementKind::Linear, {"B0 F0", "F0 B0"});
  Timeline t = run(s, uniform("F=1,B=2", 2));
  EXPECT_FALSE(t.complete);
  ValidationReport v = validateSchedule(s);
  ASSERT_FALSE(v.deadlock.empty());
  Diagnostic expected;
  for (auto& d : v.diagnostics)
    if (d.code == "validate.deadlock") expected = d;
  ASSERT_EQ(t.diagnostics.size(), 1u);
  EXPECT_EQ(t.diagnostics[0].code, expected.code);
  EXPECT_EQ(t.diagnostics[0].message, expected.message);
  EXPECT_EQ(t.metrics.ops, 0u);  // nothing could run
}

TEST(Simulator, UserKindDurationAndMemoryEffect) {
  UserKind k;
  k.name = "SCALE";
  k.durationExpr = "0.5 * W + (F - 1) / 2";
  k.memory = MemoryEffect{30, 7};
  k.after = {"W"};
  Schedule s = build(1, 1, 1, PlacementKind::Linear, {"F0 I0 W0 SCALE0"}, {k});
  Timeline t = run(s, uniform("F=3,I=1,W=2", 1));
  const auto& op = find(t, s, "SCALE0@s0");
  EXPECT_DOUBLE_EQ(op.start, 6);
  EXPECT_DOUBLE_EQ(op.duration(), 0.5 * 2 + (3 - 1) / 2.0);
  // Transient 30 while it runs, 7 stays.
  EXPECT_EQ(t.memory[0].back().bytes, 7);
  EXPECT_EQ(t.metrics.devices[0].peakMemoryBytes, 30);
}

TEST(Simulator, BadDurationExpressionIsAnError) {
  UserKind k;
  k.name = "X";
  k.durationExpr = "2 * Q";
  Schedule s = build(1, 1, 1, PlacementKind::Linear, {"F0 B0 X0"}, {k});
  auto model = makeSimulationModel(s, uniform("F=1", 1));
  ASSERT_TRUE(model.ok());
  auto t = simulate(s, *model);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("kind X"), std::string::npos);
  EXPECT_NE(t.error().message.find("unknown name 'Q'"), std::string::npos) << t.error().message;
}

TEST(DurationExpression, EvaluatesArithmetic) {
  StageCost c;
  c.F = 2, c.B = 6, c.I = 4, c.W = 2, c.R = 2.5;
  EXPECT_DOUBLE_EQ(evaluateDurationExpression("F + 2 * (I - W) / 4", c).value(), 3);
  EXPECT_DOUBLE_EQ(evaluateDurationExpression("-R + 1e1", c).value(), 7.5);
  EXPECT_DOUBLE_EQ(evaluateDurationExpression("", c).value(), 0);
  EXPECT_FALSE(evaluateDurationExpression("F +", c).ok());
  EXPECT_FALSE(evaluateDurationExpression("(F", c).ok());
  EXPECT_FALSE(evaluateDurationExpression("F / 0", c).ok());
  EXPECT_FALSE(evaluateDurationExpression("F F", c).ok());
}

TEST(Simulator, MetricsAgreeWithComputeMetrics) {
  std::vector<Schedule> cases{oneFOneB(4, 6), gpipe(3, 5),
                              build(1, 1, 2, PlacementKind::Linear, {"F0 OFFLOAD0 F1 B1 RELOAD0 B0"}),
                              build(1, 2, 1, PlacementKind::Linear, {"F0@0 F0@1 R0@1 B0@1 B0@0"})};
  for (const Schedule& s : cases) {
    CostProfile p = uniform("F=1,I=1.5,W=0.5,act=64,out=8,weight=3", s.pipeline.stages);
    p.hostBandwidthBytesPerMs = 32;
    p.link = LinkCost{0.25, 16};
    Timeline t = run(s, p);
    TimelineMetrics m = computeMetrics(t);
    EXPECT_DOUBLE_EQ(m.makespan, t.metrics.makespan);
    EXPECT_DOUBLE_EQ(m.lowerBound, t.metrics.lowerBound);
    EXPECT_NEAR(m.bubbleRatio, t.metrics.bubbleRatio, 1e-12);
    EXPECT_EQ(m.ops, t.metrics.ops);
    ASSERT_EQ(m.devices.size(), t.metrics.devices.size());
    for (size_t d = 0; d < m.devices.size(); ++d) {
      const auto &a = m.devices[d], &b = t.metrics.devices[d];
      EXPECT_DOUBLE_EQ(a.busy, b.busy);
      EXPECT_DOUBLE_EQ(a.span(), b.span());
      EXPECT_EQ(a.staticBytes, b.staticBytes);
      EXPECT_EQ(a.peakMemoryBytes, b.peakMemoryBytes);
      EXPECT_DOUBLE_EQ(a.peakMemoryTime, b.peakMemoryTime);
      EXPECT_EQ(a.peakMemoryOp.step, b.peakMemoryOp.step);
      EXPECT_EQ(a.peakInflightMicrobatches, b.peakInflightMicrobatches);
    }
  }
}

TEST(Simulator, ResimulatingAfterAMoveReflectsTheNewOrder) {
  Schedule s = oneFOneB(2, 2);
  SimulationModel model = makeSimulationModel(s, uniform("F=1,B=2", 2)).value();
  double before = simulate(s, model)->metrics.makespan;
  // Device 0: F0 F1 B0 B1 -> F0 B0 F1 B1 (GPipe-like order becomes serial per micro-batch).
  std::swap(s.devices[0][1], s.devices[0][2]);
  auto after = simulate(s, model);
  ASSERT_TRUE(after.ok());
  EXPECT_DOUBLE_EQ(before, 9);
  EXPECT_DOUBLE_EQ(after->metrics.makespan, 12);
}

TEST(Simulator, RefusesModelWithWrongStageCount) {
  Schedule s = oneFOneB(2, 2);
  SimulationModel model = makeSimulationModel(s, uniform("F=1", 2)).value();
  model.stages.pop_back();
  EXPECT_FALSE(simulate(s, model).ok());
}

TEST(Simulator, PartitionFromTheScheduleHeader) {
  Schedule s = oneFOneB(2, 1);
  s.partition = {3, 1};
  CostProfile p = uniform("F=1,I=1,W=1", 4);
  auto model = makeSimulationModel(s, p);
  ASSERT_TRUE(model.ok());
  EXPECT_DOUBLE_EQ(model->stages[0].F, 3);
  EXPECT_DOUBLE_EQ(model->stages[1].F, 1);
  // An explicit partition overrides the header's.
  EXPECT_DOUBLE_EQ(makeSimulationModel(s, p, {2, 2})->stages[0].F, 2);
}

// ---- Closed forms on the built-in generators (uniform costs, no communication).

#include "pipestudio/core/planning/generators.h"

namespace {

Schedule generated(ScheduleKind k, int D, int M, int chunks = 0) {
  auto r = generateSchedule(k, GeneratorOptions{D, M, chunks});
  EXPECT_TRUE(r.ok()) << scheduleKindName(k) << " D=" << D << " M=" << M << ": "
                      << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : Schedule{};
}

}  // namespace

TEST(SimulatorClosedForm, GeneratedOneFOneBAndGPipe) {
  for (auto [D, M] : {std::pair{4, 8}, {4, 4}, {3, 7}, {8, 16}, {4, 2}}) {
    for (ScheduleKind k : {ScheduleKind::OneFOneB, ScheduleKind::GPipe}) {
      Schedule s = generated(k, D, M);
      Timeline t = run(s, uniform("F=1,I=1,W=1", s.pipeline.stages));
      EXPECT_TRUE(t.complete) << scheduleKindName(k);
      EXPECT_DOUBLE_EQ(t.metrics.makespan, (M + D - 1) * 3.0)
          << scheduleKindName(k) << " D=" << D << " M=" << M;
      for (int d = 0; d < D; ++d)
        EXPECT_EQ(t.metrics.devices[size_t(d)].peakInflightMicrobatches,
                  k == ScheduleKind::GPipe ? M : std::min(D - d, M))
            << scheduleKindName(k) << " D=" << D << " M=" << M << " d=" << d;
    }
  }
}

TEST(SimulatorClosedForm, GeneratedInterleavedOneFOneB) {
  // Per-chunk costs F and B, M a multiple of D: V·M·(F + B) + (D - 1)(F + B).
  for (auto [D, M, V] : {std::tuple{4, 8, 2}, {2, 4, 2}, {4, 4, 3}, {3, 6, 2}}) {
    Schedule s = generated(ScheduleKind::Interleaved1F1B, D, M, V);
    ASSERT_EQ(s.pipeline.stages, D * V);
    for (auto [F, B] : {std::pair{1.0, 2.0}, {1.0, 1.0}}) {
      std::ostringstream spec;
      spec << "F=" << F << ",B=" << B;
      Timeline t = run(s, uniform(spec.str(), s.pipeline.stages));
      EXPECT_TRUE(t.complete);
      EXPECT_DOUBLE_EQ(t.metrics.makespan, V * M * (F + B) + (D - 1) * (F + B))
          << "D=" << D << " M=" << M << " V=" << V << " F=" << F << " B=" << B;
    }
  }
}

TEST(SimulatorClosedForm, GeneratedZBH1) {
  for (auto [D, M] : {std::pair{4, 8}, {4, 4}, {3, 6}, {8, 16}}) {
    Schedule s = generated(ScheduleKind::ZBH1, D, M);
    Timeline t = run(s, uniform("F=1,I=1,W=1", s.pipeline.stages));
    EXPECT_TRUE(t.complete);
    EXPECT_DOUBLE_EQ(t.metrics.makespan, 3.0 * M + D - 1) << "D=" << D << " M=" << M;
    for (int d = 0; d < D; ++d)
      EXPECT_EQ(t.metrics.devices[size_t(d)].peakInflightMicrobatches, std::min(D - d, M)) << "d=" << d;
  }
}

TEST(SimulatorClosedForm, HandBuiltZBH2HasNoGaps) {
  // ZB-H2 for D = 2, M = 4 (warm-up 2D - 1 forwards, W passes moved to the tail so the shape
  // is a parallelogram): each device busy from its first op to its last, makespan 3M + D - 1.
  Schedule s = build(2, 2, 4, PlacementKind::Linear,
                     {"F0 F1 F2 I0 F3 I1 W0 I2 W1 I3 W2 W3", "F0 I0 F1 I1 F2 I2 F3 I3 W0 W1 W2 W3"});
  Timeline t = run(s, uniform("F=1,I=1,W=1", 2));
  EXPECT_DOUBLE_EQ(t.metrics.makespan, 13);
  for (const DeviceMetrics& d : t.metrics.devices)
    EXPECT_DOUBLE_EQ(d.busy, d.span()) << "device " << d.device;
}

TEST(SimulatorClosedForm, GeneratedZBH2HasNoGaps) {
  for (auto [D, M] : {std::pair{4, 8}, {4, 12}, {3, 6}, {2, 4}}) {
    Schedule s = generated(ScheduleKind::ZBH2, D, M);
    Timeline t = run(s, uniform("F=1,I=1,W=1", s.pipeline.stages));
    EXPECT_TRUE(t.complete);
    for (const DeviceMetrics& d : t.metrics.devices)
      EXPECT_DOUBLE_EQ(d.busy, d.span()) << "D=" << D << " M=" << M << " device " << d.device;
  }
}

TEST(SimulatorClosedForm, EveryGeneratorSimulatesAndAgreesWithComputeMetrics) {
  for (ScheduleKind k : allScheduleKinds()) {
    auto r = generateSchedule(k, GeneratorOptions{4, 8, 0});
    // Every kind builds 4 devices x 8 micro-batches: a kind that fails is a failure here, not a
    // case left out.
    ASSERT_TRUE(r.ok()) << scheduleKindName(k) << ": " << formatDiagnostics(r.errors());
    CostProfile p = uniform("F=1,I=1.2,W=0.8,act=100,out=10", r->pipeline.stages);
    p.link = LinkCost{0.1, 100};
    Timeline t = run(*r, p);
    EXPECT_TRUE(t.complete) << scheduleKindName(k);
    EXPECT_TRUE(t.diagnostics.empty()) << scheduleKindName(k) << ": " << formatDiagnostics(t.diagnostics);
    TimelineMetrics m = computeMetrics(t);
    EXPECT_NEAR(m.makespan, t.metrics.makespan, 1e-9) << scheduleKindName(k);
    for (size_t d = 0; d < m.devices.size(); ++d) {
      EXPECT_NEAR(m.devices[d].busy, t.metrics.devices[d].busy, 1e-9) << scheduleKindName(k);
      EXPECT_EQ(m.devices[d].peakMemoryBytes, t.metrics.devices[d].peakMemoryBytes) << scheduleKindName(k);
      EXPECT_EQ(m.devices[d].peakInflightMicrobatches, t.metrics.devices[d].peakInflightMicrobatches)
          << scheduleKindName(k) << " device " << d;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Regression: the simulator's output must stay bit-identical across reimplementations of its
// internals. Each case hashes the whole timeline (every op, transfer and memory sample with
// the exact bit patterns of its times, the metrics and the diagnostics); the digests were
// recorded from the implementation before the flat compile (commit 9cf345a), whose results the
// closed-form tests above check. A change of semantics must update them deliberately.
namespace {

struct Digest {
  std::uint64_t h = 1469598103934665603ull;
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) {
      h ^= b[i];
      h *= 1099511628211ull;
    }
  }
  // Integers (and bools) as 64 bits, doubles as their bit pattern, an op as its kind, stage
  // and micro-batch, a string as its length and bytes.
  template <class I>
  requires std::is_integral_v<I>
  void one(I v) {
    const auto w = static_cast<std::int64_t>(v);
    bytes(&w, sizeof w);
  }
  void one(double v) { bytes(&v, sizeof v); }
  void one(const Op& o) { add(static_cast<std::int64_t>(o.kind), o.stage, o.microbatch); }
  void one(const OpRef& r) { add(r.device, r.step); }
  void one(const std::string& s) {
    one(s.size());
    bytes(s.data(), s.size());
  }
  template <class... T>
  void add(const T&... v) {
    (one(v), ...);
  }
};

std::uint64_t digestOf(const Timeline& t) {
  Digest g;
  g.add(t.devices, t.complete, t.label);
  for (const auto& o : t.ops) g.add(o.device, o.step, o.op, o.overlapped, o.start, o.end);
  for (const auto& x : t.transfers)
    g.add(x.srcDevice, x.dstDevice, x.producer, x.consumer, x.bytes, x.start, x.end);
  g.add(t.memory.size());
  for (const auto& curve : t.memory) {
    g.add(curve.size());
    for (const auto& m : curve) g.add(m.time, m.bytes);
  }
  const TimelineMetrics& m = t.metrics;
  g.add(m.makespan, m.bubbleRatio, m.lowerBound, m.efficiency, m.ops);
  for (const auto& d : m.devices)
    g.add(d.device, d.start, d.end, d.busy, d.staticBytes, d.peakMemoryBytes, d.peakMemoryTime,
          d.peakMemoryOp, d.peakInflightMicrobatches);
  for (const auto& d : t.diagnostics) {
    g.add(d.code, d.message);
    for (const auto& r : d.related) g.add(r);
  }
  return g.h;
}

// Recompute before every backward of even micro-batches; offload after and reload before
// the backward of micro-batches 1 mod 3 (on the copy stream).
Schedule withRecomputeAndOffload(Schedule s) {
  for (auto& dev : s.devices) {
    std::vector<Step> out;
    for (const Step& st : dev) {
      const Op& o = st.first;
      const bool bwd = !st.overlapped() && (o.kind == OpKind::B || o.kind == OpKind::I) && o.microbatch >= 0;
      if (bwd && o.microbatch % 2 == 0) out.push_back(Step{Op{OpKind::R, o.stage, o.microbatch}, {}});
      if (bwd && o.microbatch % 3 == 1) out.push_back(Step{Op{OpKind::Reload, o.stage, o.microbatch}, {}});
      out.push_back(st);
      if (!st.overlapped() && o.kind == OpKind::F && o.microbatch % 3 == 1)
        out.push_back(Step{Op{OpKind::Offload, o.stage, o.microbatch}, {}});
    }
    dev = std::move(out);
  }
  return s;
}

// Deterministic neighbour swaps (some orders deadlock, which must be reported identically).
Schedule shuffled(Schedule s, unsigned seed, int swaps) {
  unsigned x = seed * 2654435761u + 1;
  for (int i = 0; i < swaps; ++i) {
    x = x * 1664525u + 1013904223u;
    auto& dev = s.devices[(x >> 8) % s.devices.size()];
    if (dev.size() < 2) continue;
    x = x * 1664525u + 1013904223u;
    const size_t at = (x >> 8) % (dev.size() - 1);
    std::swap(dev[at], dev[at + 1]);
  }
  return s;
}

// Stage costs that differ per stage, so ties and transfers are not all uniform.
CostProfile heterogeneous(int stages, bool link, bool fixedComm) {
  CostProfile p = uniform("F=1,I=1,W=1,act=1048576,out=65536,weight=1048576", stages);
  for (int i = 0; i < stages; ++i) {
    LayerCost& l = p.layers[static_cast<size_t>(i)];
    l.forwardMs = 0.7 + 0.13 * (i % 5);
    l.backwardInputMs = 1.1 + 0.07 * (i % 3);
    l.backwardWeightMs = 0.9 + 0.05 * (i % 4);
    l.activationBytes = 1000000 + 4096 * i;
    l.outputBytes = 50000 + 1000 * i;
  }
  if (link) p.link = LinkCost{0.01, 25000};
  if (fixedComm) p.fixedCommMs = 0.3;
  p.hostBandwidthBytesPerMs = 2000000;
  p.overlapFactor = 0.8;
  return p;
}

}  // namespace

TEST(SimulatorRegression, GeneratedSchedulesAreBitIdenticalToTheRecordedDigests) {
  const bool print = std::getenv("PS_PRINT_SIM_DIGESTS") != nullptr;
  std::vector<std::uint64_t> got;
  int stalled = 0, transfers = 0, overLimit = 0;
  for (ScheduleKind k : allScheduleKinds())
    for (auto [D, M] : {std::pair{4, 8}, std::pair{3, 12}}) {
      // Digests recorded before DualPipe existed; routes_test.cpp checks its timelines.
      if (k == ScheduleKind::DualPipe) continue;
      auto gen = generateSchedule(k, GeneratorOptions{D, M});
      ASSERT_TRUE(gen.ok()) << scheduleKindName(k) << " " << D << "x" << M;
      const Schedule base = *gen;
      const int S = base.pipeline.stages;
      const std::vector<Schedule> variants{base, withRecomputeAndOffload(base), shuffled(base, 7, 3),
                                           shuffled(withRecomputeAndOffload(base), 11, 2)};
      for (size_t v = 0; v < variants.size(); ++v)
        for (int pc = 0; pc < 4; ++pc) {
          CostProfile p = pc == 0 ? uniform("F=1,I=1,W=1,act=1048576,out=65536,weight=1048576", S)
                                  : heterogeneous(S, pc != 3, pc == 3);
          if (pc == 0 && v == 0) p.link = LinkCost{0.01, 25000};
          SimulationOptions o;
          if (pc == 2) o.memoryLimitBytes = 14000000;  // some devices go over
          if (pc == 1 && v == 2) o.recordMemory = o.recordTransfers = false;
          auto model = makeSimulationModel(variants[v], p);
          ASSERT_TRUE(model.ok());
          auto t = simulate(variants[v], *model, o);
          ASSERT_TRUE(t.ok()) << formatDiagnostics(t.errors());
          got.push_back(digestOf(*t));
          stalled += !t->complete;
          transfers += !t->transfers.empty();
          for (const auto& d : t->diagnostics) overLimit += d.code == "simulate.memory";
        }
    }
  if (print) {
    std::string out;
    for (size_t i = 0; i < got.size(); ++i)
      out += std::to_string(got[i]) + "ull," + ((i + 1) % 4 == 0 ? "\n" : " ");
    std::printf("%s", out.c_str());
  }
  // The cases cover stalls, transfers and memory over the limit.
  EXPECT_GT(stalled, 0);
  EXPECT_GT(transfers, 0);
  EXPECT_GT(overLimit, 0);
  const std::vector<std::uint64_t> want{
      6586215860933887864ull,  3672247031145262436ull,  12816481612875364682ull, 397036770475345789ull,
      10628822965942536252ull, 2781866723572677332ull,  2781866723572677332ull,  1126285132448056670ull,
      4100429137435103916ull,  14622115816672563525ull, 10347094941733452945ull, 4017449005577285659ull,
      13978210676972992009ull, 2110193098499912140ull,  2110193098499912140ull,  17313426135966761564ull,
      913705514577459543ull,   11919726303463219555ull, 14270107802060005436ull, 10467776270289090596ull,
      13705874426363427675ull, 2956932533003013247ull,  2956932533003013247ull,  14247863041474707156ull,
      11393509925353986252ull, 5413172346562135671ull,  11218613290870903956ull, 5463207238553562897ull,
      1270982152951946326ull,  15692034346485071366ull, 15692034346485071366ull, 1555521962515413649ull,
      12516325840360047076ull, 13992520773490464750ull, 13992520773490464750ull, 7933195573581011883ull,
      8281111934662597096ull,  5206278957993994656ull,  5206278957993994656ull,  10450244690971431155ull,
      5837039398411194830ull,  4332374755738180140ull,  16997454783814318707ull, 9765115011759610089ull,
      5971648082007858681ull,  5831610651717102168ull,  5831610651717102168ull,  6244071006747950615ull,
      9641626612746599518ull,  12854609899479691838ull, 12854609899479691838ull, 12139556791211070499ull,
      8611753394914402820ull,  1976799989181942531ull,  1976799989181942531ull,  2282733566450519728ull,
      3862149287473715571ull,  6060110928755607670ull,  9156559351744468173ull,  8271865349363709232ull,
      12625465228334839078ull, 9978330675932822308ull,  9978330675932822308ull,  12226497258298932466ull,
      6726909723099130910ull,  14142108374324942753ull, 10010159499799197777ull, 5913000001054693058ull,
      11248795757796254625ull, 9810940564283658946ull,  3833270613112822614ull,  224365388607997579ull,
      14155198312842323019ull, 9941720168119376209ull,  8560009142071741058ull,  6358291025322612642ull,
      14648622374454474861ull, 4903248529172353561ull,  12718856614836617065ull, 2052515484030912994ull,
      8182678310741357618ull,  4451116174084823167ull,  7519231767568256827ull,  6723688417357887499ull,
      6656082040698250608ull,  17128782035953455600ull, 3726325724385365518ull,  9983122102569144433ull,
      934728169021205655ull,   17720429338240244088ull, 6090706489817442574ull,  17190487705825097990ull,
      18016899267431381105ull, 8440723814005176838ull,  14550001910208352188ull, 13669884793911291686ull,
      14886083604390295353ull, 11126187841000625187ull, 1506429288391752523ull,  2009819060398001558ull,
      17570178138266971113ull, 10396693553510770471ull, 6167043803106000351ull,  15762699731368623882ull,
      4717221188592368943ull,  8533289268075429085ull,  17533887771364525747ull, 11660808204116575550ull,
      1629812278636729781ull,  13160492200310982172ull, 8110287675323621000ull,  14459059567466114545ull,
      10487390024324074799ull, 3349116535377113591ull,  12053738994226141283ull, 6915024496580527372ull,
      539826012643214274ull,   11099609573845684380ull, 15381775241936056522ull, 2792712386028319101ull,
      8886908561743318731ull,  10760571186540225506ull, 10412976086699292362ull, 9392379396381551299ull,
      9408763066914042182ull,  1029226786436026000ull,  12410881357427808450ull, 10504629549915741943ull,
      11539014346852750969ull, 15849049015650255763ull, 15849049015650255763ull, 1825914212475764991ull,
      17078640370979057343ull, 4097155361538821177ull,  4097155361538821177ull,  1621263997430045615ull,
      17570503495374981972ull, 13094722706114677665ull, 17513416048314352993ull, 13647673039737483643ull,
      12737713483197596367ull, 11799707711630810812ull, 11799707711630810812ull, 3825584364124702158ull,
      7566623602161729798ull,  2834459982736786828ull,  2834459982736786828ull,  8168925105515657250ull,
      14288579412760400954ull, 10715142696189482972ull, 10715142696189482972ull, 17338812408551863626ull,
      14679661120542002931ull, 13170162791617946692ull, 17387666752246733604ull, 7460138075984267993ull,
      6929686916802761320ull,  12327190857235369191ull, 12327190857235369191ull, 5900910758812527266ull,
      15424533754482291417ull, 13968918974144037662ull, 18373105694111759203ull, 5585244535152220034ull,
      6343729036451905204ull,  12340109691121033406ull, 12340109691121033406ull, 3750007942585627952ull,
      8302980230935329764ull,  3924812204971104989ull,  6764346420725302536ull,  7016532041675268836ull,
      3115102200194780023ull,  15908470681572247016ull, 15908470681572247016ull, 9175687154782609255ull,
      17837136867853071624ull, 12267102603337542561ull, 12267102603337542561ull, 15938878987933661759ull,
      15855159017475118201ull, 1711054945096493656ull,  1711054945096493656ull,  6563329750793407517ull,
      13094931135105414754ull, 6441989130970029350ull,  1705183396777415829ull,  2616447816655836548ull,
      5904804277498716989ull,  10021808213917055426ull, 10021808213917055426ull, 10906280966456913469ull,
      18336662191946657762ull, 3223968548642898425ull,  6246036760683142697ull,  1060326447950303839ull,
      17317476926268428087ull, 11001969111038789401ull, 15921041644060685385ull, 3146927434017335064ull,
      6740379618356121546ull,  16456574778202740115ull, 15334494854154139574ull, 3654371498596784176ull,
      5748783805215420705ull,  16376507369566882611ull, 3966224828083945767ull,  11572656561313862568ull,
      15794880808033481472ull, 5399879830085888309ull,  4403021937405690145ull,  7692516485946805475ull,
      5936784554699512899ull,  11137039063139472096ull, 10324539047171137918ull, 18282982559260709742ull,
      7929937838836982328ull,  9260436308526715903ull,  6533657377487828719ull,  13279287151166959666ull,
      1971915598943494411ull,  16088930102681883753ull, 10137477771053308693ull, 11270245295026573920ull,
      4290718087028449292ull,  10189313741347330382ull, 5903812238425792322ull,  7817415434193038192ull,
      3236998624705816016ull,  14577271932534567902ull, 10302469658464008978ull, 16976712439684574564ull,
      13846644577613588318ull, 3136817411206983960ull,  13142436608054030849ull, 14807150143104398158ull,
      1485516527209253728ull,  13245304750249079338ull, 700921067704974170ull,   2582558384109028552ull,
      4472696563763234569ull,  8753309106714181189ull,  12857354615164110705ull, 2749129411446887585ull,
      5882573435965692526ull,  617386877346080189ull,   13287207923606445049ull, 13171914133353572463ull,
      4306991361611844381ull,  3760654570579841335ull,  7877203179858779397ull,  14660576609630476557ull,
      9114426645695210286ull,  3411690115216468357ull,  5148642163154430385ull,  11983543338911204860ull,
  };
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << "case " << i;
}

TEST(SimulatorErrors, GraphProblemsAreReportedInOpOrder) {
  // Duplicates, an op outside the pipeline and an undeclared kind: the graph lists them by op
  // id, and the simulator refuses the first op it cannot place.
  Schedule s = build(2, 2, 2, PlacementKind::Linear, {"F0 F0 F1 B0 B1", "F0 B0 F1 B1"});
  s.devices[1].push_back(Step{Op{OpKind::F, 7, 0}, {}});
  s.devices[1].push_back(Step{Op{static_cast<OpKind>(kFirstUserKind + 3), 1, 0}, {}});
  DependencyGraph g(s);
  ASSERT_EQ(g.problems().size(), 3u);
  EXPECT_EQ(g.problems()[0].kind, DependencyGraph::ProblemKind::Duplicate);
  EXPECT_EQ(g.problems()[0].op, 1);
  EXPECT_EQ(g.problems()[0].other, 0);
  EXPECT_EQ(g.problems()[1].kind, DependencyGraph::ProblemKind::OutOfRange);
  EXPECT_EQ(g.problems()[1].op, 9);
  EXPECT_EQ(g.problems()[2].kind, DependencyGraph::ProblemKind::BadKind);
  EXPECT_EQ(g.problems()[2].op, 10);
  EXPECT_EQ(g.size(), 11);
  EXPECT_EQ(g.deviceBegin(1), 5);
  EXPECT_EQ(g.find(Op{OpKind::F, 0, 0}), 0);
  EXPECT_EQ(g.dependencyCount(),
            static_cast<int>(g.dependencies(0).size() + g.dependencies(1).size() + g.dependencies(2).size() +
                             g.dependencies(3).size() + g.dependencies(4).size() + g.dependencies(5).size() +
                             g.dependencies(6).size() + g.dependencies(7).size() + g.dependencies(8).size()));
  auto t = simulate(s, makeSimulationModel(s, uniform("F=1,B=2", 2)).value());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.errors()[0].code, "simulate.op");
  EXPECT_NE(t.errors()[0].message.find("device 1 step 4"), std::string::npos) << t.errors()[0].message;
}

TEST(SimulatorErrors, FarTooFewOpsForThePipelineIsRefused) {
  Schedule s = build(1, 1, 1, PlacementKind::Linear, {"F0 B0"});
  s.pipeline.microbatches = 1000000;
  DependencyGraph g(s);
  ASSERT_EQ(g.problems().size(), 1u);
  EXPECT_EQ(g.problems()[0].kind, DependencyGraph::ProblemKind::TooLarge);
  EXPECT_EQ(g.size(), 2);  // the ops are still listed
  EXPECT_EQ(g.op(1).kind, OpKind::B);
  auto t = simulate(s, makeSimulationModel(s, uniform("F=1,B=2", 1)).value());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.errors()[0].code, "simulate.size");
}
