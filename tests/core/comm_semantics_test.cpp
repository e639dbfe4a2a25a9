// Named communication semantics (comm_semantics.h): the orders of pytorch/pytorch#172668 hang
// under nccl and run when posted, with the cycle named action by action across ranks; head-of-line
// waits are simulated and counted; batched point-to-point ops start as a group; dualpipe's
// compute waits for the transfers posted before it; schedules without explicit SEND/RECV simulate
// alike under every semantics.
#include "pipestudio/core/analysis/comm_semantics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "fixtures/files.h"
#include "fixtures/profiles.h"
#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/analysis/validator.h"
#include "pipestudio/core/io/pytorch_csv.h"
#include "pipestudio/core/planning/generators.h"

using namespace ps::core;
namespace fs = std::filesystem;

namespace {

const fs::path kData = PIPESTUDIO_TEST_DATA_DIR;

Schedule csv(const std::string& text) {
  auto s = readPytorchCsv(text);
  EXPECT_TRUE(s.ok()) << formatDiagnostics(s.errors());
  return s.ok() ? *s : Schedule{};
}

Schedule csvFile(const fs::path& p) {
  return csv(ps::test::readFile(p));
}

ValidationReport validateUnder(const Schedule& s, CommSemantics c, bool batched = false) {
  ValidateOptions o;
  o.comm.semantics = c;
  o.comm.batchConsecutive = batched;
  return validateSchedule(s, o);
}

std::string deadlockMessage(const ValidationReport& r) {
  for (const Diagnostic& d : r.diagnostics)
    if (d.code == "validate.deadlock") return d.message;
  return {};
}

Timeline simulateUnder(const Schedule& s, CommSemantics c, double linkMs, bool batched = false) {
  CostProfile p;
  p.name = "test";
  for (int i = 0; i < s.pipeline.stages; ++i) {
    LayerCost l;
    l.name = "L" + std::to_string(i);
    l.forwardMs = 1;
    l.backwardInputMs = 1;
    l.backwardWeightMs = 1;
    p.layers.push_back(l);
  }
  p.fixedCommMs = linkMs;
  auto model = makeSimulationModel(s, p);
  EXPECT_TRUE(model.ok()) << formatDiagnostics(model.errors());
  SimulationOptions o;
  o.comm.semantics = c;
  o.comm.batchConsecutive = batched;
  auto t = simulate(s, *model, o);
  EXPECT_TRUE(t.ok()) << formatDiagnostics(t.errors());
  return t.ok() ? *t : Timeline{};
}

const TimelineOp* find(const Timeline& t, const Op& op) {
  for (const TimelineOp& o : t.ops)
    if (o.op == op) return &o;
  return nullptr;
}

// Two ranks, stages 0 and 1, two micro-batches: 1F1B with its communication written out and no
// batching. Rank 0 sends both activations before it receives a gradient; rank 1 sends the first
// gradient before it receives the second activation. Posted, fine; on one NCCL stream per rank,
// each side's send waits for a receive the other has queued behind its own send.
const char* kUnbatched1F1B =
    "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
    "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n";

}  // namespace

TEST(CommSemantics, NamesAndDefaults) {
  for (CommSemantics c : {CommSemantics::Posted, CommSemantics::Nccl, CommSemantics::DualPipe})
    EXPECT_EQ(commSemanticsFromName(commSemanticsName(c)), c);
  EXPECT_FALSE(commSemanticsFromName("gloo").has_value());
  const Schedule comms = csv(kUnbatched1F1B);
  auto implied = generateSchedule(ScheduleKind::OneFOneB, {2, 4});
  ASSERT_TRUE(implied.ok());
  // A compute+comms CSV is what PyTorch's runtime runs on GPUs: nccl. A .pipe, or anything
  // without explicit SEND/RECV, posted.
  EXPECT_EQ(defaultCommSemantics(comms, /*fromPytorchCsv=*/true), CommSemantics::Nccl);
  EXPECT_EQ(defaultCommSemantics(comms, false), CommSemantics::Posted);
  EXPECT_EQ(defaultCommSemantics(*implied, true), CommSemantics::Posted);
  EXPECT_TRUE(commSemanticsApplies(comms, {CommSemantics::Nccl}));
  EXPECT_FALSE(commSemanticsApplies(comms, {CommSemantics::Posted}));
  EXPECT_FALSE(commSemanticsApplies(*implied, {CommSemantics::Nccl}));
}

