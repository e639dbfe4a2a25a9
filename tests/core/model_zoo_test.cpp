#include "pipestudio/core/planning/model_zoo.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

using namespace ps::core;

namespace {

TransformerConfig small() {
  TransformerConfig c;
  c.name = "small";
  c.layers = 3, c.hidden = 16, c.heads = 4, c.seqLength = 8, c.vocab = 100, c.microbatchSize = 2;
  c.gpuTflops = 1, c.computeEfficiency = 1, c.hbmGBps = 1e9, c.linkGBps = 10, c.memoryGiB = 1;
  return c;
}

}  // namespace

TEST(ModelZoo, BlockFlopsAndActivationsFollowTheFormulas) {
  auto est = transformerLayerEstimates(small());
  ASSERT_EQ(est.size(), 5u);  // embedding, 3 blocks, LM head
  EXPECT_EQ(est.front().name, "embedding");
  EXPECT_EQ(est[1].name, "block0");
  EXPECT_EQ(est.back().name, "lm_head");
  const double b = 2, s = 8, h = 16, a = 4;
  const LayerEstimate& blk = est[2];
  EXPECT_DOUBLE_EQ(blk.forwardFlops, 24 * b * s * h * h + 4 * b * s * s * h);
  EXPECT_DOUBLE_EQ(blk.backwardInputFlops + blk.backwardWeightFlops, 2 * blk.forwardFlops);
  EXPECT_DOUBLE_EQ(blk.backwardWeightFlops, 24 * b * s * h * h);
  EXPECT_DOUBLE_EQ(blk.activationBytes, s * b * h * (34 + 5 * a * s / h));
  EXPECT_DOUBLE_EQ(blk.outputBytes, b * s * h * 2);
  EXPECT_LT(blk.weightGradStashBytes, blk.activationBytes);
  EXPECT_DOUBLE_EQ(est.back().forwardFlops, 2 * b * s * h * 100);
  EXPECT_DOUBLE_EQ(est.front().forwardFlops, 0);
  // fp32 doubles the bytes; flash attention drops the s x s term.
  TransformerConfig c = small();
  c.dtypeBytes = 4;
  c.flashAttention = true;
  EXPECT_DOUBLE_EQ(transformerLayerEstimates(c)[1].activationBytes, s * b * h * 34 * 2);
}

TEST(ModelZoo, ProfileTimesAreTheRoofline) {
  TransformerConfig c = small();
  auto p = transformerProfile(c);
  ASSERT_TRUE(p.ok()) << formatDiagnostics(p.errors());
  ASSERT_EQ(p->layers.size(), 5u);
  auto est = transformerLayerEstimates(c);
  // Compute-bound here (HBM practically infinite): 1 TFLOP/s = 1e9 FLOP per ms.
  EXPECT_NEAR(p->layers[1].forwardMs, est[1].forwardFlops / 1e9, 1e-6);
  EXPECT_NEAR(p->layers[1].backwardWeightMs, est[1].backwardWeightFlops / 1e9, 1e-6);
  EXPECT_EQ(p->layers[1].activationBytes, static_cast<std::int64_t>(est[1].activationBytes));
  EXPECT_EQ(p->layers[1].weightBytes, (12 * 16 * 16 + 13 * 16) * 2);
  EXPECT_EQ(p->deviceMemoryBytes, 1LL << 30);
  EXPECT_DOUBLE_EQ(p->link.bandwidthBytesPerMs, 10e6);
  // Memory-bound when HBM is slow: the embedding's gather takes its bytes / bandwidth.
  c.hbmGBps = 1;  // 1e6 bytes per ms
  auto q = transformerProfile(c).value();
  EXPECT_NEAR(q.layers[0].forwardMs, 2 * 2 * 8 * 16 * 2 / 1e6, 1e-6);
  EXPECT_DOUBLE_EQ(q.layers[0].backwardInputMs, 0);
}

TEST(ModelZoo, RejectsBadConfigs) {
  TransformerConfig c = small();
  c.heads = 5;  // 16 is not a multiple of 5
  EXPECT_FALSE(transformerProfile(c).ok());
  c = small();
  c.gpuTflops = 0;
  EXPECT_FALSE(transformerProfile(c).ok());
  EXPECT_FALSE(transformerPreset("gpt5").ok());
  EXPECT_EQ(dtypeBytesFromName("bf16").value(), 2);
  EXPECT_EQ(dtypeBytesFromName("fp32").value(), 4);
  EXPECT_FALSE(dtypeBytesFromName("int8").ok());
}

TEST(ModelZoo, PresetsMatchPublicConfigs) {
  auto g = transformerPreset("gpt3-1.3b").value();
  EXPECT_EQ(g.layers, 24);
  EXPECT_EQ(g.hidden, 2048);
  auto l7 = transformerPreset("llama2-7b").value();
  EXPECT_EQ(l7.layers, 32);
  EXPECT_EQ(l7.hidden, 4096);
  EXPECT_EQ(l7.vocab, 32000);
  auto l70 = transformerPreset("llama2-70b").value();
  EXPECT_EQ(l70.layers, 80);
  EXPECT_EQ(l70.hidden, 8192);
  EXPECT_EQ(l70.heads, 64);
  EXPECT_DOUBLE_EQ(l70.memoryGiB, 80);
  // Parameters of the blocks land near the model's name (weights are 2 bytes each).
  auto params = [](const TransformerConfig& c) {
    double n = 0;
    for (const auto& e : transformerLayerEstimates(c)) n += e.weightBytes / 2;
    return n;
  };
  EXPECT_NEAR(params(g) / 1e9, 1.3, 0.2);
  EXPECT_NEAR(params(l7) / 1e9, 6.7, 0.4);
  EXPECT_NEAR(params(l70) / 1e9, 65, 6);
}

TEST(ModelZoo, BundledProfilesAreTheGeneratorsOutput) {
  for (const auto& name : transformerPresetNames()) {
    std::ifstream in(std::string(PIPESTUDIO_RESOURCES_DIR) + "/profiles/" + name + ".json");
    ASSERT_TRUE(in.good()) << name;
    std::stringstream ss;
    ss << in.rdbuf();
    auto bundled = parseCostProfile(ss.str(), name);
    ASSERT_TRUE(bundled.ok());
    auto fresh = transformerProfile(transformerPreset(name).value()).value();
    EXPECT_EQ(costProfileToJson(*bundled), costProfileToJson(fresh))
        << name << ": regenerate with profile-model";
  }
}
