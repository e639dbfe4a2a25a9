// The post-mortem of a hung run (hang_report.h): the wait chain from the device that timed out,
// a cycle or a chain ending at a device that is not waiting, and the `stuck` run events that
// carry each device's place from the ranks to whoever reports.
#include "pipestudio/core/model/hang_report.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pipestudio/core/io/run_events.h"

using namespace ps::core;

namespace {

StuckDevice waiting(int device, int step, const std::string& action, int on, const std::string& waitsFor,
                    int waitsForStep) {
  StuckDevice d;
  d.device = device;
  d.state = StuckDevice::State::Waiting;
  d.step = step;
  d.action = action;
  d.waitsOnDevice = on;
  d.waitsFor = waitsFor;
  d.waitsForStep = waitsForStep;
  d.seconds = 3;
  return d;
}

}  // namespace

TEST(HangReport, TwoRanksWaitingOnEachOtherAreACycle) {
  // GPipe on 2 ranks, rank 0's F0 output lost: rank 1 waits in 1F0 (its step 0) for 0F0 (rank
  // 0's step 0, already run); rank 0 waits in 0B0 (step 2) for 1B0 (rank 1's step 2, not reached).
  std::vector<StuckDevice> s = {waiting(0, 2, "0B0", 1, "1B0", 2), waiting(1, 0, "1F0", 0, "0F0", 0)};
  const HangReport h = describeHang(s, 1);
  EXPECT_TRUE(h.cycle);
  EXPECT_EQ(h.cycleFrom, 0);
  EXPECT_EQ(h.path, (std::vector<int>{1, 0}));
  EXPECT_EQ(
      h.text,
      "rank 1 waits in 1F0 for 0F0 on rank 0, which ran 0F0 (what it sent never arrived) and waits in 0B0 "
      "for 1B0 on rank 1, which rank 1 reaches only after 1F0, closing the cycle");
  ASSERT_EQ(h.stuck.size(), 2u);
  EXPECT_EQ(h.stuck[0].device, 1);
  EXPECT_EQ(h.stuck[0].step, 0);
  EXPECT_EQ(h.stuck[1].device, 0);
  EXPECT_EQ(h.stuck[1].step, 2);
}

TEST(HangReport, AWaitForTheStepTheOtherIsInClosesTheCycleDirectly) {
  std::vector<StuckDevice> s = {waiting(0, 1, "0SEND_F1", 1, "1RECV_B0", 1),
                                waiting(1, 1, "1RECV_B0", 0, "0SEND_F1", 1)};
  const HangReport h = describeHang(s, 0);
  EXPECT_TRUE(h.cycle);
  EXPECT_EQ(
      h.text,
      "rank 0 waits in 0SEND_F1 for 1RECV_B0 on rank 1, which waits in 1RECV_B0 for 0SEND_F1 on rank 0, "
      "closing the cycle");
}

TEST(HangReport, AChainEndsAtASilentRankNamingWhy) {
  // Rank 2 stopped: ranks 1 and 3 wait on it, rank 0 still computes.
  StuckDevice silent;
  silent.device = 2;
  silent.state = StuckDevice::State::Silent;
  silent.note = "stopped (SIGSTOP, or a debugger)";
  StuckDevice running;
  running.device = 0;
  running.state = StuckDevice::State::Running;
  running.step = 4;
  running.action = "0F4";
  std::vector<StuckDevice> s = {running, waiting(1, 3, "1F2", 2, "2B0", 5), silent,
                                waiting(3, 1, "3F1", 2, "2F1", 2)};
  const HangReport h = describeHang(s, 3);
  EXPECT_FALSE(h.cycle);
  EXPECT_EQ(h.path, (std::vector<int>{3, 2}));
  EXPECT_EQ(h.text,
            "rank 3 waits in 3F1 for 2F1 on rank 2, which is silent (stopped (SIGSTOP, or a debugger))");
  ASSERT_EQ(h.stuck.size(), 1u);  // the silent rank's step is unknown
  EXPECT_EQ(h.stuck[0].device, 3);

  // From a rank that is not waiting: the chain is that rank alone.
  EXPECT_EQ(describeHang(s, 0).text, "rank 0 is running 0F4 and waits for nothing");
  // A device out of range (or unknown) ends the chain as silent, in the words asked for.
  std::vector<StuckDevice> two = {waiting(0, 0, "F0@s1", 1, "F0@s0", 0)};
  EXPECT_EQ(describeHang(two, 0, "device").text, "device 0 waits in F0@s1 for F0@s0 on device 1");
  EXPECT_TRUE(describeHang({}, 0).text.empty());
}