TEST(CommSemantics, Issue172668RecvDeferredHangsOnNcclAndRunsPosted) {
  const Schedule s = csvFile(kData / "comm" / "issue172668_recv_deferred.csv");
  const ValidationReport posted = validateUnder(s, CommSemantics::Posted);
  EXPECT_TRUE(posted.valid()) << formatDiagnostics(posted.diagnostics);
  EXPECT_EQ(posted.semantics, CommSemantics::Posted);
  const ValidationReport nccl = validateUnder(s, CommSemantics::Nccl);
  EXPECT_FALSE(nccl.valid());
  EXPECT_EQ(nccl.semantics, CommSemantics::Nccl);
  // Rank 0's stream is at 0SEND_F1, which meets 1RECV_F1; rank 1 posts that only after 1SEND_F0,
  // whose receive 2RECV_F0 rank 0 has queued behind 0SEND_F1.
  EXPECT_EQ(deadlockMessage(nccl),
            "deadlock under nccl: rank 0 waits in 0SEND_F1 for 1RECV_F1 on rank 1, queued behind 1SEND_F0, "
            "which waits for 2RECV_F0 on rank 0, queued behind 0SEND_F1, closing the cycle");
  ASSERT_EQ(nccl.deadlock.size(), 2u);
  EXPECT_EQ(nccl.deadlock[0].device, 0);
  EXPECT_EQ(nccl.deadlock[0].waitsFor, (Op{OpKind::RecvF, 1, 1}));
  EXPECT_EQ(nccl.deadlock[1].device, 1);
  EXPECT_EQ(nccl.deadlock[1].waitsFor, (Op{OpKind::RecvF, 2, 0}));
  // The simulation stalls there too, with the same cycle.
  const Timeline t = simulateUnder(s, CommSemantics::Nccl, 0.5);
  EXPECT_FALSE(t.complete);
  ASSERT_FALSE(t.diagnostics.empty());
  EXPECT_EQ(t.diagnostics.back().message, deadlockMessage(nccl));
  EXPECT_TRUE(simulateUnder(s, CommSemantics::Posted, 0.5).complete);
}

TEST(CommSemantics, Issue172668OddRanksRecvFirstStillHangs) {
  // Rank 1 posting its held receives before each of its sends does not help: the first cycle is
  // rank 0's sends ahead of its receives.
  const Schedule s = csvFile(kData / "comm" / "issue172668_odd_ranks_recv_first.csv");
  EXPECT_TRUE(validateUnder(s, CommSemantics::Posted).valid());
  const ValidationReport nccl = validateUnder(s, CommSemantics::Nccl);
  EXPECT_EQ(deadlockMessage(nccl),
            "deadlock under nccl: rank 0 waits in 0SEND_F1 for 1RECV_F1 on rank 1, queued behind 1SEND_F0, "
            "which waits for 2RECV_F0 on rank 0, queued behind 0SEND_F1, closing the cycle");
  // With rank 0's receives back where PyTorch 2.11 puts them, rank 1's order runs.
  Schedule fixedRank0 = s;
  fixedRank0.devices[0] =
      csvFile(kData / "pytorch" / "Interleaved1F1B_pp2_mb4_spr2_compute_comms.csv").devices[0];
  EXPECT_TRUE(validateUnder(fixedRank0, CommSemantics::Nccl).valid())
      << deadlockMessage(validateUnder(fixedRank0, CommSemantics::Nccl));
}

TEST(CommSemantics, PyTorchsDeferPpRecvHangsOnThisScheduleAndPipeStudiosDoesNot) {
  // PyTorch's fix (defer_pp_recv, PR #178815, as PyTorch 2.15 writes it) for the schedule of
  // #172668. Its rank-parity rule flushes on rank 0 only the receives it already holds; rank 1
  // holds 3RECV_F1 past its 3SEND_B0, and rank 0 sends 2SEND_F1 before it posts 2RECV_B0.
  const Schedule pytorch =
      csvFile(kData / "pytorch-2.15" / "Interleaved1F1B_pp2_mb4_spr2_compute_comms_deferred.csv");
  EXPECT_TRUE(validateUnder(pytorch, CommSemantics::Posted).valid());
  EXPECT_EQ(deadlockMessage(validateUnder(pytorch, CommSemantics::Nccl)),
            "deadlock under nccl: rank 0 waits in 2SEND_F1 for 3RECV_F1 on rank 1, queued behind 3SEND_B0, "
            "which waits for 2RECV_B0 on rank 0, queued behind 2SEND_F1, closing the cycle");
  EXPECT_FALSE(simulateUnder(pytorch, CommSemantics::Nccl, 0.5).complete);
  // PipeStudio's placement keeps PyTorch's where it can and posts 3RECV_F1 before 3SEND_B0.
  auto gen = generateSchedule(ScheduleKind::Interleaved1F1B, {2, 4});
  ASSERT_TRUE(gen.ok());
  PytorchTarget t{2, 15};
  t.recv = RecvPlacement::DeferredSafe;
  auto safe = lowerToPytorchComms(*gen, t);
  ASSERT_TRUE(safe.ok()) << formatDiagnostics(safe.errors());
  EXPECT_TRUE(validateUnder(*safe, CommSemantics::Nccl).valid());
  EXPECT_TRUE(simulateUnder(*safe, CommSemantics::Nccl, 0.5).complete);
  EXPECT_NE(*safe, pytorch);
}

