#include "pipestudio/core/model/cost_profile.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "fixtures/diagnostics.h"

using namespace ps::core;

namespace {

const char* kProfile = R"({
  "name": "tiny",
  "layers": [
    { "name": "embed", "forward_ms": 0.5, "backward_input_ms": 0.5, "backward_weight_ms": 0.4,
      "activation_bytes": 1048576, "weight_bytes": 4194304, "output_bytes": 262144 },
    { "name": "block0", "forward_ms": 1, "backward_ms": 2, "activation_bytes": 1000,
      "weight_grad_stash_bytes": 300, "weight_bytes": 10, "output_bytes": 20, "recompute_ms": 1.25 },
    { "forward_ms": 2, "backward_input_ms": 1.5, "backward_ms": 4 }
  ],
  "optimizer_bytes_per_weight_byte": 6,
  "device": { "memory_bytes": 85899345920 },
  "link": { "latency_ms": 0.01, "bandwidth_bytes_per_ms": 25000000 },
  "host": { "bandwidth_bytes_per_ms": 12000000 },
  "overlap_factor": 0.8
})";

}  // namespace

TEST(CostProfile, ParsesEveryField) {
  auto p = parseCostProfile(kProfile, "tiny.json");
  ASSERT_TRUE(p.ok()) << formatDiagnostics(p.errors());
  EXPECT_EQ(p->name, "tiny");
  ASSERT_EQ(p->layers.size(), 3u);
  EXPECT_EQ(p->layers[0].name, "embed");
  EXPECT_DOUBLE_EQ(p->layers[0].backwardWeightMs, 0.4);
  EXPECT_EQ(p->layers[0].outputBytes, 262144);
  // backward_ms alone splits evenly; with one part given, the other is the rest.
  EXPECT_DOUBLE_EQ(p->layers[1].backwardInputMs, 1);
  EXPECT_DOUBLE_EQ(p->layers[1].backwardWeightMs, 1);
  EXPECT_EQ(p->layers[1].weightGradStashBytes, 300);
  EXPECT_EQ(p->layers[1].recomputeMs, 1.25);
  EXPECT_DOUBLE_EQ(p->layers[2].backwardWeightMs, 2.5);
  EXPECT_EQ(p->layers[2].name, "layer2");
  EXPECT_EQ(p->deviceMemoryBytes, 85899345920);
  EXPECT_DOUBLE_EQ(p->link.latencyMs, 0.01);
  EXPECT_DOUBLE_EQ(p->link.bandwidthBytesPerMs, 25000000);
  EXPECT_DOUBLE_EQ(p->hostBandwidthBytesPerMs, 12000000);
  EXPECT_DOUBLE_EQ(p->overlapFactor, 0.8);
}

TEST(CostProfile, ErrorsNameFileAndJsonPath) {
  auto p = parseCostProfile(R"({"layers": [{"forward_ms": 1, "backward_ms": 1},
      {"forward_ms": 1, "backward_ms": 1}, {"forward_ms": 1, "backward_ms": 1},
      {"forward_ms": "fast", "backward_ms": 1}], "link": {"latency_ms": -1}})",
                            "p.json");
  ASSERT_FALSE(p.ok());
  ASSERT_EQ(p.errors().size(), 2u);
  EXPECT_EQ(p.errors()[0].message, "p.json: link.latency_ms: expected a non-negative number");
  EXPECT_EQ(p.errors()[1].message, "p.json: layers[3].forward_ms: expected a number");
}

TEST(CostProfile, MissingFieldsAreReported) {
  auto p = parseCostProfile(R"({"layers": [{"backward_ms": 1}, {"forward_ms": 1}]})", "m.json");
  ASSERT_FALSE(p.ok());
  ASSERT_EQ(p.errors().size(), 2u);
  EXPECT_EQ(p.errors()[0].message, "m.json: layers[0].forward_ms: missing (expected a number)");
  EXPECT_NE(p.errors()[1].message.find("layers[1].backward_input_ms: missing"), std::string::npos);
  EXPECT_FALSE(parseCostProfile(R"({"layers": []})").ok());
  EXPECT_FALSE(parseCostProfile(R"([1, 2])").ok());
}

