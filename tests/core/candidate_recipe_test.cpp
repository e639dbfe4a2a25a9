// Search candidates carry a recipe; rebuildCandidate turns it back into the very schedule the
// search simulated, for every family (built-ins, list scheduler, Zero Bubble greedy, local moves).
#include <gtest/gtest.h>

#include <set>

#include "pipestudio/core/planning/search.h"

using namespace ps::core;

namespace {

// Eight layers with a heavy last one (an LM head), memory tight enough for recompute to matter.
CostProfile headHeavy() {
  CostProfile p;
  p.name = "head-heavy";
  p.link.latencyMs = 0.05;
  for (int k = 0; k < 8; ++k) {
    const double t = k == 7 ? 3.0 : 1.0;
    p.layers.push_back(LayerCost{.name = "L" + std::to_string(k),
                                 .forwardMs = t,
                                 .backwardInputMs = t,
                                 .backwardWeightMs = t,
                                 .activationBytes = 1000,
                                 .weightBytes = 100,
                                 .outputBytes = 10});
  }
  return p;
}

SearchResult search(const CostProfile& p, std::optional<std::int64_t> limit) {
  SearchOptions o;
  o.devices = 4;
  o.microbatches = 4;
  o.memoryLimitBytes = limit;
  o.timeLimitSeconds = 60;
  o.randomSamples = 8;
  o.localImprovementRounds = 10;
  o.keepTop = 100000;  // keep every distinct feasible candidate with its schedule
  o.seed = 3;
  auto r = searchSchedule(p, o);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : SearchResult{};
}

}  // namespace

TEST(CandidateRecipe, EveryKeptCandidateRebuildsToTheIdenticalSchedule) {
  const CostProfile p = headHeavy();
  std::set<CandidateSource> sources;
  bool sawMoves = false, sawOnDemand = false;
  for (std::optional<std::int64_t> limit :
       {std::optional<std::int64_t>{}, std::optional<std::int64_t>{1600 + 2 * 2000 + 500}}) {
    const SearchResult r = search(p, limit);
    ASSERT_FALSE(r.top.empty());
    for (const CandidateSummary& c : r.top) {
      ASSERT_TRUE(c.schedule) << c.name;
      auto s = rebuildCandidate(p, c.recipe);
      ASSERT_TRUE(s.ok()) << c.name << ": " << (s.ok() ? "" : s.error().message);
      EXPECT_EQ(*s, *c.schedule) << c.name;
      sources.insert(c.recipe.source);
      sawMoves = sawMoves || !c.recipe.moves.empty();
      sawOnDemand = sawOnDemand ||
                    (c.recipe.source == CandidateSource::ListScheduler && c.recipe.list.recomputeOnDemand);
    }
    auto best = rebuildCandidate(p, r.bestSummary.recipe);
    ASSERT_TRUE(best.ok());
    EXPECT_EQ(*best, r.best);
  }
  // The searches above reach every family the recipe describes.
  EXPECT_TRUE(sources.count(CandidateSource::Builtin));
  EXPECT_TRUE(sources.count(CandidateSource::ListScheduler));
  EXPECT_TRUE(sources.count(CandidateSource::ZbGreedy));
  EXPECT_TRUE(sources.count(CandidateSource::ZbvGreedy));
  EXPECT_TRUE(sawMoves);
  EXPECT_TRUE(sawOnDemand);
}

TEST(CandidateRecipe, BuiltinsRebuildFromTheirRecipeWithoutTheirName) {
  const CostProfile p = headHeavy();
  const SearchResult r = search(p, 1600 + 2 * 2000 + 500);
  int rebuilt = 0;
  for (CandidateSummary c : r.builtins) {
    if (!c.valid) continue;
    c.name = "renamed";  // display text is not part of the recipe
    auto s = rebuildCandidate(p, c.recipe);
    ASSERT_TRUE(s.ok()) << c.family;
    EXPECT_EQ(s->partition, c.partition);
    EXPECT_EQ(s->pipeline.devices, 4);
    EXPECT_EQ(s->pipeline.microbatches, 4);
    ++rebuilt;
  }
  EXPECT_GT(rebuilt, 3);
}

TEST(CandidateRecipe, RecipesThatDoNotFitAreErrorsNotCrashes) {
  const CostProfile p = headHeavy();
  CandidateRecipe r;
  r.source = CandidateSource::ListScheduler;
  r.devices = 4;
  r.microbatches = 4;
  r.partition = {2, 2, 2, 2};
  ASSERT_TRUE(rebuildCandidate(p, r).ok());
  r.moves.push_back({1, 0, 99});
  auto out = rebuildCandidate(p, r);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message.find("device 1"), std::string::npos) << out.error().message;
  r.moves = {{9, 0, 0}};
  EXPECT_FALSE(rebuildCandidate(p, r).ok());
  r.moves.clear();
  r.partition = {3, 3, 3, 3};  // 12 layers of an 8-layer profile
  EXPECT_FALSE(rebuildCandidate(p, r).ok());
  r.partition = {2, 2, 2, 2};
  r.source = CandidateSource::ZbvGreedy;  // needs a V-shape with two stages per device
  EXPECT_FALSE(rebuildCandidate(p, r).ok());
}

TEST(CandidateRecipe, KnobsTextSaysTheListSchedulerKnobs) {
  CandidateRecipe r;
  r.source = CandidateSource::ListScheduler;
  r.devices = 4;
  r.list.maxPendingW = 2;
  r.list.warmupOffset = 1;
  EXPECT_EQ(recipeKnobsText(r), "I/W, pending W 2, warm-up +1, group 4");
  r.list.splitBackward = false;
  r.list.warmupDepth = {4, 3};
  r.list.microbatchGroup = 1;
  EXPECT_EQ(recipeKnobsText(r), "B, warm-up 4 3, group 1");
  r.source = CandidateSource::Builtin;
  EXPECT_EQ(recipeKnobsText(r), "");
}
