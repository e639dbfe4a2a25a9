// Every built-in schedule kind, and recompute / offload variants of them, runs on CPU threads
// with gradients and loss equal to the unpipelined model's.
#include <gtest/gtest.h>

#include <vector>

#include "engine_checks.h"
#include "fixtures/schedules.h"
#include "pipestudio/core/analysis/validator.h"
#include "pipestudio/core/planning/generators.h"
#include "pipestudio/engine/engine.h"

using namespace ps::engine;
using ps::core::ScheduleKind;
using namespace ps::test;

namespace {

RunOptions tinyGpt() {
  return quickRun("gpt:layers=2,hidden=16,heads=2,seq=4,vocab=16");
}  // 4 layers

void expectExact(const ps::core::Schedule& s, const RunOptions& o) {
  auto valid = ps::core::validateSchedule(s);
  ASSERT_TRUE(valid.valid()) << s.name << ": " << ps::core::formatDiagnostics(valid.diagnostics);
  RunReport r;
  ASSERT_NO_FATAL_FAILURE(runToTheEnd(s, o, r));
  expectGradientsPassed(s, r);
  EXPECT_EQ(r.timeline.ops.size(), s.opCount());
}

class EveryKind : public ::testing::TestWithParam<ScheduleKind> {};

}  // namespace

TEST_P(EveryKind, GradientsEqualUnpipelined) {
  expectExact(generated(GetParam()), tinyGpt());
}

TEST_P(EveryKind, WithRecomputeGradientsEqualUnpipelined) {
  expectExact(ps::test::withRecompute(generated(GetParam())), tinyGpt());
}

TEST_P(EveryKind, WithOffloadGradientsEqualUnpipelined) {
  expectExact(ps::test::withOffload(generated(GetParam())), tinyGpt());
}

INSTANTIATE_TEST_SUITE_P(Engine, EveryKind, ::testing::ValuesIn(ps::core::allScheduleKinds()),
                         [](const auto& info) {
                           std::string n(ps::core::scheduleKindName(info.param));
                           for (auto& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });
