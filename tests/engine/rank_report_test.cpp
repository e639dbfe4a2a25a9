// The report a rank of a multi-process run sends rank 0 (engine/src/run/rank_report.h): named
// fields that survive the trip through the store, a clear refusal of anything else, and the
// choice of the run's root cause among every rank's errors.
#include "../../engine/src/run/rank_report.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "pipestudio/core/io/run_events.h"

namespace {

using ps::core::Op;
using ps::core::OpKind;
using ps::engine::detail::ErrorInfo;
using ps::engine::detail::RankReport;
using ps::engine::detail::rankReportFromJson;
using ps::engine::detail::rankReportToJson;
using ps::engine::detail::rootCause;

RankReport sample() {
  RankReport r;
  r.ops.push_back({1, 4, Op{OpKind::B, 1, 2}, true, 3.25, 4.5});
  r.ops.push_back({1, 5, Op{static_cast<OpKind>(64), 1, -1}, false, 5.0, 5.5});  // a user kind
  r.transfers.push_back({0, 1, Op{OpKind::F, 0, 2}, Op{OpKind::F, 1, 2}, 4096, 1.0, 1.25});
  r.memory.push_back({1, {0.0, 1024}});
  r.memory.push_back({1, {4.5, -512}});
  r.losses = {0.75, 0.5};
  r.iterationMs = {12.5, 11.0};
  r.parameters.push_back({"layer1.weight", 1e-7});
  ErrorInfo e;
  e.code = "engine.timeout";
  e.message = "device 1: waited 2 s for 0SEND_F2";
  e.device = 1;
  e.step = 5;
  e.waitStart = 17.5;
  e.lostRank = 0;
  r.error = e;
  ps::core::StuckDevice d;
  d.device = 1;
  d.state = ps::core::StuckDevice::State::Waiting;
  d.step = 5;
  d.action = "1F2";
  d.waitsOnDevice = 0;
  d.waitsFor = "0SEND_F2";
  d.waitsForStep = 3;
  d.seconds = 2.0;
  r.stuck.push_back(d);
  return r;
}

TEST(RankReport, SurvivesTheTripThroughTheStore) {
  const RankReport in = sample();
  auto out = rankReportFromJson(rankReportToJson(in), 1);
  ASSERT_TRUE(out.ok()) << out.errors().front().message;
  ASSERT_EQ(out->ops.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(out->ops[i].device, in.ops[i].device);
    EXPECT_EQ(out->ops[i].step, in.ops[i].step);
    EXPECT_EQ(out->ops[i].op, in.ops[i].op);
    EXPECT_EQ(out->ops[i].overlapped, in.ops[i].overlapped);
    EXPECT_EQ(out->ops[i].start, in.ops[i].start);
    EXPECT_EQ(out->ops[i].end, in.ops[i].end);
  }
  ASSERT_EQ(out->transfers.size(), 1u);
  EXPECT_EQ(out->transfers[0].producer, in.transfers[0].producer);
  EXPECT_EQ(out->transfers[0].consumer, in.transfers[0].consumer);
  EXPECT_EQ(out->transfers[0].bytes, 4096);
  EXPECT_EQ(out->transfers[0].end, 1.25);
  ASSERT_EQ(out->memory.size(), 2u);
  EXPECT_EQ(out->memory[1].device, 1);
  EXPECT_EQ(out->memory[1].sample.bytes, -512);
  EXPECT_EQ(out->losses, in.losses);
  EXPECT_EQ(out->iterationMs, in.iterationMs);
  ASSERT_EQ(out->parameters.size(), 1u);
  EXPECT_EQ(out->parameters[0].name, "layer1.weight");
  EXPECT_EQ(out->parameters[0].relativeError, 1e-7);
  ASSERT_TRUE(out->error.has_value());
  EXPECT_EQ(out->error->code, "engine.timeout");
  EXPECT_EQ(out->error->message, in.error->message);
  EXPECT_EQ(out->error->step, 5);
  EXPECT_EQ(out->error->waitStart, 17.5);
  EXPECT_EQ(out->error->lostRank, 0);
  ASSERT_EQ(out->stuck.size(), 1u);
  EXPECT_EQ(out->stuck[0].state, ps::core::StuckDevice::State::Waiting);
  EXPECT_EQ(out->stuck[0].waitsFor, "0SEND_F2");
  EXPECT_EQ(out->stuck[0].waitsForStep, 3);
  // A successful rank sends no error and no stuck devices.
  RankReport ok;
  auto back = rankReportFromJson(rankReportToJson(ok), 2);
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->error.has_value());
  EXPECT_TRUE(back->stuck.empty());
}

