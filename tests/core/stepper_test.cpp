// Step-through over a hand-built measured 1F1B timeline (2 devices, 2 micro-batches):
//   dev0: F(0,0) [0,1]  F(0,1) [1,2]  B(0,0) [5.4,7.4]  B(0,1) [9.4,11.4]
//   dev1: F(1,0) [1.2,2.2]  B(1,0) [2.2,5.2]  F(1,1) [5.2,6.2]  B(1,1) [6.2,9.2]
// with the backward hand-over B(1,0) -> B(0,0) recorded as a transfer [5.2, 5.4].
#include "pipestudio/core/analysis/stepper.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "fixtures/schedules.h"
#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/core/planning/generators.h"

using namespace ps::core;

namespace {

using namespace ps::test;

Timeline measured() {
  Timeline t = measuredOneFOneB();
  t.source = TimelineSource::Measured;
  t.transfers = {transfer(1, 0, B(1, 0), B(0, 0), 5.2, 5.4)};
  t.memory = {{{0, 100}, {1, 150}, {2, 200}, {7.4, 170}, {11.4, 100}}, {}};
  return t;
}

Timeline plannedTimeline() {
  Timeline t;
  t.devices = 2;
  t.ops = {op(0, F(0, 0), 0, 1), op(0, F(0, 1), 1, 2), op(0, B(0, 0), 4, 6), op(0, B(0, 1), 7, 9),
           op(1, F(1, 0), 1, 2), op(1, B(1, 0), 2, 4), op(1, F(1, 1), 4, 5), op(1, B(1, 1), 5, 7)};
  t.memory = {{{0, 100}, {1, 150}, {2, 200}, {6, 150}, {9, 100}}, {{0, 50}}};
  return t;
}

Stepper make(Timeline t = measured()) {
  auto s = Stepper::make(std::move(t), oneFOneB(), plannedTimeline());
  EXPECT_TRUE(s.ok());
  return std::move(s).value();
}

struct Ev {
  double time;
  StepEventKind kind;
  Op op;
};

// The device waits at `next` for the one input `input` of device `from`.
void expectBlockedOn(const DeviceState& d, Op next, Op input, int from) {
  EXPECT_TRUE(d.blocked);
  ASSERT_EQ(d.next.size(), 1u);
  EXPECT_EQ(d.next[0].op, next);
  ASSERT_EQ(d.next[0].missing.size(), 1u);
  EXPECT_EQ(d.next[0].missing[0].input, input);
  EXPECT_EQ(d.next[0].missing[0].device, from);
}

}  // namespace

TEST(Stepper, EventsInTimeOrderEndsBeforeStarts) {
  Stepper s = make();
  const auto S = StepEventKind::Start, E = StepEventKind::End;
  std::vector<Ev> expected = {{0, S, F(0, 0)},   {1, E, F(0, 0)},   {1, S, F(0, 1)},   {1.2, S, F(1, 0)},
                              {2, E, F(0, 1)},   {2.2, E, F(1, 0)}, {2.2, S, B(1, 0)}, {5.2, E, B(1, 0)},
                              {5.2, S, F(1, 1)}, {5.4, S, B(0, 0)}, {6.2, E, F(1, 1)}, {6.2, S, B(1, 1)},
                              {7.4, E, B(0, 0)}, {9.2, E, B(1, 1)}, {9.4, S, B(0, 1)}, {11.4, E, B(0, 1)}};
  ASSERT_EQ(s.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_DOUBLE_EQ(s.events()[i].time, expected[i].time) << i;
    EXPECT_EQ(s.events()[i].kind, expected[i].kind) << i;
    EXPECT_EQ(s.timeline().ops[s.events()[i].op].op, expected[i].op) << i;
  }
}

TEST(Stepper, NextPreviousAndPositions) {
  Stepper s = make();
  EXPECT_EQ(s.next(0), 1u);
  EXPECT_EQ(s.next(15), 16u);
  EXPECT_FALSE(s.next(16).has_value());
  EXPECT_FALSE(s.previous(0).has_value());
  EXPECT_EQ(s.previous(7), 6u);
  EXPECT_EQ(s.positionAt(-1.0), 0u);
  EXPECT_EQ(s.positionAt(1.0), 3u);  // F(0,0) end and F(0,1) start at 1 are applied
  EXPECT_EQ(s.positionAt(1.1), 3u);
  EXPECT_EQ(s.positionAt(100), 16u);
  EXPECT_DOUBLE_EQ(s.timeAt(0), 0.0);
  EXPECT_DOUBLE_EQ(s.timeAt(7), 2.2);
  EXPECT_DOUBLE_EQ(s.timeAt(16), 11.4);
}

TEST(Stepper, BreakpointsAndRunToOp) {
  Stepper s = make();
  Breakpoint dev0StartsB1;  // "when device 0 starts B1"
  dev0StartsB1.device = 0;
  dev0StartsB1.kind = OpKind::B;
  dev0StartsB1.microbatch = 1;
  auto hit = s.runToBreakpoint(0, {dev0StartsB1});
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(*hit, 15u);
  EXPECT_EQ(s.timeline().ops[s.events()[*hit - 1].op].op, B(0, 1));
  EXPECT_FALSE(s.runToBreakpoint(*hit, {dev0StartsB1}).has_value());

  Breakpoint dev1StartsAnyB;
  dev1StartsAnyB.device = 1;
  dev1StartsAnyB.kind = OpKind::B;
  EXPECT_EQ(s.runToBreakpoint(0, {dev1StartsAnyB}), 7u);
  EXPECT_EQ(s.runToBreakpoint(7, {dev1StartsAnyB}), 12u);
  EXPECT_EQ(s.runToBreakpoint(7, {dev1StartsAnyB, dev0StartsB1}), 12u);
  // Playing at a speed: only events up to `until` count.
  EXPECT_FALSE(s.runToBreakpoint(7, {dev1StartsAnyB}, 6.0).has_value());
  EXPECT_EQ(s.runToBreakpoint(7, {dev1StartsAnyB}, 6.2), 12u);
  // Backwards from after B(0,1)'s start: the last B start on device 1 is B(1,1).
  EXPECT_EQ(s.runBackToBreakpoint(15, {dev1StartsAnyB}), 12u);
  EXPECT_EQ(s.runBackToBreakpoint(12, {dev1StartsAnyB}), 7u);
  EXPECT_FALSE(s.runBackToBreakpoint(7, {dev1StartsAnyB}).has_value());

  Breakpoint onEnd;
  onEnd.kind = OpKind::F;
  onEnd.on = StepEventKind::End;
  EXPECT_EQ(s.runToBreakpoint(0, {onEnd}), 2u);

  EXPECT_EQ(s.runToOp(0, F(1, 1)), 9u);
  EXPECT_EQ(s.runToOp(0, F(1, 1), StepEventKind::End), 11u);
  EXPECT_FALSE(s.runToOp(9, F(1, 1)).has_value());
}

