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

// A route group (DeepSeek's DualPipe runs half the micro-batches down the devices and half
// up): the micro-batches firstMicrobatch .. firstMicrobatch + microbatchCount - 1 run `stages`,
// in that order. The stage ids of a route increase (a stage's predecessor on a route has a
// lower id), so "the lower stage of a link" keeps meaning "the stage whose output crosses it".
struct Route {
  std::vector<int> stages;
  int firstMicrobatch = 0;
  int microbatchCount = 0;
  friend bool operator==(const Route&, const Route&) = default;
};
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
  // This pipeline with route groups and the model block each stage runs (routeProblem's rules).
  Result<Pipeline> withRoutes(std::vector<Route> routeGroups, std::vector<int> blockOfStage) const;
  int deviceOf(int stage) const { return stageToDevice[static_cast<size_t>(stage)]; }
  std::vector<int> stagesOn(int device) const;

  // Route groups; empty: one route, every micro-batch runs stages 0..S-1 in order.
  std::vector<Route> routes;
  // The block of the model (its layers, hence its parameters) each stage runs; stages of one
  // block hold copies of the same parameters whose gradients are summed before the optimizer
  // step (DualPipe's two copies). Empty: stage s runs block s.
  std::vector<int> stageBlock;
  bool routed() const { return !routes.empty(); }
  int blockOf(int stage) const { return stageBlock.empty() ? stage : stageBlock[static_cast<size_t>(stage)]; }
  int blocks() const;  // number of distinct model blocks (stages when stageBlock is empty)
  // What a layer partition lists, for messages: "stages", or "model blocks" with copies.
  const char* partitionUnit() const { return stageBlock.empty() ? "stages" : "model blocks"; }
  // Why routes/stageBlock do not fit this pipeline, or nothing: each route non-empty, its
  // stages in range and increasing; the groups cover micro-batches 0..M-1 in order without
  // overlap; stageBlock lists every stage, blocks numbered 0..blocks-1, and stages of one block
  // sit at the same position of their routes. `routeIndex`, when given, is set to the route
  // the problem is about (-1: none in particular).
  std::optional<std::string> routeProblem(int* routeIndex = nullptr) const;
  friend bool operator==(const Pipeline&, const Pipeline&) = default;
};

// Route lookups in O(1) for the dependency rules: a micro-batch's previous and next stage on
// its route (-1 at the route's ends) and whether it runs a stage at all.
class StageRoutes {
 public:
  StageRoutes() = default;
  explicit StageRoutes(const Pipeline& p);
  int prev(int stage, int mb) const {
    if (!routed_) return stage - 1;
    return inRange(stage, mb) ? prev_[cell(stage, mb)] : -1;
  }
  int next(int stage, int mb) const {
    if (!routed_) return stage + 1 < stages_ ? stage + 1 : -1;
    return inRange(stage, mb) ? next_[cell(stage, mb)] : -1;
  }
  // Stage-level ops (micro-batch -1) belong to every route.
  bool runs(int stage, int mb) const {
    return !routed_ || mb < 0 || (inRange(stage, mb) && onRoute_[cell(stage, mb)] != 0);
  }
  bool routed() const { return routed_; }

 private:
  bool inRange(int stage, int mb) const {
    return stage >= 0 && stage < stages_ && mb >= 0 && mb < static_cast<int>(routeOf_.size());
  }
  size_t cell(int stage, int mb) const {
    return static_cast<size_t>(routeOf_[static_cast<size_t>(mb)]) * static_cast<size_t>(stages_) +
           static_cast<size_t>(stage);
  }
  bool routed_ = false;
  int stages_ = 0;
  std::vector<int> routeOf_;  // per micro-batch
  std::vector<int> prev_, next_;
  std::vector<std::uint8_t> onRoute_;
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

// The stage-level user kind that stands for one optimizer step (unrolled iterations end with
// it; a run's event stream names it).
inline constexpr std::string_view kOptimizerStepKind = "OPTIMIZER";

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

// An action as PyTorch writes it (_Action.__repr__; its profiler ranges are "PP:" + this):
// "1F3", "0UNSHARD", "(0F7;7B3)OVERLAP_F_B". PipeStudio's kinds without a PyTorch action follow
// the same pattern ("1R3", "2OFFLOAD0", "0ALLREDUCE"), so that one trace reader reads both.
std::string pytorchActionText(const Schedule& s, const Op& op);
std::string pytorchStepText(const Schedule& s, const Step& step);

}  // namespace ps::core
