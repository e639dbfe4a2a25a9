// Route groups (Pipeline::routes): micro-batches that run different stage sequences, as
// DeepSeek's DualPipe runs half of them down the devices and half up. The model, the dependency
// rules, the validator, the simulator (time and both weight copies), the critical path, the
// stepper, the DSL and the PyTorch export follow the route.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "pipestudio/core/analysis/critical_path.h"
#include "pipestudio/core/analysis/dependency_graph.h"
#include "pipestudio/core/analysis/iterations.h"
#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/analysis/stepper.h"
#include "pipestudio/core/analysis/validator.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/io/pytorch_csv.h"
#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/core/planning/generators.h"
#include "pipestudio/core/planning/search.h"

using namespace ps::core;

namespace {

Schedule dualPipe(int d, int m) {
  auto s = generateSchedule(ScheduleKind::DualPipe, GeneratorOptions{d, m});
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  return s.ok() ? std::move(s).value() : Schedule{};
}

Schedule dualPipeV(int d, int m) {
  auto s = generateSchedule(ScheduleKind::DualPipeV, GeneratorOptions{d, m});
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  return s.ok() ? std::move(s).value() : Schedule{};
}

// Simulated with uniform per-block costs (`spec` as the CLI's --cost reads it).
Timeline simulateWith(const Schedule& s, const std::string& spec) {
  auto profile = uniformCostProfile(spec, s.pipeline.blocks());
  EXPECT_TRUE(profile.ok());
  auto model = makeSimulationModel(s, *profile);
  EXPECT_TRUE(model.ok()) << (model.ok() ? "" : model.error().message);
  auto t = simulate(s, *model);
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message);
  return t.ok() ? std::move(t).value() : Timeline{};
}

std::vector<std::string> depNames(const Schedule& s, const Op& op) {
  std::vector<std::string> out;
  for (const Op& d : dependenciesOf(s, op)) out.push_back(s.opName(d));
  std::sort(out.begin(), out.end());
  return out;
}

bool hasCode(const ValidationReport& r, const std::string& code, const std::string& text) {
  return std::any_of(r.diagnostics.begin(), r.diagnostics.end(), [&](const Diagnostic& d) {
    return d.code == code && d.message.find(text) != std::string::npos;
  });
}

TEST(Routes, PipelineRefusesRoutesThatDoNotFit) {
  auto p = Pipeline::make(2, 4, 4, PlacementKind::VShape).value();
  auto ok = p.withRoutes({Route{{0, 1}, 0, 2}, Route{{2, 3}, 2, 2}}, {0, 1, 0, 1});
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->blocks(), 2);
  EXPECT_EQ(ok->blockOf(3), 1);

  auto decreasing = p.withRoutes({Route{{1, 0}, 0, 4}}, {});
  ASSERT_FALSE(decreasing.ok());
  EXPECT_NE(decreasing.error().message.find("increasing"), std::string::npos) << decreasing.error().message;
  auto gap = p.withRoutes({Route{{0, 1}, 0, 2}, Route{{2, 3}, 3, 1}}, {});
  ASSERT_FALSE(gap.ok());
  EXPECT_NE(gap.error().message.find("starts at micro-batch 3, expected 2"), std::string::npos);
  auto short_ = p.withRoutes({Route{{0, 1}, 0, 3}}, {});
  ASSERT_FALSE(short_.ok());
  EXPECT_NE(short_.error().message.find("cover 3 micro-batches"), std::string::npos);
  // Block 0 first on one route and second on the other: not copies of the same layers.
  auto depth = p.withRoutes({Route{{0, 1}, 0, 2}, Route{{2, 3}, 2, 2}}, {0, 1, 1, 0});
  ASSERT_FALSE(depth.ok());
  EXPECT_NE(depth.error().message.find("position"), std::string::npos) << depth.error().message;
}

TEST(Routes, DependenciesFollowEachMicrobatchsRoute) {
  // D = 2: down route stages 0, 1 (micro-batches 0, 1); up route stages 2, 3 (micro-batches 2, 3).
  const Schedule s = dualPipe(2, 4);
  EXPECT_EQ(depNames(s, Op{OpKind::F, 1, 0}), (std::vector<std::string>{"F0@s0"}));
  EXPECT_TRUE(depNames(s, Op{OpKind::F, 2, 2}).empty());  // the first stage of the up route
  EXPECT_EQ(depNames(s, Op{OpKind::F, 3, 2}), (std::vector<std::string>{"F2@s2"}));
  EXPECT_EQ(depNames(s, Op{OpKind::B, 1, 0}), (std::vector<std::string>{"F0@s1"}));  // last stage down
  EXPECT_EQ(depNames(s, Op{OpKind::B, 3, 2}), (std::vector<std::string>{"F2@s3"}));  // last stage up
  EXPECT_EQ(depNames(s, Op{OpKind::B, 2, 3}), (std::vector<std::string>{"B3@s3", "F3@s2"}));
}

TEST(Routes, ValidatorChecksTheRouteNotEveryStage) {
  for (int d : {2, 4, 8})
    for (int m : {2 * d, 3 * d, 4 * d, 20}) {
      const auto r = validateSchedule(dualPipe(d, m));
      EXPECT_TRUE(r.valid()) << "D=" << d << " M=" << m << ": " << formatDiagnostics(r.diagnostics);
    }
  // Without its routes the order is what the issue reports: every micro-batch misses half the stages.
  Schedule plain = dualPipe(2, 4);
  plain.pipeline.routes.clear();
  plain.pipeline.stageBlock.clear();
  EXPECT_TRUE(hasCode(validateSchedule(plain), "validate.missing", "F2@s0 is missing"));

  // An op of a stage its micro-batch's route does not run.
  Schedule off = dualPipe(2, 4);
  off.devices[1].push_back(Step{Op{OpKind::F, 2, 0}, {}});  // micro-batch 0 goes down: not stage 2
  const auto r = validateSchedule(off);
  EXPECT_TRUE(hasCode(r, "validate.route", "device 1 step 8: F0@s2: micro-batch 0 does not run stage 2"))
      << formatDiagnostics(r.diagnostics);
  EXPECT_TRUE(hasCode(r, "validate.route", "its route runs stages 0, 1"));

  // An op of the route missing.
  Schedule missing = dualPipe(2, 4);
  auto& dev0 = missing.devices[0];
  dev0.erase(std::find_if(dev0.begin(), dev0.end(), [](const Step& st) {
    return st.first == Op{OpKind::W, 0, 1};
  }));
  EXPECT_TRUE(hasCode(validateSchedule(missing), "validate.missing", "W1@s0 is missing"));

  Schedule bad = dualPipe(2, 4);
  bad.pipeline.routes[1].stages = {3, 2};
  EXPECT_TRUE(hasCode(validateSchedule(bad), "validate.routes", "increasing"));
}

TEST(Routes, DualPipeMakespanIsDeepSeeksBubbleFormula) {
  // DeepSeek's README: DualPipe's bubble is (PP/2 - 1)(F&B + B - 3W). With F = 2, B = 4 split
  // into I = W = 2, F&B (an overlapped pair, overlap factor 1) = 6, so the bubble is 4 per rank
  // pair beyond the first, and each device is busy 6 per micro-batch (M/2 of each direction).
  for (int d : {2, 4, 8})
    for (int m : {2 * d, 3 * d, 4 * d, 20}) {
      const Timeline t = simulateWith(dualPipe(d, m), "F=2,B=4");
      ASSERT_TRUE(t.complete);
      const double busy = 6.0 * m, bubble = static_cast<double>(d / 2 - 1) * (6.0 + 4.0 - 3 * 2.0);
      EXPECT_DOUBLE_EQ(t.metrics.makespan, busy + bubble) << "D=" << d << " M=" << m;
      for (const auto& dm : t.metrics.devices) EXPECT_DOUBLE_EQ(dm.busy, busy);
    }
  // No bubble at D = 2.
  EXPECT_DOUBLE_EQ(simulateWith(dualPipe(2, 4), "F=2,B=4").metrics.bubbleRatio, 0.0);
  // D = 8, M = 16: two time units ahead of DualPipe-V on the same model (DualPipe-V splits it in
  // 16 stages, each half a DualPipe block: F = 1, B = 2).
  const double dp = simulateWith(dualPipe(8, 16), "F=2,B=4").metrics.makespan;
  const double dpv = simulateWith(dualPipeV(8, 16), "F=1,B=2").metrics.makespan;
  EXPECT_DOUBLE_EQ(dpv - dp, 2.0);
}

TEST(Routes, DualPipeHoldsBothWeightCopiesAndPpPlusOneActivations) {
  const int d = 8, m = 16;
  const Schedule s = dualPipe(d, m);
  const Timeline t = simulateWith(s, "F=2,B=4,act=1000,weight=100000");
  const auto profile = uniformCostProfile("F=2,B=4,act=1000,weight=100000", d).value();
  const auto block = stageCosts(profile, d).value();
  for (const auto& dm : t.metrics.devices) {
    // Two stages per device, one of each direction, each a full copy of its block.
    EXPECT_EQ(dm.staticBytes, 2 * block[0].staticBytes) << "device " << dm.device;
    // DeepSeek's README: activation memory PP + 1 micro-batches.
    EXPECT_EQ(dm.peakInflightMicrobatches, d + 1) << "device " << dm.device;
  }
}

