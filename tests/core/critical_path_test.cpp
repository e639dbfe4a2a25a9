// Critical path and bubble attribution on a hand-built measured 1F1B timeline (2 devices,
// 2 micro-batches, F = 1 ms, stage 0's B = 2 ms, stage 1's B = 3 ms, 0.2 ms per hand-over):
//   dev0: F(0,0) [0,1]  F(0,1) [1,2]  B(0,0) [5.4,7.4]  B(0,1) [9.4,11.4]
//   dev1: F(1,0) [1.2,2.2]  B(1,0) [2.2,5.2]  F(1,1) [5.2,6.2]  B(1,1) [6.2,9.2]
#include "pipestudio/core/analysis/critical_path.h"

#include <gtest/gtest.h>

#include "fixtures/schedules.h"

using namespace ps::core;

namespace {

using namespace ps::test;

Timeline measured() {
  return measuredOneFOneB();
}

std::vector<Op> chain(const Timeline& t, const CriticalPath& cp) {
  std::vector<Op> out;
  for (const auto& s : cp.steps) out.push_back(t.ops[s.op].op);
  return out;
}

}  // namespace

TEST(CriticalPath, WalksBackThroughLatestDependencyOrDeviceOrder) {
  Timeline t = measured();
  CriticalPath cp = criticalPath(t, oneFOneB());
  // B(0,1) waited for B(1,1) (arrived 9.2, after B(0,0) ended at 7.4); B(1,1) for F(1,1);
  // F(1,1)'s input F(0,1) was there at 2, but device 1 was busy with B(1,0) until 5.2.
  std::vector<Op> expected = {F(0, 0), F(1, 0), B(1, 0), F(1, 1), B(1, 1), B(0, 1)};
  EXPECT_EQ(chain(t, cp), expected);
  ASSERT_EQ(cp.steps.size(), 6u);
  EXPECT_EQ(cp.steps[0].via, CriticalLink::Start);
  EXPECT_EQ(cp.steps[1].via, CriticalLink::Dependency);
  EXPECT_EQ(cp.steps[2].via, CriticalLink::Dependency);  // tie with device order: dependency wins
  EXPECT_EQ(cp.steps[3].via, CriticalLink::DeviceOrder);
  EXPECT_EQ(cp.steps[4].via, CriticalLink::Dependency);
  EXPECT_EQ(cp.steps[5].via, CriticalLink::Dependency);
  EXPECT_NEAR(cp.steps[1].waitMs, 0.2, 1e-12);
  EXPECT_NEAR(cp.steps[5].waitMs, 0.2, 1e-12);
  EXPECT_NEAR(cp.steps[3].waitMs, 0.0, 1e-12);
  EXPECT_DOUBLE_EQ(cp.start, 0.0);
  EXPECT_NEAR(cp.end, 11.4, 1e-12);
  EXPECT_NEAR(cp.computeMs, 11.0, 1e-12);
  EXPECT_NEAR(cp.waitMs, 0.4, 1e-12);
  EXPECT_NEAR(cp.computeMs + cp.waitMs + cp.transferMs, cp.end - cp.start, 1e-9);
  EXPECT_FALSE(cp.steps[1].transfer.has_value());
}

TEST(CriticalPath, TransfersCarryTheCrossDeviceLinks) {
  Timeline t = measured();
  t.transfers = {transfer(0, 1, F(0, 0), F(1, 0), 1.0, 1.2), transfer(0, 1, F(0, 1), F(1, 1), 2.0, 2.2),
                 transfer(1, 0, B(1, 0), B(0, 0), 5.2, 5.4), transfer(1, 0, B(1, 1), B(0, 1), 9.2, 9.4)};
  CriticalPath cp = criticalPath(t, oneFOneB());
  ASSERT_EQ(cp.steps.size(), 6u);
  ASSERT_TRUE(cp.steps[1].transfer.has_value());
  EXPECT_EQ(*cp.steps[1].transfer, 0u);
  ASSERT_TRUE(cp.steps[5].transfer.has_value());
  EXPECT_EQ(*cp.steps[5].transfer, 3u);
  EXPECT_NEAR(cp.transferMs, 0.4, 1e-12);
  EXPECT_NEAR(cp.waitMs, 0.0, 1e-12);
  EXPECT_NEAR(cp.steps[5].arrival, 9.4, 1e-12);
}

