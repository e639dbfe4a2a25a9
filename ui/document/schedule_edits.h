#pragma once
// The schedule edits the designer offers, as pure functions on a Schedule. Each returns the
// edited copy or an error that says why the edit does not apply; the document wraps them in
// undo commands.
#include "pipestudio/core/model/result.h"
#include "pipestudio/core/model/schedule.h"

namespace ps::ui {

// Moves step `from` of `device` so that it ends up at index `to` of that device's order.
ps::core::Result<ps::core::Schedule> moveStep(const ps::core::Schedule& s, int device, int from, int to);
// Replaces the full backward B(s,m) at `at` with I(s,m) followed by W(s,m).
ps::core::Result<ps::core::Schedule> splitBackward(const ps::core::Schedule& s, ps::core::OpRef at);
// Replaces I(s,m) (at `at`, or the I of the W at `at`) with B(s,m) and removes W(s,m).
ps::core::Result<ps::core::Schedule> mergeInputWeight(const ps::core::Schedule& s, ps::core::OpRef at);
// Adds R(stage,m) right before the first backward (B or I) of every micro-batch of the stage,
// or removes them all when the stage already recomputes.
ps::core::Result<ps::core::Schedule> toggleRecompute(const ps::core::Schedule& s, int stage);
bool stageRecomputes(const ps::core::Schedule& s, int stage);
// Adds OFFLOAD(s,m) right after F(s,m) and RELOAD(s,m) right before the first backward op
// (R, B or I) of (s,m) on that device: the activation lives on the host during the gap.
ps::core::Result<ps::core::Schedule> addOffloadReload(const ps::core::Schedule& s, ps::core::OpRef at);

// The op (first of an overlapped pair) at a reference, or null when out of range.
const ps::core::Op* opAt(const ps::core::Schedule& s, ps::core::OpRef at);

}  // namespace ps::ui
