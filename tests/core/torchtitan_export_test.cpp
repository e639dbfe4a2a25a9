// torchtitan's settings for a schedule CSV: the schedule class whose placement is the CSV's
// (torchtitan's _get_pp_rank_to_stage_indices_mapping: loop, or V for ZBVZeroBubble and
// DualPipeV), degree, micro-batches, the partition as module names; refusals with the reason.
// tests/pytorch/test_runtime.py loads the same settings' CSVs the way torchtitan does.
#include "pipestudio/core/io/torchtitan_export.h"

#include <gtest/gtest.h>

#include "pipestudio/core/planning/generators.h"

using namespace ps::core;

namespace {

Schedule generated(ScheduleKind k, int devices, int microbatches, int chunks = 0) {
  auto s = generateSchedule(k, GeneratorOptions{devices, microbatches, chunks});
  EXPECT_TRUE(s.ok()) << formatDiagnostics(s.errors());
  return *s;
}

// A schedule of `stageToDevice` whose orders do not matter here.
Schedule placed(std::vector<int> stageToDevice, int devices) {
  Schedule s;
  s.pipeline = *Pipeline::makeExplicit(devices, 2, std::move(stageToDevice));
  s.devices.resize(static_cast<size_t>(devices));
  return s;
}

}  // namespace

TEST(TorchtitanExport, OneStagePerRankIsASingleStageClass) {
  auto t = torchtitanSettings(generated(ScheduleKind::ZBH1, 4, 8));
  ASSERT_TRUE(t.ok()) << formatDiagnostics(t.errors());
  EXPECT_EQ(t->degree, 4);
  EXPECT_EQ(t->stages, 4);
  EXPECT_EQ(t->stagesPerRank, 1);
  EXPECT_EQ(t->microbatches, 8);
  EXPECT_EQ(t->style, "loop");
  // torchtitan builds one stage per rank for a single-stage class.
  EXPECT_EQ(t->scheduleClass, "1F1B");
  EXPECT_TRUE(t->moduleFqnsPerModelPart.empty());
  EXPECT_TRUE(t->notes.empty());
}

TEST(TorchtitanExport, LoopAndVPlacements) {
  for (ScheduleKind k : {ScheduleKind::Interleaved1F1B, ScheduleKind::LoopedBFS}) {
    auto t = torchtitanSettings(generated(k, 4, 8));
    ASSERT_TRUE(t.ok()) << formatDiagnostics(t.errors());
    EXPECT_EQ(t->style, "loop");
    EXPECT_EQ(t->scheduleClass, "Interleaved1F1B");
    EXPECT_EQ(t->stagesPerRank, 2);
  }
  // zb-h1 with two chunks is PyTorch's InterleavedZeroBubble: a loop too.
  EXPECT_EQ(torchtitanSettings(generated(ScheduleKind::ZBH1, 2, 4, 2))->style, "loop");
  for (ScheduleKind k : {ScheduleKind::ZBV, ScheduleKind::DualPipeV}) {
    auto t = torchtitanSettings(generated(k, 4, 8));
    ASSERT_TRUE(t.ok()) << formatDiagnostics(t.errors());
    EXPECT_EQ(t->style, "v");
    EXPECT_EQ(t->scheduleClass, "ZBVZeroBubble");
    EXPECT_EQ(t->stages, 8);
  }
}

TEST(TorchtitanExport, ThreeStagesPerRankNeedTheLayersSaid) {
  auto t = torchtitanSettings(generated(ScheduleKind::LoopedBFS, 2, 4, 3));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->stagesPerRank, 3);
  ASSERT_EQ(t->notes.size(), 1u);
  EXPECT_NE(t->notes[0].find("pipeline_parallel_layers_per_stage"), std::string::npos) << t->notes[0];
  EXPECT_NE(t->notes[0].find("= 6"), std::string::npos) << t->notes[0];
  EXPECT_NE(torchtitanToml(*t, "x.csv").find("# note: torchtitan builds 2 stages per rank"),
            std::string::npos);
}

TEST(TorchtitanExport, PartitionBecomesModuleNames) {
  Schedule s = generated(ScheduleKind::LoopedBFS, 2, 4, 3);
  s.partition = {2, 1, 1, 1, 1, 2};  // embedding + 6 layers + output
  auto t = torchtitanSettings(s);
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->notes.empty());
  const std::vector<std::vector<std::string>> want = {
      {"tok_embeddings", "layers.0"}, {"layers.1"}, {"layers.2"}, {"layers.3"}, {"layers.4"},
      {"layers.5", "norm", "lm_head"}};
  EXPECT_EQ(t->moduleFqnsPerModelPart, want);
  const std::string toml = torchtitanToml(*t, "runs/a \"b\".csv");
  EXPECT_NE(toml.find("pipeline_parallel_schedule_csv = \"runs/a \\\"b\\\".csv\"\n"), std::string::npos)
      << toml;
  EXPECT_NE(toml.find("module_fqns_per_model_part = [\n  [\"tok_embeddings\", \"layers.0\"],\n"),
            std::string::npos)
      << toml;
  EXPECT_NE(toml.find("  [\"layers.5\", \"norm\", \"lm_head\"],\n]\n"), std::string::npos) << toml;
}

TEST(TorchtitanExport, TomlLines) {
  auto t = torchtitanSettings(generated(ScheduleKind::ZBV, 4, 8));
  ASSERT_TRUE(t.ok());
  const std::string toml = torchtitanToml(*t, "zbv.csv");
  EXPECT_NE(toml.find("[parallelism]\n"
                      "pipeline_parallel_degree = 4\n"
                      "pipeline_parallel_schedule = \"ZBVZeroBubble\"\n"
                      "pipeline_parallel_schedule_csv = \"zbv.csv\"\n"
                      "num_pp_microbatches = 8\n"),
            std::string::npos)
      << toml;
  EXPECT_NE(toml.find("rank d builds stages d and 7 - d"), std::string::npos) << toml;
}

TEST(TorchtitanExport, RefusesWhatTorchtitanCannotBuild) {
  // One rank: torchtitan has no pipeline then.
  auto one = torchtitanSettings(generated(ScheduleKind::OneFOneB, 1, 2));
  ASSERT_FALSE(one.ok());
  EXPECT_EQ(one.error().code, "torchtitan.degree");
  // Two contiguous stages per device (linear blocks): stage 1 sits on device 0.
  auto blocks = torchtitanSettings(placed({0, 0, 1, 1}, 2));
  ASSERT_FALSE(blocks.ok());
  EXPECT_EQ(blocks.error().code, "torchtitan.placement");
  EXPECT_NE(blocks.error().message.find(
                "stage 1 is on device 0, where torchtitan's loop placement puts it on rank 1 "
                "and its V placement on rank 1"),
            std::string::npos)
      << blocks.error().message;
  // Uneven stages per rank.
  auto uneven = torchtitanSettings(placed({0, 1, 0}, 2));
  ASSERT_FALSE(uneven.ok());
  EXPECT_NE(uneven.error().message.find("3 stages do not divide over 2 ranks"), std::string::npos)
      << uneven.error().message;
  // An explicit placement that is the loop or the V is fine.
  EXPECT_EQ(torchtitanSettings(placed({0, 1, 2, 0, 1, 2}, 3))->style, "loop");
  EXPECT_EQ(torchtitanSettings(placed({0, 1, 2, 2, 1, 0}, 3))->style, "v");
  // A V of four stages per rank is no torchtitan V.
  EXPECT_FALSE(torchtitanSettings(placed({0, 1, 1, 0, 0, 1, 1, 0}, 2)).ok());
}
