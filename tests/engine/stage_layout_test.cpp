// How the engine lays a schedule's stages on the model (engine/src/run/stage_layout.h): the
// layers each stage runs, the copy of its block it holds, the routes' ends, and the devices
// that exchange tensors, for a plain pipeline and for DualPipe's two directions.
#include "../../engine/src/run/stage_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "fixtures/schedules.h"

namespace {

using ps::core::Schedule;
using ps::core::ScheduleKind;
using ps::engine::detail::StageLayout;

using ps::test::generatedSchedule;

bool linked(const std::vector<std::pair<int, int>>& pairs, int a, int b) {
  return std::find(pairs.begin(), pairs.end(), std::make_pair(a, b)) != pairs.end();
}

TEST(StageLayout, APlainPipelineRunsItsPartitionInOrderAndLinksNeighbours) {
  const Schedule s = generatedSchedule(ScheduleKind::OneFOneB, 4, 8);
  const StageLayout layout(s.pipeline, 8, {2, 3, 3, 4});
  const std::vector<std::pair<int, int>> layers{{0, 2}, {2, 5}, {5, 8}, {8, 12}};
  for (int st = 0; st < 4; ++st) {
    EXPECT_EQ(layout.layerBegin(st), layers[static_cast<size_t>(st)].first) << st;
    EXPECT_EQ(layout.layerEnd(st), layers[static_cast<size_t>(st)].second) << st;
    EXPECT_EQ(layout.copyIndex(st), 0);
    EXPECT_EQ(layout.blockStagesOf(st), std::vector<int>{st});
  }
  EXPECT_EQ(layout.copies(), 0u);
  EXPECT_EQ(layout.lossStages(), std::vector<int>{3});
  for (int m = 0; m < 8; ++m) EXPECT_EQ(layout.routeStart(m), 0);
  const std::vector<std::pair<int, int>> expected{{0, 1}, {1, 0}, {1, 2}, {2, 1}, {2, 3}, {3, 2}};
  EXPECT_EQ(layout.linkedDevices(), expected);
}

TEST(StageLayout, DualPipeRunsEveryBlockTwiceAndLinksTheDevicesOfBothCopies) {
  const Schedule s = generatedSchedule(ScheduleKind::DualPipe, 4, 8);
  const auto& p = s.pipeline;
  ASSERT_FALSE(p.stageBlock.empty());
  std::vector<int> partition(static_cast<size_t>(p.blocks()), 2);
  const StageLayout layout(p, 8, partition);
  EXPECT_EQ(layout.copies(), 1u);
  const auto pairs = layout.linkedDevices();
  EXPECT_TRUE(std::is_sorted(pairs.begin(), pairs.end()));
  std::set<int> starts;
  for (int st = 0; st < p.stages; ++st) {
    const auto& stages = layout.blockStagesOf(st);
    ASSERT_EQ(stages.size(), 2u) << st;
    // The first of a block's stages runs the model itself, the second its copy; both run the
    // block's layers.
    EXPECT_EQ(layout.copyIndex(st), st == stages[0] ? 0 : 1);
    EXPECT_EQ(layout.layerBegin(st), layout.layerBegin(stages[0]));
    EXPECT_EQ(layout.layerEnd(st) - layout.layerBegin(st), 2);
    const int a = p.deviceOf(stages[0]), b = p.deviceOf(stages[1]);
    if (a != b) {
      EXPECT_TRUE(linked(pairs, a, b) && linked(pairs, b, a)) << st;
    }
  }
  // Two directions: two routes, each with its own first and last stage.
  for (int m = 0; m < 8; ++m) starts.insert(layout.routeStart(m));
  EXPECT_EQ(starts.size(), 2u);
  EXPECT_EQ(layout.lossStages().size(), 2u);
  for (int st : layout.lossStages()) EXPECT_EQ(starts.count(st), 0u);
  // Every hop of a route is a link, both ways.
  for (int m = 0; m < 8; ++m)
    for (int st = layout.routeStart(m); layout.routes().next(st, m) >= 0; st = layout.routes().next(st, m)) {
      const int a = p.deviceOf(st), b = p.deviceOf(layout.routes().next(st, m));
      if (a != b) {
        EXPECT_TRUE(linked(pairs, a, b) && linked(pairs, b, a));
      }
    }
}

}  // namespace
