#pragma once
// Lookups over a Timeline shared by the comparison, critical path, bubble and stepper code.
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "pipestudio/core/analysis/dependency_graph.h"
#include "pipestudio/core/model/timeline.h"

namespace ps::core::detail {

inline constexpr double kTimeEps = 1e-9;

inline std::uint64_t opKey(const Op& op) {
  return (static_cast<std::uint64_t>(op.kind) << 48) |
         (static_cast<std::uint64_t>(static_cast<std::uint32_t>(op.stage) & 0xFFFFFFu) << 24) |
         (static_cast<std::uint64_t>(static_cast<std::uint32_t>(op.microbatch + 1) & 0xFFFFFFu));
}

// OFFLOAD / RELOAD run on a copy stream and SEND / RECV on the links, beside compute (a
// torch.profiler trace has them as host ranges only): they leave the device's compute idle.
inline bool occupiesCompute(OpKind k) {
  switch (k) {
    case OpKind::Offload:
    case OpKind::Reload:
    case OpKind::SendF:
    case OpKind::RecvF:
    case OpKind::SendB:
    case OpKind::RecvB:
      return false;
    default:
      return true;
  }
}

class TimelineIndex {
 public:
  explicit TimelineIndex(const Timeline& t);

  const Timeline& timeline() const { return *t_; }
  // First op of the timeline with this (kind, stage, micro-batch).
  std::optional<size_t> find(const Op& op) const;
  std::optional<size_t> transfer(const Op& producer, const Op& consumer) const;
  // Op indices of a device sorted by (start, end).
  const std::vector<size_t>& onDevice(int device) const;
  size_t position(size_t op) const { return pos_[op]; }
  // The other half of an overlapped pair (same device, same start, both overlapped).
  std::optional<size_t> sibling(size_t op) const;
  // The compute op of the same device that ended last at or before `op` started (not its
  // sibling).
  std::optional<size_t> previousOnDevice(size_t op) const;
  int devices() const { return static_cast<int>(byDevice_.size()); }

 private:
  const Timeline* t_;
  std::unordered_map<std::uint64_t, size_t> ops_;
  std::unordered_map<std::uint64_t, std::unordered_map<std::uint64_t, size_t>> transfers_;
  std::vector<std::vector<size_t>> byDevice_;
  std::vector<std::vector<double>> prefixMaxEnd_;
  std::vector<size_t> pos_;
};

// When an input of an op was available to it.
struct Arrival {
  size_t op = 0;    // producing op (timeline index)
  double time = 0;  // its end, or its transfer's end
  std::optional<size_t> transfer;
};

// Arrivals of the dependencies (plan rules) of `op` and of its overlapped sibling; inputs the
// timeline lacks are skipped, or listed in `missing` when given.
std::vector<Arrival> arrivalsOf(const TimelineIndex& ix, const DependencyGraph& g, size_t op,
                                std::vector<Op>* missing = nullptr);

}  // namespace ps::core::detail
