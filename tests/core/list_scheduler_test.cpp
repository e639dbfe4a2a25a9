#include <gtest/gtest.h>

#include <algorithm>

#include "fixtures/profiles.h"
#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/analysis/validator.h"
#include "pipestudio/core/planning/generators.h"
#include "pipestudio/core/planning/search.h"

using namespace ps::core;

namespace {

CostProfile uniformLayers(int layers, double f, double i, double w) {
  CostProfile p = ps::test::uniformLayers(layers, false);
  for (LayerCost& l : p.layers) {
    l.forwardMs = f;
    l.backwardInputMs = i;
    l.backwardWeightMs = w;
  }
  return p;
}

struct Built {
  Schedule schedule;
  Timeline timeline;
};

Built build(const CostProfile& p, const Pipeline& pl, const ListSchedulerOptions& o) {
  auto costs = stageCosts(p, pl.stages);
  EXPECT_TRUE(costs.ok());
  auto s = listSchedule(pl, *costs, p, o);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  auto model = makeSimulationModel(*s, p);
  EXPECT_TRUE(model.ok());
  SimulationOptions so;
  so.memoryLimitBytes = o.memoryLimitBytes;
  auto tl = simulate(*s, *model, so);
  EXPECT_TRUE(tl.ok());
  return {*s, *tl};
}

double simulateMakespan(const Schedule& s, const CostProfile& p) {
  auto tl = simulate(s, *makeSimulationModel(s, p));
  EXPECT_TRUE(tl.ok() && tl->complete);
  return tl->metrics.makespan;
}

// Every device's peak stays within `limit`.
void expectWithin(const Built& b, std::int64_t limit) {
  for (auto& d : b.timeline.metrics.devices) EXPECT_LE(d.peakMemoryBytes, limit) << d.device;
}

// Most cases: four devices, eight micro-batches, one stage of F = I = W = 1 ms per device (a
// case of other sizes declares its own D, M, p and pl).
class ListScheduler : public ::testing::Test {
 protected:
  const int D = 4, M = 8;
  CostProfile p = uniformLayers(D, 1.0, 1.0, 1.0);
  Result<Pipeline> pl = Pipeline::make(D, D, M, PlacementKind::Linear);
};

}  // namespace

TEST_F(ListScheduler, FullBackwardOnUniformStagesMatchesOneFOneB) {
  ASSERT_TRUE(pl.ok());
  ListSchedulerOptions o;
  o.splitBackward = false;
  Built b = build(p, *pl, o);
  EXPECT_TRUE(validateSchedule(b.schedule).valid());
  ASSERT_TRUE(b.timeline.complete);
  // 1F1B's makespan with F = 1, B = 2 and free links: (M + D - 1) x (F + B).
  EXPECT_NEAR(b.timeline.metrics.makespan, (M + D - 1) * 3.0, 1e-9);
  auto ref = generateSchedule(ScheduleKind::OneFOneB, GeneratorOptions{D, M, 0});
  ASSERT_TRUE(ref.ok());
  EXPECT_NEAR(b.timeline.metrics.makespan, simulateMakespan(*ref, p), 1e-9);
  // 1F1B depth: device d holds at most D - d micro-batches.
  for (auto& d : b.timeline.metrics.devices) EXPECT_LE(d.peakInflightMicrobatches, D - d.device);
}

TEST_F(ListScheduler, SplitBackwardFillsBubblesWithWeightGradients) {
  ASSERT_TRUE(pl.ok());
  ListSchedulerOptions full;
  full.splitBackward = false;
  ListSchedulerOptions split;
  split.splitBackward = true;
  Built a = build(p, *pl, full), b = build(p, *pl, split);
  ASSERT_TRUE(b.timeline.complete);
  EXPECT_TRUE(validateSchedule(b.schedule).valid());
  EXPECT_LT(b.timeline.metrics.makespan, a.timeline.metrics.makespan - 0.5);
  // Not below the busiest device's work.
  EXPECT_GE(b.timeline.metrics.makespan, b.timeline.metrics.lowerBound - 1e-9);
  // Every (stage, micro-batch) has one I and one W.
  size_t iCount = 0, wCount = 0;
  for (auto& dev : b.schedule.devices)
    for (auto& st : dev) {
      iCount += st.first.kind == OpKind::I;
      wCount += st.first.kind == OpKind::W;
    }
  EXPECT_EQ(iCount, static_cast<size_t>(D * M));
  EXPECT_EQ(wCount, static_cast<size_t>(D * M));
}

TEST_F(ListScheduler, InterleavedAndVShapePlacementsGiveValidOrders) {
  CostProfile p = uniformLayers(2 * D, 1.0, 1.0, 1.0);
  for (PlacementKind k : {PlacementKind::Interleaved, PlacementKind::VShape}) {
    auto pl = Pipeline::make(D, 2 * D, M, k);
    ASSERT_TRUE(pl.ok());
    for (bool split : {false, true}) {
      ListSchedulerOptions o;
      o.splitBackward = split;
      Built b = build(p, *pl, o);
      EXPECT_TRUE(validateSchedule(b.schedule).valid()) << placementKindName(k);
      EXPECT_TRUE(b.timeline.complete) << placementKindName(k);
    }
  }
}

