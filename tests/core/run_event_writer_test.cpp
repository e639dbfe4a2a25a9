// The run-event writer (core::run_event) beside the reader: what the engine and the CLI write
// reads back field for field, and the run-state vocabulary has one set of names.
#include <gtest/gtest.h>

#include <string>

#include "pipestudio/core/io/run_events.h"
#include "pipestudio/core/model/run_state.h"

using namespace ps::core;

namespace {
RunEventReader readBack(const std::string& lines) {
  RunEventReader r("writer");
  r.feed(lines);
  r.end();
  return r;
}
}  // namespace

TEST(RunEventWriter, EveryEventReadsBack) {
  RunStartedInfo s;
  s.protocolVersion = kRunEventProtocolVersion;
  s.schedule = "zb";
  s.model = "mlp:layers=4";
  s.device = "cpu";
  s.devices = 2;
  s.stages = 4;
  s.microbatches = 8;
  s.microbatchSize = 2;
  s.iterations = 3;
  s.warmup = 1;
  s.partition = {1, 1, 1, 1};
  s.worldSize = 2;
  s.threads = 4;
  s.optimizer = "adamw";
  s.learningRate = 1e-3;
  s.localWorldSize = 2;
  TimelineOp op;
  op.device = 1;
  op.step = 3;
  op.op = Op{OpKind::F, 1, 2};
  op.start = 1.25;
  op.end = 2.5;
  RunErrorEvent e;
  e.code = "engine.timeout";
  e.message = "device 1 waited 30 s for F1s0";
  e.device = 1;
  e.step = 3;
  RunFinishedInfo f;
  f.state = RunState::Failed;
  f.losses = {0.5};
  f.iterationMs = {7.5};
  f.makespanMs = 6;
  f.bubbleRatio = 0.25;
  f.gradientCheck = RunGradientCheck{true, 1e-7, "layer0.weight", 0, 1e-5};

  const std::string lines = run_event::started(s) + "\n" + run_event::progress({1, 4, false}) + "\n" +
                            run_event::op(1, op, "F2s1", "F") + "\n" + run_event::memory(1, 1, 2.5, 4096) +
                            "\n" + run_event::error(e) + "\n" + run_event::finished(f) + "\n";
  const RunEventReader r = readBack(lines);
  EXPECT_TRUE(r.warnings().empty()) << formatDiagnostics(r.warnings());
  EXPECT_EQ(r.events(), 6u);
  ASSERT_TRUE(r.started());
  EXPECT_EQ(r.started()->schedule, "zb");
  EXPECT_EQ(r.started()->partition, s.partition);
  EXPECT_EQ(r.started()->threads, 4);
  EXPECT_EQ(r.started()->optimizer, "adamw");
  EXPECT_DOUBLE_EQ(r.started()->learningRate, 1e-3);
  EXPECT_EQ(r.started()->localWorldSize, 2);
  EXPECT_EQ(r.progress().iteration, 1);
  EXPECT_EQ(r.progress().iterations, 4);
  ASSERT_EQ(r.errors().size(), 1u);
  EXPECT_EQ(r.errors()[0].code, "engine.timeout");
  EXPECT_EQ(r.errors()[0].device, 1);
  EXPECT_EQ(r.errors()[0].step, 3);
  ASSERT_TRUE(r.finished());
  EXPECT_EQ(r.finished()->status, "failed");
  EXPECT_EQ(r.finished()->state, RunState::Failed);
  ASSERT_TRUE(r.finished()->gradientCheck);
  EXPECT_EQ(r.finished()->gradientCheck->worstParameter, "layer0.weight");
  const Timeline t = r.timeline();
  ASSERT_EQ(t.ops.size(), 1u);
  EXPECT_EQ(t.ops[0].op.stage, 1);
  EXPECT_EQ(t.ops[0].op.microbatch, 2);
  EXPECT_DOUBLE_EQ(t.ops[0].start, 1.25);
  ASSERT_GE(t.memory.size(), 2u);
  ASSERT_EQ(t.memory[1].size(), 1u);
  EXPECT_EQ(t.memory[1][0].bytes, 4096);
  EXPECT_FALSE(t.complete);
}

// A refusal (before any run) carries its stage and protocol; an ordinary error does not.
TEST(RunEventWriter, RefusalCarriesStageAndProtocol) {
  RunErrorEvent refused;
  refused.code = "engine.refused";
  refused.message = "no engine";
  refused.stage = "refused";
  refused.protocolVersion = kRunEventProtocolVersion;
  const RunEventReader r = readBack(run_event::error(refused) + "\n");
  ASSERT_EQ(r.errors().size(), 1u);
  EXPECT_EQ(r.errors()[0].stage, "refused");
  EXPECT_EQ(r.errors()[0].protocolVersion, kRunEventProtocolVersion);
  EXPECT_EQ(run_event::error(RunErrorEvent{"c", "m"}).find("stage"), std::string::npos);
}

// Succeeded travels as the protocol's "finished" and comes back as Succeeded; a complete
// timeline needs it.
TEST(RunEventWriter, StatesTravelAsTheProtocolsTokens) {
  for (RunState st : {RunState::Succeeded, RunState::Failed, RunState::Cancelled}) {
    RunFinishedInfo f;
    f.state = st;
    const RunEventReader r = readBack(run_event::finished(f) + "\n");
    ASSERT_TRUE(r.finished());
    EXPECT_EQ(r.finished()->state, st);
    EXPECT_EQ(r.finished()->status, runEventStatusToken(st));
    EXPECT_EQ(r.timeline().complete, st == RunState::Succeeded);
  }
  EXPECT_EQ(runEventStatusToken(RunState::Succeeded), "finished");
  // A token this reader does not know is not a success.
  const RunEventReader r = readBack(R"({"type":"finished","status":"exploded"})"
                                    "\n");
  ASSERT_TRUE(r.finished());
  EXPECT_EQ(r.finished()->state, RunState::Failed);
}

TEST(RunState, OneSetOfNames) {
  for (RunState st :
       {RunState::Queued, RunState::Running, RunState::Succeeded, RunState::Failed, RunState::Cancelled}) {
    SCOPED_TRACE(std::string(runStateName(st)));
    EXPECT_EQ(parseRunState(runStateName(st)), st);
  }
  EXPECT_EQ(runStateName(RunState::Succeeded), "succeeded");
  EXPECT_FALSE(parseRunState("finished").has_value()) << "the event token is not a state name";
  EXPECT_TRUE(isTerminal(RunState::Cancelled));
  EXPECT_FALSE(isTerminal(RunState::Running));
}
