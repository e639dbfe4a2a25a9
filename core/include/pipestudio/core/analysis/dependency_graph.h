#pragma once
// The dependency graph of a schedule that the validator, the simulator, the critical path and
// the GUI's arrows share.
#include <cstdint>
#include <span>
#include <vector>

#include "pipestudio/core/model/schedule.h"

namespace ps::core {

// Every op of a schedule with a dense id and its direct dependencies as op ids (CSR arrays).
// Ids follow the device orders: device 0's ops first, step by step (both ops of an overlapped
// pair, first then second), then device 1's, and so on; so the ops of device d are the ids
// [deviceBegin(d), deviceBegin(d + 1)). Built in O(ops) with flat tables indexed by
// (kind, stage, micro-batch); no maps.
//
// Dependency rules (docs/formats.md, "The simulator", with these choices):
// With route groups (Pipeline::routes) s-1 and s+1 below read "the micro-batch's previous and
// next stage on its route"; without them every micro-batch runs stages 0..S-1 in order.
//   F(s,m)       after F(s-1,m), or after SEND_F(s-1,m) instead when the schedule has it;
//                also after RECV_F(s,m) when the schedule has one.
//   B/I(s,m)     after F(s,m); after the B or I of (s+1,m) (none on the last stage), or after
//                SEND_B(s+1,m) instead when the schedule has it; also after RECV_B(s,m) when
//                the schedule has one; after R(s,m) and RELOAD(s,m) when the schedule has them.
//   W(s,m)       after I(s,m).
//   R(s,m)       after F(s,m).                OFFLOAD(s,m) after F(s,m).
//   RELOAD(s,m)  after OFFLOAD(s,m).
//   SEND_F(s,m)  after F(s,m).                SEND_B(s,m) after B/I(s,m).
//   RECV_F, RECV_B: nothing. As in PyTorch's _PipelineScheduleRuntime, a receive is only
//                posted where it stands (_batch_p2p) and the compute op that consumes it
//                waits for the data (_wait_batch_p2p): the consumer depends on the peer's
//                SEND, so a RECV never blocks the ops after it.
//   REDUCE_GRAD(s) after every W(s,m), or B(s,m) for micro-batches without W.
//   UNSHARD(s), RESHARD(s): no dependencies (they may appear several times per stage); the
//                validator checks their order on the device (stage used only while
//                unsharded) and the simulator makes the stage's ops wait for the UNSHARD.
//   User kinds:  X after each kind K in X.after, X before each kind K in X.before, matched on
//                the same stage and micro-batch; a stage-level kind relates to every
//                micro-batch of a per-micro-batch kind on its stage.
class DependencyGraph {
 public:
  enum class ProblemKind : std::uint8_t {
    BadKind,     // kind is neither built in nor declared
    OutOfRange,  // stage or micro-batch outside the pipeline (or -1 mismatch)
    Duplicate,   // a second op with the same (kind, stage, micro-batch); `other` is the first
    Missing,     // a dependency the rules require is not in the schedule; `missing` names it
    TooLarge,    // stages x micro-batches far exceeds the ops given; nothing was indexed
  };
  struct Problem {
    ProblemKind kind;
    int op = -1;     // the op id concerned (-1 for TooLarge)
    int other = -1;  // Duplicate: the first op's id
    Op missing;      // Missing: the op that should exist
  };

  DependencyGraph() = default;
  explicit DependencyGraph(const Schedule& s);
  // The same as assigning DependencyGraph(s), reusing this graph's buffers.
  void rebuild(const Schedule& s);

  int size() const { return static_cast<int>(ops_.size()); }
  const Op& op(int id) const { return ops_[static_cast<size_t>(id)]; }
  OpRef ref(int id) const { return refs_[static_cast<size_t>(id)]; }
  int deviceOf(int id) const { return refs_[static_cast<size_t>(id)].device; }
  int deviceBegin(int device) const { return deviceBegin_[static_cast<size_t>(device)]; }
  int devices() const { return static_cast<int>(deviceBegin_.size()) - 1; }
  // Whether op `id` is the second op of an overlapped pair (its step is shared with id - 1).
  bool isPairSecond(int id) const { return pairSecond_[static_cast<size_t>(id)] != 0; }

  std::span<const int> dependencies(int id) const {
    return {deps_.data() + depBegin_[static_cast<size_t>(id)],
            deps_.data() + depBegin_[static_cast<size_t>(id) + 1]};
  }
  // Total number of dependencies (the sum of dependencies(id).size() over all ids).
  int dependencyCount() const { return static_cast<int>(deps_.size()); }
  // Ops that depend on `id` (built on first use).
  std::span<const int> dependents(int id) const;

  // Id of an op in the schedule, or -1. O(1).
  int find(const Op& op) const;
  // Id of the (first) op at a device's step, or -1.
  int idAt(OpRef r) const;

  const std::vector<Problem>& problems() const { return problems_; }
  // The routes of the schedule the graph was built from.
  const StageRoutes& routes() const { return routes_; }

  // The rules applied to any op, present or not; ops the rules need but the schedule lacks
  // are reported through `missing` (when non-null) instead of the id list.
  std::vector<int> dependenciesFor(const Op& op, std::vector<Op>* missing = nullptr) const;

 private:
  template <typename Emit, typename Miss>
  void forEachDependency(const Op& op, Emit&& emit, Miss&& miss) const;

  const Schedule* schedule_ = nullptr;  // only used while building
  int stages_ = 0;
  int microbatches_ = 0;
  StageRoutes routes_;
  std::vector<Op> ops_;
  std::vector<OpRef> refs_;
  std::vector<std::uint8_t> pairSecond_;
  std::vector<int> deviceBegin_;
  std::vector<int> depBegin_;
  std::vector<int> deps_;
  mutable std::vector<int> rdepBegin_;
  mutable std::vector<int> rdeps_;
  // kind value -> compact table index (-1 when the kind does not occur), per-micro-batch
  // kinds and stage-level kinds separately.
  std::vector<int> mbKindIndex_;
  std::vector<int> stageKindIndex_;
  std::vector<int> mbTable_;     // [kindIndex][stage][mb] -> op id or -1
  std::vector<int> stageTable_;  // [kindIndex][stage] -> first op id or -1
  // per kind value: user kinds that must precede it ("X before K" rules), as kind values
  std::vector<std::vector<OpKind>> precededBy_;
  std::vector<std::vector<OpKind>> afterKinds_;  // per user kind: resolved `after` kinds
  std::vector<Problem> problems_;
  std::vector<std::uint8_t> indexed_;  // rebuild's scratch: op id -> has its own table cell
};

// Direct dependencies of an op within a schedule (the rules above), as ops that exist in the
// schedule. Builds a DependencyGraph, so O(ops) per call: use DependencyGraph for many queries.
std::vector<Op> dependenciesOf(const Schedule& s, const Op& op);

}  // namespace ps::core