TEST_F(ListScheduler, RecomputeStagesGetARecomputeBeforeEachBackward) {
  const int D = 3, M = 6;
  CostProfile p = uniformLayers(D, 1.0, 1.0, 1.0);
  auto pl = Pipeline::make(D, D, M, PlacementKind::Linear);
  ASSERT_TRUE(pl.ok());
  ListSchedulerOptions o;
  o.policies = {ActivationPolicy::Recompute, ActivationPolicy::Keep, ActivationPolicy::Keep};
  Built b = build(p, *pl, o);
  EXPECT_TRUE(validateSchedule(b.schedule).valid());
  ASSERT_TRUE(b.timeline.complete);
  int rCount = 0;
  for (auto& st : b.schedule.devices[0]) rCount += st.first.kind == OpKind::R;
  EXPECT_EQ(rCount, M);
  // Only the stage input stays per micro-batch on device 0: its peak is well under keeping.
  ListSchedulerOptions keep;
  Built k = build(p, *pl, keep);
  EXPECT_LT(b.timeline.metrics.devices[0].peakMemoryBytes, k.timeline.metrics.devices[0].peakMemoryBytes);
}

TEST_F(ListScheduler, MemoryHeadroomLimitsForwardsInFlight) {
  ASSERT_TRUE(pl.ok());
  // Static 100 x 8 = 800 bytes per device; room for two activations of 1000.
  ListSchedulerOptions o;
  o.splitBackward = false;
  o.warmupOffset = 4;  // a deep warm-up that only the memory check holds back
  o.memoryLimitBytes = 800 + 2 * 1000;
  Built b = build(p, *pl, o);
  ASSERT_TRUE(b.timeline.complete);
  expectWithin(b, *o.memoryLimitBytes);
}

TEST_F(ListScheduler, RecomputeOnDemandRebuildsOnlyTheForwardsThatDoNotFit) {
  ASSERT_TRUE(pl.ok());
  // Static 800 bytes per device; room for three activations of 1000: two kept plus the room
  // for one rebuild. 1F1B holds four micro-batches on device 0, one on the last device.
  ListSchedulerOptions o;
  o.recomputeOnDemand = true;
  o.memoryLimitBytes = 800 + 3 * 1000;
  Built b = build(p, *pl, o);
  EXPECT_TRUE(validateSchedule(b.schedule).valid());
  ASSERT_TRUE(b.timeline.complete);
  expectWithin(b, *o.memoryLimitBytes);
  auto rebuilds = [](const Schedule& s, int d) {
    int n = 0;
    for (auto& st : s.devices[static_cast<size_t>(d)]) n += st.first.kind == OpKind::R;
    return n;
  };
  EXPECT_GT(rebuilds(b.schedule, 0), 0);      // four in flight do not fit
  EXPECT_LT(rebuilds(b.schedule, 0), M);      // but not every micro-batch is rebuilt
  EXPECT_EQ(rebuilds(b.schedule, D - 1), 0);  // one in flight always fits
  // Each rebuild comes before its backward on the device.
  for (auto& dev : b.schedule.devices)
    for (size_t i = 0; i < dev.size(); ++i)
      if (dev[i].first.kind == OpKind::R) {
        auto later = std::find_if(dev.begin() + static_cast<long>(i), dev.end(), [&](auto& st) {
          return st.first.kind == OpKind::I && st.first.stage == dev[i].first.stage &&
                 st.first.microbatch == dev[i].first.microbatch;
        });
        EXPECT_NE(later, dev.end());
      }
  // Fewer rebuilds than recomputing every stage, and no slower.
  ListSchedulerOptions full;
  full.memoryLimitBytes = o.memoryLimitBytes;
  full.policies.assign(static_cast<size_t>(D), ActivationPolicy::Recompute);
  Built f = build(p, *pl, full);
  ASSERT_TRUE(f.timeline.complete);
  int onDemand = 0, all = 0;
  for (int d = 0; d < D; ++d) {
    onDemand += rebuilds(b.schedule, d);
    all += rebuilds(f.schedule, d);
  }
  EXPECT_EQ(all, D * M);
  EXPECT_LT(onDemand, all);
  EXPECT_LE(b.timeline.metrics.makespan, f.timeline.metrics.makespan + 1e-9);
}

TEST_F(ListScheduler, RejectsMismatchedStageCosts) {
  auto pl = Pipeline::make(2, 2, 2, PlacementKind::Linear);
  ASSERT_TRUE(pl.ok());
  CostProfile p = uniformLayers(2, 1, 1, 1);
  auto r = listSchedule(*pl, std::vector<StageCost>(3), p, {});
  EXPECT_FALSE(r.ok());
}
