// The simulator's compile step: a schedule and its stage costs flattened into step records and
// dependency edges for the timing loop (simulator_compiled.h).
#include <algorithm>
#include <cmath>
#include <string>

#include "analysis/simulator_compiled.h"
#include "pipestudio/core/model/duration_expression.h"
#include "pipestudio/core/model/limits.h"

namespace ps::core::detail {

Status compile(const Schedule& s, const SimulationModel& model, Compiled& c, const DependencyGraph* given) {
  const Pipeline& p = s.pipeline;
  c.D = p.devices;
  c.S = p.stages;
  c.M = p.microbatches;
  if (c.D < 1 || c.S < 1 || c.M < 1)
    return makeError("simulate.pipeline", "the pipeline needs at least one device, stage and micro-batch");
  if (static_cast<int>(s.devices.size()) != c.D)
    return makeError("simulate.pipeline", "the schedule lists " + std::to_string(s.devices.size()) +
                                              " devices but its pipeline has " + std::to_string(c.D));
  if (static_cast<int>(model.stages.size()) != c.S)
    return makeError("simulate.model", "the cost model has " + std::to_string(model.stages.size()) +
                                           " stages but the schedule has " + std::to_string(c.S));
  if (given) {
    c.g = given;
  } else {
    c.ownGraph.rebuild(s);
    c.g = &c.ownGraph;
  }
  const DependencyGraph& g = *c.g;
  for (const auto& pr : g.problems()) {
    using PK = DependencyGraph::ProblemKind;
    if (pr.kind == PK::TooLarge)
      return makeError("simulate.size", "the schedule has far fewer ops than its " + std::to_string(c.S) +
                                            " stages x " + std::to_string(c.M) + " micro-batches need");
    if (pr.kind == PK::BadKind || pr.kind == PK::OutOfRange) {
      OpRef r = g.ref(pr.op);
      Diagnostic e = makeError(
          "simulate.op", "device " + std::to_string(r.device) + " step " + std::to_string(r.step) + ": " +
                             s.opName(g.op(pr.op)) +
                             (pr.kind == PK::BadKind ? " has an undeclared kind"
                                                     : " names a stage or micro-batch outside the pipeline"));
      e.related.push_back(r);
      return e;
    }
  }
  const size_t nOps = static_cast<size_t>(g.size());
  const size_t SM = static_cast<size_t>(c.S) * static_cast<size_t>(c.M);

  // Durations of user kinds per (kind, stage), evaluated once.
  const CostProfile& prof = model.profile;
  std::vector<double> userDur(s.userKinds.size() * static_cast<size_t>(c.S), 0.0);
  for (size_t u = 0; u < s.userKinds.size(); ++u) {
    // Parsed once per kind with the DSL's own grammar, evaluated per stage.
    const std::string& text = s.userKinds[u].durationExpr;
    auto expr = DurationExpression::parse(text);
    for (int st = 0; st < c.S; ++st) {
      auto v = expr ? expr->evaluate(model.stages[static_cast<size_t>(st)]) : Result<double>(expr.error());
      if (!v)
        return makeError("simulate.duration", "kind " + s.userKinds[u].name + ": duration expression '" +
                                                  text + "': " + v.error().message + " at column " +
                                                  std::to_string(v.error().location.column));
      if (!std::isfinite(*v) || *v > limits::kMaxTimeMs)
        return makeError("simulate.overflow",
                         "kind " + s.userKinds[u].name + ": duration on stage " + std::to_string(st) +
                             " is " + std::to_string(*v) + " ms, not a finite time within " +
                             std::to_string(static_cast<long long>(limits::kMaxTimeMs)) + " ms");
      userDur[u * static_cast<size_t>(c.S) + static_cast<size_t>(st)] = std::max(0.0, *v);
    }
  }
  // Marked while the steps are built (OFFLOAD/RELOAD durations depend on it and are fixed
  // afterwards when both occur).
  c.recomputed.assign(SM, 0);
  // F, B, I, W, R per stage in one table: the common case is one load.
  std::vector<double> kindDur(5 * static_cast<size_t>(c.S));
  for (int st = 0; st < c.S; ++st) {
    const StageCost& sc = model.stages[static_cast<size_t>(st)];
    const double v[5] = {sc.F, sc.B, sc.I, sc.W, sc.R};
    for (int k = 0; k < 5; ++k)
      kindDur[static_cast<size_t>(k) * static_cast<size_t>(c.S) + static_cast<size_t>(st)] = v[k];
  }
  auto opDuration = [&](int id) -> double {
    const Op& op = g.op(id);
    if (static_cast<std::uint16_t>(op.kind) <= static_cast<std::uint16_t>(OpKind::R))
      return kindDur[static_cast<size_t>(op.kind) * static_cast<size_t>(c.S) + static_cast<size_t>(op.stage)];
    const StageCost& sc = model.stages[static_cast<size_t>(op.stage)];
    switch (op.kind) {
      case OpKind::F:
        return sc.F;
      case OpKind::B:
        return sc.B;
      case OpKind::I:
        return sc.I;
      case OpKind::W:
        return sc.W;
      case OpKind::R:
        return sc.R;
      // PyTorch's data-parallel collectives: UNSHARD all-gathers the stage's weights,
      // REDUCE_GRAD reduces its gradients; RESHARD only frees memory.
      case OpKind::Unshard:
        return prof.dataParallelBandwidthBytesPerMs > 0
                   ? static_cast<double>(sc.weightBytes) / prof.dataParallelBandwidthBytesPerMs
                   : 0.0;
      case OpKind::ReduceGrad:
        return prof.dataParallelBandwidthBytesPerMs > 0
                   ? static_cast<double>(sc.weightBytes) * prof.gradientBytesPerWeightByte /
                         prof.dataParallelBandwidthBytesPerMs
                   : 0.0;
      case OpKind::Offload:
      case OpKind::Reload: {
        if (prof.hostBandwidthBytesPerMs <= 0 || op.microbatch < 0) return 0.0;
        bool rec = c.recomputed[static_cast<size_t>(op.stage) * static_cast<size_t>(c.M) +
                                static_cast<size_t>(op.microbatch)];
        return static_cast<double>(rec ? sc.inputBytes : sc.activationBytes) / prof.hostBandwidthBytesPerMs;
      }
      default:
        if (isUserKind(op.kind))
          return userDur[(static_cast<size_t>(op.kind) - kFirstUserKind) * static_cast<size_t>(c.S) +
                         static_cast<size_t>(op.stage)];
        return 0.0;
    }
  };

  size_t nSteps = 0;
  for (const auto& dev : s.devices) nSteps += dev.size();
  // Every field is written below, so a reused buffer needs no clearing pass.
  c.steps.resize(nSteps + 1);
  c.stepOp.resize(nSteps + 1);
  // Without overlapped pairs op ids are step ids, and opStep is not needed.
  const bool pairs = nSteps != nOps;
  c.opStep.resize(pairs ? nOps : 0);
  c.devBegin.clear();
  c.hasCopy.assign(static_cast<size_t>(c.D), 0);
  c.anyUnshard = false;
  bool anyR = false, anyHostMove = false;
  auto stepDuration = [&](int firstOp, bool pair) {
    const double dur = opDuration(firstOp);
    return pair ? prof.overlapFactor * (dur + opDuration(firstOp + 1)) : dur;
  };
  auto note = [&](const Op& op) {
    if (op.kind == OpKind::R) {
      anyR = true;
      if (op.microbatch >= 0)
        c.recomputed[static_cast<size_t>(op.stage) * static_cast<size_t>(c.M) +
                     static_cast<size_t>(op.microbatch)] = 1;
    } else if (op.kind == OpKind::Offload || op.kind == OpKind::Reload) {
      anyHostMove = true;
    } else if (op.kind == OpKind::Unshard) {
      c.anyUnshard = true;
    }
  };
  // What travels across devices is the output of the lower stage (activations forward, their
  // gradients backward): one transfer time per stage.
  const bool fixedComm = prof.fixedCommMs.has_value();
  c.linkCost.resize(static_cast<size_t>(c.S));
  for (int st = 0; st < c.S; ++st) {
    const auto bytes = static_cast<double>(model.stages[static_cast<size_t>(st)].outputBytes);
    c.linkCost[static_cast<size_t>(st)] =
        fixedComm ? *prof.fixedCommMs
                  : prof.link.latencyMs +
                        (prof.link.bandwidthBytesPerMs > 0 ? bytes / prof.link.bandwidthBytesPerMs : 0.0);
  }

  // Successor edges by producer step (dependencies inside an overlapped pair do not delay it).
  // One pass over the dependencies (in consumer order) counts each producer's successors and
  // notes each edge's producer step and link; a second, sequential pass scatters them into
  // the producers' lists. Edges keep the consumer order within each list.
  std::vector<int>& count = c.count;
  count.assign(nSteps + 1, 0);
  std::vector<PendingEdge>& pend = c.pending;
  pend.resize(static_cast<size_t>(g.dependencyCount()));
  size_t np = 0;
  c.timedTransfers = 0;
  // The dependencies of step `st` (ops [first, last)) of the device whose steps are
  // [devBegin, devEnd); needs opStep of the producers when there are pairs.
  auto countEdges = [&](int devBegin, int devEnd, int st, int first, int last) PS_INLINE_LAMBDA {
    StepRec& r = c.steps[static_cast<size_t>(st)];
    for (int op = first; op < last; ++op)
      for (int dep : g.dependencies(op)) {
        const int ds = pairs ? c.opStep[static_cast<size_t>(dep)] : dep;
        if (ds == st) continue;
        ++r.pending;
        ++count[static_cast<size_t>(ds) + 1];
        int link = -1;
        if (ds < devBegin || ds >= devEnd) {  // across devices
          const int low = std::min(g.op(dep).stage, g.op(op).stage);
          link = low << 2 | (dep - (pairs ? c.stepOp[static_cast<size_t>(ds)] : ds)) << 1 | (op - first);
          if (c.linkCost[static_cast<size_t>(low)] > 0) ++c.timedTransfers;
        }
        pend[np++] = PendingEdge{ds, link};
      }
  };

  int opId = 0, stepId = 0;
  if (!pairs) {
    // Op ids are step ids: the steps come from the graph's op array, and each step's
    // dependencies are counted while it is at hand.
    for (int d = 0; d < c.D; ++d) {
      const int devBegin = g.deviceBegin(d), devEnd = g.deviceBegin(d + 1);
      c.devBegin.push_back(devBegin);
      for (int id = devBegin; id < devEnd; ++id) {
        const Op& op = g.op(id);
        StepRec& r = c.steps[static_cast<size_t>(id)];
        const bool copy = runsOnCopyStream(op.kind);
        note(op);
        r.time = 0;
        r.dur = opDuration(id);
        r.pending = 0;
        r.edges = copy ? kCopyBit : 0;
        if (copy) c.hasCopy[static_cast<size_t>(d)] = 1;
        c.stepOp[static_cast<size_t>(id)] = id;
        countEdges(devBegin, devEnd, id, id, id + 1);
      }
    }
    opId = stepId = static_cast<int>(nSteps);
  } else {
    for (int d = 0; d < c.D; ++d) {
      c.devBegin.push_back(stepId);
      const auto& dev = s.devices[static_cast<size_t>(d)];
      for (size_t i = 0; i < dev.size(); ++i, ++stepId) {
        StepRec& r = c.steps[static_cast<size_t>(stepId)];
        const Step& st = dev[i];
        const bool pair = st.overlapped();
        const bool copy = !pair && runsOnCopyStream(st.first.kind);
        note(st.first);
        if (pair) note(*st.second);
        r.time = 0;
        r.dur = stepDuration(opId, pair);
        r.pending = 0;
        r.edges = copy ? kCopyBit : 0;
        if (copy) c.hasCopy[static_cast<size_t>(d)] = 1;
        c.stepOp[static_cast<size_t>(stepId)] = opId;
        c.opStep[static_cast<size_t>(opId++)] = stepId;
        if (pair) c.opStep[static_cast<size_t>(opId++)] = stepId;
      }
    }
  }
  c.devBegin.push_back(stepId);
  c.stepOp[nSteps] = opId;
  c.steps[nSteps] = StepRec{};
  if (anyR && anyHostMove)  // an OFFLOAD/RELOAD may precede its R in op order
    for (size_t st = 0; st < nSteps; ++st)
      c.steps[st].dur = stepDuration(c.stepOp[st], c.stepOp[st + 1] - c.stepOp[st] == 2);
  if (pairs)
    for (int d = 0; d < c.D; ++d) {
      const int devBegin = c.devBegin[static_cast<size_t>(d)],
                devEnd = c.devBegin[static_cast<size_t>(d) + 1];
      for (int st = devBegin; st < devEnd; ++st)
        countEdges(devBegin, devEnd, st, c.stepOp[static_cast<size_t>(st)],
                   c.stepOp[static_cast<size_t>(st) + 1]);
    }
  for (size_t i = 0; i < nSteps; ++i) count[i + 1] += count[i];
  if (static_cast<std::uint64_t>(count[nSteps]) >= kCopyBit)
    return makeError("simulate.size", "the schedule has too many dependencies to simulate");
  for (size_t i = 0; i <= nSteps; ++i) c.steps[i].edges |= static_cast<std::uint32_t>(count[i]);
  c.edges.resize(static_cast<size_t>(count[nSteps]));
  Edge* const edges = c.edges.data();
  int* const fill = count.data();
  size_t k = 0;
  for (int d = 0; d < c.D; ++d) {
    const int devBegin = c.devBegin[static_cast<size_t>(d)], devEnd = c.devBegin[static_cast<size_t>(d) + 1];
    for (int st = devBegin; st < devEnd; ++st)
      for (int j = c.steps[static_cast<size_t>(st)].pending; j > 0; --j, ++k) {
        const PendingEdge& pe = pend[k];
        edges[fill[pe.producerStep]++] = Edge{st, d, pe.link};
      }
  }
  return okStatus();
}

}  // namespace ps::core::detail
