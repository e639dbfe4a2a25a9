// The search's objective (makespan or steady-state iteration time), its tie-breaking and what
// it reports about candidates it could not build.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fixtures/profiles.h"
#include "pipestudio/core/analysis/iterations.h"
#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/planning/generators.h"
#include "pipestudio/core/planning/partition_search.h"
#include "pipestudio/core/planning/search.h"
#include "pipestudio/core/planning/zb_greedy.h"

using namespace ps::core;

namespace {

using ps::test::uniformLayers;

// A heavier last layer (an LM head), per-layer costs that differ.
CostProfile headHeavy(int layers) {
  CostProfile p = uniformLayers(layers);
  p.name = "head-heavy";
  for (int k = 0; k < layers; ++k) {
    auto& l = p.layers[static_cast<size_t>(k)];
    const double scale = k == layers - 1 ? 3.0 : 1.0 + 0.1 * (k % 3);
    l.forwardMs = 1.0 * scale;
    l.backwardInputMs = 1.1 * scale;
    l.backwardWeightMs = 0.8 * scale;
  }
  p.link.latencyMs = 0.05;
  return p;
}

SearchOptions steadyOptions(int D, int M) {
  return SearchOptions{.devices = D,
                       .microbatches = M,
                       .timeLimitSeconds = 60,
                       .maxEvaluations = 250,
                       .randomSamples = 40,
                       .localImprovementRounds = 30,
                       .objective = SearchObjective::SteadyState,
                       .boundary = IterationBoundary::Overlap};
}

// Three iterations of `s` under a memory limit (an error when the model cannot be built).
Result<IterationResult> threeIterations(const Schedule& s, const CostProfile& p, std::int64_t limit) {
  PS_ASSIGN_OR_RETURN(auto model, makeSimulationModel(s, p));
  IterationOptions io;
  io.iterations = 3;
  io.simulation.memoryLimitBytes = limit;
  return simulateIterations(s, model, io);
}

}  // namespace

TEST(SearchObjective, Names) {
  EXPECT_EQ(searchObjectiveFromName("steady-state"), SearchObjective::SteadyState);
  EXPECT_EQ(searchObjectiveFromName("makespan"), SearchObjective::Makespan);
  EXPECT_FALSE(searchObjectiveFromName("fast"));
  EXPECT_EQ(searchObjectiveName(SearchObjective::SteadyState), "steady-state");
}

// On the steady-state objective the search's best is never worse than any built-in measured
// the same way (K iterations, overlap boundary), and its figure is what simulateIterations
// gives for the returned schedule.
TEST(SearchObjective, SteadyStateNeverWorseThanAnyBuiltin) {
  for (auto [profile, D, M, limit] :
       {std::tuple{uniformLayers(8), 4, 8, std::int64_t{0}},
        std::tuple{headHeavy(16), 4, 12, std::int64_t{0}},
        std::tuple{headHeavy(16), 4, 16, std::int64_t{3200 + 3 * 4000 + 500}}}) {
    SearchOptions o = steadyOptions(D, M);
    if (limit) o.memoryLimitBytes = limit;
    auto r = searchSchedule(profile, o);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->objective, SearchObjective::SteadyState);
    EXPECT_GT(r->bestSummary.steadyStateMs, 0);
    EXPECT_DOUBLE_EQ(r->bestSummary.objective, r->bestSummary.steadyStateMs);
    int compared = 0;
    for (const auto& b : r->builtins) {
      if (!b.valid || !b.fitsMemory) continue;
      ++compared;
      EXPECT_GT(b.steadyStateMs, 0) << b.name;
      EXPECT_LE(r->bestSummary.steadyStateMs, b.steadyStateMs + 1e-9) << b.name;
    }
    EXPECT_GE(compared, 3);
    // Recompute the best's steady state independently.
    auto model = makeSimulationModel(r->best, profile);
    ASSERT_TRUE(model.ok());
    IterationOptions io;
    io.iterations = r->iterations;
    io.boundary = IterationBoundary::Overlap;
    io.simulation.memoryLimitBytes = o.memoryLimitBytes;
    auto it = simulateIterations(r->best, *model, io);
    ASSERT_TRUE(it.ok());
    EXPECT_NEAR(it->steadyStateMs, r->bestSummary.steadyStateMs, 1e-9);
    if (limit) {
      EXPECT_LE(it->peakMemoryBytes, limit);
    }
  }
}

