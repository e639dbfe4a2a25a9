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
#include <vector>

#include "pipestudio/core/model/schedule.h"

namespace ps::core {

// Every compute step of `s` (F, I, W, B, overlapped pairs) lowered as above; other steps
// (UNSHARD, RESHARD, REDUCE_GRAD, R, OFFLOAD, RELOAD, declared kinds) are dropped first, as
// PyTorch's compute-only form holds none. An error when the walk stalls (PyTorch: "Malformed
// compute schedule, can't schedule sends/recvs"), naming each rank's next action.
Result<Schedule> lowerToPytorchComms(const Schedule& s);

// Pass 2 alone: `steps` with REDUCE_GRAD after the `microbatches`-th B or W of each stage.
std::vector<Step> addReduceGrad(const std::vector<Step>& steps, int microbatches);

// Does `s` hold explicit SEND/RECV steps (a compute+comms order)?
bool hasExplicitComms(const Schedule& s);

}  // namespace ps::core