TEST(CommSemantics, UnbatchedSendsAndReceivesHangAndBatchedOnesRun) {
  const Schedule s = csv(kUnbatched1F1B);
  EXPECT_TRUE(validateUnder(s, CommSemantics::Posted).valid());
  const ValidationReport nccl = validateUnder(s, CommSemantics::Nccl);
  EXPECT_EQ(deadlockMessage(nccl),
            "deadlock under nccl: rank 0 waits in 0SEND_F1 for 1RECV_F1 on rank 1, queued behind 1SEND_B0, "
            "which waits for 0RECV_B0 on rank 0, queued behind 0SEND_F1, closing the cycle");
  // batch_isend_irecv of each run of consecutive SEND/RECV (Megatron's
  // send_forward_recv_backward) starts both directions together.
  EXPECT_TRUE(validateUnder(s, CommSemantics::Nccl, /*batched=*/true).valid());
  EXPECT_TRUE(simulateUnder(s, CommSemantics::Nccl, 0.5, true).complete);
  // DualPipe batches what is posted between two compute ops.
  EXPECT_TRUE(validateUnder(s, CommSemantics::DualPipe).valid());
}

TEST(CommSemantics, HeadOfLineWaitsAreSimulatedAndCounted) {
  // PyTorch's own lowering (2.11) of Interleaved1F1B on 2 ranks, 2 micro-batches: rank 0 posts
  // 2RECV_F0 right after 0SEND_F0, so on its NCCL stream 0SEND_F1 waits behind that receive
  // until rank 1 has computed 1F0 and sent it (pytorch/pytorch#188833).
  const Schedule s = csvFile(kData / "pytorch" / "Interleaved1F1B_pp2_mb2_spr2_compute_comms.csv");
  const Timeline posted = simulateUnder(s, CommSemantics::Posted, 0.5);
  const Timeline nccl = simulateUnder(s, CommSemantics::Nccl, 0.5);
  ASSERT_TRUE(posted.complete && nccl.complete);
  EXPECT_EQ(nccl.comm, "nccl");
  EXPECT_EQ(posted.comm, "posted");
  EXPECT_TRUE(posted.headOfLine.empty());
  // The first wait is 2RECV_F0's behind 0SEND_F0's transfer, [1, 1.5]; then the one of the issue.
  const HeadOfLineWait* found = nullptr;
  for (const HeadOfLineWait& w : nccl.headOfLine)
    if (w.op == Op{OpKind::SendF, 0, 1}) found = &w;
  ASSERT_NE(found, nullptr);
  const HeadOfLineWait& w = *found;
  EXPECT_EQ(w.device, 0);
  EXPECT_EQ(w.blocker, (Op{OpKind::RecvF, 2, 0}));
  EXPECT_EQ(nccl.headOfLine.front().op, (Op{OpKind::RecvF, 2, 0}));
  EXPECT_DOUBLE_EQ(nccl.headOfLine.front().start, 1.0);
  EXPECT_DOUBLE_EQ(nccl.headOfLine.front().end, 1.5);
  // 0F1 ends at 2; 2RECV_F0 completes when 1SEND_F0 has met it: 0F0 [0,1], transfer to 1.5,
  // 1F0 [1.5, 2.5], transfer to 3.
  EXPECT_DOUBLE_EQ(w.start, 2.0);
  EXPECT_DOUBLE_EQ(w.end, 3.0);
  EXPECT_EQ(nccl.metrics.headOfLineWaits, nccl.headOfLine.size());
  EXPECT_GT(nccl.metrics.headOfLineMs, 0.99);
  // The wait delays rank 1: 1F1 waits for 1RECV_F1, which now completes at 3.5, not 2.5.
  const TimelineOp* f1 = find(nccl, Op{OpKind::F, 1, 1});
  ASSERT_NE(f1, nullptr);
  EXPECT_DOUBLE_EQ(f1->start, 3.5);
  EXPECT_GT(nccl.metrics.makespan, posted.metrics.makespan);
  // A point-to-point op spans its turn on the stream and takes no compute time.
  const TimelineOp* send = find(nccl, Op{OpKind::SendF, 0, 1});
  ASSERT_NE(send, nullptr);
  EXPECT_DOUBLE_EQ(send->start, 3.0);
  EXPECT_DOUBLE_EQ(send->end, 3.5);
  EXPECT_DOUBLE_EQ(nccl.metrics.devices[0].busy, posted.metrics.devices[0].busy);
  // Transfers go from the send's producer to the receive's consumer.
  bool transfer = false;
  for (const Transfer& tr : nccl.transfers)
    if (tr.producer == Op{OpKind::F, 0, 1} && tr.consumer == Op{OpKind::F, 1, 1}) {
      transfer = true;
      EXPECT_DOUBLE_EQ(tr.start, 3.0);
      EXPECT_DOUBLE_EQ(tr.end, 3.5);
    }
  EXPECT_TRUE(transfer);
  // computeMetrics counts them again from the timeline.
  EXPECT_EQ(computeMetrics(nccl).headOfLineWaits, nccl.metrics.headOfLineWaits);
}

