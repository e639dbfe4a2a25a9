#pragma once
// The schedule model shared by every layer: a Pipeline (devices, stages, micro-batches,
// placement) and one ordered step list per device. Compact value types: a 1M-op schedule
// must parse, validate and simulate in well under a second.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipestudio/core/model/result.h"

namespace ps::core {

// Built-in op kinds. Values >= kFirstUserKind index Schedule::userKinds.
enum class OpKind : std::uint16_t {
  F = 0,    // forward
  B,        // full backward (inputs and weights)
  I,        // backward for inputs only
  W,        // weight gradients
  R,        // recompute forward before its backward
  Offload,  // move a stashed activation to host memory
  Reload,   // and back
  SendF,    // explicit communication (optional: implied between devices when absent)
  RecvF,
  SendB,
  RecvB,
  Unshard,  // PyTorch FSDP actions (stage-level, micro-batch -1)
  Reshard,
  ReduceGrad,
  // PyTorch 2.15's explicit waits in compute+comms orders: a rank waits for its send of
  // (stage, micro-batch) to be taken (WAIT_SEND_F/B) and for its stage's gradient reduction
  // (WAIT_REDUCE_GRAD, stage-level).
  WaitSendF,
  WaitSendB,
  WaitReduceGrad,
  kBuiltinCount
};
inline constexpr std::uint16_t kFirstUserKind = 64;

bool isUserKind(OpKind k);
// Canonical token: "F", "B", "I", "W", "R", "OFFLOAD", "RELOAD", "SEND_F", "RECV_F", "SEND_B",
// "RECV_B", "UNSHARD", "RESHARD", "REDUCE_GRAD", "WAIT_SEND_F", "WAIT_SEND_B",
// "WAIT_REDUCE_GRAD". User kinds need the schedule for their name.
std::string_view builtinKindName(OpKind k);
std::optional<OpKind> builtinKindFromName(std::string_view name);
// Kinds that belong to no micro-batch (micro_batch == -1).
bool isStageLevelKind(OpKind k);

struct Op {
  OpKind kind = OpKind::F;
  std::int32_t stage = 0;
  std::int32_t microbatch = 0;  // -1 for stage-level ops
  friend bool operator==(const Op&, const Op&) = default;
};

// One entry of a device's order: a single op, or an overlapped pair (F of one micro-batch
// with B of another, as DualPipe runs them) when `second` is set.
struct Step {
  Op first;
  std::optional<Op> second;
  bool overlapped() const { return second.has_value(); }
  friend bool operator==(const Step&, const Step&) = default;
};

enum class PlacementKind : std::uint8_t { Linear, Interleaved, VShape, Explicit };
std::string_view placementKindName(PlacementKind k);  // "linear", "interleaved", "vshape", "explicit"

struct Pipeline {
  int devices = 1;
  int stages = 1;
  int microbatches = 1;
  PlacementKind placementKind = PlacementKind::Linear;
  std::vector<int> stageToDevice;  // always materialised: size == stages

  // Fills stageToDevice for a non-explicit kind. Linear needs stages == devices (one stage
  // each) or stages a multiple of devices (contiguous blocks); Interleaved: s % D;
  // VShape: stages == 2·D·k, down then up (0..D-1, D-1..0, ...).
  static Result<Pipeline> make(int devices, int stages, int microbatches, PlacementKind kind);
  static Result<Pipeline> makeExplicit(int devices, int microbatches, std::vector<int> stageToDevice);
  int deviceOf(int stage) const { return stageToDevice[static_cast<size_t>(stage)]; }
  std::vector<int> stagesOn(int device) const;
  friend bool operator==(const Pipeline&, const Pipeline&) = default;
};

// What a user-declared op kind does to memory.
struct MemoryEffect {
  std::int64_t transientBytes = 0;  // held only while the op runs (workspace, buffers)
  std::int64_t deltaBytes = 0;      // added (or, negative, freed) when the op ends
  friend bool operator==(const MemoryEffect&, const MemoryEffect&) = default;
};

// A kind declared in the DSL (FlexPipe's extensibility), e.g.
//   kind ALLREDUCE stage_level duration = 0.5 * W after W
struct UserKind {
  std::string name;
  bool stageLevel = false;   // one op per stage (micro-batch -1) rather than per micro-batch
  std::string durationExpr;  // expression over F, B, I, W, R (the stage's times, ms) and numbers
  MemoryEffect memory;
  std::vector<std::string> after;   // kinds of the same stage (and micro-batch) it must follow;
                                    // stage-level: all micro-batches of those kinds
  std::vector<std::string> before;  // kinds it must precede
  friend bool operator==(const UserKind&, const UserKind&) = default;
};

struct Schedule {
  std::string name;  // optional
  Pipeline pipeline;
  std::vector<UserKind> userKinds;
  std::optional<std::string> profile;      // cost profile path named in the header
  std::vector<int> partition;              // layers per stage; empty = not given
  std::vector<std::vector<Step>> devices;  // size == pipeline.devices

  size_t opCount() const;  // overlapped pairs count as two ops
  // Op token as the DSL prints it, with stage: "F3@s1", "ALLREDUCE@s2".
  std::string opName(const Op& op) const;
  std::string kindName(OpKind k) const;
  std::optional<OpKind> kindFromName(std::string_view name) const;  // built-in or user
  const UserKind* userKind(OpKind k) const;
  friend bool operator==(const Schedule&, const Schedule&) = default;
};

}  // namespace ps::core
