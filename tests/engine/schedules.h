#pragma once
// Small hand-built schedules for engine tests that must not depend on the generators, plus
// helpers that add recompute and offload ops to any schedule.
#include <algorithm>

#include "pipestudio/core/model/schedule.h"

namespace ps::engine::testing {

using core::Op;
using core::OpKind;
using core::Schedule;
using core::Step;

inline Step step(OpKind k, int s, int m) { return Step{Op{k, s, m}, std::nullopt}; }

inline Schedule base(int devices, int stages, int micro, core::PlacementKind kind) {
  Schedule s;
  s.pipeline = core::Pipeline::make(devices, stages, micro, kind).value();
  s.devices.resize(static_cast<size_t>(devices));
  return s;
}

inline Schedule gpipe(int D, int M) {
  Schedule s = base(D, D, M, core::PlacementKind::Linear);
  s.name = "gpipe";
  for (int d = 0; d < D; ++d) {
    for (int m = 0; m < M; ++m) s.devices[d].push_back(step(OpKind::F, d, m));
    for (int m = 0; m < M; ++m) s.devices[d].push_back(step(OpKind::B, d, m));
  }
  return s;
}

// 1F1B; with splitBackward, B becomes I and every W runs after the last I (zero-bubble style).
inline Schedule oneFOneB(int D, int M, bool splitBackward = false) {
  Schedule s = base(D, D, M, core::PlacementKind::Linear);
  s.name = splitBackward ? "1f1b-split" : "1f1b";
  for (int d = 0; d < D; ++d) {
    auto& v = s.devices[d];
    const OpKind back = splitBackward ? OpKind::I : OpKind::B;
    int warm = std::min(D - d - 1, M), f = 0, b = 0;
    for (; f < warm; ++f) v.push_back(step(OpKind::F, d, f));
    while (f < M) {
      v.push_back(step(OpKind::F, d, f++));
      v.push_back(step(back, d, b++));
    }
    while (b < M) v.push_back(step(back, d, b++));
    if (splitBackward)
      for (int m = 0; m < M; ++m) v.push_back(step(OpKind::W, d, m));
  }
  return s;
}

// Two stages per device, interleaved placement, breadth first (all F, then all B).
inline Schedule loopedBfs(int D, int M) {
  Schedule s = base(D, 2 * D, M, core::PlacementKind::Interleaved);
  s.name = "looped-bfs";
  for (int d = 0; d < D; ++d) {
    for (int c = 0; c < 2; ++c)
      for (int m = 0; m < M; ++m) s.devices[d].push_back(step(OpKind::F, d + c * D, m));
    for (int c = 1; c >= 0; --c)
      for (int m = 0; m < M; ++m) s.devices[d].push_back(step(OpKind::B, d + c * D, m));
  }
  return s;
}

// Adds R(s,m) right before each B/I of the given micro-batches (all when empty).
inline Schedule withRecompute(Schedule s) {
  for (auto& dev : s.devices) {
    std::vector<Step> out;
    for (const auto& st : dev) {
      if (!st.overlapped() && (st.first.kind == OpKind::B || st.first.kind == OpKind::I))
        out.push_back(step(OpKind::R, st.first.stage, st.first.microbatch));
      out.push_back(st);
    }
    dev = out;
  }
  s.name += "+recompute";
  return s;
}

// Adds OFFLOAD right after each F (also inside overlapped pairs) and RELOAD right before the
// first op that needs the stash again (R, B or I).
inline Schedule withOffload(Schedule s) {
  for (auto& dev : s.devices) {
    std::vector<Step> out;
    std::vector<std::pair<int, int>> offloaded;
    auto isOff = [&](const Op& op) {
      return std::find(offloaded.begin(), offloaded.end(), std::make_pair(op.stage, op.microbatch)) != offloaded.end();
    };
    for (const auto& st : dev) {
      std::vector<Op> ops{st.first};
      if (st.second) ops.push_back(*st.second);
      for (const Op& op : ops)
        if ((op.kind == OpKind::R || op.kind == OpKind::B || op.kind == OpKind::I) && isOff(op)) {
          out.push_back(step(OpKind::Reload, op.stage, op.microbatch));
          offloaded.erase(std::find(offloaded.begin(), offloaded.end(), std::make_pair(op.stage, op.microbatch)));
        }
      out.push_back(st);
      for (const Op& op : ops)
        if (op.kind == OpKind::F) {
          out.push_back(step(OpKind::Offload, op.stage, op.microbatch));
          offloaded.emplace_back(op.stage, op.microbatch);
        }
    }
    dev = out;
  }
  s.name += "+offload";
  return s;
}

}  // namespace ps::engine::testing