TEST(Routes, CopiesOfABlockExchangeTheirGradientsAfterTheirLastBackward) {
  // D = 2: stages 0 and 2 hold block 0 (devices 0, 1), stages 1 and 3 block 1 (devices 1, 0).
  const Schedule s = dualPipe(2, 4);
  auto profile = uniformCostProfile("F=2,B=4,weight=1000", 2).value();
  profile.link.latencyMs = 0.5;
  profile.link.bandwidthBytesPerMs = 500;  // 1000 gradient bytes: 2 ms, plus 0.5 ms latency
  const Timeline t = simulate(s, makeSimulationModel(s, profile).value()).value();
  ASSERT_EQ(t.copySyncs.size(), 2u);
  for (const CopyGradientSync& c : t.copySyncs) {
    EXPECT_EQ(c.bytes, 1000);
    EXPECT_NE(c.device, c.peerDevice);
    EXPECT_EQ(s.pipeline.blockOf(c.stage), s.pipeline.blockOf(c.peerStage));
    double last = 0;
    for (const TimelineOp& o : t.ops)
      if ((o.op.kind == OpKind::B || o.op.kind == OpKind::W) &&
          (o.op.stage == c.stage || o.op.stage == c.peerStage))
        last = std::max(last, o.end);
    EXPECT_DOUBLE_EQ(c.start, last);
    EXPECT_DOUBLE_EQ(c.end - c.start, 2.5);
  }
  EXPECT_DOUBLE_EQ(t.metrics.copySyncEnd, std::max(t.copySyncs[0].end, t.copySyncs[1].end));
  // Without copies there is nothing to exchange.
  EXPECT_TRUE(simulateWith(dualPipeV(2, 4), "F=1,B=2,weight=1000").copySyncs.empty());
}

TEST(Routes, IterationsRepeatTheRoutes) {
  const Schedule s = dualPipe(4, 8);
  auto unrolled = unrollIterations(s, 3, std::vector<double>(4, 1.0));
  ASSERT_TRUE(unrolled.ok()) << unrolled.error().message;
  ASSERT_EQ(unrolled->pipeline.routes.size(), 6u);
  EXPECT_EQ(unrolled->pipeline.routes[3].firstMicrobatch, 12);  // iteration 1's up route
  EXPECT_EQ(unrolled->pipeline.routes[3].stages, s.pipeline.routes[1].stages);
  EXPECT_TRUE(validateSchedule(*unrolled).valid())
      << formatDiagnostics(validateSchedule(*unrolled).diagnostics);

  auto profile = uniformCostProfile("F=2,B=4", 4).value();
  const SimulationModel model = makeSimulationModel(s, profile).value();
  IterationOptions io;
  io.iterations = 3;
  io.boundary = IterationBoundary::Sync;
  auto it = simulateIterations(s, model, io);
  ASSERT_TRUE(it.ok()) << it.error().message;
  ASSERT_TRUE(it->complete);
  // With a sync boundary and no optimizer time each iteration takes one makespan.
  EXPECT_DOUBLE_EQ(it->steadyStateMs, simulateWith(s, "F=2,B=4").metrics.makespan);
}

TEST(Routes, CriticalPathAndStepperFollowTheRoute) {
  const Schedule s = dualPipe(4, 8);
  const Timeline t = simulateWith(s, "F=2,B=4");
  const CriticalPath cp = criticalPath(t, s);
  ASSERT_FALSE(cp.steps.empty());
  EXPECT_DOUBLE_EQ(cp.end, t.metrics.makespan);
  for (size_t i = 1; i < cp.steps.size(); ++i) {
    if (cp.steps[i].via != CriticalLink::Dependency) continue;
    const Op& from = t.ops[cp.steps[i - 1].op].op;
    const Op& to = t.ops[cp.steps[i].op].op;
    const auto deps = dependenciesOf(s, to);
    EXPECT_NE(std::find(deps.begin(), deps.end(), from), deps.end())
        << s.opName(from) << " -> " << s.opName(to);
  }
  // Device 3 starts with F4@s4, the up route's first stage: it waits for nothing, where an
  // unrouted pipeline would wait for F4@s3.
  auto stepper = Stepper::make(t, s);
  ASSERT_TRUE(stepper.ok());
  const StepState start = stepper->stateAfter(0);
  const DeviceState& dev3 = start.devices[3];
  ASSERT_FALSE(dev3.next.empty());
  EXPECT_EQ(dev3.next[0].op, (Op{OpKind::F, 4, 4}));
  EXPECT_TRUE(dev3.next[0].missing.empty());
  // Device 2's first op, F4@s5, waits for F4@s4 on device 3.
  const DeviceState& dev2 = start.devices[2];
  ASSERT_FALSE(dev2.next.empty());
  ASSERT_EQ(dev2.next[0].missing.size(), 1u);
  EXPECT_EQ(dev2.next[0].missing[0].input, (Op{OpKind::F, 4, 4}));
}

