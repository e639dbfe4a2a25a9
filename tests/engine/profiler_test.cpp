// profileModel and `pipestudio-cli profile`: one measured layer per model layer, times
// positive, bytes equal to what the model's dimensions give.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cli/cli_runner.h"
#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/engine/engine.h"

namespace ps::engine {
namespace {

ProfileOptions quick(int b) {
  ProfileOptions o;
  o.microbatchSize = b;
  o.repetitions = 3;
  o.warmup = 1;
  o.threads = 1;
  return o;
}

TEST(Profiler, MlpLayersHaveExactBytesAndPositiveTimes) {
  auto spec = parseModelSpec("mlp:layers=3,hidden=32");
  ASSERT_TRUE(spec);
  const int b = 4;
  auto p = profileModel(*spec, quick(b));
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_EQ(p->layers.size(), 3u);
  const std::int64_t H = 32, elem = 4;
  for (size_t l = 0; l < p->layers.size(); ++l) {
    const auto& c = p->layers[l];
    SCOPED_TRACE(c.name);
    EXPECT_EQ(c.name, "block" + std::to_string(l));
    EXPECT_GT(c.forwardMs, 0);
    EXPECT_GT(c.backwardInputMs, 0);
    EXPECT_GT(c.backwardWeightMs, 0);  // every block has a Linear
    EXPECT_EQ(c.weightBytes, (H * H + H) * elem);
    // F stashes the Linear's input (b x H) and keeps the output (b x H; the loss on the last).
    const bool last = l + 1 == p->layers.size();
    EXPECT_EQ(c.outputBytes, last ? elem : b * H * elem);
    EXPECT_EQ(c.activationBytes, b * H * elem + c.outputBytes);
    // After I, W holds X and dY of the Linear (b x H each), at most the activation.
    EXPECT_EQ(c.weightGradStashBytes, std::min(2 * b * H * elem, c.activationBytes));
  }
}

TEST(Profiler, GptLayersMatchTheModelDimensions) {
  auto spec = parseModelSpec("gpt:layers=2,hidden=32,heads=2,seq=8,vocab=50");
  ASSERT_TRUE(spec);
  const int b = 2;
  auto p = profileModel(*spec, quick(b));
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_EQ(static_cast<int>(p->layers.size()), modelLayerCount(*spec));
  EXPECT_EQ(p->layers.front().name, "embedding");
  EXPECT_EQ(p->layers.back().name, "head");
  const std::int64_t H = 32, T = 8, V = 50, F = 4, elem = 4, tokens = b * T;
  // Embedding: token and position tables; no Linear, so no W.
  EXPECT_EQ(p->layers[0].weightBytes, (V + T) * H * elem);
  EXPECT_EQ(p->layers[0].backwardWeightMs, 0);
  EXPECT_EQ(p->layers[0].outputBytes, tokens * H * elem);
  EXPECT_EQ(p->layers[0].activationBytes, tokens * H * elem);
  // Block: qkv (H -> 3H), proj (H -> H), fc1 (H -> FH), fc2 (FH -> H) with biases, two LayerNorms.
  const std::int64_t blockParams = 3 * H * H + 3 * H + H * H + H + F * H * H + F * H + F * H * H + H + 4 * H;
  // Stashed: inputs of qkv, proj, fc1 (tokens x H each) and fc2 (tokens x FH), plus the output.
  const std::int64_t blockActivation = (3 + F) * tokens * H + tokens * H;
  for (int l = 1; l <= 2; ++l) {
    const auto& c = p->layers[static_cast<size_t>(l)];
    SCOPED_TRACE(c.name);
    EXPECT_GT(c.forwardMs, 0);
    EXPECT_GT(c.backwardInputMs, 0);
    EXPECT_GT(c.backwardWeightMs, 0);
    EXPECT_EQ(c.weightBytes, blockParams * elem);
    EXPECT_EQ(c.activationBytes, blockActivation * elem);
    EXPECT_EQ(c.outputBytes, tokens * H * elem);
  }
  // Head: LayerNorm and the H -> V projection; F ends in the loss (one element).
  const auto& head = p->layers.back();
  EXPECT_EQ(head.weightBytes, (H * V + V + 2 * H) * elem);
  EXPECT_EQ(head.outputBytes, elem);
  EXPECT_EQ(head.activationBytes, tokens * H * elem + elem);
  EXPECT_GT(head.forwardMs, 0);
}

TEST(Profiler, DoublePrecisionDoublesTheBytes) {
  auto f32 = profileModel(*parseModelSpec("mlp:layers=2,hidden=16"), quick(2));
  auto f64 = profileModel(*parseModelSpec("mlp:layers=2,hidden=16,dtype=f64"), quick(2));
  ASSERT_TRUE(f32 && f64);
  for (size_t l = 0; l < 2; ++l) {
    EXPECT_EQ(f64->layers[l].weightBytes, 2 * f32->layers[l].weightBytes);
    EXPECT_EQ(f64->layers[l].activationBytes, 2 * f32->layers[l].activationBytes);
  }
}

TEST(Profiler, ProfileRoundTripsThroughTheCoreLoaderAndPartitions) {
  auto spec = parseModelSpec("mlp:layers=4,hidden=32");
  auto p = profileModel(*spec, quick(2));
  ASSERT_TRUE(p);
  auto loaded = core::parseCostProfile(core::costProfileToJson(*p), "profile.json");
  ASSERT_TRUE(loaded) << loaded.error().message;
  ASSERT_EQ(loaded->layers.size(), 4u);
  auto stages = core::stageCosts(*loaded, 2, {2, 2});
  ASSERT_TRUE(stages);
  EXPECT_NEAR((*stages)[0].F, p->layers[0].forwardMs + p->layers[1].forwardMs, 1e-9);
}

TEST(Profiler, ConcurrentWorkersGiveTheSameBytesAndPositiveTimes) {
  auto spec = *parseModelSpec("mlp:layers=2,hidden=32");
  ProfileOptions o = quick(2);
  auto one = profileModel(spec, o);
  o.workers = 2;  // two copies timed at once, as two workers of a run share the cores
  auto two = profileModel(spec, o);
  ASSERT_TRUE(one && two) << (two ? "" : two.error().message);
  ASSERT_EQ(two->layers.size(), 2u);
  for (size_t l = 0; l < 2; ++l) {
    EXPECT_EQ(two->layers[l].weightBytes, one->layers[l].weightBytes);
    EXPECT_EQ(two->layers[l].activationBytes, one->layers[l].activationBytes);
    EXPECT_GT(two->layers[l].forwardMs, 0);
    EXPECT_GT(two->layers[l].backwardInputMs, 0);
    EXPECT_GT(two->layers[l].backwardWeightMs, 0);
  }
}

TEST(Profiler, RefusesBadOptions) {
  auto spec = *parseModelSpec("mlp:layers=2,hidden=16");
  ProfileOptions o = quick(2);
  o.repetitions = 0;
  EXPECT_EQ(profileModel(spec, o).error().code, "engine.options");
  o = quick(0);
  EXPECT_FALSE(profileModel(spec, o));
}

TEST(Profiler, ThreadsFollowTheRunsPerWorkerRule) {
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_EQ(intraOpThreads(3, 2), 3);
  EXPECT_EQ(intraOpThreads(0, 1), hw);
  EXPECT_EQ(intraOpThreads(0, 2), std::max(1, hw / 2));
  EXPECT_EQ(intraOpThreads(0, 1000), 1);
}

std::string runCli(const std::string& args, int& code) {
  auto r = ps::test::runCli(args);
  code = r.exitCode;
  return r.out;
}

TEST(ProfileCli, WritesALoadableProfileWithItsSettings) {
  auto path = std::filesystem::temp_directory_path() / ("ps_profile_" + std::to_string(getpid()) + ".json");
  int code = -1;
  std::string out = runCli(
      "profile --model gpt:layers=2,hidden=32,heads=2,seq=8,vocab=50 --microbatch-size 2 "
      "--repetitions 2 --warmup 1 --threads 1 -o " +
          path.string(),
      code);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("block1"), std::string::npos) << out;  // the table
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::filesystem::remove(path);
  auto loaded = core::parseCostProfile(ss.str(), path.string());
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_EQ(loaded->layers.size(), 4u);
  auto j = nlohmann::json::parse(ss.str());
  EXPECT_EQ(j["source"], "profiled");
  EXPECT_EQ(j["profiler"]["threads"], 1);
  EXPECT_EQ(j["profiler"]["microbatch_size"], 2);
  EXPECT_EQ(j["profiler"]["repetitions"], 2);
}

TEST(ProfileCli, UsageErrorsAndUnavailableDevice) {
  int code = -1;
  runCli("profile", code);
  EXPECT_EQ(code, 2);
  runCli("profile --model mlp:layers=2 --repetitions 0", code);
  EXPECT_EQ(code, 2);
  runCli("profile --model bogus:layers=2", code);
  EXPECT_EQ(code, 2);
  // Layers are profiled on the CPU only; --device cuda is refused as a usage error, whatever
  // the machine, and says what to do instead.
  std::string out = runCli("profile --model mlp:layers=2 --device cuda", code);
  EXPECT_EQ(code, 2);
  EXPECT_NE(out.find("profiled on the CPU only"), std::string::npos) << out;
  EXPECT_NE(out.find("run --device cuda --trace"), std::string::npos) << out;
}

TEST(Profiler, OptimizerStepsAreTimedPerLayerOnlyWhenAsked) {
  auto spec = parseModelSpec("gpt:layers=2,hidden=32,heads=2,seq=4,vocab=16");
  ASSERT_TRUE(spec);
  auto plain = profileModel(*spec, quick(2));
  ASSERT_TRUE(plain) << plain.error().message;
  for (const auto& c : plain->layers) EXPECT_EQ(c.optimizerStepMs, 0.0) << c.name;
  EXPECT_EQ(plain->optimizerBytesPerWeightByte, 0.0);
  for (const Optimizer opt : {Optimizer::Sgd, Optimizer::AdamW}) {
    ProfileOptions o = quick(2);
    o.optimizer = opt;
    o.workers = 2;
    auto p = profileModel(*spec, o);
    ASSERT_TRUE(p) << p.error().message;
    for (const auto& c : p->layers) EXPECT_GT(c.optimizerStepMs, 0.0) << optimizerName(opt) << " " << c.name;
    EXPECT_EQ(p->optimizerBytesPerWeightByte, opt == Optimizer::AdamW ? 2.0 : 0.0);
  }
  EXPECT_FALSE(optimizerFromName("lamb").has_value());  // refused at the command line (below)
}

TEST(ProfileCli, AProfileWithOptimizerStepsPredictsTheRunsSteps) {
  // profile --optimizer, then a run with that optimizer predicted from the profile: the
  // OPTIMIZER ops are predicted (not at 0 ms), from the measured steps.
  const auto dir = std::filesystem::temp_directory_path() / ("ps_prof_opt_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  int code = -1;
  const std::string model = "--model mlp:layers=4,hidden=64 --threads 1";
  runCli("profile " + model + " --optimizer adamw --repetitions 3 -o " + (dir / "p.json").string(), code);
  ASSERT_EQ(code, 0);
  runCli("generate 1f1b --devices 2 --microbatches 4 -o " + (dir / "s.pipe").string(), code);
  ASSERT_EQ(code, 0);
  std::string out =
      runCli("run " + (dir / "s.pipe").string() + " " + model + " --optimizer adamw --session " +
                 (dir / "s.db").string() + " --profile " + (dir / "p.json").string(),
             code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("predicted run"), std::string::npos) << out;
  EXPECT_EQ(out.find("predicted at 0 ms"), std::string::npos) << out;
  out = runCli("profile " + model + " --optimizer lamb", code);
  EXPECT_EQ(code, 2) << out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ps::engine
