#include "pipestudio/core/planning/partition_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/analysis/validator.h"
#include "pipestudio/core/planning/generators.h"

using namespace ps::core;

namespace {

// Layers with varied times and bytes; seeded so failures reproduce.
CostProfile randomProfile(std::uint64_t seed, int layers) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> t(0.5, 4.0);
  std::uniform_int_distribution<int> act(10, 100), w(5, 40);
  CostProfile p;
  p.name = "random" + std::to_string(seed);
  p.optimizerBytesPerWeightByte = 2;
  p.gradientBytesPerWeightByte = 1;
  for (int i = 0; i < layers; ++i) {
    LayerCost l;
    l.name = "L" + std::to_string(i);
    l.forwardMs = t(rng);
    l.backwardInputMs = t(rng);
    l.backwardWeightMs = t(rng);
    l.activationBytes = act(rng) * 1000;
    l.weightBytes = w(rng) * 1000;
    l.outputBytes = 2000;
    p.layers.push_back(l);
  }
  p.hostBandwidthBytesPerMs = 20000;
  return p;
}

std::int64_t peakOf(const Timeline& t) {
  std::int64_t peak = 0;
  for (auto& d : t.metrics.devices) peak = std::max(peak, d.peakMemoryBytes);
  return peak;
}

}  // namespace

TEST(PartitionBisection, MatchesBruteForceWithoutMemoryLimit) {
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    const int layers = 5 + static_cast<int>(seed % 5);
    CostProfile p = randomProfile(seed, layers);
    for (int stages = 2; stages <= 4; ++stages) {
      PartitionOptions o;
      o.stages = stages;
      o.memoryLimitBytes = 0;
      auto bis = partitionBisection(p, o);
      auto bf = partitionBruteForce(p, o);
      ASSERT_TRUE(bis.ok()) << bis.error().message;
      ASSERT_TRUE(bf.ok()) << bf.error().message;
      EXPECT_NEAR(bis->bottleneckMs, bf->bottleneckMs, 1e-6 * bf->bottleneckMs)
          << "seed " << seed << " S " << stages;
      int sum = 0;
      for (int c : bis->layersPerStage) {
        EXPECT_GE(c, 1);
        sum += c;
      }
      EXPECT_EQ(sum, layers);
      EXPECT_EQ(static_cast<int>(bis->layersPerStage.size()), stages);
    }
  }
}

