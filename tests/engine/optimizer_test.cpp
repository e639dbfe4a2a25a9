// Training steps (`run --optimizer`): every iteration ends with each device's optimizer step,
// timed as an OPTIMIZER op; the loss falls over the iterations with SGD and AdamW, AdamW's
// state counts in the device's memory, the gradient check still compares the first
// iteration's gradients, and bad flags are usage errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_runner.h"
#include "fixtures/schedules.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/io/run_events.h"
#include "pipestudio/engine/engine.h"

using namespace ps::engine;
using namespace ps::test;

namespace {

const char* kMlp = "mlp:layers=4,hidden=16";

RunOptions trainingOptions(const std::string& model, Optimizer optimizer, double lr, int iterations) {
  RunOptions o;
  o.model = parseModelSpec(model).value();
  o.microbatchSize = 2;
  o.iterations = iterations;
  o.checkGradients = true;
  o.timeoutSeconds = 20;
  o.threads = 1;
  o.optimizer = optimizer;
  o.learningRate = lr;
  return o;
}

struct Recorded {
  RunReport report;
  std::vector<nlohmann::json> events;
};

Recorded runRecorded(const ps::core::Schedule& s, RunOptions o) {
  Recorded out;
  std::mutex mu;
  o.events = [&](const std::string& line) {
    std::lock_guard lock(mu);
    out.events.push_back(nlohmann::json::parse(line));
  };
  auto r = runSchedule(s, o);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : ps::core::formatDiagnostics(r.errors()));
  if (!r.ok()) return out;
  EXPECT_EQ(r->status, ps::core::RunState::Succeeded)
      << (r->diagnostics.empty() ? "" : r->diagnostics[0].message);
  out.report = std::move(r).value();
  return out;
}

void expectLossFalls(const std::vector<double>& losses, int iterations) {
  ASSERT_EQ(losses.size(), static_cast<size_t>(iterations));
  for (size_t i = 1; i < losses.size(); ++i) EXPECT_LT(losses[i], losses[i - 1]) << "iteration " << i;
  EXPECT_LT(losses.back(), 0.95 * losses.front());
}

// One OPTIMIZER op event per device and iteration, each after every other op of its device.
void expectOneStepPerDeviceAndIteration(const std::vector<nlohmann::json>& events, int devices,
                                        int iterations) {
  std::map<std::pair<int, int>, int> steps;
  std::map<std::pair<int, int>, double> lastOtherEnd, stepStart;
  for (const auto& e : events) {
    if (e.value("type", "") != "op") continue;
    const auto key = std::make_pair(e["iteration"].get<int>(), e["device"].get<int>());
    if (e["kind"] == "OPTIMIZER") {
      ++steps[key];
      stepStart[key] = e["start_ms"].get<double>();
    } else {
      lastOtherEnd[key] = std::max(lastOtherEnd[key], e["end_ms"].get<double>());
    }
  }
  for (int it = 0; it < iterations; ++it)
    for (int d = 0; d < devices; ++d) {
      const auto key = std::make_pair(it, d);
      EXPECT_EQ(steps[key], 1) << "iteration " << it << " device " << d;
      EXPECT_GE(stepStart[key], lastOtherEnd[key]) << "iteration " << it << " device " << d;
    }
}

}  // namespace

