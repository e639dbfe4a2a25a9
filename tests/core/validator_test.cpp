#include "pipestudio/core/analysis/validator.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

#include "fixtures/schedules.h"
#include "pipestudio/core/planning/generators.h"

using namespace ps::core;

namespace {

// Builds a schedule from one token list per device: "F0" (stage = the device's only stage
// under linear placement) or "F0@s2" (explicit stage), "(F1;B0)" for an overlapped pair.
Schedule make(int devices, int stages, int microbatches, const std::vector<std::string>& orders,
              PlacementKind placement = PlacementKind::Linear, std::vector<UserKind> userKinds = {}) {
  return ps::test::scheduleFromTokens(
      devices, stages, microbatches, placement, orders, std::move(userKinds),
      [](const std::string& kind) { ADD_FAILURE() << "unknown op kind " << kind; });
}

bool hasCode(const ValidationReport& r, const std::string& code) {
  for (const auto& d : r.diagnostics)
    if (d.code == code) return true;
  return false;
}

std::string messages(const ValidationReport& r) {
  return formatDiagnostics(r.diagnostics);
}

}  // namespace

TEST(Validator, AcceptsOneFOneB) {
  Schedule s = make(2, 2, 3, {"F0 F1 B0 F2 B1 B2", "F0 B0 F1 B1 F2 B2"});
  auto r = validateSchedule(s);
  EXPECT_TRUE(r.valid()) << messages(r);
  EXPECT_TRUE(r.diagnostics.empty());
  EXPECT_TRUE(r.deadlock.empty());
}

TEST(Validator, ReportsDeadlockCycleInWords) {
  // Device 0 runs B0 before F1, but device 1 needs F1 before it can run B0.
  Schedule s = make(2, 2, 2, {"F0 B0 F1 B1", "F0 F1 B0 B1"});
  auto r = validateSchedule(s);
  ASSERT_FALSE(r.valid());
  ASSERT_TRUE(hasCode(r, "validate.deadlock")) << messages(r);
  const Diagnostic* d = nullptr;
  for (const auto& x : r.diagnostics)
    if (x.code == "validate.deadlock") d = &x;
  EXPECT_EQ(d->message,
            "deadlock: device 0 waits at B0@s0 for B0@s1 on device 1, which waits at F1@s1 for F1@s0 on "
            "device 0, which is after B0@s0 on device 0");
  ASSERT_EQ(r.deadlock.size(), 2u);
  EXPECT_EQ(r.deadlock[0].device, 0);
  EXPECT_EQ(r.deadlock[0].at.step, 1);
  EXPECT_EQ(r.deadlock[0].waitsFor, (Op{OpKind::B, 1, 0}));
  EXPECT_EQ(r.deadlock[0].waitsOnDevice, 1);
  EXPECT_EQ(r.deadlock[1].device, 1);
  EXPECT_EQ(r.deadlock[1].at.step, 1);
  // The GUI outlines the stuck ops and the ops they wait for.
  EXPECT_GE(d->related.size(), 4u);
  // Structure is fine: only the deadlock is reported.
  EXPECT_EQ(r.diagnostics.size(), 1u) << messages(r);
}

TEST(Validator, DeadlockOnOneDeviceWaitingForItsOwnLaterOp) {
  // Two stages on one device, backward of stage 0 before backward of stage 1.
  Schedule s = make(1, 2, 1, {"F0@s0 F0@s1 B0@s0 B0@s1"});
  auto r = validateSchedule(s);
  ASSERT_TRUE(hasCode(r, "validate.deadlock")) << messages(r);
  EXPECT_NE(
      messages(r).find("device 0 waits at B0@s0 for B0@s1 on device 0, which is after B0@s0 on device 0"),
      std::string::npos)
      << messages(r);
}

TEST(Validator, ReportsMissingAndDuplicateOps) {
  Schedule s = make(2, 2, 2, {"F0 F1 B0 B1 F1", "F0 B0 F1"});
  auto r = validateSchedule(s);
  EXPECT_TRUE(hasCode(r, "validate.duplicate")) << messages(r);
  EXPECT_TRUE(hasCode(r, "validate.missing")) << messages(r);
  std::string m = messages(r);
  EXPECT_NE(m.find("device 0 step 4: F1@s0 appears twice (first at device 0 step 1)"), std::string::npos)
      << m;
  EXPECT_NE(m.find("B1@s1 (or I1@s1 and W1@s1) is missing (stage 1 on device 1)"), std::string::npos) << m;
}