// Uniform costs, 4 devices, 8 micro-batches, no memory limit: ZB-H2's zero-bubble spans make
// 3m = 24 ms per iteration reachable, and nothing can do better than the busiest device's work.
TEST(SearchObjective, UniformCostsReachZeroBubbleInSteadyState) {
  auto r = searchSchedule(uniformLayers(4), steadyOptions(4, 8));
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->bestSummary.steadyStateMs, 24.0, 1e-9);
  // The makespan objective on the same inputs pays the start-up of 3 forwards with one copy of
  // the model; DualPipe, with two, pays DeepSeek's bubble (D/2 - 1)(F&B + B - 3W) = 2 instead.
  SearchOptions m = steadyOptions(4, 8);
  m.objective = SearchObjective::Makespan;
  auto rm = searchSchedule(uniformLayers(4), m);
  ASSERT_TRUE(rm.ok());
  EXPECT_NEAR(rm->bestSummary.makespan, 26.0, 1e-9);
  EXPECT_EQ(rm->bestSummary.name, "dualpipe");
  EXPECT_DOUBLE_EQ(rm->bestSummary.objective, rm->bestSummary.makespan);
  m.allowRoutes = false;
  auto one = searchSchedule(uniformLayers(4), m);
  ASSERT_TRUE(one.ok());
  EXPECT_NEAR(one->bestSummary.makespan, 27.0, 1e-9);
}

TEST(SearchObjective, DeterministicForASeed) {
  SearchOptions o = steadyOptions(4, 12);
  o.seed = 7;
  auto a = searchSchedule(headHeavy(16), o);
  auto b = searchSchedule(headHeavy(16), o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->evaluated, b->evaluated);
  EXPECT_EQ(a->bestSummary.name, b->bestSummary.name);
  EXPECT_DOUBLE_EQ(a->bestSummary.steadyStateMs, b->bestSummary.steadyStateMs);
  EXPECT_EQ(a->best, b->best);
  ASSERT_EQ(a->top.size(), b->top.size());
  for (size_t i = 0; i < a->top.size(); ++i) EXPECT_EQ(a->top[i].name, b->top[i].name);
}

TEST(SearchObjective, CandidateOrderBreaksTiesByMemoryThenBubble) {
  CandidateSummary a, b;
  a.objective = b.objective = 10.0;
  a.peakMemoryBytes = 500;
  b.peakMemoryBytes = 400;
  EXPECT_TRUE(candidateBefore(b, a));
  EXPECT_FALSE(candidateBefore(a, b));
  b.peakMemoryBytes = 500;
  a.bubbleRatio = 0.2;
  b.bubbleRatio = 0.1;
  EXPECT_TRUE(candidateBefore(b, a));
  a.objective = 9.0;  // the objective comes first
  EXPECT_TRUE(candidateBefore(a, b));
  a.objective = 10.0 + 1e-12;  // equal within the tolerance: memory decides
  a.bubbleRatio = 0.1;
  a.peakMemoryBytes = 100;
  EXPECT_TRUE(candidateBefore(a, b));
}

// Many candidates reach the same makespan on uniform costs; among them the search keeps and
// ranks the ones needing less memory first, and the best is the leanest of its time.
TEST(SearchObjective, EqualTimesAreOrderedByPeakMemory) {
  for (auto objective : {SearchObjective::Makespan, SearchObjective::SteadyState}) {
    SearchOptions o = steadyOptions(4, 8);
    o.objective = objective;
    o.keepTop = 12;
    auto r = searchSchedule(uniformLayers(8), o);
    ASSERT_TRUE(r.ok());
    int ties = 0;
    for (size_t i = 1; i < r->top.size(); ++i) {
      const auto& p = r->top[i - 1];
      const auto& c = r->top[i];
      ASSERT_LE(p.objective, c.objective + 1e-9);
      if (std::abs(p.objective - c.objective) <= 1e-9) {
        ++ties;
        EXPECT_LE(p.peakMemoryBytes, c.peakMemoryBytes) << p.name << " before " << c.name;
      }
    }
    EXPECT_GT(ties, 0) << "no equal-time candidates to order";
    for (const auto& c : r->top)
      if (std::abs(c.objective - r->bestSummary.objective) <= 1e-9) {
        EXPECT_LE(r->bestSummary.peakMemoryBytes, c.peakMemoryBytes);
      }
  }
}

