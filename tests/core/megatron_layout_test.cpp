// Megatron-LM's --pipeline-model-parallel-layout: written for a partition and read back by the
// grammar of megatron/core/transformer/pipeline_parallel_layer_layout.py (its own examples
// below), refused for placements and models Megatron-LM cannot take.
#include "pipestudio/core/io/megatron_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

using namespace ps::core;

namespace {

Pipeline loop(int devices, int stages) {
  return *Pipeline::make(devices, stages, 1,
                         stages == devices ? PlacementKind::Linear : PlacementKind::Interleaved);
}

std::vector<std::string> expand(std::string_view layout) {
  auto r = expandMegatronLayout(layout);
  EXPECT_TRUE(r.ok()) << formatDiagnostics(r.errors());
  return r.ok() ? *r : std::vector<std::string>{};
}

}  // namespace

TEST(MegatronLayout, ReadsMegatronsOwnExamples) {
  // --pipeline-model-parallel-layout's help text and parse_str_to_list's docstring.
  EXPECT_EQ(expand("E|(t|)*3,m|m||L"), (std::vector<std::string>{"E", "t", "t", "t", "m", "m", "", "L"}));
  auto stages = expand("Ettt|(tt|)*29,m|L");
  ASSERT_EQ(stages.size(), 32u);
  EXPECT_EQ(stages[0], "Ettt");
  EXPECT_EQ(stages[29], "tt");
  EXPECT_EQ(stages[30], "m");
  EXPECT_EQ(stages[31], "L");
  // The examples in its comments: groups, letters, cosmetic commas.
  EXPECT_FALSE(expandMegatronLayout("(ab|cd|ef)*2").ok());  // a..f are no layers
  EXPECT_EQ(expand("t*12|tL"), (std::vector<std::string>{"tttttttttttt", "tL"}));
  auto bad = expandMegatronLayout("Et|tx|L");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("column 5: 'x' is no layer"), std::string::npos) << bad.error().message;
}

TEST(MegatronLayout, OneStagePerRank) {
  auto l = megatronLayout({1, 4, 4, 3}, loop(4, 4));
  ASSERT_TRUE(l.ok()) << formatDiagnostics(l.errors());
  EXPECT_EQ(l->layout, "E|t*4|t*4|t*2L");
  EXPECT_EQ(l->pipelineParallelSize, 4);
  EXPECT_EQ(l->virtualStages, 1);
  EXPECT_EQ(l->decoderLayers, 10);
  EXPECT_EQ(l->mtpLayers, 0);
  EXPECT_EQ(expand(l->layout), l->stages);
}

TEST(MegatronLayout, VirtualStagesAndGroups) {
  auto l = megatronLayout({7, 5, 6, 2}, loop(2, 4));
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->layout, "Et*6|t*5|t*6|tL");
  EXPECT_EQ(l->virtualStages, 2);
  // Runs of three or more equal stages become a group; the last stage never joins one.
  l = megatronLayout({1, 4, 4, 4, 4, 4, 4, 3}, loop(4, 8));
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->layout, "E|(t*4|)*6,t*2L");
  EXPECT_EQ(expand(l->layout), l->stages);
  l = megatronLayout({2, 2, 2, 2}, loop(4, 4));
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->layout, "Et|t*2|t*2|tL");
  // An empty stage is allowed (Megatron prints it as "(empty stage)").
  l = megatronLayout({2, 0, 3, 1}, loop(2, 4));
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->layout, "Et||t*3|L");
  EXPECT_EQ(expand(l->layout), (std::vector<std::string>{"Et", "", "ttt", "L"}));
}

TEST(MegatronLayout, EveryPartitionReadsBack) {
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    const int D = 1 + static_cast<int>(rng() % 4), V = 1 + static_cast<int>(rng() % 3);
    std::vector<int> part(static_cast<size_t>(D * V));
    int total = 0;
    for (auto& n : part) total += n = static_cast<int>(rng() % 5);
    if (total < 2) continue;
    auto l = megatronLayout(part, loop(D, D * V));
    ASSERT_TRUE(l.ok()) << formatDiagnostics(l.errors());
    auto back = expand(l->layout);
    ASSERT_EQ(back, l->stages) << l->layout;
    for (size_t s = 0; s < part.size(); ++s)
      EXPECT_EQ(back[s].size(), static_cast<size_t>(part[s])) << l->layout;
    // Megatron's checks on the layers in stage order: the embedding first, the loss last.
    std::string flat;
    for (const auto& st : back) flat += st;
    EXPECT_EQ(flat.front(), 'E') << l->layout;
    EXPECT_EQ(flat.back(), 'L') << l->layout;
    EXPECT_EQ(std::count(flat.begin(), flat.end(), 'E'), 1);
    EXPECT_EQ(std::count(flat.begin(), flat.end(), 'L'), 1);
  }
}

TEST(MegatronLayout, MtpLayersFromTheProfileNames) {
  std::vector<std::string> names = {"embedding", "block0", "block1", "block2", "mtp0", "lm_head"};
  auto l = megatronLayout({2, 2, 1, 1}, loop(2, 4), names);
  ASSERT_TRUE(l.ok()) << formatDiagnostics(l.errors());
  EXPECT_EQ(l->layout, "Et|t*2|m|L");
  EXPECT_EQ(l->mtpLayers, 1);
  EXPECT_EQ(l->decoderLayers, 3);
  // In stage 1, virtual stage 0 of rank 1: Megatron-LM wants it in a rank's last one.
  auto early = megatronLayout({2, 1, 0, 1}, loop(2, 4), {"embedding", "block0", "mtp0", "lm_head"});
  ASSERT_FALSE(early.ok());
  EXPECT_NE(early.error().message.find("a rank's last virtual stage"), std::string::npos)
      << early.error().message;
  // A decoder layer after an MTP layer.
  auto mixed = megatronLayout({2, 1, 1, 2}, loop(2, 4),
                              {"embedding", "block0", "mtp0", "block1", "block2", "lm_head"});
  ASSERT_FALSE(mixed.ok());
  EXPECT_EQ(mixed.error().code, "megatron.mtp");
}

TEST(MegatronLayout, RefusesWhatMegatronCannotTake) {
  // The V: stage 2 on device 1.
  auto v = megatronLayout({1, 1, 1, 1}, *Pipeline::make(2, 4, 1, PlacementKind::VShape));
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().code, "megatron.placement");
  EXPECT_NE(v.error().message.find(
                "stage 2 is on device 1; Megatron-LM runs stage k of the layout on pipeline rank k "
                "mod 2"),
            std::string::npos)
      << v.error().message;
  // Contiguous blocks of stages per device.
  EXPECT_FALSE(megatronLayout({1, 1, 1, 1}, *Pipeline::make(2, 4, 1, PlacementKind::Linear)).ok());
  // A hybrid model.
  auto h = megatronLayout({2, 2}, loop(2, 2), {"embedding", "mamba0", "attention1", "lm_head"});
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.error().code, "megatron.hybrid");
  EXPECT_NE(h.error().message.find("--hybrid-layer-pattern"), std::string::npos);
  // Too few layers; a partition that does not match.
  EXPECT_FALSE(megatronLayout({1, 0}, loop(2, 2)).ok());
  EXPECT_FALSE(megatronLayout({1, 2, 3}, loop(2, 2)).ok());
  EXPECT_FALSE(megatronLayout({2, 2}, loop(2, 2), {"embedding", "block0", "lm_head"}).ok());
}