TEST(Stepper, StateWhileDeviceZeroWaitsForStageOneBackward) {
  Stepper s = make();
  StepState st = s.stateAt(3.0);
  EXPECT_EQ(st.position, 7u);
  EXPECT_FALSE(st.stopped);
  ASSERT_EQ(st.devices.size(), 2u);

  const DeviceState& d0 = st.devices[0];
  EXPECT_TRUE(d0.idle);
  EXPECT_TRUE(d0.blocked);
  EXPECT_EQ(d0.opsDone, 2u);
  EXPECT_EQ(d0.opsPlanned, 4u);
  ASSERT_EQ(d0.next.size(), 1u);
  EXPECT_EQ(d0.next[0].op, B(0, 0));
  EXPECT_EQ(d0.next[0].planned.step, 2);
  ASSERT_EQ(d0.next[0].missing.size(), 1u);  // F(0,0) is done; B(1,0) still runs
  EXPECT_EQ(d0.next[0].missing[0].input, B(1, 0));
  EXPECT_EQ(d0.next[0].missing[0].device, 1);
  EXPECT_EQ(d0.next[0].missing[0].status, InputStatus::Running);
  EXPECT_EQ(d0.inFlight, (std::vector<StageMicrobatch>{{0, 0}, {0, 1}}));
  EXPECT_EQ(d0.memoryBytes, 200);
  EXPECT_EQ(d0.plannedMemoryBytes, 200);  // planned time of F(0,1)'s end (2)

  const DeviceState& d1 = st.devices[1];
  EXPECT_FALSE(d1.idle);
  EXPECT_FALSE(d1.blocked);
  ASSERT_EQ(d1.running.size(), 1u);
  EXPECT_EQ(s.timeline().ops[d1.running[0]].op, B(1, 0));
  ASSERT_EQ(d1.next.size(), 1u);
  EXPECT_EQ(d1.next[0].op, F(1, 1));
  EXPECT_TRUE(d1.next[0].missing.empty());
  EXPECT_EQ(d1.inFlight, (std::vector<StageMicrobatch>{{1, 0}}));
  EXPECT_FALSE(d1.memoryBytes.has_value());  // no measured curve for device 1
  EXPECT_EQ(d1.plannedMemoryBytes, 50);
  EXPECT_TRUE(st.transfersInAir.empty());
}

TEST(Stepper, StateWithGradientInTheAir) {
  Stepper s = make();
  StepState st = s.stateAt(5.3);
  ASSERT_EQ(st.transfersInAir.size(), 1u);
  EXPECT_EQ(st.transfersInAir[0], 0u);
  const DeviceState& d0 = st.devices[0];
  ASSERT_EQ(d0.next.size(), 1u);
  ASSERT_EQ(d0.next[0].missing.size(), 1u);
  EXPECT_EQ(d0.next[0].missing[0].status, InputStatus::InTransit);
  EXPECT_EQ(d0.next[0].missing[0].transfer, 0u);
  const DeviceState& d1 = st.devices[1];
  EXPECT_EQ(d1.inFlight, (std::vector<StageMicrobatch>{{1, 1}}));
  ASSERT_EQ(d1.running.size(), 1u);
  EXPECT_EQ(s.timeline().ops[d1.running[0]].op, F(1, 1));

  // Later: planned memory follows device 0's progress (B(0,0) ended: planned time 6).
  StepState later = s.stateAt(8.0);
  EXPECT_EQ(later.devices[0].memoryBytes, 170);
  EXPECT_EQ(later.devices[0].plannedMemoryBytes, 150);
  EXPECT_EQ(later.devices[0].inFlight, (std::vector<StageMicrobatch>{{0, 1}}));

  StepState end = s.stopState();
  EXPECT_FALSE(end.stopped);  // a complete run just finishes
  EXPECT_TRUE(end.devices[0].finished);
  EXPECT_TRUE(end.devices[1].finished);
  EXPECT_TRUE(end.devices[0].inFlight.empty());
}