TEST(Routes, DslCarriesRoutesAndBlocks) {
  const Schedule s = dualPipe(4, 8);
  const std::string text = printDsl(s);
  EXPECT_NE(text.find("route 0..4: 0..4\nroute 4..8: 4..8\nblocks 0..4, 0..4\n"), std::string::npos) << text;
  auto back = parseDsl(text);
  ASSERT_TRUE(back.ok()) << formatDiagnostics(back.errors());
  EXPECT_EQ(*back, s);

  const std::string bad =
      "devices 2\nstages 4\nmicrobatches 4\nplacement vshape\nroute 0..2: 0, 1\nroute 2..4: 3, 2\n"
      "device 0: F0@s0\n";
  auto r = parseDsl(bad);
  ASSERT_FALSE(r.ok());
  const Diagnostic& e = r.errors().front();
  EXPECT_EQ(e.code, "dsl.header");
  EXPECT_NE(e.message.find("route 1: stage 2 follows stage 3"), std::string::npos) << e.message;
  EXPECT_EQ(e.location.line, 6);  // the route line at fault

  // A stage's cursor visits the micro-batches whose route runs it: stage 0 has two.
  const std::string cursor =
      "devices 2\nstages 4\nmicrobatches 4\nplacement vshape\nroute 0..2: 0, 1\nroute 2..4: 2, 3\n"
      "device 0 { next F@s0; next F@s0; next F@s0 }\n";
  auto c = parseDsl(cursor);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.errors().front().message.find(
                "stage 0: every micro-batch whose route runs the stage already has its F"),
            std::string::npos)
      << c.errors().front().message;
}

TEST(Routes, PytorchCsvRefusesRoutesWithTheReason) {
  auto csv = writePytorchCsv(dualPipe(2, 4));
  ASSERT_FALSE(csv.ok());
  EXPECT_EQ(csv.error().code, "pytorch.routes");
  EXPECT_NE(csv.error().message.find("every micro-batch of a PyTorch schedule runs every stage"),
            std::string::npos);
  EXPECT_FALSE(writePytorchCsv(dualPipe(2, 4), CsvFormat::ComputeComms).ok());
}

TEST(Routes, SearchComparesDualPipeWithDualPipeV) {
  CostProfile p = uniformCostProfile("F=2,B=4,act=1000,weight=100000", 8).value();
  SearchOptions o;
  o.devices = 4;
  o.microbatches = 8;
  o.maxEvaluations = 40;
  o.localImprovement = false;
  o.randomSamples = 0;
  auto r = searchSchedule(p, o);
  ASSERT_TRUE(r.ok());
  auto find = [&](const std::string& name) {
    auto it = std::find_if(r->builtins.begin(), r->builtins.end(),
                           [&](const CandidateSummary& c) { return c.name == name; });
    EXPECT_NE(it, r->builtins.end()) << name;
    return it == r->builtins.end() ? CandidateSummary{} : *it;
  };
  const CandidateSummary dp = find("dualpipe"), dpv = find("dualpipe-v");
  ASSERT_TRUE(dp.valid && dpv.valid) << dp.note << " / " << dpv.note;
  EXPECT_LT(dp.makespan, dpv.makespan);
  EXPECT_GT(dp.peakMemoryBytes, dpv.peakMemoryBytes);  // twice the parameters

  // Under a memory limit between the two, DualPipe no longer fits and DualPipe-V does.
  o.memoryLimitBytes = (dp.peakMemoryBytes + dpv.peakMemoryBytes) / 2;
  o.allowRecompute = false;
  auto limited = searchSchedule(p, o);
  ASSERT_TRUE(limited.ok());
  for (const auto& c : limited->builtins) {
    if (c.name == "dualpipe") {
      EXPECT_FALSE(c.fitsMemory);
    }
    if (c.name == "dualpipe-v") {
      EXPECT_TRUE(c.fitsMemory);
    }
  }
  EXPECT_FALSE(limited->best.pipeline.routed());

  o.memoryLimitBytes.reset();
  o.allowRoutes = false;
  auto noRoutes = searchSchedule(p, o);
  ASSERT_TRUE(noRoutes.ok());
  for (const auto& c : noRoutes->builtins) EXPECT_NE(c.name, "dualpipe");
}

}  // namespace