TEST(Validator, ReportsOpsOutsideThePipelineAndOnTheWrongDevice) {
  Schedule s = make(2, 2, 1, {"F0 B0 F5", "F0 B0 F0@s0"});
  auto r = validateSchedule(s);
  std::string m = messages(r);
  EXPECT_NE(m.find("F5@s0 names micro-batch 5, outside 0..0"), std::string::npos) << m;
  EXPECT_NE(m.find("device 1 step 2: F0@s0 belongs to stage 0 on device 0, not device 1"), std::string::npos)
      << m;
  EXPECT_TRUE(hasCode(r, "validate.range"));
  EXPECT_TRUE(hasCode(r, "validate.placement"));
}

TEST(Validator, SplitBackwardNeedsBothHalvesAndNotAlsoFullBackward) {
  Schedule s = make(1, 1, 3, {"F0 I0 W0 F1 I1 F2 B2 W2"});
  auto r = validateSchedule(s);
  std::string m = messages(r);
  EXPECT_NE(m.find("W1@s0 is missing (stage 0 on device 0) after I1@s0"), std::string::npos) << m;
  EXPECT_NE(m.find("micro-batch 2 has both a full backward"), std::string::npos) << m;
}

TEST(Validator, WeightBeforeItsInputGradientDeadlocks) {
  Schedule s = make(1, 1, 1, {"F0 W0 I0"});
  auto r = validateSchedule(s);
  EXPECT_TRUE(hasCode(r, "validate.deadlock")) << messages(r);
}

TEST(Validator, OverlappedPairMustBeForwardAndBackwardOfDifferentMicrobatches) {
  // V-shape: device 0 holds stages 0 and 3, device 1 holds 1 and 2.
  Schedule ok = make(2, 4, 2,
                     {"F0@s0 F1@s0 F0@s3 B0@s3 (F1@s3;B0@s0) B1@s3 B1@s0",
                      "F0@s1 F0@s2 F1@s1 B0@s2 F1@s2 B0@s1 B1@s2 B1@s1"},
                     PlacementKind::VShape);
  auto r1 = validateSchedule(ok);
  EXPECT_TRUE(r1.valid()) << messages(r1);

  Schedule bad = make(1, 1, 2, {"F0 (F1;B1) B0"});
  auto r2 = validateSchedule(bad);
  EXPECT_TRUE(hasCode(r2, "validate.pair")) << messages(r2);
}

TEST(Validator, RecomputeOffloadAndCommunicationDependencies) {
  Schedule s = make(2, 2, 1, {"F0 SEND_F0 OFFLOAD0 RECV_B0 RELOAD0 R0 B0", "RECV_F0 F0 B0 SEND_B0"});
  auto r = validateSchedule(s);
  EXPECT_TRUE(r.valid()) << messages(r);
  DependencyGraph g(s);
  int b0 = g.find(Op{OpKind::B, 0, 0});
  std::vector<Op> deps;
  for (int id : g.dependencies(b0)) deps.push_back(g.op(id));
  // B waits on F, the received gradient, the recompute and the reload.
  EXPECT_NE(std::find(deps.begin(), deps.end(), Op{OpKind::F, 0, 0}), deps.end());
  EXPECT_NE(std::find(deps.begin(), deps.end(), Op{OpKind::RecvB, 0, 0}), deps.end());
  EXPECT_NE(std::find(deps.begin(), deps.end(), Op{OpKind::R, 0, 0}), deps.end());
  EXPECT_NE(std::find(deps.begin(), deps.end(), Op{OpKind::Reload, 0, 0}), deps.end());
  // With explicit communication, F of stage 1 waits on its posted RECV_F and on the data the
  // SEND_F sends (not on F of stage 0); posting the RECV waits for nothing (PyTorch's
  // _batch_p2p / _wait_batch_p2p).
  EXPECT_EQ(dependenciesOf(s, Op{OpKind::F, 1, 0}),
            (std::vector<Op>{Op{OpKind::RecvF, 1, 0}, Op{OpKind::SendF, 0, 0}}));
  EXPECT_EQ(dependenciesOf(s, Op{OpKind::RecvF, 1, 0}), (std::vector<Op>{}));

  // Sends and receives come in matched pairs.
  Schedule lonely = make(2, 2, 1, {"F0 SEND_F0 B0", "F0 B0 SEND_B0"});
  std::string m = messages(validateSchedule(lonely));
  EXPECT_NE(m.find("device 0 step 1: SEND_F0@s0 has no matching RECV_F0@s1"), std::string::npos) << m;
  EXPECT_NE(m.find("device 1 step 2: SEND_B0@s1 has no matching RECV_B0@s0"), std::string::npos) << m;
  Schedule deaf = make(2, 2, 1, {"F0 B0", "RECV_F0 F0 B0"});
  EXPECT_NE(messages(validateSchedule(deaf)).find("RECV_F0@s1 has no matching SEND_F0@s0"),
            std::string::npos);

  Schedule noReload = make(1, 1, 1, {"F0 OFFLOAD0 B0"});
  auto r2 = validateSchedule(noReload);
  EXPECT_NE(messages(r2).find("OFFLOAD0@s0 is never reloaded"), std::string::npos) << messages(r2);
  Schedule reloadFirst = make(1, 1, 1, {"F0 RELOAD0 B0"});
  auto r3 = validateSchedule(reloadFirst);
  EXPECT_NE(messages(r3).find("RELOAD0@s0 needs OFFLOAD0@s0, which the schedule does not have"),
            std::string::npos)
      << messages(r3);
}

TEST(Validator, DependenciesOfFollowSharedSemantics) {
  Schedule s = *generateSchedule(ScheduleKind::ZBH1, GeneratorOptions{3, 3});
  EXPECT_EQ(dependenciesOf(s, Op{OpKind::F, 0, 1}), std::vector<Op>{});
  EXPECT_EQ(dependenciesOf(s, Op{OpKind::F, 2, 1}), (std::vector<Op>{Op{OpKind::F, 1, 1}}));
  EXPECT_EQ(dependenciesOf(s, Op{OpKind::I, 1, 1}),
            (std::vector<Op>{Op{OpKind::F, 1, 1}, Op{OpKind::I, 2, 1}}));
  EXPECT_EQ(dependenciesOf(s, Op{OpKind::I, 2, 1}), (std::vector<Op>{Op{OpKind::F, 2, 1}}));
  EXPECT_EQ(dependenciesOf(s, Op{OpKind::W, 0, 2}), (std::vector<Op>{Op{OpKind::I, 0, 2}}));
}

TEST(Validator, UserKindsFollowTheirRules) {
  UserKind ar;
  ar.name = "ALLREDUCE";
  ar.stageLevel = true;
  ar.after = {"W"};
  // One stage, two micro-batches; ALLREDUCE after every W of its stage.
  Schedule good = make(1, 1, 2, {"F0 F1 I0 I1 W0 W1 ALLREDUCE"}, PlacementKind::Linear, {ar});
  auto r1 = validateSchedule(good);
  EXPECT_TRUE(r1.valid()) << messages(r1);
  DependencyGraph g(good);
  int a = g.find(Op{static_cast<OpKind>(kFirstUserKind), 0, -1});
  ASSERT_GE(a, 0);
  EXPECT_EQ(g.dependencies(a).size(), 2u);

  Schedule early = make(1, 1, 2, {"F0 F1 I0 I1 W0 ALLREDUCE W1"}, PlacementKind::Linear, {ar});
  EXPECT_TRUE(hasCode(validateSchedule(early), "validate.deadlock"));

  UserKind pre;
  pre.name = "PREFETCH";
  pre.before = {"F"};
  Schedule bad = make(1, 1, 1, {"F0 PREFETCH0 B0"}, PlacementKind::Linear, {pre});
  EXPECT_TRUE(hasCode(validateSchedule(bad), "validate.deadlock"));
  Schedule fine = make(1, 1, 1, {"PREFETCH0 F0 B0"}, PlacementKind::Linear, {pre});
  EXPECT_TRUE(validateSchedule(fine).valid());

  UserKind typo;
  typo.name = "X";
  typo.after = {"WW"};
  Schedule t = make(1, 1, 1, {"F0 B0"}, PlacementKind::Linear, {typo});
  auto r4 = validateSchedule(t);
  EXPECT_NE(messages(r4).find("kind X must follow unknown kind 'WW'"), std::string::npos) << messages(r4);
}

TEST(Validator, ReduceGradAfterEveryWeightGradient) {
  Schedule s = make(1, 1, 2, {"F0 F1 B0 REDUCE_GRAD B1"});
  EXPECT_TRUE(hasCode(validateSchedule(s), "validate.deadlock"));
  Schedule ok = make(1, 1, 2, {"UNSHARD F0 F1 B0 B1 REDUCE_GRAD RESHARD UNSHARD RESHARD"});
  auto r = validateSchedule(ok);
  EXPECT_TRUE(r.valid()) << messages(r);
}

TEST(Validator, HeaderMismatchesAreReportedNotCrashed) {
  Schedule s = make(2, 2, 1, {"F0 B0", "F0 B0"});
  s.devices.pop_back();
  EXPECT_TRUE(hasCode(validateSchedule(s), "validate.devices"));
  Schedule t = make(2, 2, 1, {"F0 B0", "F0 B0"});
  t.pipeline.stageToDevice.pop_back();
  EXPECT_TRUE(hasCode(validateSchedule(t), "validate.placement"));
  Schedule u = make(1, 1, 1, {"F0 B0"});
  u.pipeline.microbatches = 1'000'000'000;
  u.pipeline.stages = 1'000'000'000;
  u.pipeline.stageToDevice.assign(1, 0);
  EXPECT_FALSE(validateSchedule(u).valid());
  Schedule v = make(1, 1, 1, {"F0 B0"});
  v.devices[0].push_back(Step{Op{static_cast<OpKind>(99), 0, 0}, {}});
  EXPECT_TRUE(hasCode(validateSchedule(v), "validate.kind"));
}

TEST(Validator, CapsTheNumberOfDiagnostics) {
  Schedule s = make(1, 1, 500, {""});
  auto r = validateSchedule(s, ValidateOptions{20});
  ASSERT_EQ(r.diagnostics.size(), 21u);
  EXPECT_EQ(r.diagnostics.back().code, "validate.more");
  EXPECT_EQ(r.diagnostics.back().message, "980 more errors not shown");
}

// ---- deadlock detection against a naive reference ---------------------------------------

namespace {

// Reference: rounds of unit-time steps; in each round every device whose next step's
// dependencies finished in earlier rounds runs it. Stalls when a round makes no progress.
bool naiveCompletes(const Schedule& s) {
  DependencyGraph g(s);
  std::vector<int> pos(static_cast<size_t>(g.devices()));
  std::vector<char> done(static_cast<size_t>(g.size()), 0);
  for (int d = 0; d < g.devices(); ++d) pos[static_cast<size_t>(d)] = g.deviceBegin(d);
  while (true) {
    std::vector<int> finished;
    for (int d = 0; d < g.devices(); ++d) {
      int id = pos[static_cast<size_t>(d)];
      if (id >= g.deviceBegin(d + 1)) continue;
      int width = id + 1 < g.deviceBegin(d + 1) && g.isPairSecond(id + 1) ? 2 : 1;
      bool ready = true;
      for (int k = 0; k < width; ++k)
        for (int dep : g.dependencies(id + k)) ready = ready && done[static_cast<size_t>(dep)];
      if (!ready) continue;
      for (int k = 0; k < width; ++k) finished.push_back(id + k);
      pos[static_cast<size_t>(d)] += width;
    }
    if (finished.empty()) break;
    for (int id : finished) done[static_cast<size_t>(id)] = 1;
  }
  for (int d = 0; d < g.devices(); ++d)
    if (pos[static_cast<size_t>(d)] < g.deviceBegin(d + 1)) return false;
  return true;
}

}  // namespace

