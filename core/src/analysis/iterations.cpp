// K iterations back to back over the one-iteration simulator (docs/search.md "Iterations").
#include "pipestudio/core/analysis/iterations.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "pipestudio/core/model/enum_names.h"

namespace ps::core {

constexpr EnumName<IterationBoundary> kBoundaryNames[] = {{IterationBoundary::Overlap, "overlap"},
                                                          {IterationBoundary::Sync, "sync"}};

PS_ENUM_NAME_FUNCTION(IterationBoundary, kBoundaryNames, iterationBoundaryName);
PS_ENUM_FROM_NAME_FUNCTION(IterationBoundary, kBoundaryNames, iterationBoundaryFromName);

namespace {

std::string exactNumber(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// Stage-level ops that relate to "every micro-batch of the stage" would tie iteration 0 to
// the last iteration's work once the micro-batches of K iterations share one schedule.
Status checkUnrollable(const Schedule& s) {
  for (size_t d = 0; d < s.devices.size(); ++d)
    for (size_t i = 0; i < s.devices[d].size(); ++i) {
      const Step& st = s.devices[d][i];
      for (const Op* op : {&st.first, st.second ? &*st.second : nullptr}) {
        if (!op || op->microbatch >= 0) continue;
        if (op->kind == OpKind::Unshard || op->kind == OpKind::Reshard) continue;  // no dependencies
        return makeError("iterations.stage-level",
                         "device " + std::to_string(d) + " step " + std::to_string(i) + ": " + s.opName(*op) +
                             " is a stage-level op that depends on every micro-batch of its stage; several "
                             "iterations cannot be simulated with it (remove it or simulate one iteration)");
      }
    }
  return okStatus();
}

// Names of the optimizer-step kinds: one kind when every device's step takes the same time,
// else one per device (a duration expression cannot tell devices apart).
std::vector<std::string> stepKindNames(const Schedule& s, const std::vector<double>& stepMs) {
  std::string base(kOptimizerStepKind);
  while (s.kindFromName(base)) base += "_";
  const bool same = std::all_of(stepMs.begin(), stepMs.end(), [&](double v) { return v == stepMs.front(); });
  std::vector<std::string> names;
  for (size_t d = 0; d < stepMs.size(); ++d) names.push_back(same ? base : base + "_D" + std::to_string(d));
  return names;
}

// Adds the optimizer-step kinds to `out` and returns the kind of each device's step.
std::vector<OpKind> addStepKinds(Schedule& out, const std::vector<double>& stepMs) {
  const auto names = stepKindNames(out, stepMs);
  std::vector<OpKind> kinds;
  for (size_t d = 0; d < stepMs.size(); ++d) {
    if (auto k = out.kindFromName(names[d])) {
      kinds.push_back(*k);
      continue;
    }
    UserKind u;
    u.name = names[d];
    u.durationExpr = exactNumber(stepMs[d]);
    out.userKinds.push_back(u);
    kinds.push_back(static_cast<OpKind>(kFirstUserKind + out.userKinds.size() - 1));
  }
  return kinds;
}

Op offsetOp(Op op, int by) {
  if (op.microbatch >= 0) op.microbatch += by;
  return op;
}

// One iteration with each device's optimizer step in front (what follows a sync barrier).
Schedule stepFirst(const Schedule& s, const std::vector<double>& stepMs) {
  Schedule out = s;
  const auto kinds = addStepKinds(out, stepMs);
  for (int d = 0; d < s.pipeline.devices; ++d) {
    const auto stages = s.pipeline.stagesOn(d);
    if (stages.empty()) continue;
    auto& ord = out.devices[static_cast<size_t>(d)];
    ord.insert(ord.begin(), Step{Op{kinds[static_cast<size_t>(d)], stages.front(), 0}, std::nullopt});
  }
  return out;
}

bool isStepKind(const Schedule& unrolled, OpKind k) {
  const UserKind* u = unrolled.userKind(k);
  return u && u->name.rfind(std::string(kOptimizerStepKind), 0) == 0 && u->after.empty() && u->before.empty();
}

}  // namespace

std::vector<double> optimizerStepPerDevice(const Schedule& s, const SimulationModel& model,
                                           std::optional<double> perStageOverride) {
  std::vector<double> out(static_cast<size_t>(std::max(0, s.pipeline.devices)), 0.0);
  for (int st = 0; st < s.pipeline.stages && st < static_cast<int>(model.stages.size()); ++st) {
    if (static_cast<size_t>(st) >= s.pipeline.stageToDevice.size()) break;
    const int d = s.pipeline.deviceOf(st);
    if (d < 0 || d >= s.pipeline.devices) continue;
    double t = 0;
    if (perStageOverride) {
      t = *perStageOverride;
    } else {
      const StageCost& c = model.stages[static_cast<size_t>(st)];
      for (int l = c.firstLayer;
           l < c.firstLayer + c.layerCount && l < static_cast<int>(model.profile.layers.size()); ++l)
        t += model.profile.layers[static_cast<size_t>(l)].optimizerStepMs;
    }
    out[static_cast<size_t>(d)] += t;
  }
  return out;
}

Result<Schedule> unrollIterations(const Schedule& s, int iterations, const std::vector<double>& stepMs) {
  if (iterations < 1) return makeError("iterations.count", "the number of iterations must be at least 1");
  if (static_cast<int>(stepMs.size()) != s.pipeline.devices ||
      static_cast<int>(s.devices.size()) != s.pipeline.devices)
    return makeError("iterations.devices", "one optimizer step time per device is needed");
  PS_TRY(checkUnrollable(s));
  const int M = s.pipeline.microbatches;
  if (static_cast<long long>(M) * iterations > std::numeric_limits<int>::max() / 2)
    return makeError("iterations.count", "too many iterations for " + std::to_string(M) + " micro-batches");
  Schedule out = s;
  out.pipeline.microbatches = M * iterations;
  // Iteration k's micro-batches are k·M + m: each route group repeats for them.
  out.pipeline.routes.clear();
  for (int k = 0; k < iterations && s.pipeline.routed(); ++k)
    for (Route r : s.pipeline.routes) {
      r.firstMicrobatch += k * M;
      out.pipeline.routes.push_back(std::move(r));
    }
  const auto kinds = addStepKinds(out, stepMs);
  for (int d = 0; d < s.pipeline.devices; ++d) {
    const auto& src = s.devices[static_cast<size_t>(d)];
    auto& ord = out.devices[static_cast<size_t>(d)];
    ord.clear();
    ord.reserve((src.size() + 1) * static_cast<size_t>(iterations));
    const auto stages = s.pipeline.stagesOn(d);
    for (int k = 0; k < iterations; ++k) {
      for (const Step& st : src) {
        Step c{offsetOp(st.first, k * M), std::nullopt};
        if (st.second) c.second = offsetOp(*st.second, k * M);
        ord.push_back(c);
      }
      if (!stages.empty())
        ord.push_back(Step{Op{kinds[static_cast<size_t>(d)], stages.front(), k}, std::nullopt});
    }
  }
  if (!out.name.empty()) out.name += " x" + std::to_string(iterations);
  return out;
}

Result<IterationResult> simulateIterations(const Schedule& s, const SimulationModel& model,
                                           const IterationOptions& o) {
  const int K = o.iterations;
  if (K < 1) return makeError("iterations.count", "the number of iterations must be at least 1");
  PS_TRY(checkUnrollable(s));
  const int D = s.pipeline.devices, M = s.pipeline.microbatches;
  const std::vector<double> stepMs = optimizerStepPerDevice(s, model, o.optimizerStepMs);
  IterationResult r;
  r.iterations = K;
  r.microbatches = M;
  r.boundary = o.boundary;
  r.devices.resize(static_cast<size_t>(std::max(0, D)));
  for (int d = 0; d < D; ++d) {
    r.devices[static_cast<size_t>(d)].device = d;
    r.devices[static_cast<size_t>(d)].optimizerStepMs = stepMs[static_cast<size_t>(d)];
  }
  double maxStep = 0;
  for (double v : stepMs) maxStep = std::max(maxStep, v);
  constexpr double kInf = std::numeric_limits<double>::infinity();

  if (o.boundary == IterationBoundary::Overlap) {
    auto unrolled = unrollIterations(s, K, stepMs);
    PS_TRY(unrolled);
    SimulationOptions so = o.simulation;
    if (!o.buildTimeline) so.recordMemory = so.recordTransfers = false;
    auto tl = simulate(*unrolled, model, so);
    PS_TRY(tl);
    r.complete = tl->complete;
    r.diagnostics = tl->diagnostics;
    // Per (device, iteration): first start and last end of its work, end of its step.
    const size_t DK = static_cast<size_t>(D) * static_cast<size_t>(K);
    std::vector<double> lo(DK, kInf), hi(DK, -kInf), stepEnd(DK, -kInf);
    double first = kInf;
    for (const TimelineOp& op : tl->ops) {
      first = std::min(first, op.start);
      if (isStepKind(*unrolled, op.op.kind)) {
        if (op.op.microbatch >= 0 && op.op.microbatch < K)
          stepEnd[static_cast<size_t>(op.device) * K + static_cast<size_t>(op.op.microbatch)] = op.end;
        continue;
      }
      if (op.op.microbatch < 0) continue;
      const size_t i = static_cast<size_t>(op.device) * K + static_cast<size_t>(op.op.microbatch / M);
      lo[i] = std::min(lo[i], op.start);
      hi[i] = std::max(hi[i], op.end);
    }
    r.iterationEnds.assign(static_cast<size_t>(K), 0);
    for (int k = 0; k < K; ++k) {
      double e = -kInf;
      for (int d = 0; d < D; ++d)
        e = std::max(e, stepEnd[static_cast<size_t>(d) * K + static_cast<size_t>(k)]);
      r.iterationEnds[static_cast<size_t>(k)] = std::isfinite(e) ? e : 0;
    }
    for (int d = 0; d < D; ++d) {
      auto& dm = r.devices[static_cast<size_t>(d)];
      const size_t b = static_cast<size_t>(d) * K;
      if (std::isfinite(lo[b])) dm.firstSpan = hi[b] - lo[b];
      if (std::isfinite(lo[b + K - 1])) dm.steadySpan = hi[b + K - 1] - lo[b + K - 1];
      if (K >= 2 && std::isfinite(stepEnd[b + K - 1]) && std::isfinite(stepEnd[b + K - 2]))
        dm.period = stepEnd[b + K - 1] - stepEnd[b + K - 2];
      if (static_cast<size_t>(d) < tl->metrics.devices.size())
        dm.peakMemoryBytes = tl->metrics.devices[static_cast<size_t>(d)].peakMemoryBytes;
    }
    r.firstIterationMs = r.complete && std::isfinite(first) ? r.iterationEnds[0] - first : 0;
    if (o.buildTimeline) {
      r.unrolled = std::move(unrolled).value();
      r.timeline = std::move(tl).value();
    }
  } else {
    // Sync: iteration 0 as it is; every later one starts at the barrier with its devices'
    // steps in front, so one simulation of that form serves them all.
    SimulationOptions so = o.simulation;
    if (!o.buildTimeline) so.recordMemory = so.recordTransfers = false;
    auto t0 = simulate(s, model, so);
    PS_TRY(t0);
    std::optional<Timeline> tp;
    const Schedule prefixed = stepFirst(s, stepMs);
    if (K >= 2) {
      auto t = simulate(prefixed, model, so);
      PS_TRY(t);
      tp = std::move(t).value();
    }
    r.complete = t0->complete && (!tp || tp->complete);
    r.diagnostics = t0->diagnostics;
    if (tp)
      for (Diagnostic dg : tp->diagnostics) {
        dg.message = "iterations 2.." + std::to_string(K) + " (after the barrier): " + dg.message;
        r.diagnostics.push_back(std::move(dg));
      }
    auto lastEnd = [](const Timeline& t) {
      double e = 0;
      for (const auto& op : t.ops) e = std::max(e, op.end);
      return e;
    };
    auto firstStart = [](const Timeline& t) {
      double b = t.ops.empty() ? 0 : kInf;
      for (const auto& op : t.ops) b = std::min(b, op.start);
      return b;
    };
    const double first = firstStart(*t0);
    std::vector<double> barrier(static_cast<size_t>(K));
    barrier[0] = lastEnd(*t0);
    const double piece = tp ? lastEnd(*tp) : 0;
    for (int k = 1; k < K; ++k) barrier[static_cast<size_t>(k)] = barrier[static_cast<size_t>(k) - 1] + piece;
    r.iterationEnds.resize(static_cast<size_t>(K));
    for (int k = 0; k < K; ++k)
      r.iterationEnds[static_cast<size_t>(k)] = barrier[static_cast<size_t>(k)] + maxStep;
    r.firstIterationMs = r.iterationEnds[0] - first;
    for (int d = 0; d < D; ++d) {
      auto& dm = r.devices[static_cast<size_t>(d)];
      if (static_cast<size_t>(d) < t0->metrics.devices.size()) {
        dm.firstSpan = t0->metrics.devices[static_cast<size_t>(d)].span();
        dm.peakMemoryBytes = t0->metrics.devices[static_cast<size_t>(d)].peakMemoryBytes;
      }
      dm.steadySpan = dm.firstSpan;
      if (tp && static_cast<size_t>(d) < tp->metrics.devices.size()) {
        // The work after the step: from the first op after the step to the last op.
        double lo = kInf, hi = -kInf;
        for (const auto& op : tp->ops)
          if (op.device == d && op.step > 0) {
            lo = std::min(lo, op.start);
            hi = std::max(hi, op.end);
          }
        dm.steadySpan = std::isfinite(lo) ? hi - lo : 0;
        dm.peakMemoryBytes =
            std::max(dm.peakMemoryBytes, tp->metrics.devices[static_cast<size_t>(d)].peakMemoryBytes);
      }
      dm.period = K >= 2 ? piece : 0;
    }
    if (o.buildTimeline) {
      auto unrolled = unrollIterations(s, K, stepMs);
      PS_TRY(unrolled);
      Timeline& out = r.timeline;
      out.source = TimelineSource::Simulated;
      out.label = t0->label;
      out.devices = D;
      out.complete = r.complete;
      out.diagnostics = r.diagnostics;
      if (so.recordMemory) out.memory.assign(static_cast<size_t>(D), {});
      std::vector<size_t> perDev(static_cast<size_t>(D), 0);  // steps per iteration and device
      for (int d = 0; d < D; ++d) perDev[static_cast<size_t>(d)] = s.devices[static_cast<size_t>(d)].size();
      auto stride = [&](int d) { return static_cast<int>(perDev[static_cast<size_t>(d)]) + 1; };
      // Ops per device in time order: iteration 0, then each later iteration (its step first
      // is the previous iteration's step), then the last iteration's step.
      std::vector<std::vector<TimelineOp>> byDev(static_cast<size_t>(D));
      for (const auto& op : t0->ops) byDev[static_cast<size_t>(op.device)].push_back(op);
      for (int k = 1; k < K; ++k) {
        const double off = barrier[static_cast<size_t>(k) - 1];
        for (TimelineOp op : tp->ops) {
          op.start += off;
          op.end += off;
          if (op.step == 0) {  // the previous iteration's step
            op.op.microbatch = k - 1;
            op.step = (k - 1) * stride(op.device) + static_cast<int>(perDev[static_cast<size_t>(op.device)]);
          } else {
            op.op = offsetOp(op.op, k * M);
            op.step = k * stride(op.device) + op.step - 1;
          }
          byDev[static_cast<size_t>(op.device)].push_back(op);
        }
        for (const Transfer& tr0 : tp->transfers) {
          Transfer tr = tr0;
          tr.start += off;
          tr.end += off;
          tr.producer = offsetOp(tr.producer, k * M);
          tr.consumer = offsetOp(tr.consumer, k * M);
          out.transfers.push_back(tr);
        }
        if (so.recordMemory)
          for (int d = 0; d < D && static_cast<size_t>(d) < tp->memory.size(); ++d)
            for (MemorySample m : tp->memory[static_cast<size_t>(d)]) {
              m.time += off;
              out.memory[static_cast<size_t>(d)].push_back(m);
            }
      }
      // Iteration 0's transfers and memory first.
      out.transfers.insert(out.transfers.begin(), t0->transfers.begin(), t0->transfers.end());
      if (so.recordMemory)
        for (int d = 0; d < D && static_cast<size_t>(d) < t0->memory.size(); ++d)
          out.memory[static_cast<size_t>(d)].insert(out.memory[static_cast<size_t>(d)].begin(),
                                                    t0->memory[static_cast<size_t>(d)].begin(),
                                                    t0->memory[static_cast<size_t>(d)].end());
      // The last iteration's steps after the last barrier.
      for (int d = 0; d < D; ++d) {
        const auto& ord = unrolled->devices[static_cast<size_t>(d)];
        if (ord.empty()) continue;
        const int step = static_cast<int>(ord.size()) - 1;
        const Op op = ord.back().first;
        if (!isStepKind(*unrolled, op.kind)) continue;
        const double b = barrier[static_cast<size_t>(K) - 1];
        byDev[static_cast<size_t>(d)].push_back(
            TimelineOp{d, step, op, false, b, b + stepMs[static_cast<size_t>(d)]});
      }
      for (auto& v : byDev) {
        std::stable_sort(v.begin(), v.end(),
                         [](const TimelineOp& a, const TimelineOp& b) { return a.start < b.start; });
        out.ops.insert(out.ops.end(), v.begin(), v.end());
      }
      out.metrics = computeMetrics(out);
      if (!so.recordMemory)
        for (int d = 0; d < D && static_cast<size_t>(d) < out.metrics.devices.size(); ++d)
          out.metrics.devices[static_cast<size_t>(d)].peakMemoryBytes =
              r.devices[static_cast<size_t>(d)].peakMemoryBytes;
      r.unrolled = std::move(unrolled).value();
    }
  }

  if (r.complete) {
    r.steadyStateMs =
        K >= 2 ? r.iterationEnds[static_cast<size_t>(K) - 1] - r.iterationEnds[static_cast<size_t>(K) - 2]
               : r.firstIterationMs;
  }
  for (const auto& dm : r.devices) {
    r.maxFirstSpan = std::max(r.maxFirstSpan, dm.firstSpan);
    r.maxSteadySpan = std::max(r.maxSteadySpan, dm.steadySpan);
    r.peakMemoryBytes = std::max(r.peakMemoryBytes, dm.peakMemoryBytes);
  }
  return r;
}

}  // namespace ps::core