TEST(Optimizer, SgdLowersTheLossAndTimesOneStepPerDevice) {
  const auto s = oneFOneB(2, 4);
  auto rec = runRecorded(s, trainingOptions(kMlp, Optimizer::Sgd, 1.0, 5));
  const RunReport& r = rec.report;
  expectLossFalls(r.losses, 5);
  expectOneStepPerDeviceAndIteration(rec.events, 2, 5);
  // The measured timeline (last iteration): one OPTIMIZER op per device, on the step the
  // engine appended to the device's order.
  auto withSteps = scheduleWithOptimizerSteps(s);
  ASSERT_TRUE(withSteps.ok());
  std::map<int, int> perDevice;
  for (const auto& op : r.timeline.ops)
    if (withSteps->kindName(op.op.kind) == "OPTIMIZER") {
      ++perDevice[op.device];
      EXPECT_EQ(op.step, static_cast<int>(withSteps->devices[static_cast<size_t>(op.device)].size()) - 1);
      EXPECT_GE(op.end, op.start);
    }
  EXPECT_EQ(perDevice, (std::map<int, int>{{0, 1}, {1, 1}}));
  // Plain SGD keeps no state.
  EXPECT_EQ(r.optimizerStateBytes, (std::vector<std::int64_t>{0, 0}));
  // The first iteration's gradients, before the first step, are the unpipelined model's.
  ASSERT_TRUE(r.gradients.ran);
  EXPECT_TRUE(r.gradients.passed) << r.gradients.worstParameter << " " << r.gradients.maxRelativeError;
  EXPECT_LE(r.gradients.maxRelativeError, 1e-5);
  EXPECT_NEAR(r.gradients.lossPipelined, r.losses.front(), 1e-6 * r.losses.front());
  EXPECT_NEAR(r.gradients.lossReference, r.losses.front(), 1e-5 * r.losses.front());
}

TEST(Optimizer, AdamWLowersTheLossAndItsStateCountsInMemory) {
  const auto s = oneFOneB(2, 4, /*splitBackward=*/true);  // I and W: deferred weight gradients too
  auto rec = runRecorded(s, trainingOptions(kMlp, Optimizer::AdamW, 0.01, 5));
  const RunReport& r = rec.report;
  expectLossFalls(r.losses, 5);
  expectOneStepPerDeviceAndIteration(rec.events, 2, 5);
  EXPECT_TRUE(r.gradients.passed) << r.gradients.worstParameter << " " << r.gradients.maxRelativeError;
  // exp_avg and exp_avg_sq: twice the parameters' f32 bytes over both devices.
  ASSERT_EQ(r.optimizerStateBytes.size(), 2u);
  EXPECT_GT(r.optimizerStateBytes[0], 0);
  EXPECT_GT(r.optimizerStateBytes[1], 0);
  EXPECT_EQ(r.optimizerStateBytes[0] + r.optimizerStateBytes[1], 2 * 4 * r.parameterCount);
  // The state is held through the whole measured iteration: no memory sample lies below it.
  ASSERT_EQ(r.timeline.memory.size(), 2u);
  for (size_t d = 0; d < 2; ++d) {
    ASSERT_FALSE(r.timeline.memory[d].empty());
    for (const auto& m : r.timeline.memory[d]) EXPECT_GE(m.bytes, r.optimizerStateBytes[d]) << "device " << d;
  }
}

TEST(Optimizer, GptLossFallsWithAdamW) {
  auto rec = runRecorded(gpipe(2, 2), trainingOptions("gpt:layers=2,hidden=16,heads=2,seq=4,vocab=16",
                                                      Optimizer::AdamW, 0.01, 4));
  expectLossFalls(rec.report.losses, 4);
  EXPECT_TRUE(rec.report.gradients.passed);
}

TEST(Optimizer, WithoutOptimizerIterationsRepeatTheSameStep) {
  // Today's behaviour stays: no OPTIMIZER op, the same loss every iteration.
  auto o = trainingOptions(kMlp, Optimizer::None, 0, 3);
  auto rec = runRecorded(oneFOneB(2, 4), o);
  ASSERT_EQ(rec.report.losses.size(), 3u);
  EXPECT_DOUBLE_EQ(rec.report.losses[2], rec.report.losses[0]);
  for (const auto& e : rec.events) EXPECT_NE(e.value("kind", ""), "OPTIMIZER");
  EXPECT_TRUE(rec.report.optimizerStateBytes.empty());
}