TEST(Stepper, FailedRunOpensWhereItStopped) {
  // B(1,1) raised while running: it never ended. Device 0 is left waiting for it.
  Timeline t = measured();
  t.ops[7].end = std::numeric_limits<double>::quiet_NaN();
  t.ops.erase(t.ops.begin() + 3);  // B(0,1) never ran
  t.complete = false;
  t.diagnostics.push_back(makeError("run.op-failed", "B1@s1 on device 1 failed: NaN in loss"));
  Stepper s = make(t);
  EXPECT_EQ(s.size(), 13u);  // 7 ops started, 6 ended
  StepState st = s.stopState();
  EXPECT_TRUE(st.stopped);
  EXPECT_DOUBLE_EQ(st.time, 7.4);
  ASSERT_EQ(st.diagnostics.size(), 1u);
  EXPECT_EQ(st.diagnostics[0].code, "run.op-failed");

  const DeviceState& d1 = st.devices[1];
  ASSERT_EQ(d1.running.size(), 1u);
  EXPECT_EQ(s.timeline().ops[d1.running[0]].op, B(1, 1));
  EXPECT_FALSE(d1.finished);

  const DeviceState& d0 = st.devices[0];
  EXPECT_TRUE(d0.blocked);
  ASSERT_EQ(d0.next.size(), 1u);
  EXPECT_EQ(d0.next[0].op, B(0, 1));
  EXPECT_FALSE(d0.next[0].timelineOp.has_value());
  ASSERT_EQ(d0.next[0].missing.size(), 1u);
  EXPECT_EQ(d0.next[0].missing[0].input, B(1, 1));
  EXPECT_EQ(d0.next[0].missing[0].status, InputStatus::Running);
  EXPECT_EQ(d0.next[0].missing[0].device, 1);
}

TEST(Stepper, HungRunShowsTheInputThatNeverArrived) {
  // The activation F(0,1) -> F(1,1) left device 0 and never arrived; nothing after ran.
  Timeline t = measured();
  t.ops = {t.ops[0], t.ops[1], t.ops[2], t.ops[4], t.ops[5]};
  t.transfers.push_back(transfer(0, 1, F(0, 1), F(1, 1), 2.0, std::numeric_limits<double>::infinity()));
  t.complete = false;
  Stepper s = make(t);
  StepState st = s.stopState();
  EXPECT_TRUE(st.stopped);
  EXPECT_DOUBLE_EQ(st.time, 7.4);
  const DeviceState& d1 = st.devices[1];
  EXPECT_TRUE(d1.blocked);
  ASSERT_EQ(d1.next.size(), 1u);
  EXPECT_EQ(d1.next[0].op, F(1, 1));
  ASSERT_EQ(d1.next[0].missing.size(), 1u);
  EXPECT_EQ(d1.next[0].missing[0].input, F(0, 1));
  EXPECT_EQ(d1.next[0].missing[0].status, InputStatus::InTransit);
  const DeviceState& d0 = st.devices[0];
  ASSERT_EQ(d0.next.size(), 1u);
  EXPECT_EQ(d0.next[0].op, B(0, 1));
  ASSERT_EQ(d0.next[0].missing.size(), 1u);
  EXPECT_EQ(d0.next[0].missing[0].input, B(1, 1));
  EXPECT_EQ(d0.next[0].missing[0].status, InputStatus::NeverRan);
  EXPECT_EQ(d0.next[0].missing[0].device, 1);  // where the plan puts stage 1
  EXPECT_EQ(st.transfersInAir.size(), 1u);
}

TEST(Stepper, OverlappedPairRunsAsTwoOpsAndZeroLengthOpsStartBeforeTheyEnd) {
  Schedule plan;
  plan.pipeline = Pipeline::make(1, 1, 2, PlacementKind::Linear).value();
  plan.devices = {{Step{F(0, 0)}, Step{F(0, 1), B(0, 0)}, Step{B(0, 1)}}};
  Timeline t;
  t.devices = 1;
  t.ops = {op(0, F(0, 0), 0, 0), TimelineOp{0, -1, F(0, 1), true, 0, 2},
           TimelineOp{0, -1, B(0, 0), true, 0, 2}, op(0, B(0, 1), 2, 3)};
  auto s = Stepper::make(t, plan);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->size(), 8u);
  EXPECT_EQ(s->events()[0].kind, StepEventKind::Start);
  EXPECT_EQ(s->events()[0].op, 0u);
  EXPECT_EQ(s->events()[3].kind, StepEventKind::End);  // F(0,0)'s zero-length end after the starts
  EXPECT_EQ(s->events()[3].op, 0u);
  StepState st = s->stateAt(1.0);
  EXPECT_EQ(st.devices[0].running.size(), 2u);
  ASSERT_EQ(st.devices[0].next.size(), 1u);
  EXPECT_EQ(st.devices[0].next[0].op, B(0, 1));

  StepState before = s->stateAfter(1);           // only F(0,0)'s start applied
  ASSERT_EQ(before.devices[0].next.size(), 2u);  // the pair is the next step
  EXPECT_EQ(before.devices[0].next[0].op, F(0, 1));
  EXPECT_EQ(before.devices[0].next[1].op, B(0, 0));
}

