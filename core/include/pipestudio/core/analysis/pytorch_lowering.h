#pragma once
// PyTorch's lowering of a compute-only pipeline order to a compute+comms one, as
// torch.distributed.pipelining's _PipelineScheduleRuntime._prepare_schedule_with_comms does it
// (checked action for action against torch 2.11: tests/core/pytorch_orders_test.cpp). Three
// passes, in PyTorch's order:
//   1. _add_unshard_reshard, per rank: UNSHARD the next three stages the rank computes on,
//      RESHARD the ones that leave that window (FSDP's all-gather and release; no-ops for a
//      stage without FSDP);
//   2. _add_reduce_grad, per rank: REDUCE_GRAD(s) right after the M-th B or W of stage s (where
//      the runtime scales the gradients by 1/M and reduces them across data parallel);
//   3. _add_send_recv: a lock-step walk over the ranks (0, 1, ... each round) that moves each
//      rank's next action in once its input is there, puts SEND right after a producer whose
//      consumer sits on another rank, and the matching RECV at that moment into the consumer
//      rank's order. Receives thus appear in the order the peer sends.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipestudio/core/model/schedule.h"

namespace ps::core {

// The PyTorch whose compute+comms form is written. PyTorch 2.11 to 2.14 lower alike; 2.15
// changed the form: it evicts UNSHARDed stages in the order they were gathered (a dict where
// 2.11 had a set), follows each REDUCE_GRAD with a WAIT_REDUCE_GRAD, and gives every send a
// WAIT_SEND_F/WAIT_SEND_B (after the local backward that proves a forward send was taken,
// else at the end of the rank's order); its loader refuses a compute+comms file without them,
// and 2.11's misreads them. compute_only files are the same for every version.
// Where the receives of a compute+comms order go.
enum class RecvPlacement : std::uint8_t {
  Asap,  // where _add_send_recv puts them: at the moment the peer sends (every version's default)
  // PyTorch 2.13+'s `defer_pp_recv` (_PipelineScheduleRuntime(defer_pp_recv=True), PR #178815):
  // _defer_recv_ops exactly, each RECV right before the compute op that consumes it, and the
  // deferred RECVs from a higher-ranked peer flushed before a send to it (the rank-parity rule).
  Deferred,
  // PipeStudio's: PyTorch's deferred placement wherever that order cannot hang under nccl and
  // posts each peer's messages in its send order; elsewhere the receives involved are pulled
  // earlier, never before their Asap place, until no rank waits in a cycle (comm_semantics.h).
  DeferredSafe,
};
std::string_view recvPlacementName(RecvPlacement r);  // "asap", "pytorch", "safe"
std::optional<RecvPlacement> recvPlacementFromName(std::string_view name);

struct PytorchTarget {
  int major = 2, minor = 11;                 // the pinned version (tests/pytorch/requirements.txt)
  RecvPlacement recv = RecvPlacement::Asap;  // Deferred and DeferredSafe need 2.13 or later
  bool atLeast(int ma, int mi) const { return major > ma || (major == ma && minor >= mi); }
  std::string name() const { return std::to_string(major) + "." + std::to_string(minor); }
};
// "2.11" .. "2.15" (a patch number is ignored: "2.12.1"); other versions are refused, naming
// the range, since their lowering has not been checked.
Result<PytorchTarget> parsePytorchTarget(std::string_view text);

// Every compute step of `s` (F, I, W, B, overlapped pairs) lowered as above; other steps
// (UNSHARD, RESHARD, REDUCE_GRAD, R, OFFLOAD, RELOAD, declared kinds) are dropped first, as
// PyTorch's compute-only form holds none. An error when the walk stalls (PyTorch: "Malformed
// compute schedule, can't schedule sends/recvs"), naming each rank's next action.
Result<Schedule> lowerToPytorchComms(const Schedule& s, const PytorchTarget& target = {});

// PyTorch's schedules run every micro-batch through every stage in order: a schedule with route
// groups (DualPipe's two directions) has no PyTorch form. The error says so (pytorch.routes).
Status checkPytorchHasNoRoutes(const Schedule& s);

// Pass 2 alone: `steps` with REDUCE_GRAD after the `microbatches`-th B or W of each stage (and,
// with `withWait` as PyTorch 2.15 does, a WAIT_REDUCE_GRAD right after each).
std::vector<Step> addReduceGrad(const std::vector<Step>& steps, int microbatches, bool withWait = false);

// PyTorch 2.15's _add_wait_send over one rank's compute+comms order: a WAIT_SEND_F(s,m) right
// after the local backward of (s,m) that follows SEND_F(s,m), and a wait for every send still
// unwaited at the end, in the order the sends were posted.
std::vector<Step> addWaitSend(const std::vector<Step>& steps);

// PyTorch's _defer_recv_ops (2.13 to 2.15) over a compute+comms order: each rank's RECVs held back
// until the compute op that consumes them (a pair: either of its ops), except that a SEND to a
// higher-ranked peer first flushes the RECVs held from that peer, in the order they were held. An
// error (PyTorch's "leftover RECV ops with no consumer") for a RECV nothing consumes.
Result<Schedule> deferRecvOps(const Schedule& lowered);
// PipeStudio's deferred placement (RecvPlacement::DeferredSafe) from the Asap lowering `asap`:
// deferRecvOps(asap) when that order runs under nccl and keeps every peer's messages in order;
// otherwise receives are pulled earlier as described there. The result runs under nccl.
Result<Schedule> deferRecvOpsSafe(const Schedule& asap);

// Does `s` hold explicit SEND/RECV steps (a compute+comms order)?
bool hasExplicitComms(const Schedule& s);

}  // namespace ps::core
