#include "pipestudio/core/planning/generators.h"

#include <algorithm>
#include <array>
#include <deque>
#include <string>

#include "pipestudio/core/model/enum_names.h"

namespace ps::core {

namespace {

constexpr EnumName<ScheduleKind> kKindNames[] = {{ScheduleKind::GPipe, "gpipe"},
                                                 {ScheduleKind::OneFOneB, "1f1b"},
                                                 {ScheduleKind::Interleaved1F1B, "interleaved-1f1b"},
                                                 {ScheduleKind::LoopedBFS, "looped-bfs"},
                                                 {ScheduleKind::ZBH1, "zb-h1"},
                                                 {ScheduleKind::ZBH2, "zb-h2"},
                                                 {ScheduleKind::ZBV, "zb-v"},
                                                 {ScheduleKind::DualPipeV, "dualpipe-v"}};

Diagnostic sizeError(ScheduleKind kind, const std::string& constraint) {
  return makeError("generate.size", std::string(scheduleKindName(kind)) + " needs " + constraint);
}

// Collects the per-device orders.
struct Orders {
  std::vector<std::vector<Step>> devices;
  explicit Orders(int d) : devices(static_cast<size_t>(d)) {}
  void add(int d, OpKind k, int stage, int mb) {
    devices[static_cast<size_t>(d)].push_back(Step{Op{k, stage, mb}, {}});
  }
  void pair(int d, Op a, Op b) { devices[static_cast<size_t>(d)].push_back(Step{a, b}); }
};

Result<Schedule> finish(ScheduleKind kind, int devices, int stages, int microbatches, PlacementKind placement,
                        Orders&& orders) {
  auto p = Pipeline::make(devices, stages, microbatches, placement);
  PS_TRY(p);
  Schedule s;
  s.name = std::string(scheduleKindName(kind));
  s.pipeline = std::move(*p);
  s.devices = std::move(orders.devices);
  return s;
}

// GPipe: all forwards, then all backwards, in micro-batch order.
void gpipe(Orders& o, int D, int M) {
  for (int d = 0; d < D; ++d) {
    for (int m = 0; m < M; ++m) o.add(d, OpKind::F, d, m);
    for (int m = 0; m < M; ++m) o.add(d, OpKind::B, d, m);
  }
}

// 1F1B: D - d - 1 warm-up forwards, then one forward and one backward, then the remaining
// backwards (PipeDream-Flush / Megatron's non-interleaved order).
void oneFOneB(Orders& o, int D, int M) {
  for (int d = 0; d < D; ++d) {
    int warmup = std::min(D - d - 1, M);
    for (int m = 0; m < warmup; ++m) o.add(d, OpKind::F, d, m);
    for (int i = 0; i < M - warmup; ++i) {
      o.add(d, OpKind::F, d, warmup + i);
      o.add(d, OpKind::B, d, i);
    }
    for (int m = M - warmup; m < M; ++m) o.add(d, OpKind::B, d, m);
  }
}

// Megatron-LM's interleaved 1F1B (forward_backward_pipelining_with_interleaving): virtual
// micro-batch k runs chunk (k mod D·V) / D on micro-batch (k / (D·V))·D + k mod D; backward
// chunks in reverse. Warm-up (D - d - 1)·2 + (V - 1)·D, or everything when M == D.
void interleaved(Orders& o, int D, int V, int M) {
  const int total = M * V;
  auto mbOf = [&](int k) { return (k / (D * V)) * D + k % D; };
  auto fwdChunk = [&](int k) { return (k % (D * V)) / D; };
  for (int d = 0; d < D; ++d) {
    int warmup = M == D ? total : std::min((D - d - 1) * 2 + (V - 1) * D, total);
    auto fwd = [&](int k) { o.add(d, OpKind::F, fwdChunk(k) * D + d, mbOf(k)); };
    auto bwd = [&](int k) { o.add(d, OpKind::B, (V - 1 - fwdChunk(k)) * D + d, mbOf(k)); };
    for (int k = 0; k < warmup; ++k) fwd(k);
    for (int i = 0; i < total - warmup; ++i) {
      fwd(warmup + i);
      bwd(i);
    }
    for (int k = total - warmup; k < total; ++k) bwd(k);
  }
}

// PyTorch's ScheduleLoopedBFS: every forward of each local stage in turn (earliest stage
// first), then the backwards of the local stages in reverse, micro-batches in reverse.
void loopedBfs(Orders& o, int D, int V, int M) {
  for (int d = 0; d < D; ++d) {
    for (int c = 0; c < V; ++c)
      for (int m = 0; m < M; ++m) o.add(d, OpKind::F, c * D + d, m);
    for (int c = V - 1; c >= 0; --c)
      for (int m = M - 1; m >= 0; --m) o.add(d, OpKind::B, c * D + d, m);
  }
}

// ZB-H1 (Zero Bubble, handcrafted, 1F1B's memory): 1F1B's warm-up, then F + I per step; the
// W of the oldest pending I joins each step once d steps have passed, so W fills the
// cool-down bubbles. This is PyTorch's ScheduleInterleavedZeroBubble with one stage per rank.
void zbH1(Orders& o, int D, int M) {
  for (int d = 0; d < D; ++d) {
    int warmup = std::min(D - d - 1, M);
    int nextW = 0;
    for (int m = 0; m < warmup; ++m) o.add(d, OpKind::F, d, m);
    for (int j = 0; j < M; ++j) {
      if (j < M - warmup) o.add(d, OpKind::F, d, warmup + j);
      o.add(d, OpKind::I, d, j);
      if (j >= d) o.add(d, OpKind::W, d, nextW++);
    }
    while (nextW < M) o.add(d, OpKind::W, d, nextW++);
  }
}

// ZB-H2 (Zero Bubble, handcrafted, 2D - 1 micro-batches in flight like the paper's 2p - 1):
// the order a device gets when every op takes one unit and each device, at each step, runs
// the next I if its gradient has arrived, else the next F while fewer than 2D - 1
// micro-batches are in flight (F done, W not), else the oldest pending W, else an F. The
// extra warm-up forwards cover the wait for the first gradient and the W's pile up for the
// tail, so with F = I = W and M >= 2D every device works from its first op to its last
// (a parallelogram).
void zbH2(Orders& o, int D, int M) {
  const int cap = 2 * D - 1;
  std::vector<int> nf(static_cast<size_t>(D), 0), ni(static_cast<size_t>(D), 0),
      nw(static_cast<size_t>(D), 0);
  // Completion times (step + 1) of F and I per (device, micro-batch); -1 = not yet.
  std::vector<int> fDone(static_cast<size_t>(D) * static_cast<size_t>(M), -1), iDone(fDone);
  auto at = [&](std::vector<int>& v, int d, int m) -> int& {
    return v[static_cast<size_t>(d) * static_cast<size_t>(M) + static_cast<size_t>(m)];
  };
  auto doneBy = [](int when, int t) { return when >= 0 && when <= t; };
  int finished = 0;
  std::vector<char> choice(static_cast<size_t>(D));
  for (int t = 0; finished < D; ++t) {
    for (int d = 0; d < D; ++d) {
      auto du = static_cast<size_t>(d);
      char c = 0;
      int f = nf[du], i = ni[du], w = nw[du];
      bool fReady = f < M && (d == 0 || doneBy(at(fDone, d - 1, f), t));
      bool iReady = i < M && doneBy(at(fDone, d, i), t) && (d == D - 1 || doneBy(at(iDone, d + 1, i), t));
      bool wReady = w < i && doneBy(at(iDone, d, w), t);
      // I first; F while the W backlog is under the cap; then W; then F anyway.
      if (iReady)
        c = 'I';
      else if (wReady && !(fReady && f - w < cap))
        c = 'W';
      else if (fReady)
        c = 'F';
      choice[du] = c;
    }
    for (int d = 0; d < D; ++d) {
      auto du = static_cast<size_t>(d);
      switch (choice[du]) {
        case 'F':
          at(fDone, d, nf[du]) = t + 1;
          o.add(d, OpKind::F, d, nf[du]++);
          break;
        case 'I':
          at(iDone, d, ni[du]) = t + 1;
          o.add(d, OpKind::I, d, ni[du]++);
          break;
        case 'W':
          o.add(d, OpKind::W, d, nw[du]++);
          if (nw[du] == M) ++finished;
          break;
        default:
          break;
      }
    }
  }
}

// PyTorch's ScheduleZBVZeroBubble (Zero Bubble's ZB-V): two stages per device in a V, F of
// the first chunk to warm up, then F/I/W of both chunks alternating; computed for
// max(M, 2D - 1) micro-batches and the extra ones dropped, as PyTorch does.
void zbV(Orders& o, int D, int M) {
  const int S = 2 * D;
  const int n = std::max(2 * D - 1, M);
  for (int r = 0; r < D; ++r) {
    const int c0 = r, c1 = S - 1 - r;
    int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
    auto add = [&](OpKind k, int stage, int mb) {
      if (mb < M) o.add(r, k, stage, mb);
    };
    for (int k = 0; k < 2 * (D - r) - 1; ++k) add(OpKind::F, c0, f0++);
    for (int k = 0; k < r; ++k) {
      add(OpKind::F, c1, f1++);
      add(OpKind::F, c0, f0++);
    }
    for (int k = 0; k < D - r; ++k) {
      add(OpKind::F, c1, f1++);
      add(OpKind::I, c1, b1);
      add(OpKind::W, c1, b1++);
    }
    while (f1 < f0 || f0 < n) {
      if (f0 < n) add(OpKind::F, c0, f0++);
      add(OpKind::I, c0, b0);
      add(OpKind::W, c0, b0++);
      add(OpKind::F, c1, f1++);
      add(OpKind::I, c1, b1);
      add(OpKind::W, c1, b1++);
    }
    int w0 = b0, w1 = b1;
    for (int k = 0; k < r; ++k) {
      add(OpKind::I, c0, b0++);
      add(OpKind::I, c1, b1++);
    }
    for (int k = 0; k < D - r; ++k) {
      add(OpKind::I, c0, b0++);
      add(OpKind::W, c0, w0++);
    }
    while (w1 < b1) add(OpKind::W, c1, w1++);
    while (w0 < b0) add(OpKind::W, c0, w0++);
  }
}

// DeepSeek's DualPipeV as PyTorch's ScheduleDualPipeV builds it: V placement, warm-up
// forwards, zero-bubble I/W steps, then overlapped F+B pairs of the two chunks in the steady
// state, and split backwards (I then W) in the second half of the cool-down.
void dualPipeV(Orders& o, int D, int M) {
  const int S = 2 * D;
  for (int r = 0; r < D; ++r) {
    const int s0 = r, s1 = S - 1 - r;
    int fwd[2] = {0, 0}, bwd[2] = {0, 0}, wgt[2] = {0, 0};
    std::deque<Op> weights;  // pending W after an I
    auto idx = [&](int stage) { return stage == s0 ? 0 : 1; };
    auto F = [&](int stage) { o.add(r, OpKind::F, stage, fwd[idx(stage)]++); };
    auto B = [&](int stage) {
      int c = idx(stage);
      o.add(r, OpKind::B, stage, bwd[c]++);
      ++wgt[c];
    };
    auto I = [&](int stage) {
      int c = idx(stage);
      weights.push_back(Op{OpKind::W, stage, bwd[c]});
      o.add(r, OpKind::I, stage, bwd[c]++);
    };
    auto Wp = [&]() {
      if (weights.empty()) return;
      Op w = weights.front();
      weights.pop_front();
      o.add(r, w.kind, w.stage, w.microbatch);
      ++wgt[idx(w.stage)];
    };
    auto overlap = [&](int fStage, int bStage) {
      Op f{OpKind::F, fStage, fwd[idx(fStage)]++};
      int c = idx(bStage);
      Op b{OpKind::B, bStage, bwd[c]++};
      ++wgt[c];
      o.pair(r, f, b);
    };
    for (int k = 0; k < (D - r - 1) * 2; ++k) F(s0);
    for (int k = 0; k < r + 1; ++k) {
      F(s0);
      F(s1);
    }
    for (int k = 0; k < D - r - 1; ++k) {
      I(s1);
      Wp();
      F(s1);
    }
    for (int i = 0; i < M - 2 * D + r + 1; ++i) {
      if (i == 0 && r == D - 1) {
        // The last device does not overlap this first pair, to shorten the bubble.
        F(s0);
        B(s1);
      } else {
        overlap(s0, s1);
      }
      overlap(s1, s0);
    }
    for (int k = 0; k < D - r - 1; ++k) {
      B(s1);
      overlap(s1, s0);
    }
    bool zb = false;
    const int step6 = r + 1;
    for (int i = 0; i < step6; ++i) {
      if (i == step6 / 2 && r % 2 == 1) zb = true;
      if (zb)
        I(s1);
      else
        B(s1);
      if (i == step6 / 2 && r % 2 == 0) zb = true;
      if (zb)
        I(s0);
      else
        B(s0);
    }
    for (int k = 0; k < D - r - 1; ++k) {
      Wp();
      if (zb)
        I(s0);
      else
        B(s0);
    }
    for (int k = 0; k < r + 1; ++k) Wp();
  }
}

}  // namespace

std::string_view scheduleKindName(ScheduleKind k) {
  for (const auto& e : kKindNames)
    if (e.value == k) return e.name;
  return "?";
}

PS_ENUM_FROM_NAME_FUNCTION(ScheduleKind, kKindNames, scheduleKindFromName);

const std::vector<ScheduleKind>& allScheduleKinds() {
  static const std::vector<ScheduleKind> kinds = [] {
    std::vector<ScheduleKind> v;
    for (const auto& kn : kKindNames) v.push_back(kn.value);
    return v;
  }();
  return kinds;
}

int defaultChunks(ScheduleKind k) {
  switch (k) {
    case ScheduleKind::Interleaved1F1B:
    case ScheduleKind::LoopedBFS:
    case ScheduleKind::ZBV:
    case ScheduleKind::DualPipeV:
      return 2;
    default:
      return 1;
  }
}

Result<Schedule> generateSchedule(ScheduleKind kind, const GeneratorOptions& options) {
  const int D = options.devices, M = options.microbatches;
  const int V = options.chunks == 0 ? defaultChunks(kind) : options.chunks;
  if (D < 1) return sizeError(kind, "at least 1 device, got " + std::to_string(D));
  if (M < 1) return sizeError(kind, "at least 1 micro-batch, got " + std::to_string(M));
  if (V < 1) return sizeError(kind, "at least 1 chunk, got " + std::to_string(V));
  // Keep generated schedules addressable with 32-bit op ids.
  if (static_cast<long long>(D) * V * M > 50'000'000LL)
    return sizeError(kind, "devices x chunks x micro-batches of at most 50,000,000");
  Orders o(D);
  switch (kind) {
    case ScheduleKind::GPipe:
    case ScheduleKind::OneFOneB:
    case ScheduleKind::ZBH1:
    case ScheduleKind::ZBH2:
      if (V != 1) return sizeError(kind, "--chunks 1 (one stage per device), got " + std::to_string(V));
      if (kind == ScheduleKind::GPipe) gpipe(o, D, M);
      if (kind == ScheduleKind::OneFOneB) oneFOneB(o, D, M);
      if (kind == ScheduleKind::ZBH1) zbH1(o, D, M);
      if (kind == ScheduleKind::ZBH2) zbH2(o, D, M);
      return finish(kind, D, D, M, PlacementKind::Linear, std::move(o));
    case ScheduleKind::Interleaved1F1B:
      if (M % D != 0)
        return sizeError(
            kind, "micro-batches to be a multiple of devices (Megatron's micro-batch groups of size D): " +
                      std::to_string(M) + " is not a multiple of " + std::to_string(D));
      interleaved(o, D, V, M);
      return finish(kind, D, D * V, M, PlacementKind::Interleaved, std::move(o));
    case ScheduleKind::LoopedBFS:
      loopedBfs(o, D, V, M);
      return finish(kind, D, D * V, M, PlacementKind::Interleaved, std::move(o));
    case ScheduleKind::ZBV:
      if (V != 2)
        return sizeError(kind, "--chunks 2 (two stages per device in a V), got " + std::to_string(V));
      zbV(o, D, M);
      return finish(kind, D, 2 * D, M, PlacementKind::VShape, std::move(o));
    case ScheduleKind::DualPipeV:
      if (V != 2)
        return sizeError(kind, "--chunks 2 (two stages per device in a V), got " + std::to_string(V));
      if (M < 2 * D)
        return sizeError(kind, "at least as many micro-batches as stages (2 x devices = " +
                                   std::to_string(2 * D) + "), got " + std::to_string(M));
      dualPipeV(o, D, M);
      return finish(kind, D, 2 * D, M, PlacementKind::VShape, std::move(o));
  }
  return makeError("generate.kind", "unknown schedule kind");
}

}  // namespace ps::core
