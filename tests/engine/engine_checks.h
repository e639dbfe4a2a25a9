#pragma once
// Checks shared by the engine tests: built-in schedules, runs that must finish, gradients
// that must match the unpipelined reference, and the same through `pipestudio-cli run`.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "cli/cli_runner.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/planning/generators.h"
#include "pipestudio/engine/engine.h"

namespace ps::test {

// A built-in schedule (a test failure, and an empty schedule, when the generator refuses).
inline core::Schedule generated(core::ScheduleKind k, int devices = 2, int micro = 4) {
  auto s = core::generateSchedule(k, {devices, micro, 0});
  EXPECT_TRUE(s.ok()) << core::scheduleKindName(k);
  return s.ok() ? s.value() : core::Schedule{};
}

// A small, quick run of `model` (micro-batches of 2, gradients checked, one thread).
inline engine::RunOptions quickRun(const std::string& model) {
  engine::RunOptions o;
  o.model = engine::parseModelSpec(model).value();
  o.microbatchSize = 2;
  o.checkGradients = true;
  o.timeoutSeconds = 20;
  o.threads = 1;
  return o;
}

// Runs `s`, which must finish; its report goes to `report`. Call through
// ASSERT_NO_FATAL_FAILURE.
inline void runToTheEnd(const core::Schedule& s, const engine::RunOptions& o, engine::RunReport& report) {
  auto r = engine::runSchedule(s, o);
  ASSERT_TRUE(r.ok()) << core::formatDiagnostics(r.errors());
  ASSERT_EQ(r->status, core::RunState::Succeeded) << r->diagnostics[0].message;
  report = std::move(r).value();
}

inline void expectGradientsPassed(const core::Schedule& s, const engine::RunReport& r) {
  EXPECT_TRUE(r.gradients.passed) << s.name << ": worst " << r.gradients.worstParameter << " "
                                  << r.gradients.maxRelativeError << ", loss "
                                  << r.gradients.lossRelativeError;
}

// `pipestudio-cli run PIPE ARGS` with `s` written to PIPE passes its gradient check; PIPE is
// removed.
inline void expectCliRunPassesGradientCheck(const core::Schedule& s, const std::string& pipe,
                                            const std::string& args) {
  std::ofstream(pipe) << core::printDsl(s);
  const auto result = runCommand(std::string(PIPESTUDIO_CLI) + " run " + pipe + args);
  const std::string& out = result.out;
  EXPECT_EQ(result.exitCode, 0) << out;
  EXPECT_NE(out.find("gradient check: passed"), std::string::npos) << out;
  std::remove(pipe.c_str());
}

}  // namespace ps::test
