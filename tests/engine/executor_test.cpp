// The executor on CPU threads: gradients equal the unpipelined model's for every schedule
// shape (B, split I/W, interleaved placement, recompute, offload), measured timelines keep
// the schedule's order and dependencies, and failures stop the run naming the op.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <thread>

#include "engine_checks.h"
#include "fixtures/schedules.h"
#include "pipestudio/engine/engine.h"

using namespace ps::engine;
using namespace ps::test;
using ps::core::OpKind;

namespace {

RunOptions smallOptions(const std::string& model) {
  return quickRun(model);
}

RunReport runOk(const ps::core::Schedule& s, const RunOptions& o) {
  auto r = runSchedule(s, o);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : ps::core::formatDiagnostics(r.errors()));
  if (!r.ok()) return {};
  EXPECT_EQ(r->status, ps::core::RunState::Succeeded)
      << (r->diagnostics.empty() ? "" : r->diagnostics[0].message);
  return std::move(r).value();
}

void expectExactGradients(const RunReport& r) {
  ASSERT_TRUE(r.gradients.ran);
  EXPECT_TRUE(r.gradients.passed) << "worst " << r.gradients.worstParameter << " rel "
                                  << r.gradients.maxRelativeError << ", loss rel "
                                  << r.gradients.lossRelativeError;
  EXPECT_LE(r.gradients.maxRelativeError, 1e-5);
  EXPECT_LE(r.gradients.lossRelativeError, 1e-5);
  EXPECT_FALSE(r.gradients.parameters.empty());
  EXPECT_GT(r.gradients.lossReference, 0.0);
}

// Every F(s,m) with s > 0 starts after F(s-1,m) ends; every B/I(s,m) after B/I(s+1,m).
void expectDependenciesHold(const ps::core::Schedule& s, const RunReport& r) {
  std::map<std::tuple<int, int, int>, std::pair<double, double>> at;
  for (const auto& op : r.timeline.ops) {
    int k = static_cast<int>(op.op.kind == OpKind::I ? OpKind::B : op.op.kind);
    at[{k, op.op.stage, op.op.microbatch}] = {op.start, op.end};
  }
  const int S = s.pipeline.stages, M = s.pipeline.microbatches;
  const int F = static_cast<int>(OpKind::F), B = static_cast<int>(OpKind::B);
  for (int st = 0; st < S; ++st)
    for (int m = 0; m < M; ++m) {
      ASSERT_TRUE(at.count(std::make_tuple(F, st, m)));
      ASSERT_TRUE(at.count(std::make_tuple(B, st, m)));
      auto get = [&](int k, int stage) { return at[std::make_tuple(k, stage, m)]; };
      if (st > 0) {
        EXPECT_GE(get(F, st).first, get(F, st - 1).second);
      }
      if (st + 1 < S) {
        EXPECT_GE(get(B, st).first, get(B, st + 1).second);
      }
      EXPECT_GE(get(B, st).first, get(F, st).second);
    }
}

// Runs the schedule; the report and the wall-clock seconds the run took.
std::pair<ps::core::Result<RunReport>, double> timedRun(const ps::core::Schedule& s, const RunOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  auto r = runSchedule(s, o);
  return {std::move(r), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
}

}  // namespace

TEST(ModelSpec, ParsesKeysAndRejectsUnknownOnes) {
  auto g = parseModelSpec("gpt:layers=8,hidden=256,heads=4,seq=128,vocab=1000");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->kind, ModelKind::Gpt);
  EXPECT_EQ(g->layers, 8);
  EXPECT_EQ(g->hidden, 256);
  EXPECT_EQ(g->seq, 128);
  EXPECT_EQ(modelLayerCount(*g), 10);  // embedding + 8 blocks + head
  EXPECT_EQ(modelLayerNames(*g).front(), "embedding");
  EXPECT_EQ(modelLayerNames(*g).back(), "head");
  auto m = parseModelSpec("mlp:layers=3,hidden=32");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(modelLayerCount(*m), 3);
  EXPECT_FALSE(parseModelSpec("resnet").ok());
  EXPECT_FALSE(parseModelSpec("mlp:heads=2").ok());
  EXPECT_FALSE(parseModelSpec("gpt:hidden=30,heads=4").ok());
  EXPECT_FALSE(parseModelSpec("mlp:layers=zero").ok());
}

