#include "pipestudio/core/simulator.h"

#include <gtest/gtest.h>

#include <sstream>

#include "pipestudio/core/validator.h"

using namespace ps::core;

namespace {

// "F3@1" = F of micro-batch 3 on stage 1; "F3" = on the device's own stage (stage == device);
// "(F3@1;B0@1)" = an overlapped pair; "OFFLOAD0", "RELOAD0", "R2", "X1" (user kind X).
Op parseOp(const Schedule& s, const std::string& tok, int device) {
  size_t i = 0;
  while (i < tok.size() && std::isalpha(static_cast<unsigned char>(tok[i]))) ++i;
  auto kind = s.kindFromName(tok.substr(0, i));
  EXPECT_TRUE(kind.has_value()) << tok;
  Op op;
  op.kind = kind.value_or(OpKind::F);
  size_t at = tok.find('@');
  std::string mb = tok.substr(i, at == std::string::npos ? std::string::npos : at - i);
  op.microbatch = mb.empty() ? -1 : std::stoi(mb);
  op.stage = at == std::string::npos ? device : std::stoi(tok.substr(at + 1));
  return op;
}

Schedule build(int D, int S, int M, PlacementKind pk, const std::vector<std::string>& devs,
               std::vector<UserKind> userKinds = {}) {
  Schedule s;
  s.pipeline = Pipeline::make(D, S, M, pk).value();
  s.userKinds = std::move(userKinds);
  s.devices.resize(static_cast<size_t>(D));
  for (int d = 0; d < D; ++d) {
    std::istringstream in(devs[static_cast<size_t>(d)]);
    std::string tok;
    while (in >> tok) {
      Step st;
      if (tok.front() == '(') {
        auto semi = tok.find(';');
        st.first = parseOp(s, tok.substr(1, semi - 1), d);
        st.second = parseOp(s, tok.substr(semi + 1, tok.size() - semi - 2), d);
      } else {
        st.first = parseOp(s, tok, d);
      }
      s.devices[static_cast<size_t>(d)].push_back(st);
    }
  }
  return s;
}

// Reference 1F1B (one stage per device): D-d-1 warm-up forwards, then F/B alternation.
Schedule oneFOneB(int D, int M) {
  Schedule s;
  s.pipeline = Pipeline::make(D, D, M, PlacementKind::Linear).value();
  s.devices.resize(static_cast<size_t>(D));
  for (int d = 0; d < D; ++d) {
    auto& v = s.devices[static_cast<size_t>(d)];
    int warm = std::min(D - d - 1, M), f = 0, b = 0;
    for (; f < warm; ++f) v.push_back(Step{Op{OpKind::F, d, f}, {}});
    while (b < M) {
      if (f < M) v.push_back(Step{Op{OpKind::F, d, f++}, {}});
      v.push_back(Step{Op{OpKind::B, d, b++}, {}});
    }
  }
  return s;
}

Schedule gpipe(int D, int M) {
  Schedule s;
  s.pipeline = Pipeline::make(D, D, M, PlacementKind::Linear).value();
  s.devices.resize(static_cast<size_t>(D));
  for (int d = 0; d < D; ++d) {
    for (int m = 0; m < M; ++m) s.devices[static_cast<size_t>(d)].push_back(Step{Op{OpKind::F, d, m}, {}});
    for (int m = 0; m < M; ++m) s.devices[static_cast<size_t>(d)].push_back(Step{Op{OpKind::B, d, m}, {}});
  }
  return s;
}

Timeline run(const Schedule& s, const CostProfile& p, SimulationOptions o = {}) {
  auto model = makeSimulationModel(s, p);
  EXPECT_TRUE(model.ok()) << (model.ok() ? "" : formatDiagnostics(model.errors()));
  auto t = simulate(s, *model, o);
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : formatDiagnostics(t.errors()));
  return std::move(t).value();
}

CostProfile uniform(const std::string& spec, int stages) { return uniformCostProfile(spec, stages).value(); }

const TimelineOp& find(const Timeline& t, const Schedule& s, const std::string& name) {
  for (const auto& op : t.ops)
    if (s.opName(op.op) == name) return op;
  ADD_FAILURE() << "no op " << name;
  static TimelineOp none;
  return none;
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
  EXPECT_DOUBLE_EQ(find(t, s, "F0@s1").start, 3);
  EXPECT_DOUBLE_EQ(find(t, s, "F1@s1").start, 5);
  EXPECT_DOUBLE_EQ(find(t, s, "F2@s1").start, 7);
  // The backward direction has its own channel: B0@s1 ends at 10, arrives 12; B1 at 12 -> 14;
  // B2 at 14 -> 16 (it could leave at 14, the channel is free by then).
  EXPECT_DOUBLE_EQ(find(t, s, "B0@s0").start, 12);
  EXPECT_DOUBLE_EQ(find(t, s, "B2@s0").start, 16);
  EXPECT_DOUBLE_EQ(t.metrics.makespan, 18);
}

