// Every built-in schedule kind, and recompute / offload variants of them, runs on CPU threads
// with gradients and loss equal to the unpipelined model's.
#include <gtest/gtest.h>

#include "pipestudio/core/planning/generators.h"
#include "pipestudio/core/analysis/validator.h"
#include "pipestudio/engine/engine.h"
#include "schedules.h"

using namespace ps::engine;
using ps::core::ScheduleKind;

namespace {

RunOptions tinyGpt() {
  RunOptions o;
  o.model = parseModelSpec("gpt:layers=2,hidden=16,heads=2,seq=4,vocab=16").value();  // 4 layers
  o.microbatchSize = 2;
  o.checkGradients = true;
  o.timeoutSeconds = 20;
  o.threads = 1;
  return o;
}

ps::core::Schedule generated(ScheduleKind k) {
  auto s = ps::core::generateSchedule(k, {2, 4, 0});
  EXPECT_TRUE(s.ok()) << ps::core::scheduleKindName(k);
  return s.ok() ? s.value() : ps::core::Schedule{};
}

void expectExact(const ps::core::Schedule& s, const RunOptions& o) {
  auto valid = ps::core::validateSchedule(s);
  ASSERT_TRUE(valid.valid()) << s.name << ": " << ps::core::formatDiagnostics(valid.diagnostics);
  auto r = runSchedule(s, o);
  ASSERT_TRUE(r.ok()) << ps::core::formatDiagnostics(r.errors());
  ASSERT_EQ(r->status, ps::core::RunState::Succeeded) << r->diagnostics[0].message;
  EXPECT_TRUE(r->gradients.passed) << s.name << ": worst " << r->gradients.worstParameter << " "
                                   << r->gradients.maxRelativeError << ", loss " << r->gradients.lossRelativeError;
  EXPECT_EQ(r->timeline.ops.size(), s.opCount());
}

class EveryKind : public ::testing::TestWithParam<ScheduleKind> {};

}  // namespace

TEST_P(EveryKind, GradientsEqualUnpipelined) { expectExact(generated(GetParam()), tinyGpt()); }

TEST_P(EveryKind, WithRecomputeGradientsEqualUnpipelined) {
  expectExact(ps::engine::testing::withRecompute(generated(GetParam())), tinyGpt());
}

TEST_P(EveryKind, WithOffloadGradientsEqualUnpipelined) {
  expectExact(ps::engine::testing::withOffload(generated(GetParam())), tinyGpt());
}

INSTANTIATE_TEST_SUITE_P(Engine, EveryKind, ::testing::ValuesIn(ps::core::allScheduleKinds()),
                         [](const auto& info) {
                           std::string n(ps::core::scheduleKindName(info.param));
                           for (auto& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });
