#pragma once
// The schedule edits the designer offers, as pure functions on a Schedule. Each returns the
// edited copy or an error that says why the edit does not apply; the GUI wraps them in undo
// commands. The memory ops they add follow the same placement rules as
// applyActivationPolicies (partition_search.h), through the helpers below.
#include <cstddef>
#include <vector>

#include "pipestudio/core/model/result.h"
#include "pipestudio/core/model/schedule.h"

namespace ps::core {

// Moves step `from` of `device` so that it ends up at index `to` of that device's order.
Result<Schedule> moveStep(const Schedule& s, int device, int from, int to);
// Moves the op at `step` of `device` one place earlier (delta < 0) or later (delta > 0) among
// the device's compute ops, carrying its own transfers: the RECVs of its inputs right before it
// and the SENDs of its output right after it (a compute_comms CSV's SEND/RECV stay with the op
// they belong to, so one key press cannot post a receive after its consumer). A SEND or RECV
// step itself moves one step, as moveStep does.
Result<Schedule> moveAmongCompute(const Schedule& s, int device, int step, int delta);
// Replaces the full backward B(s,m) at `at` with I(s,m) followed by W(s,m).
Result<Schedule> splitBackward(const Schedule& s, OpRef at);
// Replaces I(s,m) (at `at`, or the I of the W at `at`) with B(s,m) and removes W(s,m).
Result<Schedule> mergeInputWeight(const Schedule& s, OpRef at);
// Adds R(stage,m) right before the first backward (B or I) of every micro-batch of the stage,
// or removes them all when the stage already recomputes.
Result<Schedule> toggleRecompute(const Schedule& s, int stage);
bool stageRecomputes(const Schedule& s, int stage);
// Adds OFFLOAD(s,m) right after F(s,m) and RELOAD(s,m) where reloadSlot puts it, ahead of the
// first backward op (R, B or I) of (s,m) on that device: the activation lives on the host
// during the gap.
Result<Schedule> addOffloadReload(const Schedule& s, OpRef at);

// The op (first of an overlapped pair) at a reference, or null when out of range.
const Op* opAt(const Schedule& s, OpRef at);

// The backward op of a step: the second of an overlapped pair when that is a B or I, else the
// first. Recompute (R) is not a backward here: it belongs to the backward right after it.
const Op& backwardOpOf(const Step& st);
bool isBackwardStep(const Step& st);  // its backwardOpOf is a B or I

// THE RELOAD placement rule: the index of `row` in front of which RELOAD goes for the backward
// at `target`. One backward ahead: in front of the previous backward step (B or I) on the
// device when that step comes after `earliest` (the first index after the activation's
// OFFLOAD); otherwise right before `target`.
//
// Why one ahead: real activation offloading prefetches. Megatron-Core's fine-grained
// activation offloading and Transformer Engine's CPU offload issue the host-to-device copy of
// the next module's activations while the current backward computes, on a separate stream,
// so the copy overlaps compute instead of stalling the backward that needs it (PyTorch's plain
// save_on_cpu hook, which copies back on first use, is what this avoids). Our simulator runs
// RELOAD on the device's copy stream, so placing it one backward ahead models that overlap.
std::size_t reloadSlot(const std::vector<Step>& row, std::size_t target, std::size_t earliest);

}  // namespace ps::core