TEST(HangReport, OneLinePerDevice) {
  EXPECT_EQ(describeStuckDevice(waiting(1, 0, "1F0", 0, "0F0", 0)),
            "rank 1: waits in 1F0 for 0F0 on rank 0 (3.00 s)");
  StuckDevice silent;
  silent.device = 2;
  silent.note = "sent no report";
  silent.action = "2F3";
  EXPECT_EQ(describeStuckDevice(silent, "device"), "device 2: silent: sent no report, last seen in 2F3");
  StuckDevice done;
  done.device = 0;
  done.state = StuckDevice::State::Finished;
  EXPECT_EQ(describeStuckDevice(done), "rank 0: finished its iteration");
}

TEST(HangReport, StuckEventsAndRelatedOpsRoundTripThroughTheStream) {
  StuckDevice w = waiting(1, 0, "1F0", 0, "0F0", 0);
  StuckDevice silent;
  silent.device = 0;
  silent.note = "sent no report";
  RunErrorEvent e;
  e.code = "engine.timeout";
  e.message = "timed out; wait cycle: ...";
  e.device = 1;
  e.step = 0;
  e.related = {{1, 0}, {0, 2}};
  RunEventReader reader;
  // The writers give lines without their newline (the emitter adds it).
  reader.feed(run_event::stuck(w) + "\n" + run_event::stuck(silent) + "\n" + run_event::error(e) + "\n");
  reader.end();
  for (const auto& w : reader.warnings()) ADD_FAILURE() << w.message;
  ASSERT_EQ(reader.stuck().size(), 2u);
  EXPECT_EQ(reader.stuck()[1].state, StuckDevice::State::Waiting);
  EXPECT_EQ(reader.stuck()[1].action, "1F0");
  EXPECT_EQ(reader.stuck()[1].waitsOnDevice, 0);
  EXPECT_EQ(reader.stuck()[1].waitsFor, "0F0");
  EXPECT_EQ(reader.stuck()[1].waitsForStep, 0);
  EXPECT_DOUBLE_EQ(reader.stuck()[1].seconds, 3);
  EXPECT_EQ(reader.stuck()[0].state, StuckDevice::State::Silent);
  EXPECT_EQ(reader.stuck()[0].note, "sent no report");
  ASSERT_EQ(reader.errors().size(), 1u);
  ASSERT_EQ(reader.errors()[0].related.size(), 2u);
  EXPECT_EQ(reader.errors()[0].related[1].device, 0);
  EXPECT_EQ(reader.errors()[0].related[1].step, 2);
  // The diagnostic marks the error's own op and every stuck op of the chain.
  // Then one note per device saying where it stood, for whoever has only the timeline.
  const auto tl = reader.timeline();
  ASSERT_EQ(tl.diagnostics.size(), 3u);
  ASSERT_EQ(tl.diagnostics[0].related.size(), 2u);
  EXPECT_EQ(tl.diagnostics[0].related[0].device, 1);
  EXPECT_EQ(tl.diagnostics[0].related[1].device, 0);
  EXPECT_EQ(tl.diagnostics[1].code, "engine.stuck");
  EXPECT_EQ(tl.diagnostics[1].severity, Severity::Note);
  EXPECT_EQ(tl.diagnostics[1].message, "device 0: silent: sent no report");
  EXPECT_TRUE(tl.diagnostics[1].related.empty());  // its step is unknown
  EXPECT_EQ(tl.diagnostics[2].message, "device 1: waits in 1F0 for 0F0 on device 0 (3.00 s)");
  ASSERT_EQ(tl.diagnostics[2].related.size(), 1u);
  EXPECT_EQ(tl.diagnostics[2].related[0].step, 0);
}

