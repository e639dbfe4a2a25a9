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
                                                 {ScheduleKind::DualPipeV, "dualpipe-v"},
                                                 {ScheduleKind::DualPipe, "dualpipe"}};

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

// PyTorch's interleaved schedules (torch.distributed.pipelining's _get_1f1b_rank_ops, as
// ScheduleInterleaved1F1B and ScheduleInterleavedZeroBubble call it; action for action equal
// to torch 2.11's orders, tests/core/pytorch_orders_test.cpp). Micro-batches go in rounds of
// `perRound` = M / max(1, M / D); local chunk c = (step / perRound) mod V runs stage c·D + d, each
// stage taking its micro-batches in order. Warm-up: (V - 1)·perRound + factor·(D - d - 1)
// forwards (factor 2 for 1F1B, 1 for zero bubble), capped at V·M; then one forward and one
// backward per step; then the remaining backwards. Zero bubble splits each backward into I and
// a W that follows once the device has run d backwards (its W fill the cool-down).
void pytorchInterleaved(Orders& o, int D, int V, int M, bool zeroBubble) {
  const int rounds = std::max(1, M / D);
  const int perRound = M / rounds;
  const int total = V * M;
  for (int d = 0; d < D; ++d) {
    const int warmup = std::min((V - 1) * perRound + (zeroBubble ? 1 : 2) * (D - 1 - d), total);
    auto fwdStage = [&](int step) { return ((step / perRound) % V) * D + d; };
    auto bwdStage = [&](int step) { return (V - 1 - ((step - warmup) / perRound) % V) * D + d; };
    std::vector<int> fwdMb(static_cast<size_t>(D * V), 0), bwdMb(fwdMb), wMb(fwdMb);
    auto next = [](std::vector<int>& counter, int stage) { return counter[static_cast<size_t>(stage)]++; };
    std::vector<int> backwardSteps;
    size_t weights = 0;
    auto weight = [&] {
      const int stage = bwdStage(backwardSteps[weights++]);
      o.add(d, OpKind::W, stage, next(wMb, stage));
    };
    for (int step = 0; step < total + warmup; ++step) {
      if (step < total) {
        const int stage = fwdStage(step);
        o.add(d, OpKind::F, stage, next(fwdMb, stage));
      }
      if (step < warmup) continue;
      const int stage = bwdStage(step);
      o.add(d, zeroBubble ? OpKind::I : OpKind::B, stage, next(bwdMb, stage));
      backwardSteps.push_back(step);
      if (zeroBubble && step - warmup >= d) weight();
    }
    while (zeroBubble && weights < backwardSteps.size()) weight();
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

// One rank's order of DeepSeek's DualPipe family (DualPipe.step and DualPipeV.step share it):
// the rank runs two chunks, chunk 0 and chunk 1 as step() numbers its phases. `halfRanks` is
// the length of the pipeline one chunk belongs to counted in rank pairs (DualPipeV: all its
// ranks; DualPipe: half its ranks), `halfRank` this rank's place in it, `chunkMicrobatches`
// the micro-batches each chunk runs. Eight steps: warm-up forwards of chunk 0, alternating
// forwards, zero-bubble I/W steps, overlapped F+B pairs of the two chunks in the steady state
// (the middle rank does not overlap its first pair, to shorten the bubble), then the
// cool-down, whose second half splits backwards into I and W.
struct DualPipeChunk {
  int stage;
  int firstMicrobatch;  // the chunk's micro-batches are firstMicrobatch + 0, 1, ...
};

void dualPipeRank(Orders& o, int device, int halfRanks, int chunkMicrobatches, int halfRank,
                  const std::array<DualPipeChunk, 2>& chunks) {
  const int H = halfRanks, h = halfRank;
  int fwd[2] = {0, 0}, bwd[2] = {0, 0};
  std::deque<Op> weights;  // pending W after an I, first in first out (WeightGradStore)
  auto mb = [&](int c, int k) { return chunks[static_cast<size_t>(c)].firstMicrobatch + k; };
  auto stage = [&](int c) { return chunks[static_cast<size_t>(c)].stage; };
  auto F = [&](int c) {
    o.add(device, OpKind::F, stage(c), mb(c, fwd[c]));
    ++fwd[c];
  };
  auto backward = [&](int c, bool zb) {
    const Op op{zb ? OpKind::I : OpKind::B, stage(c), mb(c, bwd[c]++)};
    if (zb) weights.push_back(Op{OpKind::W, op.stage, op.microbatch});
    o.add(device, op.kind, op.stage, op.microbatch);
  };
  auto Wp = [&]() {
    if (weights.empty()) return;
    const Op w = weights.front();
    weights.pop_front();
    o.add(device, w.kind, w.stage, w.microbatch);
  };
  auto overlap = [&](int fc, int bc) {
    const Op f{OpKind::F, stage(fc), mb(fc, fwd[fc]++)};
    const Op b{OpKind::B, stage(bc), mb(bc, bwd[bc]++)};
    o.pair(device, f, b);
  };
  for (int k = 0; k < (H - h - 1) * 2; ++k) F(0);  // step 1: nF0
  for (int k = 0; k < h + 1; ++k) {                // step 2: nF0F1
    F(0);
    F(1);
  }
  for (int k = 0; k < H - h - 1; ++k) {  // step 3: nB1W1F1, zero bubble
    backward(1, true);
    Wp();
    F(1);
  }
  for (int i = 0; i < chunkMicrobatches - 2 * H + h + 1; ++i) {  // step 4: nF0B1F1B0
    if (i == 0 && h == H - 1) {
      F(0);
      backward(1, false);
    } else {
      overlap(0, 1);
    }
    overlap(1, 0);
  }
  for (int k = 0; k < H - h - 1; ++k) {  // step 5: nB1F1B0
    backward(1, false);
    overlap(1, 0);
  }
  bool zb = false;  // step 6: nB1B0, the second half with zero bubble
  const int step6 = h + 1;
  for (int i = 0; i < step6; ++i) {
    if (i == step6 / 2 && h % 2 == 1) zb = true;
    backward(1, zb);
    if (i == step6 / 2 && h % 2 == 0) zb = true;
    backward(0, zb);
  }
  for (int k = 0; k < H - h - 1; ++k) {  // step 7: nWB0, zero bubble
    Wp();
    backward(0, true);
  }
  for (int k = 0; k < h + 1; ++k) Wp();  // step 8: nW
}

// DeepSeek's DualPipeV as PyTorch's ScheduleDualPipeV builds it: V placement, rank r runs
// stages r (chunk 0) and 2D-1-r (chunk 1), every micro-batch through both.
void dualPipeV(Orders& o, int D, int M) {
  for (int r = 0; r < D; ++r)
    dualPipeRank(o, r, D, M, r, {DualPipeChunk{r, 0}, DualPipeChunk{2 * D - 1 - r, 0}});
}

// DeepSeek's bidirectional DualPipe as DualPipe.step runs it (dualpipe/dualpipe.py). Stages
// 0..D-1 on devices 0..D-1 carry the micro-batches going down (DeepSeek's phase 0, fed at
// rank 0): PipeStudio's micro-batches 0..M/2-1 are its chunks 0..M/2-1. Stages D..2D-1 on
// devices D-1..0 carry those going up (phase 1, fed at rank D-1): micro-batches M/2..M-1 are
// its chunks 0..M/2-1. Stage D+k runs the same model block as stage k. step()'s chunk 0 is the
// down direction on the first half of the ranks and the up direction on the second half.
void dualPipe(Orders& o, int D, int M) {
  const int H = D / 2, half = M / 2;
  for (int r = 0; r < D; ++r) {
    const DualPipeChunk down{r, 0}, up{2 * D - 1 - r, half};
    const bool secondHalf = r >= H;
    dualPipeRank(o, r, H, half, std::min(r, D - 1 - r), {secondHalf ? up : down, secondHalf ? down : up});
  }
}

// The routes of DualPipe: micro-batches 0..M/2-1 down stages 0..D-1, M/2..M-1 up stages
// D..2D-1; stage D+k holds a copy of block k.
Result<Pipeline> dualPipeRoutes(const Pipeline& p, int D, int M) {
  Route down, up;
  std::vector<int> blocks(static_cast<size_t>(2 * D));
  for (int k = 0; k < D; ++k) {
    down.stages.push_back(k);
    up.stages.push_back(D + k);
    blocks[static_cast<size_t>(k)] = blocks[static_cast<size_t>(D) + static_cast<size_t>(k)] = k;
  }
  down.microbatchCount = M / 2;
  up.firstMicrobatch = M / 2;
  up.microbatchCount = M - M / 2;
  return p.withRoutes({down, up}, std::move(blocks));
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
    case ScheduleKind::DualPipe:
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
    case ScheduleKind::ZBH2:
      if (V != 1) return sizeError(kind, "--chunks 1 (one stage per device), got " + std::to_string(V));
      if (kind == ScheduleKind::GPipe) gpipe(o, D, M);
      if (kind == ScheduleKind::OneFOneB) oneFOneB(o, D, M);
      if (kind == ScheduleKind::ZBH2) zbH2(o, D, M);
      return finish(kind, D, D, M, PlacementKind::Linear, std::move(o));
    case ScheduleKind::Interleaved1F1B:
    case ScheduleKind::ZBH1: {
      // PyTorch's rule: micro-batches in max(1, M / D) equal rounds. With one chunk ZB-H1's
      // order does not depend on the rounds, so any M serves.
      const int rounds = std::max(1, M / D);
      if ((kind == ScheduleKind::Interleaved1F1B || V > 1) && M % rounds != 0)
        return sizeError(kind, "micro-batches in equal rounds of about one per device, as PyTorch's " +
                                   std::string(kind == ScheduleKind::ZBH1 ? "ScheduleInterleavedZeroBubble"
                                                                          : "ScheduleInterleaved1F1B") +
                                   " does: " + std::to_string(M) + " is not a multiple of max(1, " +
                                   std::to_string(M) + " / " + std::to_string(D) +
                                   ") = " + std::to_string(rounds) + " rounds");
      pytorchInterleaved(o, D, V, M, kind == ScheduleKind::ZBH1);
      return finish(kind, D, D * V, M, V == 1 ? PlacementKind::Linear : PlacementKind::Interleaved,
                    std::move(o));
    }
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
    case ScheduleKind::DualPipe: {
      // DualPipe.step's assertions: an even number of ranks, an even number of micro-batches,
      // at least two per rank.
      if (V != 2)
        return sizeError(kind, "--chunks 2 (a copy of each stage per direction), got " + std::to_string(V));
      if (D % 2 != 0) return sizeError(kind, "an even number of devices, got " + std::to_string(D));
      if (M % 2 != 0 || M < 2 * D)
        return sizeError(kind, "an even number of micro-batches, at least 2 x devices (" +
                                   std::to_string(2 * D) + "), got " + std::to_string(M));
      dualPipe(o, D, M);
      auto s = finish(kind, D, 2 * D, M, PlacementKind::VShape, std::move(o));
      PS_TRY(s);
      auto routed = dualPipeRoutes(s->pipeline, D, M);
      PS_TRY(routed);
      s->pipeline = std::move(*routed);
      return s;
    }
  }
  return makeError("generate.kind", "unknown schedule kind");
}

}  // namespace ps::core