TEST(RankReport, FieldsAreNamedNotPositional) {
  const auto j = nlohmann::json::parse(rankReportToJson(sample()));
  const auto& op = j.at("ops").at(0);
  EXPECT_EQ(op.at("device"), 1);
  EXPECT_EQ(op.at("step"), 4);
  EXPECT_EQ(op.at("op").at("stage"), 1);
  EXPECT_EQ(op.at("op").at("microbatch"), 2);
  EXPECT_EQ(op.at("overlapped"), true);
  EXPECT_EQ(op.at("start_ms"), 3.25);
  EXPECT_EQ(j.at("transfers").at(0).at("bytes"), 4096);
  EXPECT_EQ(j.at("memory").at(0).at("time_ms"), 0.0);
  EXPECT_EQ(j.at("parameters").at(0).at("name"), "layer1.weight");
  EXPECT_EQ(j.at("error").at("wait_start"), 17.5);
  // A stuck device is the run-event stream's own `stuck` event: one codec for both.
  const auto& stuck = j.at("stuck").at(0);
  EXPECT_EQ(stuck.at("type"), "stuck");
  EXPECT_EQ(stuck.at("waits_on_device"), 0);
  EXPECT_EQ(stuck.dump(), ps::core::run_event::stuck(sample().stuck[0]));
}

TEST(RankReport, AnythingElseIsRefusedNamingTheRankAndTheField) {
  auto notObject = rankReportFromJson("[1, 2]", 3);
  ASSERT_FALSE(notObject.ok());
  EXPECT_EQ(notObject.errors().front().code, "engine.rank-report");
  EXPECT_NE(notObject.errors().front().message.find("rank 3's report"), std::string::npos);
  auto cut = rankReportFromJson(R"({"ops": [)", 2);
  ASSERT_FALSE(cut.ok());
  // The old positional form ([device, step, op, ...]) is not a report of this build.
  auto positional = rankReportFromJson(
      R"({"ops": [[0, 1, [0, 0, 1], false, 1.0, 2.0]], "transfers": [], "memory": [], "losses": [],
          "iteration_ms": [], "parameters": []})",
      1);
  ASSERT_FALSE(positional.ok());
  EXPECT_NE(positional.errors().front().message.find("rank 1's report: field 'ops'"), std::string::npos)
      << positional.errors().front().message;
  nlohmann::json j = nlohmann::json::parse(rankReportToJson(sample()));
  j.at("error").erase("code");
  auto noCode = rankReportFromJson(j.dump(), 4);
  ASSERT_FALSE(noCode.ok());
  EXPECT_NE(noCode.errors().front().message.find("field 'error'"), std::string::npos);
  // A stuck device in the old form, or in an unknown state, is refused the same way.
  for (const char* bad : {R"([{"device": 1, "state": "waiting", "waits_on": 0}])",
                          R"([{"type": "stuck", "device": 1, "state": "dancing"}])", R"({"device": 1})"}) {
    nlohmann::json k = nlohmann::json::parse(rankReportToJson(sample()));
    k["stuck"] = nlohmann::json::parse(bad);
    auto refused = rankReportFromJson(k.dump(), 5);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.errors().front().code, "engine.rank-report");
    EXPECT_NE(refused.errors().front().message.find("rank 5's report: field 'stuck'"), std::string::npos)
        << refused.errors().front().message;
  }
}

ErrorInfo error(const std::string& code, const std::string& message, double waitStart = -1) {
  ErrorInfo e;
  e.code = code;
  e.message = message;
  e.waitStart = waitStart;
  return e;
}

TEST(RankReport, RootCauseIsTheCancelThenTheAbortThenTheFirstWait) {
  const std::vector<ErrorInfo> errors{
      error("engine.timeout", "device 2 waited", 9.0), error("engine.op-failed", "device 1: B1@s1 threw"),
      error("engine.timeout", "device 0 waited", 4.0), error("engine.peer-lost", "device 3 lost rank 1")};
  // What the failing rank published under "abort".
  EXPECT_EQ(rootCause(errors, std::string("device 1: B1@s1 threw")), 1u);
  // No abort: the wait that began first.
  EXPECT_EQ(rootCause(errors, std::nullopt), 2u);
  // An abort that names a timeout does not make it the cause: the earliest wait does.
  EXPECT_EQ(rootCause(errors, std::string("device 2 waited")), 2u);
  // A cancel on any rank comes before everything it caused.
  std::vector<ErrorInfo> cancelled = errors;
  cancelled.push_back(error("engine.cancelled", "cancelled"));
  EXPECT_EQ(rootCause(cancelled, std::string("device 1: B1@s1 threw")), 4u);
  // Neither abort nor timeout: the first error.
  EXPECT_EQ(rootCause({error("engine.peer-lost", "a"), error("engine.rank-lost", "b")}, std::nullopt), 0u);
}

}  // namespace
