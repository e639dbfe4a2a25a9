#include "pipestudio/core/model/timeline.h"

#include <gtest/gtest.h>

using namespace ps::core;

namespace {

TimelineOp op(int device, int step, OpKind k, int stage, int mb, double start, double end,
              bool pair = false) {
  return TimelineOp{device, step, Op{k, stage, mb}, pair, start, end};
}

}  // namespace

TEST(TimelineMetrics, MakespanBusySpanAndBubble) {
  Timeline t;
  t.devices = 2;
  // Device 0: [1,3] and [4,6]; device 1: an overlapped pair [2,5] counted once, and [5,7].
  t.ops = {op(0, 0, OpKind::F, 0, 0, 1, 3), op(0, 1, OpKind::B, 0, 0, 4, 6),
           op(1, 0, OpKind::F, 1, 1, 2, 5, true), op(1, 0, OpKind::B, 1, 0, 2, 5, true),
           op(1, 1, OpKind::B, 1, 1, 5, 7)};
  TimelineMetrics m = computeMetrics(t);
  EXPECT_DOUBLE_EQ(m.makespan, 6);  // 1 .. 7
  EXPECT_EQ(m.ops, 5u);
  ASSERT_EQ(m.devices.size(), 2u);
  EXPECT_DOUBLE_EQ(m.devices[0].busy, 4);
  EXPECT_DOUBLE_EQ(m.devices[0].span(), 5);
  EXPECT_DOUBLE_EQ(m.devices[1].busy, 5);
  EXPECT_DOUBLE_EQ(m.devices[1].span(), 5);
  EXPECT_DOUBLE_EQ(m.lowerBound, 5);
  EXPECT_DOUBLE_EQ(m.bubbleRatio, 1 - 9.0 / 12.0);
  EXPECT_DOUBLE_EQ(m.efficiency, 5.0 / 6.0);
}

TEST(TimelineMetrics, CopyStreamOpsCountTowardsSpanNotBusy) {
  Timeline t;
  t.devices = 1;
  t.ops = {op(0, 0, OpKind::F, 0, 0, 0, 1), op(0, 1, OpKind::Offload, 0, 0, 1, 3),
           op(0, 2, OpKind::F, 0, 1, 1, 2)};
  TimelineMetrics m = computeMetrics(t);
  EXPECT_DOUBLE_EQ(m.devices[0].busy, 2);
  EXPECT_DOUBLE_EQ(m.devices[0].span(), 3);
}

TEST(TimelineMetrics, MemoryPeakAndTheOpRunningThen) {
  Timeline t;
  t.devices = 1;
  t.ops = {op(0, 0, OpKind::F, 0, 0, 0, 1), op(0, 1, OpKind::F, 0, 1, 1, 2), op(0, 2, OpKind::B, 0, 0, 2, 4),
           op(0, 3, OpKind::B, 0, 1, 4, 6)};
  t.memory = {{{0, 10}, {0, 20}, {1, 30}, {4, 20}, {6, 10}}};
  TimelineMetrics m = computeMetrics(t);
  EXPECT_EQ(m.devices[0].staticBytes, 10);
  EXPECT_EQ(m.devices[0].peakMemoryBytes, 30);
  EXPECT_DOUBLE_EQ(m.devices[0].peakMemoryTime, 1);
  EXPECT_EQ(m.devices[0].peakMemoryOp.step, 1);  // F1 starts at the peak
  EXPECT_EQ(m.devices[0].peakInflightMicrobatches, 2);
}

TEST(TimelineMetrics, InflightCountsFirstForwardToLastBackward) {
  // Two stages on one device: micro-batch 0 is in flight from its first F to its last B/I;
  // W does not keep it in flight.
  Timeline t;
  t.devices = 1;
  t.ops = {op(0, 0, OpKind::F, 0, 0, 0, 1), op(0, 1, OpKind::F, 1, 0, 1, 2), op(0, 2, OpKind::I, 1, 0, 2, 3),
           op(0, 3, OpKind::F, 0, 1, 3, 4), op(0, 4, OpKind::I, 0, 0, 4, 5), op(0, 5, OpKind::F, 0, 2, 5, 6),
           op(0, 6, OpKind::W, 0, 0, 6, 7)};
  TimelineMetrics m = computeMetrics(t);
  EXPECT_EQ(m.devices[0].peakInflightMicrobatches, 2);  // mb 0 and 1 during [3, 5)
}

TEST(TimelineMetrics, EmptyTimeline) {
  Timeline t;
  t.devices = 3;
  TimelineMetrics m = computeMetrics(t);
  EXPECT_EQ(m.devices.size(), 3u);
  EXPECT_DOUBLE_EQ(m.makespan, 0);
  EXPECT_DOUBLE_EQ(m.bubbleRatio, 0);
  EXPECT_EQ(m.ops, 0u);
}
