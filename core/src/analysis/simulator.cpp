#include "pipestudio/core/analysis/simulator.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <queue>
#include <string>
#include <utility>

#include "pipestudio/core/model/limits.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "analysis/simulator_compiled.h"
#include "pipestudio/core/analysis/dependency_graph.h"
#include "pipestudio/core/analysis/validator.h"
#include "pipestudio/core/model/duration_expression.h"

namespace ps::core {

Result<SimulationModel> makeSimulationModel(const Schedule& s, const CostProfile& p,
                                            const std::vector<int>& layersPerStage) {
  const std::vector<int>& part = layersPerStage.empty() ? s.partition : layersPerStage;
  if (auto problem = s.pipeline.routeProblem()) return makeError("simulate.routes", *problem);
  // Copies of one model block (DualPipe's two directions) cost the same: the profile's layers
  // are split over the blocks, and each stage takes its block's costs.
  auto costs = stageCosts(p, s.pipeline.blocks(), part, s.pipeline.partitionUnit());
  PS_TRY(costs);
  SimulationModel m;
  m.profile = p;
  if (s.pipeline.stageBlock.empty()) {
    m.stages = std::move(*costs);
  } else {
    m.stages.reserve(static_cast<size_t>(s.pipeline.stages));
    for (int st = 0; st < s.pipeline.stages; ++st)
      m.stages.push_back((*costs)[static_cast<size_t>(s.pipeline.blockOf(st))]);
  }
  return m;
}

// ---------------------------------------------------------------------------------------------
// The simulation: flat arrays, op ids precomputed once per call, a worklist of devices.
namespace {

using namespace detail;

// Reserves a large output vector. On Linux its pages are advised as huge pages first: a
// million-op timeline is tens of MB written once, and taking it in 2 MiB pages instead of
// 4 KiB ones saves thousands of page faults per simulation (advice only; ignored elsewhere).
template <typename T>
void reserveOutput(std::vector<T>& v, size_t n) {
  v.reserve(n);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
  const size_t bytes = n * sizeof(T);
  if (bytes < 4 * kHuge) return;
  const auto p = reinterpret_cast<std::uintptr_t>(v.data());
  const std::uintptr_t b = (p + kHuge - 1) & ~(kHuge - 1), e = (p + bytes) & ~(kHuge - 1);
  // NOLINTNEXTLINE(performance-no-int-to-ptr): madvise takes the page-aligned address as a pointer
  if (e > b) madvise(reinterpret_cast<void*>(b), e - b, MADV_HUGEPAGE);
#endif
}

std::string formatMs(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g ms", v);
  return buf;
}

std::string formatBytes(std::int64_t b) {
  char buf[64];
  double v = static_cast<double>(b);
  if (std::llabs(b) >= (1LL << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", v / (1LL << 30));
  else if (std::llabs(b) >= (1LL << 20))
    std::snprintf(buf, sizeof buf, "%.2f MiB", v / (1LL << 20));
  else
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  return buf;
}

}  // namespace

namespace {

// Under nccl and dualpipe (comm_semantics.h): the steps' times from the shared execution with the
// ranks' communication streams, instead of the timing loop below. Point-to-point steps span from
// the start of their turn on the stream to the end of their transfer and, like the copy stream's
// ops, take no compute time. `head` is each device's first step not done.
void timeWithCommStreams(const Schedule& s, const SimulationModel& model, const SimulationOptions& o,
                         Compiled& c, std::vector<int>& head, Timeline& tl) {
  const DependencyGraph& g = *c.g;
  const auto n = static_cast<size_t>(g.size());
  const CommPlan plan = makeCommPlan(s, g, o.comm);
  CommCosts costs;
  costs.duration.assign(n, 0.0);
  costs.transfer.assign(n, 0.0);
  costs.impliedTransfer.assign(n, 0.0);
  const size_t nSteps = c.steps.size() - 1;
  for (size_t h = 0; h < nSteps; ++h) costs.duration[static_cast<size_t>(c.stepOp[h])] = c.steps[h].dur;
  // What crosses a link is the lower stage's output, as in the timing loop.
  auto linkOf = [&](int low) { return low >= 0 && low < c.S ? c.linkCost[static_cast<size_t>(low)] : 0.0; };
  for (size_t id = 0; id < n; ++id) {
    const Op& op = g.op(static_cast<int>(id));
    if (op.kind == OpKind::SendF) costs.transfer[id] = linkOf(op.stage);
    if (op.kind == OpKind::SendB) costs.transfer[id] = linkOf(g.routes().prev(op.stage, op.microbatch));
    if (op.kind == OpKind::F) costs.impliedTransfer[id] = linkOf(op.stage);
    if (op.kind == OpKind::B || op.kind == OpKind::I)
      costs.impliedTransfer[id] = linkOf(g.routes().prev(op.stage, op.microbatch));
  }
  const CommExecution x = executeWithComms(s, g, plan, costs);
  for (int d = 0; d < c.D; ++d) {
    const int b = c.devBegin[static_cast<size_t>(d)];
    head[static_cast<size_t>(d)] = b + x.stepsDone[static_cast<size_t>(d)];
    for (int h = b; h < head[static_cast<size_t>(d)]; ++h) {
      StepRec& r = c.steps[static_cast<size_t>(h)];
      const int op = c.stepOp[static_cast<size_t>(h)];
      r.time = x.start[static_cast<size_t>(op)];
      r.dur = x.end[static_cast<size_t>(op)] - r.time;
      if (isPointToPointKind(g.op(op).kind) && c.stepOp[static_cast<size_t>(h) + 1] - op == 1) {
        r.edges |= kCopyBit;
        c.hasCopy[static_cast<size_t>(d)] = 1;
      }
    }
  }
  auto stepRef = [&](int op) { return g.ref(op).step; };
  // The compute ops a transfer connects: the send's producer and the receive's consumer.
  auto producerOf = [&](int send) {
    for (int dep : g.dependencies(send)) return g.op(dep);
    return g.op(send);
  };
  auto consumerOf = [&](int recv) {
    for (int u : g.dependents(recv))
      if (!isPointToPointKind(g.op(u).kind)) return g.op(u);
    return g.op(recv);
  };
  if (o.recordTransfers)
    for (const auto& pr : x.pairs) {
      if (!(pr.end > pr.start)) continue;
      const Op& send = g.op(pr.send);
      const int low = send.kind == OpKind::SendF ? send.stage : g.routes().prev(send.stage, send.microbatch);
      tl.transfers.push_back(Transfer{g.deviceOf(pr.send), g.deviceOf(pr.recv), producerOf(pr.send),
                                      consumerOf(pr.recv), model.stages[static_cast<size_t>(low)].outputBytes,
                                      pr.start, pr.end});
    }
  for (const auto& w : x.headOfLine)
    tl.headOfLine.push_back(HeadOfLineWait{g.deviceOf(w.op), stepRef(w.op), g.op(w.op), stepRef(w.blocker),
                                           g.op(w.blocker), w.from, w.to});
  std::sort(tl.headOfLine.begin(), tl.headOfLine.end(), [](const HeadOfLineWait& a, const HeadOfLineWait& b) {
    return a.device != b.device ? a.device < b.device : a.start < b.start;
  });
}

}  // namespace

namespace {
Result<Timeline> run(const Schedule& s, const SimulationModel& model, const SimulationOptions& o,
                     const DependencyGraph* given);

// The gradient exchanges between copies of a block on different devices (CopyGradientSync):
// DeepSeek's DualPipe example sums the two copies' gradients after step(). Each side sends its
// gradients (weights x gradient bytes per weight byte) over the link, both ways at once, from
// when both copies have finished their last backward.
void addCopyGradientSyncs(const Schedule& s, const SimulationModel& model, Timeline& tl) {
  const Pipeline& p = s.pipeline;
  const CostProfile& prof = model.profile;
  const auto S = static_cast<size_t>(p.stages);
  std::vector<double> lastGrad(S, 0.0);
  for (const TimelineOp& o : tl.ops)
    if ((o.op.kind == OpKind::B || o.op.kind == OpKind::W) && o.op.stage >= 0 && o.op.stage < p.stages)
      lastGrad[static_cast<size_t>(o.op.stage)] = std::max(lastGrad[static_cast<size_t>(o.op.stage)], o.end);
  for (int a = 0; a < p.stages; ++a)
    for (int b = a + 1; b < p.stages; ++b) {
      if (p.blockOf(a) != p.blockOf(b) || p.deviceOf(a) == p.deviceOf(b)) continue;
      CopyGradientSync sync{p.blockOf(a), a, b, p.deviceOf(a), p.deviceOf(b), 0, 0, 0};
      sync.bytes =
          static_cast<std::int64_t>(static_cast<double>(model.stages[static_cast<size_t>(a)].weightBytes) *
                                    prof.gradientBytesPerWeightByte);
      const double transfer =
          prof.fixedCommMs
              ? *prof.fixedCommMs
              : prof.link.latencyMs + (prof.link.bandwidthBytesPerMs > 0
                                           ? static_cast<double>(sync.bytes) / prof.link.bandwidthBytesPerMs
                                           : 0.0);
      sync.start = std::max(lastGrad[static_cast<size_t>(a)], lastGrad[static_cast<size_t>(b)]);
      sync.end = sync.start + transfer;
      tl.metrics.copySyncEnd = std::max(tl.metrics.copySyncEnd, sync.end);
      tl.copySyncs.push_back(sync);
    }
}
}  // namespace

Result<Timeline> simulate(const Schedule& s, const SimulationModel& model, const SimulationOptions& o) {
  return run(s, model, o, nullptr);
}

Result<Timeline> simulate(const Schedule& s, const SimulationModel& model, const SimulationOptions& o,
                          const DependencyGraph& graph) {
  return run(s, model, o, &graph);
}

namespace {
// A stalled simulation: the timeline is incomplete, and its diagnostics say why: the
// validator's deadlock when it finds the cycle, else where each device stopped and what it
// waits for. `head` is each device's first step not done.
void reportStall(const Schedule& s, const SimulationOptions& o, const Compiled& c,
                 const std::vector<int>& head, Timeline& tl) {
  tl.complete = false;
  ValidateOptions vo;
  vo.comm = o.comm;
  ValidationReport report = validateSchedule(s, vo);
  bool reported = false;
  for (const Diagnostic& dg : report.diagnostics) {
    if (dg.code == "validate.deadlock") {
      tl.diagnostics.push_back(dg);
      reported = true;
    }
  }
  if (!reported) {
    // The validator found no cycle (e.g. a dependency it does not model): name where each
    // device stopped and what it waits for.
    std::string msg = "simulation stalled:";
    Diagnostic diag = makeError("simulate.stall", "");
    for (int d = 0; d < c.D; ++d) {
      const int h = head[static_cast<size_t>(d)];
      if (h >= c.devBegin[static_cast<size_t>(d) + 1]) continue;
      const int first = c.stepOp[static_cast<size_t>(h)];
      std::string waits;
      for (int op = first; op < c.stepOp[static_cast<size_t>(h) + 1] && waits.empty(); ++op)
        for (int dep : c.g->dependencies(op)) {
          const int ds = c.stepOf(dep);
          const int dd = c.g->deviceOf(dep);
          if (head[static_cast<size_t>(dd)] <= ds && ds != h) {
            waits = s.opName(c.op(dep)) + " on device " + std::to_string(dd);
            break;
          }
        }
      msg += " device " + std::to_string(d) + " at " + s.opName(c.op(first)) + " waits for " +
             (waits.empty() ? std::string("?") : waits) + ";";
      diag.related.push_back(OpRef{d, h - c.devBegin[static_cast<size_t>(d)]});
    }
    msg.pop_back();
    diag.message = msg;
    tl.diagnostics.push_back(std::move(diag));
  }
}

// One device's memory over its timed steps: each op's effect at its start (phase 0) and end
// (phase 1), the curve, the peak and the op at it, the micro-batches in flight, and the
// diagnostics of a limit passed or a sum that overflows.
class DeviceMemoryWalk {
 public:
  DeviceMemoryWalk(const Schedule& s, const SimulationModel& model, Compiled& c,
                   std::vector<std::int64_t>& gathered, std::int64_t limit, int d, DeviceMetrics& dm,
                   std::vector<MemorySample>* curve, std::vector<Diagnostic>& diagnostics)
      : s_(s),
        model_(model),
        c_(c),
        gathered_(gathered),
        limit_(limit),
        d_(d),
        b_(c.devBegin[static_cast<size_t>(d)]),
        M_(static_cast<size_t>(c.M)),
        dm_(dm),
        curve_(curve),
        diagnostics_(diagnostics) {}

  // The device's weights, gradients and optimizer state: resident from the start.
  void start(std::int64_t staticBytes, int steps) {
    cur_ = staticBytes;
    dm_.peakMemoryBytes = cur_;
    if (curve_) {
      curve_->reserve(static_cast<size_t>(steps) + 2);
      curve_->push_back(MemorySample{0, cur_});
    }
    if (limit_ > 0 && cur_ > limit_) {
      overLimit_ = true;
      diagnostics_.push_back(makeError(
          "simulate.memory", "device " + std::to_string(d_) + " needs " + formatBytes(cur_) +
                                 " for weights, gradients and optimizer state alone, over its limit of " +
                                 formatBytes(limit_)));
    }
  }

  // The effects of step h's ops at its start (phase 0) or end (phase 1).
  PS_INLINE_LAMBDA void step(int h, int phase) {
    const StepRec& r = c_.steps[static_cast<size_t>(h)];
    const double time = phase == 0 ? r.time : r.time + r.dur;
    curStep_ = h - b_;
    for (int op = c_.stepOp[static_cast<size_t>(h)]; op < c_.stepOp[static_cast<size_t>(h) + 1]; ++op)
      effect(c_.op(op), phase, time);
  }

  // A device with copy-stream steps: its compute steps [b, e) (copy steps skipped) and its
  // copy steps, two streams each in time order, merged; at a tie an end (a free) comes before
  // a start (an allocation).
  void sweepTwoStreams(int e, const std::vector<int>& copySteps) {
    const std::vector<StepRec>& steps = c_.steps;
    int ci = b_;
    size_t qi = 0;
    int cPhase = 0, qPhase = 0;
    auto nextCompute = [&] {
      while (ci < e && (steps[static_cast<size_t>(ci)].edges & kCopyBit)) ++ci;
    };
    nextCompute();
    while (ci < e || qi < copySteps.size()) {
      double tc = std::numeric_limits<double>::infinity(), tq = tc;
      if (ci < e) {
        const StepRec& r = steps[static_cast<size_t>(ci)];
        tc = cPhase == 0 ? r.time : r.time + r.dur;
      }
      if (qi < copySteps.size()) {
        const StepRec& r = steps[static_cast<size_t>(copySteps[qi])];
        tq = qPhase == 0 ? r.time : r.time + r.dur;
      }
      const bool takeCompute = tc < tq || (tc == tq && (cPhase == 1 || qPhase == 0));
      if (takeCompute) {
        step(ci, cPhase);
        if (cPhase == 0) {
          cPhase = 1;
        } else {
          cPhase = 0;
          ++ci;
          nextCompute();
        }
      } else {
        step(copySteps[qi], qPhase);
        if (qPhase == 0) {
          qPhase = 1;
        } else {
          qPhase = 0;
          ++qi;
        }
      }
    }
  }

  // The first sample and the peak time start at the device's first op, known after the pass.
  void finish() {
    if (curve_) curve_->front().time = dm_.start;
    if (!peakMoved_) dm_.peakMemoryTime = dm_.start;
  }

 private:
  PS_INLINE_LAMBDA void apply(double time, std::int64_t delta, const Op& op) {
    if (delta == 0) return;
    if (!limits::addBytes(cur_, delta)) {
      // Saturate and report once: a wrapped sum would print as a plausible (or negative) peak.
      cur_ = delta > 0 ? std::numeric_limits<std::int64_t>::max() : std::numeric_limits<std::int64_t>::min();
      if (!memOverflow_) {
        memOverflow_ = true;
        diagnostics_.push_back(makeError(
            "simulate.overflow",
            "device " + std::to_string(d_) + ": memory in use overflows 64 bits during " + s_.opName(op)));
      }
    }
    if (curve_) {
      // Changes at one instant collapse into one sample, but the first (static) sample stays.
      if (curve_->size() > 1 && curve_->back().time == time)
        curve_->back().bytes = cur_;
      else
        curve_->push_back(MemorySample{time, cur_});
    }
    if (cur_ > dm_.peakMemoryBytes) {
      dm_.peakMemoryBytes = cur_;
      dm_.peakMemoryTime = time;
      dm_.peakMemoryOp = OpRef{d_, curStep_};
      peakMoved_ = true;
    }
    if (limit_ > 0 && cur_ > limit_ && !overLimit_) {
      overLimit_ = true;
      Diagnostic diag =
          makeError("simulate.memory", "device " + std::to_string(d_) + " exceeds its memory limit at " +
                                           formatMs(time) + " during " + s_.opName(op) + ": " +
                                           formatBytes(cur_) + " > " + formatBytes(limit_));
      diag.related.push_back(OpRef{d_, curStep_});
      diagnostics_.push_back(std::move(diag));
    }
  }

  PS_INLINE_LAMBDA void inflightDelta(const Op& op, int delta) {
    if (op.microbatch < 0) return;
    int& n = c_.live[static_cast<size_t>(d_) * M_ + static_cast<size_t>(op.microbatch)];
    if (delta > 0) {
      if (n++ == 0) dm_.peakInflightMicrobatches = std::max(dm_.peakInflightMicrobatches, ++inflight_);
    } else if (n > 0) {
      if (--n == 0) --inflight_;
    }
  }

  PS_INLINE_LAMBDA void effect(const Op& op, int phase, double time) {
    const StageCost& sc = model_.stages[static_cast<size_t>(op.stage)];
    const size_t sm =
        op.microbatch >= 0 ? static_cast<size_t>(op.stage) * M_ + static_cast<size_t>(op.microbatch) : 0;
    std::vector<std::int64_t>& stash = c_.stash;  // per (stage, mb): activations resident on the device
    std::vector<std::int64_t>& offloaded = c_.offloaded;  // per (stage, mb): activations on the host
    switch (op.kind) {
      case OpKind::F:
        if (phase == 0 && op.microbatch >= 0) {
          const std::int64_t bytes = c_.recomputed[sm] ? sc.inputBytes : sc.activationBytes;
          stash[sm] = bytes;
          inflightDelta(op, +1);
          apply(time, bytes, op);
        }
        break;
      case OpKind::R:
        if (phase == 0 && op.microbatch >= 0) {
          stash[sm] += sc.activationBytes;
          apply(time, sc.activationBytes, op);
        }
        break;
      case OpKind::B:
      case OpKind::I:
        if (phase == 1 && op.microbatch >= 0) {
          std::int64_t& st = stash[sm];
          const std::int64_t freed =
              op.kind == OpKind::B ? st
                                   : std::max<std::int64_t>(0, st - std::min(st, sc.weightGradStashBytes));
          st -= freed;
          inflightDelta(op, -1);
          apply(time, -freed, op);
        }
        break;
      case OpKind::W:
      case OpKind::Offload:
        // The rest of the stash leaves the device: freed (W) or moved to the host (OFFLOAD).
        if (phase == 1 && op.microbatch >= 0) {
          const std::int64_t gone = std::exchange(stash[sm], 0);
          if (op.kind == OpKind::Offload) offloaded[sm] += gone;
          apply(time, -gone, op);
        }
        break;
      case OpKind::Reload:
        if (phase == 0 && op.microbatch >= 0) {
          const std::int64_t back = offloaded[sm];
          offloaded[sm] = 0;
          stash[sm] += back;
          apply(time, back, op);
        }
        break;
      case OpKind::Unshard:
        if (phase == 0 && gathered_[static_cast<size_t>(op.stage)] == 0) {
          gathered_[static_cast<size_t>(op.stage)] = sc.weightBytes;
          apply(time, sc.weightBytes, op);
        }
        break;
      case OpKind::Reshard:
        if (phase == 1 && !gathered_.empty()) {
          const std::int64_t freed = gathered_[static_cast<size_t>(op.stage)];
          gathered_[static_cast<size_t>(op.stage)] = 0;
          apply(time, -freed, op);
        }
        break;
      default:
        if (const UserKind* u = s_.userKind(op.kind)) {
          if (phase == 0)
            apply(time, u->memory.transientBytes, op);
          else
            apply(time, u->memory.deltaBytes - u->memory.transientBytes, op);
        }
        break;
    }
  }

  const Schedule& s_;
  const SimulationModel& model_;
  Compiled& c_;
  std::vector<std::int64_t>& gathered_;  // per stage: gathered (unsharded) weights, UNSHARD to RESHARD
  const std::int64_t limit_;
  const int d_;
  const int b_;  // the device's first step
  const size_t M_;
  DeviceMetrics& dm_;
  std::vector<MemorySample>* curve_;
  std::vector<Diagnostic>& diagnostics_;
  std::int64_t cur_ = 0;
  int curStep_ = 0;  // step index (in the device's order) of the op being applied: the peak's op
  int inflight_ = 0;
  bool peakMoved_ = false;
  bool overLimit_ = false;
  bool memOverflow_ = false;
};

// The weights, gradients and optimizer state of the stages on device d.
Result<std::int64_t> deviceStaticBytes(const Schedule& s, const SimulationModel& model, int stages, int d) {
  std::int64_t bytes = 0;
  for (int st = 0; st < stages; ++st)
    if (s.pipeline.stageToDevice.size() == static_cast<size_t>(stages) && s.pipeline.deviceOf(st) == d)
      if (!limits::addBytes(bytes, model.stages[static_cast<size_t>(st)].staticBytes))
        return makeError("simulate.overflow", "device " + std::to_string(d) +
                                                  ": the static memory of its stages overflows 64 bits");
  return bytes;
}

// --- Ops of the timeline, per-device busy / span, and memory: each device's compute stream
// and copy stream are walked in time order (each is ordered by itself), frees before
// allocations at equal times. A device without copy-stream steps is in time order already,
// so its ops, metrics and memory curve come out of one pass over its steps. `head`: each
// device's first step not timed; `done`: the ops timed.
Status emitOpsAndMemory(const Schedule& s, const SimulationModel& model, const SimulationOptions& o,
                        Compiled& c, const std::vector<int>& head, size_t done, Timeline& tl) {
  const std::vector<StepRec>& steps = c.steps;
  const size_t D = static_cast<size_t>(c.D);
  reserveOutput(tl.ops, done);
  TimelineMetrics& m = tl.metrics;
  m.devices.resize(D);
  double first = std::numeric_limits<double>::infinity(), last = -first, busySum = 0;
  const std::int64_t limit = o.memoryLimitBytes.value_or(model.profile.deviceMemoryBytes);
  const size_t SM = static_cast<size_t>(c.S) * static_cast<size_t>(c.M);
  std::vector<std::int64_t> gathered(c.anyUnshard ? static_cast<size_t>(c.S) : 0, 0);
  c.stash.assign(SM, 0);
  c.offloaded.assign(SM, 0);
  c.live.assign(D * static_cast<size_t>(c.M), 0);
  if (o.recordMemory) tl.memory.resize(D);
  std::vector<int> copySteps;
  for (int d = 0; d < c.D; ++d) {
    DeviceMetrics& dm = m.devices[static_cast<size_t>(d)];
    dm.device = d;
    const int b = c.devBegin[static_cast<size_t>(d)], e = head[static_cast<size_t>(d)];
    PS_ASSIGN_OR_RETURN(const std::int64_t staticBytes, deviceStaticBytes(s, model, c.S, d));
    dm.staticBytes = staticBytes;
    DeviceMemoryWalk memory(s, model, c, gathered, limit, d, dm,
                            o.recordMemory ? &tl.memory[static_cast<size_t>(d)] : nullptr, tl.diagnostics);
    memory.start(staticBytes, e - b);
    const bool copyDevice = c.hasCopy[static_cast<size_t>(d)] != 0;
    const size_t segBegin = tl.ops.size();
    bool anyCopy = false;
    double lo = std::numeric_limits<double>::infinity(), hi = -lo, busy = 0;
    for (int h = b; h < e; ++h) {
      const StepRec& r = steps[static_cast<size_t>(h)];
      const int o0 = c.stepOp[static_cast<size_t>(h)], o1 = c.stepOp[static_cast<size_t>(h) + 1];
      const bool pair = o1 - o0 == 2;
      for (int op = o0; op < o1; ++op)
        tl.ops.push_back(TimelineOp{d, h - b, c.op(op), pair, r.time, r.time + r.dur});
      lo = std::min(lo, r.time);
      hi = std::max(hi, r.time + r.dur);
      if (r.edges & kCopyBit)
        anyCopy = true;
      else
        busy += r.dur;
      if (!copyDevice) {
        memory.step(h, 0);
        memory.step(h, 1);
      }
    }
    dm.busy = busy;
    if (e > b) {
      dm.start = lo;
      dm.end = hi;
      first = std::min(first, lo);
      last = std::max(last, hi);
    }
    if (anyCopy)
      std::stable_sort(tl.ops.begin() + static_cast<std::ptrdiff_t>(segBegin), tl.ops.end(),
                       [](const TimelineOp& x, const TimelineOp& y) { return x.start < y.start; });
    busySum += dm.busy;
    m.lowerBound = std::max(m.lowerBound, dm.busy);
    if (copyDevice) {
      copySteps.clear();
      for (int h = b; h < e; ++h)
        if (steps[static_cast<size_t>(h)].edges & kCopyBit) copySteps.push_back(h);
      memory.sweepTwoStreams(e, copySteps);
    }
    memory.finish();
  }
  m.ops = done;
  m.headOfLineWaits = tl.headOfLine.size();
  for (const HeadOfLineWait& w : tl.headOfLine) m.headOfLineMs += w.duration();
  if (last >= first) {
    m.makespan = last - first;
    if (m.makespan > 0) {
      m.bubbleRatio = 1.0 - busySum / (static_cast<double>(D) * m.makespan);
      m.efficiency = m.lowerBound / m.makespan;
    }
  }
  // Costs built in code are not bounded like a parsed profile: an infinite time is an error.
  if (!std::isfinite(m.makespan) || !std::isfinite(busySum))
    tl.diagnostics.push_back(makeError("simulate.overflow",
                                       "the simulated times are not finite (a cost too large "
                                       "for the model; times are bounded by " +
                                           std::to_string(static_cast<long long>(limits::kMaxTimeMs)) +
                                           " ms per value)"));
  return okStatus();
}

Result<Timeline> run(const Schedule& s, const SimulationModel& model, const SimulationOptions& o,
                     const DependencyGraph* given) {
  Compiled& c = scratch();
  PS_TRY(compile(s, model, c, given));
  const size_t D = static_cast<size_t>(c.D);
  std::vector<StepRec>& steps = c.steps;

  Timeline tl;
  tl.source = TimelineSource::Simulated;
  tl.label = s.name;
  tl.devices = c.D;

  // --- Timing. A device runs its steps while their dependencies are scheduled; a step that
  // is scheduled hands its end time (plus the transfer, across devices) to its successors and
  // wakes a device whose next step became ready. Each link direction is one channel: a device
  // schedules its steps in order, so transfers enter the channel in the order their data is
  // ready (copy-stream ops aside, which send nothing across devices).
  std::vector<int> head(c.devBegin.begin(), c.devBegin.end() - 1);
  std::vector<double> devFree(D, 0.0), copyFree(D, 0.0), channelFree(D * D, 0.0);
  // When each stage's weights are gathered: its compute waits for the UNSHARD before it in
  // its device's order, as _PipelineScheduleRuntime waits for the unshard handle at the
  // stage's next compute action (_assert_unsharded).
  std::vector<double> unshardedAt(c.anyUnshard ? static_cast<size_t>(c.S) : 0, 0.0);
  std::vector<int> work;
  std::vector<char> queued(D, 1);
  work.reserve(D);
  for (int d = c.D - 1; d >= 0; --d) work.push_back(d);
  const std::uint32_t nEdges = static_cast<std::uint32_t>(c.edges.size());
  if (o.recordTransfers) reserveOutput(tl.transfers, c.timedTransfers);
  constexpr std::uint32_t kPrefetchEdges = 8;
  const bool commStreams = commSemanticsApplies(s, o.comm);
  tl.comm = std::string(commSemanticsName(commStreams ? o.comm.semantics : CommSemantics::Posted));
  if (commStreams) {
    timeWithCommStreams(s, model, o, c, head, tl);
  } else {
    while (!work.empty()) {
      const int d = work.back();
      work.pop_back();
      queued[static_cast<size_t>(d)] = 0;
      int h = head[static_cast<size_t>(d)];
      const int stop = c.devBegin[static_cast<size_t>(d) + 1];
      double free = devFree[static_cast<size_t>(d)];
      for (; h < stop; ++h) {
        StepRec& r = steps[static_cast<size_t>(h)];
        if (r.pending > 0) break;
        double start;
        if (r.edges & kCopyBit) {
          double& cf = copyFree[static_cast<size_t>(d)];
          start = std::max({free, r.time, cf});
          cf = start + r.dur;
          if (c.anyUnshard) {
            const Op& op = c.op(c.stepOp[static_cast<size_t>(h)]);
            if (op.kind == OpKind::Unshard) unshardedAt[static_cast<size_t>(op.stage)] = cf;
          }
        } else {
          start = std::max(free, r.time);
          if (c.anyUnshard)
            for (int op = c.stepOp[static_cast<size_t>(h)]; op < c.stepOp[static_cast<size_t>(h) + 1]; ++op)
              start = std::max(start, unshardedAt[static_cast<size_t>(c.op(op).stage)]);
          free = start + r.dur;
        }
        r.time = start;
        const double end = start + r.dur;
        const std::uint32_t edgeEnd = steps[static_cast<size_t>(h) + 1].edges & kEdgeMask;
        for (std::uint32_t k = r.edges & kEdgeMask; k < edgeEnd; ++k) {
          // A consumer's record is usually first touched here, on another device's list and
          // long after compile() wrote it: fetch a few edges ahead so the misses overlap.
          if (k + kPrefetchEdges < nEdges)
            __builtin_prefetch(&steps[static_cast<size_t>(c.edges[k + kPrefetchEdges].consumerStep)], 1);
          const Edge& e = c.edges[k];
          StepRec& cons = steps[static_cast<size_t>(e.consumerStep)];
          const int cd = e.consumerDevice;
          double arrival = end;
          if (e.link >= 0) {
            const int low = e.link >> 2;
            const double cost = c.linkCost[static_cast<size_t>(low)];
            if (cost > 0) {
              double& ch = channelFree[static_cast<size_t>(d) * D + static_cast<size_t>(cd)];
              const double ts = std::max(end, ch);
              ch = ts + cost;
              arrival = ch;
              if (o.recordTransfers) {
                const Op& prod = c.op(c.stepOp[static_cast<size_t>(h)] + ((e.link >> 1) & 1));
                const Op& con = c.op(c.stepOp[static_cast<size_t>(e.consumerStep)] + (e.link & 1));
                const std::int64_t bytes = model.stages[static_cast<size_t>(low)].outputBytes;
                tl.transfers.push_back(Transfer{d, cd, prod, con, bytes, ts, arrival});
              }
            }
          }
          if (arrival > cons.time) cons.time = arrival;
          if (--cons.pending == 0 && cd != d && head[static_cast<size_t>(cd)] == e.consumerStep &&
              !queued[static_cast<size_t>(cd)]) {
            queued[static_cast<size_t>(cd)] = 1;
            work.push_back(cd);
          }
        }
      }
      head[static_cast<size_t>(d)] = h;
      devFree[static_cast<size_t>(d)] = free;
    }
  }
  // Transfers stay in the order they were scheduled: per link direction, in time order.

  bool stalled = false;
  for (int d = 0; d < c.D; ++d)
    if (head[static_cast<size_t>(d)] < c.devBegin[static_cast<size_t>(d) + 1]) stalled = true;

  // --- Ops of the timeline, sorted by (device, start), and per-device busy / span.
  size_t done = static_cast<size_t>(c.g->size());
  if (stalled) {
    done = 0;
    for (int d = 0; d < c.D; ++d)
      done += static_cast<size_t>(c.stepOp[static_cast<size_t>(head[static_cast<size_t>(d)])] -
                                  c.stepOp[static_cast<size_t>(c.devBegin[static_cast<size_t>(d)])]);
  }
  PS_TRY(emitOpsAndMemory(s, model, o, c, head, done, tl));
  if (!stalled && !s.pipeline.stageBlock.empty()) addCopyGradientSyncs(s, model, tl);
  if (stalled) reportStall(s, o, c, head, tl);
  return tl;
}
}  // namespace

}  // namespace ps::core
