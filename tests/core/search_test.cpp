#include "pipestudio/core/planning/search.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "fixtures/profiles.h"
#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/analysis/validator.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/planning/generators.h"
#include "pipestudio/core/planning/model_zoo_hetero.h"

using namespace ps::core;

namespace {

// A small model whose last layer is three times as heavy as the others (an LM head).
CostProfile headHeavy(int layers) {
  return ps::test::lmHeadLayers(layers);
}

SearchOptions smallOptions(int D, int M) {
  SearchOptions o;
  o.devices = D;
  o.microbatches = M;
  o.timeLimitSeconds = 20;
  o.maxEvaluations = 60;
  o.localImprovementRounds = 20;
  o.seed = 7;
  return o;
}

double bestFeasibleBuiltin(const SearchResult& r) {
  double best = 1e300;
  for (auto& b : r.builtins)
    if (b.valid && b.fitsMemory) best = std::min(best, b.makespan);
  return best;
}

Timeline resimulate(const CostProfile& p, const Schedule& s, std::optional<std::int64_t> limit = {}) {
  auto model = makeSimulationModel(s, p, s.partition);
  EXPECT_TRUE(model.ok());
  SimulationOptions so;
  so.memoryLimitBytes = limit;
  auto tl = simulate(s, *model, so);
  EXPECT_TRUE(tl.ok());
  return *tl;
}

}  // namespace

TEST(Search, ResultIsValidAndNeverWorseThanTheBuiltins) {
  CostProfile p = headHeavy(12);
  auto r = searchSchedule(p, smallOptions(4, 8));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(validateSchedule(r->best).valid());
  EXPECT_FALSE(r->builtins.empty());
  const double builtin = bestFeasibleBuiltin(*r);
  ASSERT_LT(builtin, 1e300);
  EXPECT_LE(r->bestSummary.makespan, builtin + 1e-9);
  // The summary is what the simulator says about the schedule returned.
  Timeline tl = resimulate(p, r->best);
  ASSERT_TRUE(tl.complete);
  EXPECT_NEAR(tl.metrics.makespan, r->bestSummary.makespan, 1e-9);
  // Partition and placement travel in the schedule's header.
  int sum = 0;
  for (int c : r->best.partition) sum += c;
  EXPECT_EQ(sum, 12);
  // Layers per block: per stage, except that DualPipe's two copies of a block share theirs.
  EXPECT_EQ(static_cast<int>(r->best.partition.size()), r->best.pipeline.blocks());
}

TEST(Search, BeatsInterleavedOneFOneBOnAUniformSplitOfAHeadHeavyModel) {
  // Megatron's interleaved 1F1B with equal layer counts puts the heavy last layer's stage
  // and another on one device; the search re-balances the split.
  CostProfile p = headHeavy(12);
  p.layers.back().forwardMs = 4;
  p.layers.back().backwardInputMs = 4;
  p.layers.back().backwardWeightMs = 4;
  const int D = 2, M = 8;
  auto ref = generateSchedule(ScheduleKind::Interleaved1F1B, GeneratorOptions{D, M, 2});
  ASSERT_TRUE(ref.ok());
  auto refModel = makeSimulationModel(*ref, p, uniformPartition(12, 4));
  ASSERT_TRUE(refModel.ok());
  auto refTl = simulate(*ref, *refModel);
  ASSERT_TRUE(refTl.ok() && refTl->complete);
  SearchOptions o = smallOptions(D, M);
  o.maxEvaluations = 150;
  auto r = searchSchedule(p, o);
  ASSERT_TRUE(r.ok());
  EXPECT_LT(r->bestSummary.makespan, 0.9 * refTl->metrics.makespan);
}

TEST(Search, DeterministicForASeed) {
  CostProfile p = headHeavy(10);
  SearchOptions o = smallOptions(3, 6);
  auto a = searchSchedule(p, o);
  auto b = searchSchedule(p, o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->best, b->best);
  EXPECT_EQ(a->bestSummary.name, b->bestSummary.name);
  EXPECT_EQ(a->evaluated, b->evaluated);
}