TEST(Optimizer, RunEventReaderKnowsTheStepKind) {
  // A GUI reads the stream with its schedule's own kinds: OPTIMIZER follows them.
  auto rec = runRecorded(oneFOneB(2, 2), trainingOptions(kMlp, Optimizer::Sgd, 0.1, 1));
  ps::core::RunEventReader reader;
  reader.setUserKinds({});
  std::string text;
  for (const auto& e : rec.events) text += e.dump() + "\n";
  reader.feed(text);
  reader.end();
  int steps = 0;
  for (const auto& op : reader.timeline().ops)
    if (static_cast<int>(op.op.kind) == ps::core::kFirstUserKind) ++steps;
  EXPECT_EQ(steps, 2);
}

TEST(Optimizer, RefusesBadOptionsAndAClashingKind) {
  const auto s = oneFOneB(2, 2);
  // Names are read once, at the command line: what --optimizer does not take is no optimizer.
  EXPECT_FALSE(optimizerFromName("adam").has_value());
  EXPECT_FALSE(optimizerFromName("none").has_value());
  EXPECT_EQ(optimizerFromName("adamw"), Optimizer::AdamW);
  EXPECT_EQ(optimizerName(Optimizer::None), "none");
  EXPECT_FALSE(runSchedule(s, trainingOptions(kMlp, Optimizer::Sgd, 0, 1)).ok());
  EXPECT_FALSE(runSchedule(s, trainingOptions(kMlp, Optimizer::Sgd, -1, 1)).ok());
  auto clash = s;
  clash.userKinds.push_back({"OPTIMIZER", false, "1", {}, {}, {}});
  auto r = scheduleWithOptimizerSteps(clash);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("OPTIMIZER"), std::string::npos);
}

TEST(OptimizerCli, BadFlagsAreUsageErrorsNamingTheFlag) {
  const std::string path = ::testing::TempDir() + "optimizer_cli.pipe";
  std::ofstream(path) << ps::core::printDsl(oneFOneB(2, 2));
  const std::string run = "run " + path + " --model " + kMlp + " --threads 1 --timeout 20";
  for (const char* bad : {" --optimizer adam", " --optimizer sgd --lr 0", " --optimizer sgd --lr -0.1",
                          " --optimizer adamw --lr fast", " --lr 0.1"}) {
    auto r = ps::test::runCli(run + bad);
    EXPECT_EQ(r.exitCode, 2) << bad << "\n" << r.out;
    const std::string flag = std::string(bad).find("--lr") != std::string::npos ? "--lr" : "--optimizer";
    EXPECT_NE(r.out.find("pipestudio-cli run: " + flag), std::string::npos) << bad << "\n" << r.out;
  }
}

TEST(OptimizerCli, EachRankStepsItsOwnStages) {
  const std::string path = ::testing::TempDir() + "optimizer_nproc.pipe";
  std::ofstream(path) << ps::core::printDsl(oneFOneB(2, 4));
  auto r =
      ps::test::runCli("run " + path + " --model " + kMlp +
                           " --threads 1 --timeout 30 --nproc 2 --iterations 4 --optimizer adamw --lr 0.01 "
                           "--check-gradients --events jsonl",
                       ps::test::Stderr::Drop);
  ASSERT_EQ(r.exitCode, 0) << r.out;
  std::vector<double> losses;
  std::map<int, int> lastIterationSteps;
  bool passed = false;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    auto e = nlohmann::json::parse(line, nullptr, false);
    if (!e.is_object()) continue;
    if (e["type"] == "op" && e["kind"] == "OPTIMIZER" && e["iteration"] == 3)
      ++lastIterationSteps[e["device"].get<int>()];
    if (e["type"] == "finished") {
      losses = e["losses"].get<std::vector<double>>();
      passed = e["gradient_check"]["passed"].get<bool>();
    }
  }
  expectLossFalls(losses, 4);
  EXPECT_TRUE(passed);
  EXPECT_EQ(lastIterationSteps, (std::map<int, int>{{0, 1}, {1, 1}}));
}