TEST(Simulator, ComputeOverlapsCommunication) {
  // Device 0 keeps computing while its outputs travel.
  Schedule s = build(2, 2, 2, PlacementKind::Linear, {"F0 F1 B0 B1", "F0 B0 F1 B1"});
  CostProfile p = uniform("F=1,B=1", 2);
  p.fixedCommMs = 5;
  Timeline t = run(s, p);
  EXPECT_DOUBLE_EQ(find(t, s, "F1@s0").start, 1);
  EXPECT_DOUBLE_EQ(find(t, s, "F0@s1").start, 6);
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
  std::vector<std::pair<double, std::int64_t>> want{{0, 0}, {0, 100}, {1, 110}, {2, 210}, {5.5, 100}, {7.5, 0}};
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
  EXPECT_DOUBLE_EQ(find(t, s, "F1@s0").start, 1);  // not blocked by the copy
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

#include "pipestudio/core/generators.h"

namespace {

Schedule generated(ScheduleKind k, int D, int M, int chunks = 0) {
  auto r = generateSchedule(k, GeneratorOptions{D, M, chunks});
  EXPECT_TRUE(r.ok()) << scheduleKindName(k) << " D=" << D << " M=" << M << ": " << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : Schedule{};
}

}  // namespace

TEST(SimulatorClosedForm, GeneratedOneFOneBAndGPipe) {
  for (auto [D, M] : {std::pair{4, 8}, {4, 4}, {3, 7}, {8, 16}, {4, 2}}) {
    for (ScheduleKind k : {ScheduleKind::OneFOneB, ScheduleKind::GPipe}) {
      Schedule s = generated(k, D, M);
      Timeline t = run(s, uniform("F=1,I=1,W=1", s.pipeline.stages));
      EXPECT_TRUE(t.complete) << scheduleKindName(k);
      EXPECT_DOUBLE_EQ(t.metrics.makespan, (M + D - 1) * 3.0) << scheduleKindName(k) << " D=" << D << " M=" << M;
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
  for (const DeviceMetrics& d : t.metrics.devices) EXPECT_DOUBLE_EQ(d.busy, d.span()) << "device " << d.device;
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
    if (!r.ok()) continue;
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

// ---- The simulate and profile-model commands.

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <nlohmann/json.hpp>

namespace {

struct CliResult {
  int status = -1;
  std::string out, err;
};

CliResult cli(const std::string& args) {
  static int n = 0;
  auto dir = std::filesystem::temp_directory_path();
  // ctest runs test cases as parallel processes: the pid keeps their files apart.
  std::string errFile =
      (dir / ("ps_sim_test_err_" + std::to_string(::getpid()) + "_" + std::to_string(++n) + ".txt")).string();
  std::string cmd = std::string(PIPESTUDIO_CLI) + " " + args + " 2>" + errFile;
  CliResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t got;
  while ((got = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, got);
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::ifstream e(errFile);
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  std::filesystem::remove(errFile);
  return r;
}

std::filesystem::path tempDir() {
  auto dir = std::filesystem::temp_directory_path() / ("ps_sim_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

std::string writeTemp(const std::string& name, const std::string& text) {
  auto dir = tempDir();
  auto path = dir / name;
  std::ofstream(path) << text;
  return path.string();
}

}  // namespace

TEST(SimulateCommand, JsonMetricsOfAPipeFile) {
  std::string pipe = writeTemp("g.pipe",
                               "devices 2\nstages 2\nmicrobatches 3\nplacement linear\n"
                               "device 0: F0 F1 F2 B0 B1 B2\ndevice 1: F0 F1 F2 B0 B1 B2\n");
  CliResult r = cli("simulate " + pipe + " --cost F=1,I=1,W=1,act=10 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_DOUBLE_EQ(j["makespan"].get<double>(), (3 + 2 - 1) * 3.0);
  EXPECT_DOUBLE_EQ(j["lower_bound"].get<double>(), 9);
  EXPECT_NEAR(j["bubble_ratio"].get<double>(), 1 - 18.0 / 24.0, 1e-12);
  EXPECT_NEAR(j["efficiency"].get<double>(), 9.0 / 12.0, 1e-12);
  EXPECT_EQ(j["ops"], 12);
  EXPECT_EQ(j["valid"], true);
  ASSERT_EQ(j["devices"].size(), 2u);
  EXPECT_EQ(j["devices"][1]["device"], 1);
  EXPECT_DOUBLE_EQ(j["devices"][1]["busy"].get<double>(), 9);
  EXPECT_DOUBLE_EQ(j["devices"][1]["span"].get<double>(), 9);
  EXPECT_EQ(j["devices"][0]["peak_memory_bytes"], 30);
  EXPECT_EQ(j["devices"][0]["peak_inflight_microbatches"], 3);
  EXPECT_TRUE(j["diagnostics"].empty());
}

TEST(SimulateCommand, HeaderProfileAndPartitionRelativeToThePipeFile) {
  writeTemp("p4.json", R"({"name": "four", "layers": [
      {"forward_ms": 1, "backward_ms": 2}, {"forward_ms": 1, "backward_ms": 2},
      {"forward_ms": 1, "backward_ms": 2}, {"forward_ms": 1, "backward_ms": 2}]})");
  std::string pipe = writeTemp("h.pipe",
                               "profile \"p4.json\"\npartition 3, 1\ndevices 2\nstages 2\nmicrobatches 1\n"
                               "placement linear\ndevice 0: F0 B0\ndevice 1: F0 B0\n");
  CliResult r = cli("simulate " + pipe + " --json");
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_DOUBLE_EQ(j["makespan"].get<double>(), 3 + 1 + 2 + 6);  // stage 0 has 3 layers
  // --partition overrides the header's.
  r = cli("simulate " + pipe + " --partition 2,2 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(r.out)["makespan"].get<double>(), 12);
  // --comm adds a fixed time per transfer (two transfers on the critical path).
  r = cli("simulate " + pipe + " --comm 0.5 --json");
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(r.out)["makespan"].get<double>(), 13);
}

TEST(SimulateCommand, DeadlockAndMemoryExitOne) {
  std::string pipe = writeTemp("d.pipe",
                               "devices 2\nstages 2\nmicrobatches 1\nplacement linear\n"
                               "device 0: B0 F0\ndevice 1: F0 B0\n");
  CliResult r = cli("simulate " + pipe + " --cost F=1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("deadlock"), std::string::npos) << r.err;
  std::string ok = writeTemp("m.pipe",
                             "devices 1\nstages 1\nmicrobatches 2\nplacement linear\ndevice 0: F0 F1 B0 B1\n");
  r = cli("simulate " + ok + " --cost F=1,act=100 --memory-limit 150 --json");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("device 0 exceeds its memory limit at 1 ms during F1@s0"), std::string::npos) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["valid"], false);
  EXPECT_EQ(cli("simulate " + ok).status, 2);  // no profile at all
  EXPECT_EQ(cli("simulate " + ok + " --cost F=1 --profile x.json").status, 2);
}

TEST(SimulateCommand, PyTorchCsvAndTrace) {
  std::string csv = writeTemp("s.csv", "0F0,0F1,0B0,0B1\n,1F0,1B0,1F1,1B1\n");
  std::string trace = (tempDir() / "t.json").string();
  CliResult r = cli("simulate " + csv + " --cost F=1,B=2 --trace " + trace);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("makespan"), std::string::npos);
  std::ifstream in(trace);
  auto j = nlohmann::json::parse(in);
  EXPECT_TRUE(j["traceEvents"].is_array());
}

TEST(ProfileModelCommand, PresetMatchesTheBundledProfile) {
  CliResult r = cli("profile-model --preset gpt3-1.3b");
  ASSERT_EQ(r.status, 0) << r.err;
  std::ifstream in(std::string(PIPESTUDIO_RESOURCES_DIR) + "/profiles/gpt3-1.3b.json");
  std::string bundled((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(r.out, bundled);
  r = cli("profile-model --layers 2 --hidden 64 --heads 4 --seq 16 --vocab 100 --microbatch-size 2 --dtype bf16 "
          "--gpu-tflops 100 --hbm-gbps 1000 --link-gbps 10 --memory-gb 16 --name tiny");
  ASSERT_EQ(r.status, 0) << r.err;
  auto p = parseCostProfile(r.out);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->name, "tiny");
  EXPECT_EQ(p->layers.size(), 4u);
  EXPECT_EQ(p->deviceMemoryBytes, 16LL << 30);
  EXPECT_EQ(cli("profile-model --layers 2").status, 2);
  EXPECT_EQ(cli("profile-model --preset nope").status, 2);
}