// Without a host bandwidth the copies of an offload would take no time: the search does not
// consider offload and says so.
TEST(SearchObjective, NoHostBandwidthMeansNoOffload) {
  CostProfile p = headHeavy(16);
  p.hostBandwidthBytesPerMs = 0;
  SearchOptions o = steadyOptions(4, 16);
  o.objective = SearchObjective::Makespan;
  o.memoryLimitBytes = 3200 + 2 * 4000 + 500;  // static + 2.1 stashes of 4 layers: keeping all does not fit
  auto r = searchSchedule(p, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_FALSE(r->notes.empty());
  EXPECT_NE(r->notes.front().find("host bandwidth"), std::string::npos);
  for (const auto& c : r->top)
    for (auto pol : c.policies) EXPECT_NE(pol, ActivationPolicy::Offload) << c.name;
  for (auto pol : r->bestSummary.policies) EXPECT_NE(pol, ActivationPolicy::Offload);
}

// Zero Bubble's greedy, as the search uses it: with F = I = W = 1 on 4 devices and a limit of
// 2p activations it finds the zero-bubble order (every span 3m = 24 ms); with p activations
// (1F1B's memory) device 0 must wait p - 1 for its first gradient as in ZB-H1 (27 ms). Both
// stay within the limit in the simulator.
TEST(SearchObjective, ZeroBubbleGreedyReachesTheKnownSpans) {
  const int D = 4, M = 8;
  CostProfile p = uniformLayers(D);
  auto costs = stageCosts(p, D);
  ASSERT_TRUE(costs.ok());
  for (auto [acts, span] : {std::pair{2 * D, 24.0}, std::pair{D, 27.0}}) {
    const std::int64_t limit = (*costs)[0].staticBytes + acts * 1000;
    double best = 1e9;
    for (int v = 0; v < 8; ++v) {
      detail::ZbGreedyFlags fl{(v & 1) != 0, (v & 2) != 0, (v & 4) != 0};
      auto s = detail::zbGreedySchedule(detail::zbGreedyInput(*costs, p, limit), M, fl);
      if (!s) continue;
      auto it = threeIterations(*s, p, limit);
      ASSERT_TRUE(it.ok() && it->complete);
      EXPECT_LE(it->peakMemoryBytes, limit);
      best = std::min(best, it->maxFirstSpan);
    }
    EXPECT_DOUBLE_EQ(best, span) << acts << " activations";
  }
}

// Its ZB-V greedy on a V of two stages per device, F = I = W = 1 per stage, 4 devices, 8
// micro-batches, within 1F1B's memory (4 activations of both chunks): every device is busy
// 2 x 3 x 8 = 48 ms without a gap, so a long run pays 48 ms per iteration.
TEST(SearchObjective, ZbvGreedyReachesZeroBubbleWithinOneFOneBMemory) {
  const int D = 4, M = 8;
  CostProfile p = uniformLayers(2 * D);
  auto costs = stageCosts(p, 2 * D);
  ASSERT_TRUE(costs.ok());
  const std::int64_t limit = 2 * (*costs)[0].staticBytes + D * 2 * 1000;
  double best = 1e9;
  for (int v = 0; v < 4; ++v) {
    auto s = detail::zbvGreedySchedule(*costs, p, limit, M, v & 1, v & 2);
    if (!s) continue;
    EXPECT_EQ(s->pipeline.placementKind, PlacementKind::VShape);
    auto it = threeIterations(*s, p, limit);
    ASSERT_TRUE(it.ok() && it->complete);
    EXPECT_LE(it->peakMemoryBytes, limit);
    best = std::min(best, it->steadyStateMs);
  }
  EXPECT_DOUBLE_EQ(best, 2.0 * 3 * M);
}

// The partition planner offers offload only with a host bandwidth: with one, a stage whose
// activations do not fit is offloaded (its copies hide behind compute); without one the same
// stage recomputes instead of offloading for free.
TEST(SearchObjective, PartitionPlanOffloadsOnlyWithAHostBandwidth) {
  PartitionOptions o;
  o.stages = 4;
  o.inflightPerStage = {6, 6, 6, 6};
  o.allowRecompute = true;
  o.allowOffload = true;
  // Static 4 x 800 bytes per stage of 4 layers, 4000 bytes of activations per micro-batch:
  // offload needs 3 stashes, keeping 6 does not fit.
  o.memoryLimitBytes = 3200 + 3 * 4000 + 100;
  CostProfile with = uniformLayers(16, true);
  with.hostBandwidthBytesPerMs = 1e9;
  auto a = partitionBisection(with, o);
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_NE(std::count(a->policies.begin(), a->policies.end(), ActivationPolicy::Offload), 0);
  auto b = partitionBisection(uniformLayers(16, false), o);
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(std::count(b->policies.begin(), b->policies.end(), ActivationPolicy::Offload), 0);
  EXPECT_NE(std::count(b->policies.begin(), b->policies.end(), ActivationPolicy::Recompute), 0);
}
