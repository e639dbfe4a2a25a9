// Where each device stands during a run (engine/src/run/device_positions.h), as a hang's
// post-mortem reads it: the step entered, the wait for a peer's output with the step of the
// schedule that sends it, how the wait ended, and the finish.
#include "../../engine/src/run/device_positions.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "fixtures/schedules.h"

namespace {

using ps::core::Op;
using ps::core::OpKind;
using ps::core::Schedule;
using ps::core::ScheduleKind;
using ps::core::StuckDevice;
using ps::engine::detail::DevicePositions;

using ps::test::generatedSchedule;

// The step of `device`'s order that runs `op` (-1 if none).
int stepOf(const Schedule& s, int device, const Op& op) {
  const auto& steps = s.devices[static_cast<size_t>(device)];
  for (size_t i = 0; i < steps.size(); ++i)
    if (steps[i].first == op || (steps[i].second && *steps[i].second == op)) return static_cast<int>(i);
  return -1;
}

TEST(DevicePositions, AWaitNamesTheStepThatSendsAndHowLongItLasted) {
  const Schedule s = generatedSchedule(ScheduleKind::OneFOneB, 2, 4);
  DevicePositions positions;
  positions.reset(s, 2);
  const Op b00{OpKind::B, 0, 0};
  const int step = stepOf(s, 0, b00);
  ASSERT_GE(step, 0);
  positions.enterStep(0, step, b00);
  positions.enterStep(1, 0, Op{OpKind::F, 1, 0});
  // Device 0's B of micro-batch 0 waits for the gradient device 1's B sends.
  const Op producer{OpKind::B, 1, 0};
  positions.startWait(0, 1, producer);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));

  StuckDevice d = positions.stuck(0);
  EXPECT_EQ(d.device, 0);
  EXPECT_EQ(d.state, StuckDevice::State::Waiting);
  EXPECT_EQ(d.step, step);
  EXPECT_EQ(d.action, "0B0");
  EXPECT_EQ(d.waitsOnDevice, 1);
  EXPECT_EQ(d.waitsFor, "1B0");
  EXPECT_EQ(d.waitsForStep, stepOf(s, 1, producer));
  EXPECT_GE(d.seconds, 0.025);

  // Device 1 is in a step and waits for nothing.
  const StuckDevice other = positions.stuck(1);
  EXPECT_EQ(other.state, StuckDevice::State::Running);
  EXPECT_EQ(other.action, "1F0");

  // A wait that ended without its data keeps its place, and its length stops growing.
  positions.endWait(0, false);
  const double frozen = positions.stuck(0).seconds;
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  d = positions.stuck(0);
  EXPECT_EQ(d.state, StuckDevice::State::Waiting);
  EXPECT_DOUBLE_EQ(d.seconds, frozen);

  // With its data, the device runs its step again; then finishes; then, between iterations,
  // stands nowhere.
  positions.startWait(0, 1, producer);
  positions.endWait(0, true);
  EXPECT_EQ(positions.stuck(0).state, StuckDevice::State::Running);
  positions.finish(0);
  EXPECT_EQ(positions.stuck(0).state, StuckDevice::State::Finished);
  positions.clear(0);
  d = positions.stuck(0);
  EXPECT_EQ(d.state, StuckDevice::State::Running);
  EXPECT_EQ(d.step, -1);
  EXPECT_TRUE(d.action.empty());
}

TEST(DevicePositions, AGradientOfASplitBackwardComesFromTheInputGradientStep) {
  // Zero Bubble splits B into I and W: the gradient a stage waits for is sent by the next
  // stage's I, which is where the post-mortem must point.
  const Schedule s = generatedSchedule(ScheduleKind::ZBH1, 2, 4);
  ASSERT_LT(stepOf(s, 1, Op{OpKind::B, 1, 0}), 0);
  const Op i10{OpKind::I, 1, 0};
  ASSERT_GE(stepOf(s, 1, i10), 0);
  DevicePositions positions;
  positions.reset(s, 2);
  positions.enterStep(0, stepOf(s, 0, Op{OpKind::I, 0, 0}), Op{OpKind::I, 0, 0});
  positions.startWait(0, 1, Op{OpKind::B, 1, 0});
  const StuckDevice d = positions.stuck(0);
  EXPECT_EQ(d.waitsFor, "1I0");
  EXPECT_EQ(d.waitsForStep, stepOf(s, 1, i10));
}

TEST(DevicePositions, AWaitForWhatNoStepSendsKeepsTheProducerAndNoStep) {
  const Schedule s = generatedSchedule(ScheduleKind::OneFOneB, 2, 2);
  DevicePositions positions;
  positions.reset(s, 2);
  positions.enterStep(1, 0, Op{OpKind::F, 1, 0});
  positions.startWait(1, 0, Op{OpKind::F, 0, 7});  // micro-batch 7 is not in the schedule
  const StuckDevice d = positions.stuck(1);
  EXPECT_EQ(d.state, StuckDevice::State::Waiting);
  EXPECT_EQ(d.waitsFor, "0F7");
  EXPECT_EQ(d.waitsForStep, -1);
}

}  // namespace