TEST(PartitionBisection, MatchesBruteForceUnderMemoryLimits) {
  int feasibleCases = 0, constrainedCases = 0;
  for (std::uint64_t seed = 20; seed <= 40; ++seed) {
    const int layers = 6 + static_cast<int>(seed % 4);
    CostProfile p = randomProfile(seed, layers);
    for (int stages = 2; stages <= 4; ++stages) {
      for (std::int64_t limit : {250'000LL, 400'000LL, 700'000LL}) {
        for (bool opt : {false, true}) {
          PartitionOptions o;
          o.stages = stages;
          o.microbatches = 8;
          o.memoryLimitBytes = limit;
          o.allowRecompute = opt;
          o.allowOffload = opt;
          auto bis = partitionBisection(p, o);
          auto bf = partitionBruteForce(p, o);
          ASSERT_EQ(bis.ok(), bf.ok()) << "seed " << seed << " S " << stages << " limit " << limit;
          if (!bf.ok()) continue;
          ++feasibleCases;
          EXPECT_NEAR(bis->bottleneckMs, bf->bottleneckMs, 1e-6 * bf->bottleneckMs)
              << "seed " << seed << " S " << stages << " limit " << limit << " opt " << opt;
          for (auto& sp : bis->stages) EXPECT_LE(sp.peakBytes, limit);
          if (std::any_of(bis->policies.begin(), bis->policies.end(),
                          [](auto x) { return x != ActivationPolicy::Keep; }))
            ++constrainedCases;
        }
      }
    }
  }
  // The sweep must exercise both fitting plans and plans that need recompute or offload.
  EXPECT_GT(feasibleCases, 20);
  EXPECT_GT(constrainedCases, 5);
}

TEST(PartitionBisection, ReportsTheLayerThatCannotFit) {
  CostProfile p = randomProfile(3, 6);
  p.layers[2].weightBytes = 10'000'000;  // static bytes alone exceed the limit
  PartitionOptions o;
  o.stages = 3;
  o.memoryLimitBytes = 1'000'000;
  auto r = partitionBisection(p, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "partition.no-fit");
  EXPECT_NE(r.error().message.find("layer 2"), std::string::npos) << r.error().message;
}

TEST(PartitionBisection, RejectsMoreStagesThanLayers) {
  PartitionOptions o;
  o.stages = 7;
  auto r = partitionBisection(randomProfile(1, 4), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "partition.stages");
}

// The plan's memory model must be confirmed by the simulator: build 1F1B over the plan's
// stages, add its recompute / offload ops and simulate under the same limit.
TEST(PartitionBisection, MemoryPlansFitInTheSimulator) {
  int plansWithOptimisations = 0;
  bool usedRecompute = false, usedOffload = false;
  for (std::uint64_t seed = 50; seed <= 65; ++seed) {
    CostProfile p = randomProfile(seed, 10);
    const int S = 4, M = 8;
    for (std::int64_t limit : {300'000LL, 450'000LL, 650'000LL}) {
      PartitionOptions o;
      o.stages = S;
      o.microbatches = M;
      o.memoryLimitBytes = limit;
      auto plan = partitionBisection(p, o);
      if (!plan) continue;
      auto s = generateSchedule(ScheduleKind::OneFOneB, GeneratorOptions{S, M, 0});
      ASSERT_TRUE(s.ok());
      auto withOps = applyActivationPolicies(*s, plan->policies);
      ASSERT_TRUE(withOps.ok());
      ASSERT_TRUE(validateSchedule(*withOps).valid());
      auto model = makeSimulationModel(*withOps, p, plan->layersPerStage);
      ASSERT_TRUE(model.ok()) << model.error().message;
      SimulationOptions so;
      so.memoryLimitBytes = limit;
      auto tl = simulate(*withOps, *model, so);
      ASSERT_TRUE(tl.ok());
      ASSERT_TRUE(tl->complete);
      for (auto& d : tl->metrics.devices) {
        EXPECT_LE(d.peakMemoryBytes, limit) << "seed " << seed << " device " << d.device;
        EXPECT_LE(d.peakMemoryBytes, plan->stages[static_cast<size_t>(d.device)].peakBytes)
            << "planner must not under-estimate, seed " << seed << " device " << d.device;
      }
      const bool optimised = std::any_of(plan->policies.begin(), plan->policies.end(),
                                         [](auto x) { return x != ActivationPolicy::Keep; });
      for (auto x : plan->policies) {
        usedRecompute = usedRecompute || x == ActivationPolicy::Recompute;
        usedOffload = usedOffload || x == ActivationPolicy::Offload;
      }
      if (optimised) {
        ++plansWithOptimisations;
        // Without the plan's recompute / offload, the same split overflows.
        auto plain = simulate(*s, *makeSimulationModel(*s, p, plan->layersPerStage), so);
        ASSERT_TRUE(plain.ok());
        EXPECT_GT(peakOf(*plain), limit);
      }
    }
  }
  EXPECT_GT(plansWithOptimisations, 3);
  // Both memory optimisations are exercised against the simulator.
  EXPECT_TRUE(usedRecompute);
  EXPECT_TRUE(usedOffload);
}

TEST(PartitionBisection, LargestMicrobatchSizeBeatsKeepOnlyBalancedSplit) {
  CostProfile p = randomProfile(7, 12);
  PartitionOptions o;
  o.stages = 4;
  o.microbatches = 8;
  o.memoryLimitBytes = 2'000'000;
  auto best = largestMicrobatchSize(p, o, 256);
  PartitionOptions plain = o;
  plain.allowRecompute = plain.allowOffload = false;
  auto base = largestMicrobatchSizeFixed(p, {}, plain, 256);
  ASSERT_GE(base.largestMicrobatchSize, 1);
  EXPECT_GE(best.largestMicrobatchSize, 2 * base.largestMicrobatchSize);
  ASSERT_TRUE(best.plan.has_value());
  // One more does not fit.
  PartitionOptions next = o;
  next.microbatchSize = best.largestMicrobatchSize + 1;
  EXPECT_FALSE(partitionBisection(p, next).ok());
  // And the plan at the largest size fits in the simulator with the scaled profile.
  CostProfile scaled = scaleMicrobatchSize(p, best.largestMicrobatchSize);
  auto s = generateSchedule(ScheduleKind::OneFOneB, GeneratorOptions{4, 8, 0});
  ASSERT_TRUE(s.ok());
  auto withOps = applyActivationPolicies(*s, best.plan->policies);
  ASSERT_TRUE(withOps.ok());
  SimulationOptions so;
  so.memoryLimitBytes = *o.memoryLimitBytes;
  auto tl = simulate(*withOps, *makeSimulationModel(*withOps, scaled, best.plan->layersPerStage), so);
  ASSERT_TRUE(tl.ok());
  EXPECT_TRUE(tl->complete);
  EXPECT_LE(peakOf(*tl), *o.memoryLimitBytes);
}

TEST(PartitionBisection, ScalingMultipliesTimesAndActivationsNotWeights) {
  CostProfile p = randomProfile(5, 3);
  CostProfile s = scaleMicrobatchSize(p, 4);
  for (size_t i = 0; i < p.layers.size(); ++i) {
    EXPECT_DOUBLE_EQ(s.layers[i].forwardMs, 4 * p.layers[i].forwardMs);
    EXPECT_EQ(s.layers[i].activationBytes, 4 * p.layers[i].activationBytes);
    EXPECT_EQ(s.layers[i].outputBytes, 4 * p.layers[i].outputBytes);
    EXPECT_EQ(s.layers[i].weightBytes, p.layers[i].weightBytes);
  }
}

TEST(ApplyActivationPolicies, InsertsRecomputeAndOffloadOpsInValidPlaces) {
  auto s = generateSchedule(ScheduleKind::OneFOneB, GeneratorOptions{4, 8, 0});
  ASSERT_TRUE(s.ok());
  std::vector<ActivationPolicy> pol = {ActivationPolicy::Offload, ActivationPolicy::Recompute,
                                       ActivationPolicy::Keep, ActivationPolicy::Keep};
  auto r = applyActivationPolicies(*s, pol);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(validateSchedule(*r).valid());
  EXPECT_EQ(r->opCount(), s->opCount() + 8 * 3);  // 8 OFFLOAD + 8 RELOAD on stage 0, 8 R on stage 1
  const auto& d1 = r->devices[1];
  for (size_t i = 0; i < d1.size(); ++i)
    if (d1[i].first.kind == OpKind::B) {
      ASSERT_GT(i, 0u);
      EXPECT_EQ(d1[i - 1].first.kind, OpKind::R);
      EXPECT_EQ(d1[i - 1].first.microbatch, d1[i].first.microbatch);
    }
  // A size mismatch is an error, not a crash.
  EXPECT_FALSE(applyActivationPolicies(*s, {ActivationPolicy::Keep}).ok());
}