TEST(Search, RespectsTheMemoryLimit) {
  CostProfile p = headHeavy(8);
  // Static 800 / 4 devices = 200 per device (x 8 for gradients and Adam) = 1600 bytes;
  // activations 2000 per stage-micro-batch with two layers per stage.
  const std::int64_t limit = 1600 + 2 * 2000 + 500;
  SearchOptions o = smallOptions(4, 8);
  o.memoryLimitBytes = limit;
  auto r = searchSchedule(p, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  Timeline tl = resimulate(p, r->best, limit);
  ASSERT_TRUE(tl.complete);
  for (auto& d : tl.metrics.devices) EXPECT_LE(d.peakMemoryBytes, limit);
  EXPECT_TRUE(validateSchedule(r->best).valid());
  // Plain 1F1B holds up to 4 micro-batches on device 0 and does not fit.
  auto oneF = std::find_if(r->builtins.begin(), r->builtins.end(), [](auto& b) { return b.name == "1f1b"; });
  ASSERT_NE(oneF, r->builtins.end());
  EXPECT_FALSE(oneF->fitsMemory);
}

TEST(Search, FullSearchUnderAMemoryLimitIsDeterministicAndFits) {
  // Every phase runs to its end (no evaluation cap): grid with recompute-on-demand twins,
  // runner-up knob samples, alternating policy and partition refinement, order refinement.
  CostProfile p = headHeavy(8);
  const std::int64_t limit = 1600 + 2 * 2000 + 500;
  SearchOptions o;
  o.devices = 4;
  o.microbatches = 4;
  o.memoryLimitBytes = limit;
  o.timeLimitSeconds = 60;
  o.randomSamples = 12;
  o.localImprovementRounds = 10;
  o.seed = 3;
  auto a = searchSchedule(p, o);
  auto b = searchSchedule(p, o);
  ASSERT_TRUE(a.ok() && b.ok()) << (a.ok() ? "" : a.error().message);
  EXPECT_FALSE(a->timedOut);
  EXPECT_EQ(a->best, b->best);
  EXPECT_EQ(a->bestSummary.name, b->bestSummary.name);
  EXPECT_EQ(a->evaluated, b->evaluated);
  Timeline tl = resimulate(p, a->best, limit);
  ASSERT_TRUE(tl.complete);
  EXPECT_NEAR(tl.metrics.makespan, a->bestSummary.makespan, 1e-9);
  for (auto& d : tl.metrics.devices) EXPECT_LE(d.peakMemoryBytes, limit);
  EXPECT_TRUE(validateSchedule(a->best).valid());
  EXPECT_LE(a->bestSummary.makespan, bestFeasibleBuiltin(*a) + 1e-9);
  // The best candidates are distinct, feasible and sorted, and each keeps its schedule: what
  // the simulator says of it is what the list says (the GUI opens any of them as a design).
  ASSERT_FALSE(a->top.empty());
  EXPECT_NEAR(a->top.front().makespan, a->bestSummary.makespan, 1e-9);
  for (size_t i = 0; i < a->top.size(); ++i) {
    EXPECT_TRUE(a->top[i].fitsMemory);
    if (i) {
      EXPECT_LE(a->top[i - 1].makespan, a->top[i].makespan);
    }
    ASSERT_TRUE(a->top[i].schedule) << a->top[i].name;
    Timeline t = resimulate(p, *a->top[i].schedule, limit);
    ASSERT_TRUE(t.complete) << a->top[i].name;
    EXPECT_NEAR(t.metrics.makespan, a->top[i].makespan, 1e-9) << a->top[i].name;
  }
}

TEST(Search, CancelReturnsTheBestSoFarQuickly) {
  CostProfile p = headHeavy(12);
  std::atomic<bool> cancel{true};
  SearchOptions o = smallOptions(4, 8);
  o.maxEvaluations = 0;
  o.cancel = &cancel;
  auto r = searchSchedule(p, o);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->cancelled);
  // Only the built-ins (and their recompute variants) ran.
  EXPECT_LE(r->evaluated, 2 * r->builtins.size());
  EXPECT_TRUE(validateSchedule(r->best).valid());
}