TEST(Validator, DeadlockVerdictMatchesNaiveExecutionOnShuffledOrders) {
  std::uint64_t state = 42;
  auto rnd = [&](size_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<size_t>((state >> 33) % n);
  };
  int deadlocks = 0, fine = 0;
  for (ScheduleKind k :
       {ScheduleKind::OneFOneB, ScheduleKind::ZBH1, ScheduleKind::ZBV, ScheduleKind::DualPipeV}) {
    Schedule base = *generateSchedule(k, GeneratorOptions{3, 6});
    for (int iter = 0; iter < 150; ++iter) {
      Schedule s = base;
      // A few random swaps of neighbouring steps: some orders stay feasible, some deadlock.
      int swaps = 1 + static_cast<int>(rnd(6));
      for (int i = 0; i < swaps; ++i) {
        auto& dev = s.devices[rnd(s.devices.size())];
        if (dev.size() < 2) continue;
        size_t at = rnd(dev.size() - 1);
        std::swap(dev[at], dev[at + 1 + rnd(std::min<size_t>(3, dev.size() - at - 1))]);
      }
      auto r = validateSchedule(s);
      bool completes = naiveCompletes(s);
      EXPECT_EQ(r.deadlock.empty(), completes) << scheduleKindName(k) << " iteration " << iter;
      EXPECT_EQ(r.valid(), completes) << formatDiagnostics(r.diagnostics);
      if (!r.deadlock.empty()) {
        ++deadlocks;
        // The reported waits form a cycle: each waits on the next one's device, and each
        // waited-for op is not before the op its device is stuck at.
        for (size_t i = 0; i < r.deadlock.size(); ++i) {
          const DeadlockWait& w = r.deadlock[i];
          const DeadlockWait& next = r.deadlock[(i + 1) % r.deadlock.size()];
          EXPECT_EQ(w.waitsOnDevice, next.device);
          DependencyGraph g(s);
          int x = g.find(w.waitsFor);
          ASSERT_GE(x, 0);
          EXPECT_EQ(g.deviceOf(x), w.waitsOnDevice);
          EXPECT_GE(g.ref(x).step, next.at.step);
        }
      } else {
        ++fine;
      }
    }
  }
  // Both outcomes were exercised.
  EXPECT_GT(deadlocks, 50);
  EXPECT_GT(fine, 50);
}

TEST(DependencyGraph, IdsFollowDeviceOrdersWithPairsAndReverseEdges) {
  Schedule s = make(2, 4, 2,
                    {"F0@s0 F1@s0 F0@s3 B0@s3 (F1@s3;B0@s0) B1@s3 B1@s0",
                     "F0@s1 F0@s2 F1@s1 B0@s2 F1@s2 B0@s1 B1@s2 B1@s1"},
                    PlacementKind::VShape);
  DependencyGraph g(s);
  EXPECT_EQ(g.size(), 16);
  EXPECT_EQ(g.devices(), 2);
  EXPECT_EQ(g.deviceBegin(1), 8);
  // The pair takes ids 4 and 5 and shares step 4.
  EXPECT_FALSE(g.isPairSecond(4));
  EXPECT_TRUE(g.isPairSecond(5));
  EXPECT_EQ(g.ref(5).step, 4);
  EXPECT_EQ(g.idAt(OpRef{0, 4}), 4);
  EXPECT_EQ(g.idAt(OpRef{0, 5}), 6);
  EXPECT_EQ(g.idAt(OpRef{1, 0}), 8);
  EXPECT_EQ(g.idAt(OpRef{0, 7}), -1);
  EXPECT_EQ(g.find(Op{OpKind::B, 0, 0}), 5);
  EXPECT_EQ(g.find(Op{OpKind::W, 0, 0}), -1);
  EXPECT_TRUE(g.problems().empty());
  // F0@s2 (id 9) is needed by F0@s3 (id 2) and by its own backward B0@s2 (id 11).
  auto users = g.dependents(9);
  std::vector<int> u(users.begin(), users.end());
  std::sort(u.begin(), u.end());
  EXPECT_EQ(u, (std::vector<int>{2, 11}));
  // Rules apply to ops that are not (yet) in the schedule too.
  std::vector<Op> missing;
  auto deps = g.dependenciesFor(Op{OpKind::W, 2, 1}, &missing);
  EXPECT_TRUE(deps.empty());
  EXPECT_EQ(missing, (std::vector<Op>{Op{OpKind::I, 2, 1}}));
  EXPECT_EQ(dependenciesOf(s, Op{OpKind::R, 3, 1}), (std::vector<Op>{Op{OpKind::F, 3, 1}}));
}