TEST(Executor, GPipeMlpGradientsEqualUnpipelined) {
  auto s = gpipe(2, 3);
  auto r = runOk(s, smallOptions("mlp:layers=4,hidden=16"));
  expectExactGradients(r);
  EXPECT_EQ(r.timeline.source, ps::core::TimelineSource::Measured);
  EXPECT_EQ(r.timeline.ops.size(), s.opCount());
  expectDependenciesHold(s, r);
}

TEST(Executor, OneFOneBGptGradientsEqualUnpipelined) {
  auto s = oneFOneB(3, 4);
  auto r = runOk(s, smallOptions("gpt:layers=2,hidden=16,heads=2,seq=8,vocab=32"));
  expectExactGradients(r);
  expectDependenciesHold(s, r);
  // Embedding and LM head are layers of their own: 4 layers over 3 stages.
  int sum = 0;
  for (int n : r.partition) sum += n;
  EXPECT_EQ(sum, 4);
}

TEST(Executor, SplitBackwardDefersWeightGradientsToW) {
  auto s = oneFOneB(2, 4, /*splitBackward=*/true);
  auto o = smallOptions("gpt:layers=2,hidden=16,heads=2,seq=8,vocab=32");
  auto r = runOk(s, o);
  expectExactGradients(r);
  // Deferred (X, dY) pairs are held from I until W: memory after the last I is above zero
  // and drops back when the Ws have run.
  for (int d = 0; d < 2; ++d) {
    const auto& mem = r.timeline.memory[d];
    ASSERT_FALSE(mem.empty());
    double lastI = 0;
    for (const auto& op : r.timeline.ops)
      if (op.device == d && op.op.kind == OpKind::I) lastI = std::max(lastI, op.end);
    std::int64_t atLastI = 0;
    for (const auto& smp : mem)
      if (smp.time <= lastI) atLastI = smp.bytes;
    EXPECT_GT(atLastI, 0) << "device " << d;
    EXPECT_EQ(mem.back().bytes, 0) << "device " << d;
  }
}

TEST(Executor, ExplicitPartitionAndInterleavedPlacement) {
  auto s = loopedBfs(2, 2);
  auto o = smallOptions("gpt:layers=3,hidden=16,heads=2,seq=4,vocab=16");
  o.partition = {2, 1, 1, 1};
  auto r = runOk(s, o);
  expectExactGradients(r);
  EXPECT_EQ(r.partition, (std::vector<int>{2, 1, 1, 1}));
}

TEST(Executor, RecomputeKeepsGradientsExact) {
  auto s = withRecompute(oneFOneB(2, 3));
  auto r = runOk(s, smallOptions("mlp:layers=4,hidden=16"));
  expectExactGradients(r);
  EXPECT_EQ(r.timeline.ops.size(), s.opCount());
}

TEST(Executor, RecomputeWithSplitBackward) {
  auto s = withRecompute(oneFOneB(2, 3, true));
  auto r = runOk(s, smallOptions("gpt:layers=2,hidden=16,heads=2,seq=4,vocab=16"));
  expectExactGradients(r);
}

TEST(Executor, OffloadReloadKeepsGradientsExactAndFreesDeviceMemory) {
  auto plain = gpipe(2, 3);
  auto s = withOffload(plain);
  auto o = smallOptions("mlp:layers=4,hidden=32");
  auto base = runOk(plain, o);
  auto r = runOk(s, o);
  expectExactGradients(r);
  // GPipe holds every micro-batch's stash at the F/B turn; offloading moves them off.
  auto peak = [](const RunReport& rep, int d) {
    std::int64_t p = 0;
    for (const auto& smp : rep.timeline.memory[d]) p = std::max(p, smp.bytes);
    return p;
  };
  for (int d = 0; d < 2; ++d) EXPECT_LT(peak(r, d), peak(base, d)) << "device " << d;
}

TEST(Executor, OffloadWithRecompute) {
  auto s = withOffload(withRecompute(gpipe(2, 2)));
  auto r = runOk(s, smallOptions("gpt:layers=2,hidden=16,heads=2,seq=4,vocab=16"));
  expectExactGradients(r);
}

TEST(Executor, WarmupIterationsAreLeftOutOfTheTimeline) {
  auto s = gpipe(2, 2);
  auto o = smallOptions("mlp:layers=2,hidden=16");
  o.warmup = 2;
  o.iterations = 3;
  std::vector<std::string> events;
  o.events = [&](const std::string& line) { events.push_back(line); };
  auto r = runOk(s, o);
  EXPECT_EQ(r.iterationMs.size(), 3u);
  EXPECT_EQ(r.losses.size(), 5u);
  // Without an optimizer step, every iteration computes the same loss.
  for (double l : r.losses) EXPECT_NEAR(l, r.losses.front(), 1e-6);
  EXPECT_EQ(r.timeline.ops.size(), s.opCount());
  size_t opEvents = 0;
  for (const auto& e : events)
    if (e.find("\"type\":\"op\"") != std::string::npos) ++opEvents;
  EXPECT_EQ(opEvents, 3 * s.opCount());
  EXPECT_NE(events.front().find("\"protocol_version\":1"), std::string::npos);
  EXPECT_NE(events.back().find("\"type\":\"finished\""), std::string::npos);
}

TEST(Executor, RefusesSchedulesItCannotRun) {
  auto s = gpipe(2, 2);
  s.devices[1].pop_back();  // B1@s1 missing
  auto r = runSchedule(s, smallOptions("mlp:layers=2,hidden=8"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("B1@s1"), std::string::npos) << r.error().message;

  auto o = smallOptions("mlp:layers=3,hidden=8");
  o.partition = {1, 1};
  EXPECT_FALSE(runSchedule(gpipe(2, 2), o).ok());  // sums to 2 of 3 layers
  auto c = smallOptions("mlp:layers=2,hidden=8");
  c.device = Device::Cuda;
  if (!cudaAvailable()) {
    auto rc = runSchedule(gpipe(2, 2), c);
    ASSERT_FALSE(rc.ok());
    EXPECT_NE(rc.error().message.find("cuda"), std::string::npos);
  }
}

TEST(ExecutorFailure, ExceptionInOneWorkerStopsAllAndNamesTheOp) {
  auto s = oneFOneB(3, 4);
  auto o = smallOptions("mlp:layers=3,hidden=16");
  o.checkGradients = false;
  o.fault = parseFaultInjection("throw:B1@s1").value();
  auto [r, secs] = timedRun(s, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, ps::core::RunState::Failed);
  ASSERT_FALSE(r->diagnostics.empty());
  EXPECT_NE(r->diagnostics[0].message.find("device 1 at B1@s1"), std::string::npos)
      << r->diagnostics[0].message;
  EXPECT_FALSE(r->timeline.complete);
  EXPECT_FALSE(r->timeline.ops.empty());           // partial timeline kept
  EXPECT_LT(r->timeline.ops.size(), s.opCount());  // and it is partial
  EXPECT_LT(secs, 5.0);
}

TEST(ExecutorFailure, NanIsCaughtAtTheOpThatProducedIt) {
  auto s = gpipe(2, 2);
  auto o = smallOptions("mlp:layers=2,hidden=8");
  o.fault = parseFaultInjection("nan:F1@s0").value();
  auto r = runSchedule(s, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, ps::core::RunState::Failed);
  EXPECT_EQ(r->diagnostics[0].code, "engine.nan");
  EXPECT_NE(r->diagnostics[0].message.find("device 0 at F1@s0"), std::string::npos)
      << r->diagnostics[0].message;
}

TEST(ExecutorFailure, MissingTransferTimesOutNamingOpAndPeer) {
  auto s = gpipe(2, 2);
  // Forwards that take a while: device 1 starts waiting for the dropped activation well before
  // device 0 (busy with F0 and F1) starts waiting for a gradient, also on a loaded machine, so
  // the wait that began first (the root cause) is device 1's.
  auto o = smallOptions("mlp:layers=2,hidden=1024");
  o.microbatchSize = 256;
  o.checkGradients = false;
  o.timeoutSeconds = 0.5;
  o.fault = parseFaultInjection("drop:F0@s0").value();
  auto [r, secs] = timedRun(s, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, ps::core::RunState::Failed);
  EXPECT_EQ(r->diagnostics[0].code, "engine.timeout");
  const auto& msg = r->diagnostics[0].message;
  EXPECT_NE(msg.find("device 1 at F0@s1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("device 0"), std::string::npos) << msg;
  // The bound as --timeout prints it, its unit once.
  EXPECT_NE(msg.find("timed out after 0.5 s waiting for the activation"), std::string::npos) << msg;
  EXPECT_EQ(msg.find(" s s"), std::string::npos) << msg;
  EXPECT_LT(secs, 5.0);
}

TEST(ExecutorFailure, CancelStopsTheRun) {
  auto s = gpipe(2, 4);
  auto o = smallOptions("mlp:layers=2,hidden=64");
  o.checkGradients = false;
  o.iterations = 100000;
  std::atomic<bool> cancel{false};
  o.cancel = &cancel;
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cancel = true;
  });
  auto t0 = std::chrono::steady_clock::now();
  auto r = runSchedule(s, o);
  stopper.join();
  auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, ps::core::RunState::Cancelled);
  EXPECT_LT(secs, 5.0);
}