TEST(Search, ReportsProgress) {
  CostProfile p = headHeavy(8);
  std::vector<SearchProgress> seen;
  SearchOptions o = smallOptions(2, 4);
  o.progress = [&](const SearchProgress& pr) { seen.push_back(pr); };
  auto r = searchSchedule(p, o);
  ASSERT_TRUE(r.ok());
  ASSERT_FALSE(seen.empty());
  for (size_t i = 1; i < seen.size(); ++i) {
    EXPECT_GE(seen[i].evaluated, seen[i - 1].evaluated);
    if (seen[i - 1].bestMakespan > 0) {
      EXPECT_LE(seen[i].bestMakespan, seen[i - 1].bestMakespan + 1e-9);
    }
  }
  EXPECT_EQ(seen.back().evaluated, r->evaluated);
  EXPECT_NEAR(seen.back().bestMakespan, r->bestSummary.makespan, 1e-9);
}

TEST(Search, RejectsBadSizes) {
  SearchOptions o = smallOptions(0, 4);
  EXPECT_FALSE(searchSchedule(headHeavy(4), o).ok());
  o = smallOptions(8, 4);
  EXPECT_FALSE(searchSchedule(headHeavy(4), o).ok());  // fewer layers than devices
}

TEST(Search, UniformPartitionSpreadsTheRemainderFirst) {
  EXPECT_EQ(uniformPartition(10, 4), (std::vector<int>{3, 3, 2, 2}));
  EXPECT_TRUE(uniformPartition(3, 4).empty());
}

// ---- heterogeneous model zoo -----------------------------------------------------------

TEST(HeterogeneousZoo, ModelsHaveTheirCharacteristicLayers) {
  auto gemma = gemmaStyleProfile("gemma-2b");
  ASSERT_EQ(gemma.layers.size(), 20u);  // embedding + 18 blocks + LM head
  const auto& head = gemma.layers.back();
  const auto& block = gemma.layers[5];
  // 256k vocabulary: the LM head outweighs several blocks, in time and in stashed logits.
  EXPECT_GT(head.forwardMs, 3 * block.forwardMs);
  EXPECT_GT(head.activationBytes, block.activationBytes);
  EXPECT_GT(gemma.layers.front().weightBytes, 4 * block.weightBytes);

  auto ds = deepseekStyleProfile();
  ASSERT_EQ(ds.layers.size(), 29u);
  // MoE layers: far more weight than the dense layer's compute would suggest (sharded experts).
  EXPECT_NE(ds.layers[1].name, ds.layers[2].name);
  EXPECT_GT(ds.layers[2].weightBytes, ds.layers[1].weightBytes);

  auto nh = nemotronHStyleProfile();
  ASSERT_EQ(nh.layers.size(), 54u);
  double minF = 1e9, maxF = 0;
  for (size_t i = 1; i + 1 < nh.layers.size(); ++i) {
    minF = std::min(minF, nh.layers[i].forwardMs);
    maxF = std::max(maxF, nh.layers[i].forwardMs);
  }
  EXPECT_GT(maxF, 2 * minF);  // Mamba-2, attention and MLP layers differ

  auto llama = llama2Profile();
  ASSERT_EQ(llama.layers.size(), 34u);
  EXPECT_DOUBLE_EQ(llama.layers[3].forwardMs, llama.layers[20].forwardMs);
}

TEST(HeterogeneousZoo, ResourceFilesMatchTheGenerator) {
  for (const CostProfile& p : heterogeneousZoo()) {
    const std::string path = std::string(PIPESTUDIO_RESOURCES_DIR) + "/profiles/" + p.name + ".json";
    std::ifstream in(path);
    ASSERT_TRUE(in.good()) << path;
    std::stringstream ss;
    ss << in.rdbuf();
    auto parsed = parseCostProfile(ss.str(), path);
    ASSERT_TRUE(parsed.ok()) << parsed.error().message;
    ASSERT_EQ(parsed->layers.size(), p.layers.size()) << path;
    for (size_t i = 0; i < p.layers.size(); ++i) {
      EXPECT_NEAR(parsed->layers[i].forwardMs, p.layers[i].forwardMs, 1e-6 * p.layers[i].forwardMs + 1e-12);
      EXPECT_EQ(parsed->layers[i].activationBytes, p.layers[i].activationBytes);
      EXPECT_EQ(parsed->layers[i].weightBytes, p.layers[i].weightBytes);
    }
  }
}
