#pragma once
// Named communication semantics: what an explicit SEND or RECV of a schedule does when it runs,
// shared by the validator (deadlocks), the simulator (time, head-of-line waits), the GUI and the
// command line. Each check says which one it applies.
//
//   posted    PyTorch's _PipelineScheduleRuntime over Gloo (CPU): SEND and RECV only post work
//             (_batch_p2p); the compute op that consumes a received tensor waits for its data
//             (_wait_batch_p2p), which leaves when the producer has ended. A RECV never holds up
//             the ops after it. The dependency graph's rules (dependency_graph.h).
//   nccl      The same runtime over NCCL (GPUs): a rank's point-to-point operations run one after
//             the other on one communication stream, in the order the rank issues them, each after
//             the compute the rank issued before it; a send completes only when the peer's matching
//             receive runs (a rendezvous), the k-th send from rank p to rank q matching the k-th
//             receive rank q posts from p. The consumer waits for its RECV to complete; a later
//             point-to-point op waits behind an earlier one of its rank (a head-of-line wait), so an
//             order that is fine when posted can hang. Operations batched together
//             (batch_isend_irecv, `batchConsecutive`) start as one group.
//   dualpipe  DeepSeek's DualPipe: the point-to-point ops posted between two compute ops are one
//             batch, and every compute op waits for all transfers posted before it.
//
// A schedule without explicit SEND/RECV has its transfers implied (a consumer waits for the
// producer plus the link): every semantics gives the same result there, and the fast paths of the
// validator and the simulator are those of `posted`.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipestudio/core/analysis/dependency_graph.h"
#include "pipestudio/core/model/schedule.h"