TEST(HangReport, HostileStuckEventsAreWarningsNotAllocations) {
  RunEventReader reader;
  reader.feed(
      R"({"type":"stuck","device":2000000000,"state":"waiting"})"
      "\n"
      R"({"type":"stuck","device":1,"state":"asleep"})"
      "\n"
      R"({"type":"stuck","device":1,"state":"waiting","waits_on_device":-7})"
      "\n"
      R"({"type":"error","code":"engine.timeout","message":"m","related":[[-1,0],[0,-5],[2000000000,1],[1,2]]})"
      "\n");
  reader.end();
  EXPECT_TRUE(reader.stuck().empty());
  EXPECT_EQ(reader.warnings().size(), 3u);
  ASSERT_EQ(reader.errors().size(), 1u);
  ASSERT_EQ(reader.errors()[0].related.size(), 1u);
  EXPECT_EQ(reader.errors()[0].related[0].device, 1);
}

TEST(HangReport, TheErrorsClauseIsFoundAgainInTheRunsTimeline) {
  // The engine appends hangClause to its timeout; a GUI given the streamed (or stored) timeline
  // finds the cycle text and the stuck steps again, with no ranks' states at hand.
  std::vector<StuckDevice> s = {waiting(0, 2, "0B0", 1, "1B0", 2), waiting(1, 0, "1F0", 0, "0F0", 0)};
  const HangReport h = describeHang(s, 1);
  ASSERT_TRUE(h.cycle);
  EXPECT_EQ(hangClause(h), "wait cycle: " + h.text);
  RunErrorEvent e;
  e.code = "engine.timeout";
  e.message = "rank 1 timed out after 3 s in 1F0; " + hangClause(h);
  e.device = 1;
  e.related = h.stuck;
  RunEventReader reader;
  reader.feed(run_event::error(e) + "\n");
  reader.end();
  Diagnostics ds = reader.timeline().diagnostics;
  ds.insert(ds.begin(), makeWarning("engine.slow", "slow; wait cycle: not an error"));
  const auto found = findHang(ds);
  ASSERT_TRUE(found.has_value());
  EXPECT_TRUE(found->cycle);
  EXPECT_EQ(found->text, h.text);
  EXPECT_EQ(found->clause, hangClause(h));
  EXPECT_EQ(found->cause, "rank 1 timed out after 3 s in 1F0");
  EXPECT_EQ(found->code, "engine.timeout");
  ASSERT_EQ(found->stuck.size(), 2u);
  // No `stuck` events in this stream: no device's own line.
  EXPECT_EQ(found->notes, (std::vector<std::string>{"", ""}));
  EXPECT_EQ(found->stuck[0].device, 1);
  EXPECT_EQ(found->stuck[0].step, 0);
  EXPECT_EQ(found->stuck[1].device, 0);
  EXPECT_EQ(found->stuck[1].step, 2);
  // A summary repeating the message first (the GUI's "run failed on HOST: ..."): the error
  // with the stuck steps is the one found.
  Diagnostics summarised = ds;
  summarised.insert(summarised.begin(), makeError("run.failed", "run failed on local: " + e.message));
  const auto fromSummary = findHang(summarised);
  ASSERT_TRUE(fromSummary.has_value());
  EXPECT_EQ(fromSummary->code, "engine.timeout");
  EXPECT_EQ(fromSummary->stuck.size(), 2u);
  // A chain reads as one; an error without the clause is no hang.
  StuckDevice running;
  running.device = 0;
  running.state = StuckDevice::State::Running;
  running.step = 1;
  const HangReport chain = describeHang({running, waiting(1, 0, "1F0", 0, "0F0", 0)}, 1);
  ASSERT_FALSE(chain.cycle);
  const auto c = findHang({makeError("engine.timeout", "timed out; " + hangClause(chain))});
  ASSERT_TRUE(c.has_value());
  EXPECT_FALSE(c->cycle);
  EXPECT_EQ(c->text, chain.text);
  EXPECT_FALSE(findHang({makeError("engine.op-failed", "CUDA out of memory")}).has_value());
  EXPECT_FALSE(findHang({}).has_value());
}