TEST(Stepper, RejectsTimelineWithMoreDevicesThanThePlan) {
  Timeline t = measured();
  t.ops.push_back(op(5, F(0, 0), 0, 1));
  auto s = Stepper::make(t, oneFOneB());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, "stepper.device");
}

TEST(Stepper, StalledSimulationOpensAtTheDeadlock) {
  // Device 1 runs F(1,1) first: it needs F(0,1), which device 0 runs only after B(0,0),
  // which needs B(1,0), queued on device 1 behind F(1,1).
  Schedule plan;
  plan.pipeline = Pipeline::make(2, 2, 2, PlacementKind::Linear).value();
  plan.devices = {{Step{F(0, 0)}, Step{B(0, 0)}, Step{F(0, 1)}, Step{B(0, 1)}},
                  {Step{F(1, 1)}, Step{F(1, 0)}, Step{B(1, 0)}, Step{B(1, 1)}}};
  auto model = makeSimulationModel(plan, uniformCostProfile("F=1,B=2", 2).value());
  ASSERT_TRUE(model.ok());
  auto sim = simulate(plan, *model);
  ASSERT_TRUE(sim.ok());
  ASSERT_FALSE(sim->complete);
  auto s = Stepper::make(*sim, plan);
  ASSERT_TRUE(s.ok());
  StepState st = s->stopState();
  EXPECT_TRUE(st.stopped);
  EXPECT_FALSE(st.diagnostics.empty());
  const DeviceState& d0 = st.devices[0];
  ASSERT_NO_FATAL_FAILURE(expectBlockedOn(d0, B(0, 0), B(1, 0), 1));
  EXPECT_EQ(d0.next[0].missing[0].status, InputStatus::NeverRan);
  ASSERT_NO_FATAL_FAILURE(expectBlockedOn(st.devices[1], F(1, 1), F(0, 1), 0));
}