// The gradient check's negative control: an input gradient off by 1e-4 (relative, ten times
// the f32 tolerance), sent by one B or I of the last stage, must fail the check, naming a
// parameter of a stage before it; the last stage's own gradients stay exact.
TEST(GradientCheck, AWrongInputGradientFailsTheCheck) {
  struct Case {
    ps::core::Schedule schedule;
    std::string model, fault;
  };
  const std::string chain =
      std::string("torchscript:path=") + PIPESTUDIO_TEST_DATA_DIR + "/torchscript/chain.pt";
  for (const Case& c :
       {Case{generated(ps::core::ScheduleKind::OneFOneB, 2, 4), "mlp:layers=4,hidden=16", "grad:B1@s1"},
        Case{generated(ps::core::ScheduleKind::ZBH1, 2, 4), "mlp:layers=4,hidden=16", "grad:I2@s1"},
        Case{generated(ps::core::ScheduleKind::ZBH1, 2, 4), chain, "grad:I0@s1"}}) {
    SCOPED_TRACE(c.model + " " + c.fault);
    auto o = smallOptions(c.model);
    o.partition = {c.model.rfind("mlp", 0) == 0 ? 2 : 1, 2};
    o.fault = parseFaultInjection(c.fault).value();
    const RunReport r = runOk(c.schedule, o);
    ASSERT_TRUE(r.gradients.ran);
    EXPECT_FALSE(r.gradients.passed);
    EXPECT_GT(r.gradients.maxRelativeError, r.gradients.tolerance);
    EXPECT_LT(r.gradients.maxRelativeError, 1e-3);  // the error injected, not noise
    // The corrupted gradient reaches stage 0's parameters only.
    const bool mlp = c.model.rfind("mlp", 0) == 0;
    auto inStage0 = [&](const std::string& name) {
      return mlp ? name.rfind("block0.", 0) == 0 || name.rfind("block1.", 0) == 0
                 : name.rfind("fc1.", 0) == 0;
    };
    EXPECT_TRUE(inStage0(r.gradients.worstParameter)) << r.gradients.worstParameter;
    for (const auto& p : r.gradients.parameters)
      if (!inStage0(p.name)) {
        EXPECT_LE(p.relativeError, r.gradients.tolerance) << p.name;
      }
    // Without the fault the same run passes: the failure is the injected error's.
    o.fault = {};
    expectExactGradients(runOk(c.schedule, o));
  }
  // A fault kind that cannot fire where it is aimed is refused before the run.
  auto o = smallOptions("mlp:layers=4,hidden=16");
  o.fault = parseFaultInjection("grad:F1@s1").value();
  auto refused = runSchedule(generated(ps::core::ScheduleKind::OneFOneB, 2, 4), o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("only a B or I of a stage after the first"), std::string::npos)
      << refused.error().message;
}

TEST(GradientCheck, CliExitsOneAndSaysFailedOnAWrongGradient) {
  const std::string pipe = ::testing::TempDir() + "grad_fault_" + std::to_string(::getpid()) + ".pipe";
  std::ofstream(pipe) << ps::core::printDsl(generated(ps::core::ScheduleKind::OneFOneB, 2, 4));
  const auto r =
      runCommand(std::string(PIPESTUDIO_CLI) + " run " + pipe +
                 " --model mlp:layers=4,hidden=16 --threads 1 --check-gradients --inject-fault grad:B3@s1");
  std::remove(pipe.c_str());
  EXPECT_EQ(r.exitCode, 1) << r.out;
  EXPECT_NE(r.out.find("gradient check: FAILED"), std::string::npos) << r.out;
}