TEST(CostProfile, InvalidJsonPointsAtLineAndColumn) {
  auto p = parseCostProfile("{\n  \"layers\": [\n    { \"forward_ms\": 1,, }\n  ]\n}", "bad.json");
  ASSERT_FALSE(p.ok());
  ps::test::expectErrorAt(p.error(), "bad.json", 3, 23, "bad.json: invalid JSON");
}

TEST(CostProfile, RoundTripsThroughJson) {
  auto p = parseCostProfile(kProfile);
  ASSERT_TRUE(p.ok());
  p->fixedCommMs = 0.25;
  auto q = parseCostProfile(costProfileToJson(*p));
  ASSERT_TRUE(q.ok()) << formatDiagnostics(q.errors());
  ASSERT_EQ(q->layers.size(), p->layers.size());
  for (size_t i = 0; i < p->layers.size(); ++i) {
    EXPECT_EQ(q->layers[i].name, p->layers[i].name);
    EXPECT_DOUBLE_EQ(q->layers[i].forwardMs, p->layers[i].forwardMs);
    EXPECT_DOUBLE_EQ(q->layers[i].backwardInputMs, p->layers[i].backwardInputMs);
    EXPECT_DOUBLE_EQ(q->layers[i].backwardWeightMs, p->layers[i].backwardWeightMs);
    EXPECT_EQ(q->layers[i].recomputeMs, p->layers[i].recomputeMs);
    EXPECT_EQ(q->layers[i].activationBytes, p->layers[i].activationBytes);
    EXPECT_EQ(q->layers[i].weightGradStashBytes, p->layers[i].weightGradStashBytes);
    EXPECT_EQ(q->layers[i].weightBytes, p->layers[i].weightBytes);
    EXPECT_EQ(q->layers[i].outputBytes, p->layers[i].outputBytes);
  }
  EXPECT_EQ(q->deviceMemoryBytes, p->deviceMemoryBytes);
  EXPECT_EQ(q->fixedCommMs, 0.25);
  EXPECT_DOUBLE_EQ(q->overlapFactor, 0.8);
}

TEST(CostProfile, UniformShortcut) {
  auto p = uniformCostProfile("F=1,I=1,W=1", 3);
  ASSERT_TRUE(p.ok());
  auto c = stageCosts(*p, 3);
  ASSERT_TRUE(c.ok());
  for (const StageCost& s : *c) {
    EXPECT_DOUBLE_EQ(s.F, 1);
    EXPECT_DOUBLE_EQ(s.B, 2);  // B defaults to I + W
    EXPECT_DOUBLE_EQ(s.R, 1);  // R to F
  }
  auto b = stageCosts(uniformCostProfile("F=1,B=3", 1).value(), 1).value();
  EXPECT_DOUBLE_EQ(b[0].I, 1.5);  // B alone splits evenly
  EXPECT_DOUBLE_EQ(b[0].W, 1.5);
  auto bi = stageCosts(uniformCostProfile("F=1,B=3,I=2,R=0.5", 1).value(), 1).value();
  EXPECT_DOUBLE_EQ(bi[0].W, 1);
  EXPECT_DOUBLE_EQ(bi[0].R, 0.5);
  EXPECT_FALSE(uniformCostProfile("I=1", 2).ok());
  EXPECT_FALSE(uniformCostProfile("F=1,Q=2", 2).ok());
  EXPECT_FALSE(uniformCostProfile("F=x", 2).ok());
  EXPECT_FALSE(uniformCostProfile("F=1", 0).ok());
}