namespace ps::core {

enum class CommSemantics : std::uint8_t { Posted, Nccl, DualPipe };

std::string_view commSemanticsName(CommSemantics c);  // "posted", "nccl", "dualpipe"
std::optional<CommSemantics> commSemanticsFromName(std::string_view name);
// One line for people: what the semantics models ("PyTorch's runtime over NCCL: ...").
std::string_view commSemanticsDescription(CommSemantics c);

struct CommOptions {
  CommSemantics semantics = CommSemantics::Posted;
  // nccl: consecutive SEND/RECV steps of a rank are one batch_isend_irecv (Megatron's
  // send_forward_recv_backward, PyTorch's single-stage schedules). _PipelineScheduleRuntime
  // issues every action alone, the default. dualpipe always batches them.
  bool batchConsecutive = false;
  friend bool operator==(const CommOptions&, const CommOptions&) = default;
};

// SEND_F, RECV_F, SEND_B, RECV_B.
bool isPointToPointKind(OpKind k);
// The stage a point-to-point op exchanges with: the receiver of a send (SEND_F(s): the next stage
// on the micro-batch's route, SEND_B(s): the previous one), the sender of a receive (RECV_F(s):
// the previous, RECV_B(s): the next); -1 otherwise (or at the route's end).
int pointToPointPeerStage(const StageRoutes& routes, const Op& op);

// Whether `comm` changes anything for `s`: it has explicit SEND/RECV steps and the semantics is
// not `posted`.
bool commSemanticsApplies(const Schedule& s, const CommOptions& comm);

// The semantics a schedule is checked under unless the user names one: a PyTorch CSV with
// explicit SEND/RECV (a compute+comms file, which PyTorch's runtime runs on GPUs over NCCL) ->
// nccl; anything else (a .pipe, a compute-only CSV: transfers implied or run by the engine) ->
// posted. `fromPytorchCsv`: the schedule was read from a PyTorch CSV.
CommSemantics defaultCommSemantics(const Schedule& s, bool fromPytorchCsv);
// Why that default applies, for the line a command prints ("a compute+comms CSV: ...").
std::string defaultCommReason(const Schedule& s, bool fromPytorchCsv);

// --- The execution both the validator and the simulator run under nccl and dualpipe -----------

// The point-to-point ops of a schedule as each rank's communication stream runs them.
struct CommPlan {
  CommOptions options;
  // Per op id (DependencyGraph ids): the entry of its rank's stream (-1: not a point-to-point op
  // across ranks), and the op it meets on the peer (-1: none posted there).
  std::vector<int> entryOf;
  std::vector<int> matchOf;
  // Entries of all ranks, rank by rank in stream order; entryBegin[d] .. entryBegin[d + 1].
  std::vector<int> entryBegin;
  std::vector<int> entryOpBegin;  // ops of entry e: entryOps[entryOpBegin[e] .. entryOpBegin[e + 1])
  std::vector<int> entryOps;
  // Unmatched ops: a send with no receive posted on the peer or the reverse (op ids).
  std::vector<int> unmatched;
};

// Builds the streams: every SEND/RECV whose peer stage is on another device, in program order,
// one entry per op (or per run of consecutive ones when batched); the k-th send from p to q is
// matched with the k-th receive q posts from p.
CommPlan makeCommPlan(const Schedule& s, const DependencyGraph& g, const CommOptions& options);

// What ran, and where it stopped. Times in the unit of the durations given.
struct CommExecution {
  std::vector<double> start, end;  // per op id (NaN: never ran)
  std::vector<int> stepsDone;      // per device: steps done from its first on (a prefix)
  bool complete = true;
  // Where it stopped: per device, the op id its host stands at (the next op of its order not
  // issued; deviceBegin(d + 1) when it issued all), and the entry at the head of its stream
  // (entryBegin[d + 1] when drained); per entry, whether it was issued and started.
  std::vector<int> hostAt, streamAt;
  std::vector<std::uint8_t> entryIssued, entryStarted;
  // Point-to-point ops that waited behind an earlier op of their rank's stream: when they were
  // issued (the compute before them ended) until the op before them completed.
  struct HeadOfLine {
    int op = -1;       // the op that waited
    int blocker = -1;  // the op it waited behind (the last of the entry before it)
    double from = 0, to = 0;
  };
  std::vector<HeadOfLine> headOfLine;
  // Completed transfers: the send, the receive, when both had started and when they completed.
  struct Pair {
    int send = -1, recv = -1;
    double start = 0, end = 0;
  };
  std::vector<Pair> pairs;
};

struct CommCosts {
  // Per op id: how long it occupies its device's compute stream (comm ops: ignored). Empty: one
  // unit per op (the validator's unit-time execution).
  std::vector<double> duration;
  // Per op id of a send: the transfer time once both sides have started. Empty: none.
  std::vector<double> transfer;
  // Implied transfers (a compute op waiting for a compute op of another device): the time its
  // data takes, per producer op id. Empty: none.
  std::vector<double> impliedTransfer;
};

CommExecution executeWithComms(const Schedule& s, const DependencyGraph& g, const CommPlan& plan,
                               const CommCosts& costs);

// One link of a wait cycle: `device` is stuck in `at` waiting for `waitsFor` on `waitsOnDevice`.
struct CommWaitLink {
  enum class Reason : std::uint8_t {
    Data,       // waitsFor has not run yet (a compute op, or a peer op at its stream's head)
    Behind,     // waitsFor is queued behind the head of its rank's stream (a head-of-line wait)
    NotIssued,  // `at` is not issued yet: its rank's host is stuck at waitsFor
    Later,      // waitsFor comes after `at` in the rank's own order
  };
  int device = 0;
  int at = -1;        // op id the rank is stuck in
  int waitsFor = -1;  // op id it waits for
  int waitsOnDevice = 0;
  Reason reason = Reason::Data;
};

// After an incomplete execution: the cycle of waits across ranks, each rank's stream and compute
// followed to what it waits for; empty when the stall is no cycle (e.g. an unmatched op).
std::vector<CommWaitLink> findCommWaitCycle(const Schedule& s, const DependencyGraph& g, const CommPlan& plan,
                                            const CommExecution& x);
// "rank 1 waits in 3SEND_B0 for 2RECV_B0 on rank 0, which waits in 0SEND_F2 for 1RECV_F2 on rank
// 1, closing the cycle": actions as PyTorch writes them.
std::string describeWaitCycle(const Schedule& s, const DependencyGraph& g,
                              const std::vector<CommWaitLink>& cycle);

}  // namespace ps::core