TEST(CommSemantics, DualPipeComputeWaitsForTheTransfersPostedBeforeIt) {
  const Schedule s = csv(kUnbatched1F1B);
  const Timeline nccl = simulateUnder(s, CommSemantics::Nccl, 0.5, /*batched=*/true);
  const Timeline dual = simulateUnder(s, CommSemantics::DualPipe, 0.5);
  ASSERT_TRUE(nccl.complete && dual.complete);
  // On a stream, 0F1 runs as soon as 0F0 has; under DualPipe it first waits for 0SEND_F0 to
  // complete (rank 1's receive is posted at 0: the transfer ends at 1.5).
  EXPECT_DOUBLE_EQ(find(nccl, Op{OpKind::F, 0, 1})->start, 1.0);
  EXPECT_DOUBLE_EQ(find(dual, Op{OpKind::F, 0, 1})->start, 1.5);
}

TEST(CommSemantics, ImpliedTransfersSimulateAlikeUnderEverySemantics) {
  auto s = generateSchedule(ScheduleKind::Interleaved1F1B, {4, 8});
  ASSERT_TRUE(s.ok());
  const Timeline posted = simulateUnder(*s, CommSemantics::Posted, 0.25);
  for (CommSemantics c : {CommSemantics::Nccl, CommSemantics::DualPipe}) {
    const Timeline t = simulateUnder(*s, c, 0.25);
    EXPECT_EQ(t.comm, "posted");  // what applied: transfers are implied
    EXPECT_DOUBLE_EQ(t.metrics.makespan, posted.metrics.makespan);
    EXPECT_TRUE(validateUnder(*s, c).valid());
    EXPECT_EQ(validateUnder(*s, c).semantics, CommSemantics::Posted);
  }
}

TEST(CommSemantics, ReceivesMatchThePeersSendsInPostingOrder) {
  // NCCL matches the k-th send from a rank with the k-th receive its peer posts from it: the plan
  // pairs them so, and an unmatched op stalls without a cycle (validate.comm names it).
  const Schedule s = csv(kUnbatched1F1B);
  const DependencyGraph g(s);
  const CommPlan plan = makeCommPlan(s, g, {CommSemantics::Nccl});
  EXPECT_TRUE(plan.unmatched.empty());
  const int send = g.find(Op{OpKind::SendF, 0, 1}), recv = g.find(Op{OpKind::RecvF, 1, 1});
  EXPECT_EQ(plan.matchOf[static_cast<size_t>(send)], recv);
  EXPECT_EQ(plan.matchOf[static_cast<size_t>(recv)], send);
  const Schedule missing = csv("0F0,0SEND_F0,0RECV_B0,0B0\n1F0,1B0,1SEND_B0\n");
  const ValidationReport r = validateUnder(missing, CommSemantics::Nccl);
  EXPECT_FALSE(r.valid());
  bool comm = false;
  for (const Diagnostic& d : r.diagnostics) comm |= d.code == "validate.comm";
  EXPECT_TRUE(comm) << formatDiagnostics(r.diagnostics);
}
