#pragma once
// Helpers shared by the timeline view's files (timeline_view.cpp: state, overlay, tooltips;
// timeline_paint.cpp: the paint passes; timeline_input.cpp: mouse, keys, drag). Not for
// other widgets.
#include <QString>
#include <algorithm>
#include <cstdint>
#include <iterator>

#include "pipestudio/core/model/timeline.h"
#include "widgets/units_text.h"

namespace ps::ui::timeline_detail {

inline constexpr double kMinBlockPx = 3.0;        // thinner blocks merge (level of detail)
inline constexpr double kMinCommPx = 6.0;         // SEND / RECV are drawn at least this wide
inline constexpr double kBreakpointDotPx = 10.0;  // breakpoint dots closer than this merge
inline constexpr double kHitSlopPx = 3.0;

inline bool isCommKind(ps::core::OpKind k) {
  using ps::core::OpKind;
  return k == OpKind::SendF || k == OpKind::RecvF || k == OpKind::SendB || k == OpKind::RecvB;
}

inline std::uint64_t refKey(int device, int step) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(device)) << 32) |
         static_cast<std::uint32_t>(step);
}
inline int keyDevice(std::uint64_t key) {
  return static_cast<int>(key >> 32);
}
inline int keyStep(std::uint64_t key) {
  return static_cast<int>(key & 0xffffffffu);
}

// One formatter across the GUI and CLI (pipestudio/core/io/units.h).
inline QString fmtMs(double v) {
  return msValue(v);
}

// The span of (device, step) in a timeline (ops sorted by device, then start).
inline const ps::core::TimelineOp* timedOp(const ps::core::Timeline& t, int device, int step) {
  auto lo = std::lower_bound(t.ops.begin(), t.ops.end(), device,
                             [](const ps::core::TimelineOp& o, int d) { return o.device < d; });
  for (auto it = lo; it != t.ops.end() && it->device == device; ++it)
    if (it->step == step) return &*it;
  return nullptr;
}

inline const ps::core::Transfer* transferBetween(const ps::core::Timeline& t, const ps::core::Op& producer,
                                                 const ps::core::Op& consumer) {
  for (const auto& tr : t.transfers)
    if (tr.producer == producer && tr.consumer == consumer) return &tr;
  return nullptr;
}

}  // namespace ps::ui::timeline_detail
