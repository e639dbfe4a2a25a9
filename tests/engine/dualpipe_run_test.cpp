// DualPipe's routes on the engine: micro-batches run down and up two copies of the model, and
// the copies of a block train as one set of parameters (their gradients summed before the
// optimizer step, or as the iteration ends), in threads and in processes over Gloo.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "engine_checks.h"
#include "pipestudio/core/analysis/validator.h"

using namespace ps::engine;
using ps::core::ScheduleKind;
using namespace ps::test;

namespace {

// The losses of every iteration, as `run` prints them ("loss per iteration (...): a, b, c").
std::vector<double> lossesPrinted(const std::string& out) {
  std::smatch m;
  std::vector<double> losses;
  if (!std::regex_search(out, m, std::regex(R"(loss per iteration \([^)]*\):([^\n]*))"))) return losses;
  const std::string list = m[1];
  const std::regex number(R"([-0-9.e+]+)");
  for (std::sregex_iterator it(list.begin(), list.end(), number), end; it != end; ++it)
    losses.push_back(std::stod(it->str()));
  return losses;
}

std::string writePipe(const ps::core::Schedule& s, const std::string& name) {
  const std::string path = ::testing::TempDir() + name + ".pipe";
  std::ofstream(path) << ps::core::printDsl(s);
  return path;
}

const char* kMlp = " --model mlp:layers=8,hidden=16 --threads 1 --timeout 60";

}  // namespace

TEST(DualPipeRun, EverySizeRunsWithTheUnpipelinedGradientsInThreads) {
  // D in {2, 4, 8}, M in {2D, 3D, 4D, 20}: every copy of every block holds the model's gradient.
  for (int d : {2, 4, 8})
    for (int m : {2 * d, 3 * d, 4 * d, 20}) {
      SCOPED_TRACE("D=" + std::to_string(d) + " M=" + std::to_string(m));
      const auto s = generated(ScheduleKind::DualPipe, d, m);
      ASSERT_TRUE(ps::core::validateSchedule(s).valid());
      RunOptions o = quickRun("mlp:layers=" + std::to_string(2 * d) + ",hidden=8");
      o.model.dtype = DType::F64;
      RunReport r;
      ASSERT_NO_FATAL_FAILURE(runToTheEnd(s, o, r));
      expectGradientsPassed(s, r);
      EXPECT_EQ(r.timeline.ops.size(), s.opCount());
      // Both copies of every block are checked: twice the model's parameters.
      EXPECT_EQ(r.gradients.parameters.size(), 2u * 2u * static_cast<size_t>(2 * d));
    }
}

TEST(DualPipeRun, CopiesOfABlockDoNotPassTheCheckWithTheirOwnHalfOfTheGradient) {
  // The check compares each copy with the whole model's gradient: a copy that kept only the
  // gradient of its own direction's micro-batches would be half of it, so a pass means summed.
  const auto s = generated(ScheduleKind::DualPipe, 2, 4);
  RunOptions o = quickRun("gpt:layers=2,hidden=16,heads=2,seq=4,vocab=16");
  RunReport r;
  ASSERT_NO_FATAL_FAILURE(runToTheEnd(s, o, r));
  expectGradientsPassed(s, r);
  int copies = 0;
  for (const auto& p : r.gradients.parameters)
    if (p.name.find(" (copy on stage ") != std::string::npos) ++copies;
  EXPECT_EQ(2 * copies, static_cast<int>(r.gradients.parameters.size()));
}

TEST(DualPipeRun, TrainingStepsTheCopiesAsOneModelInThreadsAndProcesses) {
  // AdamW over three iterations: the loss of every iteration equals 1F1B's on the same model
  // and data, which holds only when both copies of every block take the same step each time.
  const std::string f1b = writePipe(generated(ScheduleKind::OneFOneB, 4, 8), "dp_ref_1f1b");
  const std::string dual = writePipe(generated(ScheduleKind::DualPipe, 4, 8), "dp_train");
  const std::string train = std::string(kMlp) + " --optimizer adamw --iterations 3 --check-gradients";
  const auto ref = runCli("run " + f1b + train);
  ASSERT_EQ(ref.exitCode, 0) << ref.out;
  const std::vector<double> expected = lossesPrinted(ref.out);
  ASSERT_EQ(expected.size(), 3u) << ref.out;
  for (const std::string procs : {"", " --nproc 4"}) {
    SCOPED_TRACE(procs.empty() ? "threads" : "processes");
    const auto r = runCli("run " + dual + train + procs);
    ASSERT_EQ(r.exitCode, 0) << r.out;
    EXPECT_NE(r.out.find("gradient check: passed"), std::string::npos) << r.out;
    const std::vector<double> got = lossesPrinted(r.out);
    ASSERT_EQ(got.size(), expected.size()) << r.out;
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], expected[i], 1e-5 * std::abs(expected[i])) << i;
  }
}

TEST(DualPipeRun, ProcessesWithoutAnOptimizerSumTheCopiesAsTheIterationEnds) {
  // Over Gloo each rank holds one copy of two blocks; the check on every rank passes only with
  // the other copy's gradient added. The loss is the sum of the two routes' last ranks.
  const std::string dual = writePipe(generated(ScheduleKind::DualPipe, 4, 8), "dp_gloo");
  const auto r = runCli("run " + dual + kMlp + " --nproc 4 --check-gradients --iterations 2");
  ASSERT_EQ(r.exitCode, 0) << r.out;
  EXPECT_NE(r.out.find("gradient check: passed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("32 parameters"), std::string::npos) << r.out;
}

TEST(DualPipeRun, APartitionIsPerModelBlockAndItsErrorsSaySo) {
  // DualPipe on 4 devices has 8 stages but 4 blocks: a partition lists the blocks' layers.
  const auto s = generated(ScheduleKind::DualPipe, 4, 8);
  RunOptions o = quickRun("mlp:layers=8,hidden=8");
  o.partition = {2, 2, 2};
  auto r = runSchedule(s, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("partition lists 3 model blocks but the schedule has 4"),
            std::string::npos)
      << r.error().message;
  o.partition = {1, 3, 3, 1};
  RunReport report;
  ASSERT_NO_FATAL_FAILURE(runToTheEnd(s, o, report));
  EXPECT_EQ(report.partition, (std::vector<int>{1, 3, 3, 1}));
  expectGradientsPassed(s, report);
  o.partition.clear();
  o.model = parseModelSpec("mlp:layers=3,hidden=8").value();
  r = runSchedule(s, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("fewer than the schedule's 4 model blocks"), std::string::npos)
      << r.error().message;
}