TEST(Stepper, StateAtEveryPositionAgreesWithADirectCount) {
  // ZB-H1 on 4 devices with communication: the indexed state queries must give what a
  // direct pass over the events gives, at every position.
  Schedule plan = generatedSchedule(ScheduleKind::ZBH1, 4, 8);
  CostProfile p = uniformCostProfile("F=1,I=1,W=1", plan.pipeline.stages).value();
  p.fixedCommMs = 0.3;
  auto sim = simulate(plan, makeSimulationModel(plan, p).value());
  ASSERT_TRUE(sim.ok());
  ASSERT_FALSE(sim->transfers.empty());
  Stepper s = Stepper::make(*sim, plan).value();
  const Timeline& t = s.timeline();
  for (size_t pos = 0; pos <= s.size(); ++pos) {
    std::vector<char> started(t.ops.size(), 0), ended(t.ops.size(), 0);
    for (size_t k = 0; k < pos; ++k)
      (s.events()[k].kind == StepEventKind::Start ? started : ended)[s.events()[k].op] = 1;
    StepState st = s.stateAfter(pos);
    for (int d = 0; d < 4; ++d) {
      std::vector<size_t> running;
      size_t done = 0;
      std::vector<StageMicrobatch> inFlight;
      for (size_t i = 0; i < t.ops.size(); ++i) {
        if (t.ops[i].device != d) continue;
        if (started[i] && !ended[i]) running.push_back(i);
        if (ended[i]) ++done;
        if (t.ops[i].op.kind == OpKind::F && started[i]) {
          bool freed = false;
          for (size_t j = 0; j < t.ops.size(); ++j)
            if (ended[j] && (t.ops[j].op.kind == OpKind::I || t.ops[j].op.kind == OpKind::B) &&
                t.ops[j].op.stage == t.ops[i].op.stage && t.ops[j].op.microbatch == t.ops[i].op.microbatch)
              freed = true;
          if (!freed) inFlight.push_back(StageMicrobatch{t.ops[i].op.stage, t.ops[i].op.microbatch});
        }
      }
      std::sort(inFlight.begin(), inFlight.end(), [](const StageMicrobatch& a, const StageMicrobatch& b) {
        return std::tie(a.stage, a.microbatch) < std::tie(b.stage, b.microbatch);
      });
      const DeviceState& ds = st.devices[static_cast<size_t>(d)];
      std::vector<size_t> got = ds.running;
      std::sort(got.begin(), got.end());
      ASSERT_EQ(got, running) << "pos " << pos << " device " << d;
      ASSERT_EQ(ds.opsDone, done) << "pos " << pos << " device " << d;
      ASSERT_EQ(ds.inFlight, inFlight) << "pos " << pos << " device " << d;
      // Next step: the first in plan order whose first op has not started.
      std::optional<Op> next;
      for (const auto& step : plan.devices[static_cast<size_t>(d)]) {
        bool st0 = false;
        for (size_t i = 0; i < t.ops.size(); ++i)
          if (t.ops[i].op == step.first && started[i]) st0 = true;
        if (!st0) {
          next = step.first;
          break;
        }
      }
      if (next) {
        ASSERT_FALSE(ds.next.empty()) << "pos " << pos;
        ASSERT_EQ(ds.next[0].op, *next) << "pos " << pos << " device " << d;
      } else {
        ASSERT_TRUE(ds.next.empty());
      }
    }
    std::vector<size_t> air;
    for (size_t k = 0; k < t.transfers.size(); ++k)
      if (t.transfers[k].start <= st.time && st.time < t.transfers[k].end) air.push_back(k);
    ASSERT_EQ(st.transfersInAir, air) << "pos " << pos;
  }
}

TEST(Stepper, WaitingForAnInputOnItsWayIsNotStuck) {
  // A complete run: device 0 waits for B(1,0), which still runs at 3.0; nothing is stuck, it
  // is the pipeline's normal wait.
  Stepper s = make();
  StepState st = s.stateAt(3.0);
  EXPECT_TRUE(st.devices[0].blocked);
  EXPECT_FALSE(isStuck(st.devices[0], st));
  EXPECT_FALSE(isStuck(st.devices[1], st));  // running
  // At the start the last stage waits for its first activation: warm-up, not an error.
  StepState start = s.stateAfter(0);
  EXPECT_TRUE(start.devices[1].blocked);
  EXPECT_FALSE(isStuck(start.devices[1], start));

  // A hung run: where it stopped, every idle device lacking an input is stuck; before the stop
  // only the one whose input never ran is.
  Timeline t = measured();
  t.ops = {t.ops[0], t.ops[1], t.ops[2], t.ops[4], t.ops[5]};
  t.transfers.push_back(transfer(0, 1, F(0, 1), F(1, 1), 2.0, std::numeric_limits<double>::infinity()));
  t.complete = false;
  Stepper hung = make(t);
  StepState stop = hung.stopState();
  EXPECT_TRUE(isStuck(stop.devices[0], stop));
  EXPECT_TRUE(isStuck(stop.devices[1], stop));  // its input is in transit for ever
  StepState early = hung.stateAt(3.0);
  ASSERT_FALSE(early.stopped);
  EXPECT_TRUE(early.devices[0].blocked);  // waits for B(1,0), still running
  EXPECT_FALSE(isStuck(early.devices[0], early));
}