TEST(CriticalPath, SlowDeviceOrderChainWins) {
  // Device 0 runs a long F(0,1) so B(0,0) waits for its own device, not for stage 1.
  Timeline t = measured();
  t.ops[1].end = 8.0;    // F(0,1) [1, 8]
  t.ops[2].start = 8.0;  // B(0,0) [8, 10]
  t.ops[2].end = 10.0;
  t.ops[3].start = 10.0;  // B(0,1) [10, 12]
  t.ops[3].end = 12.0;
  CriticalPath cp = criticalPath(t, oneFOneB());
  std::vector<Op> expected = {F(0, 0), F(0, 1), B(0, 0), B(0, 1)};
  EXPECT_EQ(chain(t, cp), expected);
  EXPECT_EQ(cp.steps[1].via, CriticalLink::DeviceOrder);
  EXPECT_EQ(cp.steps[2].via, CriticalLink::DeviceOrder);
  EXPECT_EQ(cp.steps[3].via, CriticalLink::DeviceOrder);
}

TEST(CriticalPath, EmptyTimeline) {
  Timeline t;
  EXPECT_TRUE(criticalPath(t, oneFOneB()).steps.empty());
}

TEST(BubbleAttribution, EachGapNamesTheDependencyItWaitedOn) {
  Timeline t = measured();
  auto bubbles = attributeBubbles(t, oneFOneB());
  ASSERT_EQ(bubbles.size(), 2u);

  const DeviceBubbles& d0 = bubbles[0];
  EXPECT_NEAR(d0.idleMs, 11.4 - 6.0, 1e-9);
  ASSERT_EQ(d0.bubbles.size(), 4u);
  // [2, 5.2] waiting for B(1,0) on device 1, then [5.2, 5.4] with the input there.
  EXPECT_EQ(d0.bubbles[0].cause, BubbleCause::Dependency);
  EXPECT_NEAR(d0.bubbles[0].start, 2.0, 1e-12);
  EXPECT_NEAR(d0.bubbles[0].end, 5.2, 1e-12);
  EXPECT_EQ(d0.bubbles[0].waitedFor, B(1, 0));
  EXPECT_EQ(d0.bubbles[0].waitedOnDevice, 1);
  ASSERT_TRUE(d0.bubbles[0].before.has_value());
  EXPECT_EQ(t.ops[*d0.bubbles[0].before].op, B(0, 0));
  EXPECT_EQ(d0.bubbles[1].cause, BubbleCause::Unexplained);
  EXPECT_NEAR(d0.bubbles[1].duration(), 0.2, 1e-12);
  EXPECT_EQ(d0.bubbles[2].waitedFor, B(1, 1));
  EXPECT_NEAR(d0.bubbles[2].duration(), 9.2 - 7.4, 1e-12);
  EXPECT_NEAR(d0.dependencyMs, 3.2 + 1.8, 1e-9);
  EXPECT_NEAR(d0.unexplainedMs, 0.4, 1e-9);
  EXPECT_NEAR(d0.tailMs, 0.0, 1e-12);
  ASSERT_EQ(d0.waitedOn.size(), 1u);
  EXPECT_EQ(d0.waitedOn[0].device, 1);
  EXPECT_NEAR(d0.waitedOn[0].ms, 5.0, 1e-9);

  const DeviceBubbles& d1 = bubbles[1];
  // Warm-up [0, 1] waiting for F(0,0), [1, 1.2] unexplained, tail [9.2, 11.4].
  ASSERT_EQ(d1.bubbles.size(), 3u);
  EXPECT_EQ(d1.bubbles[0].cause, BubbleCause::Dependency);
  EXPECT_EQ(d1.bubbles[0].waitedFor, F(0, 0));
  EXPECT_EQ(d1.bubbles[0].waitedOnDevice, 0);
  EXPECT_NEAR(d1.bubbles[0].start, 0.0, 1e-12);
  EXPECT_NEAR(d1.bubbles[0].end, 1.0, 1e-12);
  EXPECT_EQ(d1.bubbles[2].cause, BubbleCause::Tail);
  EXPECT_NEAR(d1.tailMs, 2.2, 1e-9);
  EXPECT_NEAR(d1.idleMs, 11.4 - 8.0, 1e-9);
  EXPECT_NEAR(d1.dependencyMs + d1.unexplainedMs + d1.tailMs, d1.idleMs, 1e-9);
}

TEST(BubbleAttribution, HostSideCommunicationOpsDoNotSplitGaps) {
  // A torch.profiler trace has RECV_B as a short host range inside device 0's idle gap.
  Timeline t = measured();
  t.ops.push_back(op(0, Op{OpKind::RecvB, 0, 0}, 5.0, 5.02));
  auto bubbles = attributeBubbles(t, oneFOneB());
  const DeviceBubbles& d0 = bubbles[0];
  ASSERT_EQ(d0.bubbles.size(), 4u);
  EXPECT_NEAR(d0.bubbles[0].start, 2.0, 1e-12);
  EXPECT_NEAR(d0.bubbles[0].end, 5.2, 1e-12);
  EXPECT_NEAR(d0.idleMs, 5.4, 1e-9);
  CriticalPath cp = criticalPath(t, oneFOneB());
  EXPECT_EQ(cp.steps.size(), 6u);
}

TEST(BubbleAttribution, TransferArrivalExplainsTheWholeGap) {
  Timeline t = measured();
  t.transfers = {transfer(0, 1, F(0, 0), F(1, 0), 1.0, 1.2)};
  auto bubbles = attributeBubbles(t, oneFOneB());
  const DeviceBubbles& d1 = bubbles[1];
  ASSERT_GE(d1.bubbles.size(), 1u);
  EXPECT_EQ(d1.bubbles[0].cause, BubbleCause::Dependency);
  EXPECT_NEAR(d1.bubbles[0].end, 1.2, 1e-12);
  ASSERT_TRUE(d1.bubbles[0].transfer.has_value());
  EXPECT_NEAR(d1.unexplainedMs, 0.0, 1e-12);
}

TEST(BubbleAttribution, OverlappedPairAndCopyStreamOps) {
  // One device: F(0,0) [0,1], an overlapped pair (F(0,1), B(0,0)) [1,3], an OFFLOAD on the
  // copy stream [3,4] that leaves compute idle, B(0,1) [5,6].
  Schedule s;
  s.pipeline = Pipeline::make(1, 1, 2, PlacementKind::Linear).value();
  s.devices = {{Step{F(0, 0)}, Step{F(0, 1), B(0, 0)}, Step{Op{OpKind::Offload, 0, 1}},
                Step{Op{OpKind::Reload, 0, 1}}, Step{B(0, 1)}}};
  Timeline t;
  t.devices = 1;
  t.ops = {op(0, F(0, 0), 0, 1),
           TimelineOp{0, -1, F(0, 1), true, 1, 3},
           TimelineOp{0, -1, B(0, 0), true, 1, 3},
           op(0, Op{OpKind::Offload, 0, 1}, 3, 3.5),
           op(0, Op{OpKind::Reload, 0, 1}, 4, 4.8),
           op(0, B(0, 1), 5, 6)};
  auto bubbles = attributeBubbles(t, s);
  ASSERT_EQ(bubbles.size(), 1u);
  const DeviceBubbles& d = bubbles[0];
  EXPECT_NEAR(d.idleMs, 2.0, 1e-12);  // [3, 5]: offload/reload don't keep compute busy
  ASSERT_EQ(d.bubbles.size(), 2u);
  EXPECT_EQ(d.bubbles[0].cause, BubbleCause::Dependency);
  EXPECT_EQ(d.bubbles[0].waitedFor.kind, OpKind::Reload);
  EXPECT_NEAR(d.bubbles[0].end, 4.8, 1e-12);
  EXPECT_EQ(d.bubbles[1].cause, BubbleCause::Unexplained);

  CriticalPath cp = criticalPath(t, s);
  std::vector<Op> expected = {F(0, 0), F(0, 1), Op{OpKind::Offload, 0, 1}, Op{OpKind::Reload, 0, 1}, B(0, 1)};
  EXPECT_EQ(chain(t, cp), expected);
}