TEST(CostProfile, ExplicitPartitionIsChecked) {
  CostProfile p = uniformCostProfile("F=1", 6).value();
  EXPECT_EQ(partitionLayers(p, 3, {1, 2, 3}).value(), (std::vector<int>{1, 2, 3}));
  EXPECT_FALSE(partitionLayers(p, 3, {1, 2, 2}).ok());  // sums to 5
  EXPECT_FALSE(partitionLayers(p, 3, {1, 5}).ok());     // two entries for three stages
  EXPECT_FALSE(partitionLayers(p, 2, {0, 6}).ok());     // empty stage
  EXPECT_FALSE(partitionLayers(p, 7).ok());             // more stages than layers
  EXPECT_EQ(partitionLayers(p, 6).value(), std::vector<int>(6, 1));
}

TEST(CostProfile, BalancedPartitionMinimisesTheSlowestStage) {
  CostProfile p;
  for (double f : {4.0, 1.0, 1.0, 1.0, 1.0, 4.0, 2.0, 2.0}) {
    LayerCost l;
    l.forwardMs = f;
    p.layers.push_back(l);
  }
  // Total 16 over 3 stages: the best contiguous split has a largest stage of 6.
  auto part = partitionLayers(p, 3);
  ASSERT_TRUE(part.ok());
  ASSERT_EQ(part->size(), 3u);
  auto costs = stageCosts(p, 3).value();
  double worst = 0;
  int layers = 0;
  for (size_t s = 0; s < costs.size(); ++s) {
    worst = std::max(worst, costs[s].F);
    EXPECT_GE((*part)[s], 1);
    layers += (*part)[s];
  }
  EXPECT_EQ(layers, 8);
  EXPECT_DOUBLE_EQ(worst, 6);
  // Uniform layers spread evenly, remainders to the end; every stage non-empty even when
  // one huge layer would take a stage alone.
  CostProfile q = uniformCostProfile("F=1", 5).value();
  q.layers[0].forwardMs = 100;
  auto qp = partitionLayers(q, 4).value();
  EXPECT_EQ(qp, (std::vector<int>{1, 2, 1, 1}));
}

TEST(CostProfile, StageCostsSumLayersAndTrackBytes) {
  auto p = parseCostProfile(kProfile).value();
  auto c = stageCosts(p, 2, {1, 2}).value();
  EXPECT_DOUBLE_EQ(c[0].F, 0.5);
  EXPECT_DOUBLE_EQ(c[1].F, 3);
  EXPECT_DOUBLE_EQ(c[1].I, 2.5);
  EXPECT_DOUBLE_EQ(c[1].W, 3.5);
  EXPECT_DOUBLE_EQ(c[1].B, 6);
  EXPECT_DOUBLE_EQ(c[1].R, 1.25 + 2);  // recompute_ms where given, else forward
  EXPECT_EQ(c[1].inputBytes, 262144);  // the embed layer's output
  EXPECT_EQ(c[0].inputBytes, 0);
  EXPECT_EQ(c[1].outputBytes, 0);
  EXPECT_EQ(c[1].activationBytes, 1000);
  EXPECT_EQ(c[1].weightGradStashBytes, 300);
  EXPECT_EQ(c[0].weightGradStashBytes, 1048576 / 2);
  EXPECT_EQ(c[0].staticBytes, 4194304LL * (1 + 1 + 6));
  EXPECT_EQ(c[1].firstLayer, 1);
  EXPECT_EQ(c[1].layerCount, 2);
}

TEST(CostProfile, BundledProfilesParse) {
  for (const char* name : {"gpt3-1.3b", "llama2-7b", "llama2-70b"}) {
    std::string path = std::string(PIPESTUDIO_RESOURCES_DIR) + "/profiles/" + name + ".json";
    std::ifstream in(path);
    ASSERT_TRUE(in.good()) << path;
    std::stringstream ss;
    ss << in.rdbuf();
    auto p = parseCostProfile(ss.str(), path);
    ASSERT_TRUE(p.ok()) << formatDiagnostics(p.errors());
    EXPECT_EQ(p->name, name);
    EXPECT_EQ(p->layers.front().name, "embedding");
    EXPECT_EQ(p->layers.back().name, "lm_head");
    EXPECT_EQ(p->deviceMemoryBytes, 80LL << 30);
  }
}
