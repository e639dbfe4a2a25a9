// The validator: structural checks, then a unit-time execution that finds deadlocks.
#include "pipestudio/core/analysis/validator.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

namespace ps::core {

namespace {

class Reporter {
 public:
  Reporter(ValidationReport& r, int maxDiagnostics) : report_(r), max_(maxDiagnostics) {}
  bool full() const { return count_ >= max_; }
  void error(std::string code, std::string message, std::vector<OpRef> related = {}) {
    if (count_++ >= max_) return;
    Diagnostic d = makeError(std::move(code), std::move(message));
    d.related = std::move(related);
    report_.diagnostics.push_back(std::move(d));
  }
  void warning(std::string code, std::string message, std::vector<OpRef> related = {}) {
    Diagnostic d = makeWarning(std::move(code), std::move(message));
    d.related = std::move(related);
    report_.diagnostics.push_back(std::move(d));
  }
  // For loops that may produce very many errors: builds the message only when it is shown.
  template <typename MakeMessage>
  void errorLazy(const char* code, MakeMessage&& make, const std::vector<OpRef>& related = {}) {
    if (count_ >= max_) {
      ++count_;
      return;
    }
    error(code, make(), related);
  }
  void finish() {
    if (count_ > max_) {
      Diagnostic d;
      d.severity = Severity::Note;
      d.code = "validate.more";
      d.message = std::to_string(count_ - max_) + " more errors not shown";
      report_.diagnostics.push_back(std::move(d));
    }
  }

 private:
  ValidationReport& report_;
  int max_;
  int count_ = 0;
};

std::string where(const OpRef& r) {
  return "device " + std::to_string(r.device) + " step " + std::to_string(r.step);
}

// "its route runs stages 4, 5, 6, 7": the route of a micro-batch of a routed pipeline.
std::string routeText(const Pipeline& p, int mb) {
  for (const Route& route : p.routes) {
    if (mb < route.firstMicrobatch || mb >= route.firstMicrobatch + route.microbatchCount) continue;
    std::string out = "its route runs stages ";
    for (size_t i = 0; i < route.stages.size(); ++i) out += (i ? ", " : "") + std::to_string(route.stages[i]);
    return out;
  }
  return "it has no route";
}

bool usesStageWeights(OpKind k) {
  return k == OpKind::F || k == OpKind::B || k == OpKind::I || k == OpKind::W || k == OpKind::R;
}

// PyTorch's stage actions along each device's order, as _PipelineScheduleRuntime runs them:
// a stage with UNSHARD/RESHARD actions (FSDP) computes only between an UNSHARD and the next
// RESHARD (_assert_unsharded), is not unsharded twice nor resharded while sharded; REDUCE_GRAD
// comes after the stage's last backward (B or W), as _add_reduce_grad places it.
void checkStageActions(const Schedule& s, const DependencyGraph& g, Reporter& rep) {
  const int S = s.pipeline.stages;
  std::vector<std::uint8_t> fsdp(static_cast<size_t>(S), 0);
  bool anyStageAction = false;
  for (int id = 0; id < g.size(); ++id) {
    const Op& op = g.op(id);
    if (!isStageLevelKind(op.kind) || op.stage < 0 || op.stage >= S) continue;
    anyStageAction = true;
    if (op.kind != OpKind::ReduceGrad) fsdp[static_cast<size_t>(op.stage)] = 1;
  }
  if (!anyStageAction) return;
  auto name = [&](int id) { return s.opName(g.op(id)); };
  std::vector<int> unshardAt(static_cast<size_t>(S), -1);     // the UNSHARD in force, or -1
  std::vector<int> reshardAt(static_cast<size_t>(S), -1);     // the last RESHARD, or -1
  std::vector<std::uint8_t> used(static_cast<size_t>(S), 0);  // the UNSHARD in force was used
  std::vector<int> lastGrad(static_cast<size_t>(S), -1);
  for (int d = 0; d < g.devices(); ++d) {
    const int b = g.deviceBegin(d), e = g.deviceBegin(d + 1);
    for (int id = b; id < e; ++id) {
      const Op& op = g.op(id);
      if ((op.kind == OpKind::B || op.kind == OpKind::W) && op.stage >= 0 && op.stage < S)
        lastGrad[static_cast<size_t>(op.stage)] = id;
    }
    auto unused = [&](int st, const std::string& until) {
      const int u = unshardAt[static_cast<size_t>(st)];
      rep.warning("validate.unshard-unused",
                  where(g.ref(u)) + ": " + name(u) + " gathers stage " + std::to_string(st) +
                      "'s weights but no op of the stage runs before " + until,
                  {g.ref(u)});
    };
    for (int id = b; id < e; ++id) {
      const Op& op = g.op(id);
      if (op.stage < 0 || op.stage >= S) continue;
      const auto st = static_cast<size_t>(op.stage);
      switch (op.kind) {
        case OpKind::Unshard:
          if (unshardAt[st] >= 0)
            rep.error("validate.unshard",
                      where(g.ref(id)) + ": " + name(id) + " unshards stage " + std::to_string(op.stage) +
                          " again; it is unsharded since " + where(g.ref(unshardAt[st])) +
                          " with no RESHARD between",
                      {g.ref(id), g.ref(unshardAt[st])});
          else {
            unshardAt[st] = id;
            used[st] = 0;
          }
          break;
        case OpKind::Reshard:
          if (unshardAt[st] < 0) {
            rep.error("validate.reshard",
                      where(g.ref(id)) + ": " + name(id) + " reshards stage " + std::to_string(op.stage) +
                          ", which is not unsharded here (no " + s.opName(Op{OpKind::Unshard, op.stage, -1}) +
                          " before it)",
                      {g.ref(id)});
          } else {
            if (!used[st]) unused(op.stage, name(id));
            unshardAt[st] = -1;
          }
          reshardAt[st] = id;
          break;
        case OpKind::ReduceGrad:
          if (lastGrad[st] > id)
            rep.error("validate.reduce-grad",
                      where(g.ref(id)) + ": " + name(id) + " comes before " + name(lastGrad[st]) + " (" +
                          where(g.ref(lastGrad[st])) + "), the stage's last backward; it reduces the " +
                          "gradients after all of them",
                      {g.ref(id), g.ref(lastGrad[st])});
          break;
        default:
          if (!usesStageWeights(op.kind) || !fsdp[st]) break;
          if (unshardAt[st] >= 0) {
            used[st] = 1;
          } else if (reshardAt[st] >= 0) {
            rep.error("validate.sharded",
                      where(g.ref(id)) + ": " + name(id) + " runs after " + name(reshardAt[st]) + " (" +
                          where(g.ref(reshardAt[st])) + ") with no new UNSHARD: stage " +
                          std::to_string(op.stage) + " is sharded here",
                      {g.ref(id), g.ref(reshardAt[st])});
          } else {
            rep.error("validate.sharded",
                      where(g.ref(id)) + ": " + name(id) + " runs before " +
                          s.opName(Op{OpKind::Unshard, op.stage, -1}) + ": stage " +
                          std::to_string(op.stage) + " is still sharded here",
                      {g.ref(id)});
          }
          break;
      }
    }
    for (int st = 0; st < S; ++st)
      if (s.pipeline.deviceOf(st) == d && unshardAt[static_cast<size_t>(st)] >= 0 &&
          !used[static_cast<size_t>(st)])
        unused(st, "the end of device " + std::to_string(d) + "'s order");
  }
}

}  // namespace

// The messages between two ranks, in each direction, are matched in the order they are
// posted: Gloo pairs a receive with the oldest unmatched send of its peer and tag (PyTorch's
// stages all use tag 0), NCCL runs a rank's point-to-point ops in order. So the sends one
// rank posts to another must come in the order that rank posts the matching receives, or a
// receive takes another message's tensor: a gradient read as an activation, silently when the
// shapes agree. Each direction's first disagreement is an error naming the four actions.
void checkChannelOrder(const Schedule& s, const DependencyGraph& g, Reporter& rep) {
  const Pipeline& p = s.pipeline;
  struct Posted {
    Op message;  // the receive this post matches: RECV_F/RECV_B and its stage
    int id;
  };
  std::map<std::pair<int, int>, std::pair<std::vector<Posted>, std::vector<Posted>>> channels;
  auto inRange = [&](int stage) { return stage >= 0 && stage < p.stages; };
  const StageRoutes& routes = g.routes();
  for (int id = 0; id < g.size(); ++id) {
    const Op& op = g.op(id);
    if (g.isPairSecond(id) || !inRange(op.stage)) continue;
    const int here = g.ref(id).device;
    if (op.kind == OpKind::SendF || op.kind == OpKind::SendB) {
      const bool fwd = op.kind == OpKind::SendF;
      const int to = fwd ? routes.next(op.stage, op.microbatch) : routes.prev(op.stage, op.microbatch);
      if (!inRange(to) || p.deviceOf(to) == here) continue;
      channels[{here, p.deviceOf(to)}].first.push_back(
          {Op{fwd ? OpKind::RecvF : OpKind::RecvB, to, op.microbatch}, id});
    } else if (op.kind == OpKind::RecvF || op.kind == OpKind::RecvB) {
      const int from = op.kind == OpKind::RecvF ? routes.prev(op.stage, op.microbatch)
                                                : routes.next(op.stage, op.microbatch);
      if (!inRange(from) || p.deviceOf(from) == here) continue;
      channels[{p.deviceOf(from), here}].second.push_back({op, id});
    }
  }
  auto name = [&](int id) { return s.opName(g.op(id)); };
  for (const auto& [pair, posts] : channels) {
    // Plain references (clang 14 cannot capture structured bindings in the lambdas below).
    const std::vector<Posted>& sends = posts.first;
    const std::vector<Posted>& recvs = posts.second;
    const size_t n = std::min(sends.size(), recvs.size());
    for (size_t i = 0; i < n; ++i) {
      if (sends[i].message == recvs[i].message) continue;
      // The receive that takes this send's message, and the send whose message this receive
      // wanted; either may be missing (then the comm checks above report it).
      auto matchingRecv = std::find_if(recvs.begin(), recvs.end(),
                                       [&](const Posted& r) { return r.message == sends[i].message; });
      auto matchingSend = std::find_if(sends.begin(), sends.end(),
                                       [&](const Posted& x) { return x.message == recvs[i].message; });
      const std::string nth = std::to_string(i + 1) + (i == 0 ? "st" : i == 1 ? "nd" : i == 2 ? "rd" : "th");
      std::string msg = "device " + std::to_string(pair.first);
      msg += "'s " + nth + " message to device " + std::to_string(pair.second);
      msg += " is " + name(sends[i].id) + " (" + where(g.ref(sends[i].id)) + ")";
      msg += ", but the " + nth + " receive device " + std::to_string(pair.second);
      msg += " posts from it is " + name(recvs[i].id) + " (" + where(g.ref(recvs[i].id)) + ")";
      std::vector<OpRef> related{g.ref(sends[i].id), g.ref(recvs[i].id)};
      if (matchingSend != sends.end()) {
        msg += ", whose data " + name(matchingSend->id) + " sends later";
        related.push_back(g.ref(matchingSend->id));
      }
      msg += ". Gloo and NCCL match the messages between two ranks in posting order, so " +
             name(recvs[i].id) + " would receive " + name(sends[i].id) + "'s tensor";
      if (matchingRecv != recvs.end()) related.push_back(g.ref(matchingRecv->id));
      rep.error("validate.comm-order", msg, std::move(related));
      break;
    }
  }
}

namespace {

// The order executed with the ranks' communication streams (comm_semantics.h): an order that runs
// when SEND/RECV are only posted can still hang on NCCL, a send waiting for a receive its peer
// has queued behind an op that waits for this rank. The deadlock names the cycle across ranks in
// PyTorch's action names.
void checkCommStreams(const Schedule& s, const DependencyGraph& g, const CommOptions& comm,
                      ValidationReport& report, Reporter& rep) {
  const CommPlan plan = makeCommPlan(s, g, comm);
  const CommExecution x = executeWithComms(s, g, plan, {});
  if (x.complete) return;
  const std::string under = std::string(commSemanticsName(comm.semantics));
  const std::vector<CommWaitLink> cycle = findCommWaitCycle(s, g, plan, x);
  if (!cycle.empty()) {
    std::vector<OpRef> related;
    for (const CommWaitLink& l : cycle) {
      report.deadlock.push_back(DeadlockWait{l.device, g.ref(l.at), g.op(l.waitsFor), l.waitsOnDevice});
      related.push_back(g.ref(l.at));
      related.push_back(g.ref(l.waitsFor));
    }
    rep.error("validate.deadlock", "deadlock under " + under + ": " + describeWaitCycle(s, g, cycle),
              std::move(related));
    return;
  }
  if (!plan.unmatched.empty()) return;  // reported above (validate.comm)
  std::string msg = "the order stalls under " + under + ":";
  std::vector<OpRef> related;
  for (int d = 0; d < g.devices(); ++d) {
    const int at = x.hostAt[static_cast<size_t>(d)];
    if (at >= g.deviceBegin(d + 1)) continue;
    msg += " rank " + std::to_string(d) + " at " + pytorchActionText(s, g.op(at)) + ";";
    related.push_back(g.ref(at));
  }
  msg.pop_back();
  rep.error("validate.deadlock", msg, std::move(related));
}

}  // namespace

ValidationReport validateSchedule(const Schedule& s) {
  return validateSchedule(s, ValidateOptions{});
}

namespace {
ValidationReport validate(const Schedule& s, const ValidateOptions& options, const DependencyGraph* given);
}  // namespace

ValidationReport validateSchedule(const Schedule& s, const ValidateOptions& options) {
  return validate(s, options, nullptr);
}

ValidationReport validateSchedule(const Schedule& s, const ValidateOptions& options,
                                  const DependencyGraph& graph) {
  return validate(s, options, &graph);
}

namespace {
// The pipeline's numbers, placement, routes and device orders agree: nothing else can be
// checked before they do.
bool checkPipelineShape(const Schedule& s, ValidationReport& report, Reporter& rep) {
  const Pipeline& p = s.pipeline;
  if (p.devices < 1 || p.stages < 1 || p.microbatches < 1) {
    rep.error("validate.pipeline", "the pipeline needs at least one device, stage and micro-batch (devices " +
                                       std::to_string(p.devices) + ", stages " + std::to_string(p.stages) +
                                       ", micro-batches " + std::to_string(p.microbatches) + ")");
    return false;
  }
  if (p.stageToDevice.size() != static_cast<size_t>(p.stages)) {
    rep.error("validate.placement", "the placement lists " + std::to_string(p.stageToDevice.size()) +
                                        " stages but the pipeline has " + std::to_string(p.stages));
    return false;
  }
  for (int st = 0; st < p.stages; ++st) {
    int d = p.deviceOf(st);
    if (d < 0 || d >= p.devices) {
      rep.error("validate.placement", "stage " + std::to_string(st) + " is placed on device " +
                                          std::to_string(d) + ", outside 0.." +
                                          std::to_string(p.devices - 1));
    }
  }
  if (auto problem = p.routeProblem()) rep.error("validate.routes", *problem);
  if (s.devices.size() != static_cast<size_t>(p.devices))
    rep.error("validate.devices", "the schedule has " + std::to_string(s.devices.size()) +
                                      " device orders but the pipeline has " + std::to_string(p.devices) +
                                      " devices");
  return report.diagnostics.empty();
}

// Declared kinds' rules must name kinds.
void checkKindRules(const Schedule& s, Reporter& rep) {
  for (const auto& u : s.userKinds) {
    for (const auto& n : u.after)
      if (!s.kindFromName(n))
        rep.error("validate.kind-rule", "kind " + u.name + " must follow unknown kind '" + n + "'");
    for (const auto& n : u.before)
      if (!s.kindFromName(n))
        rep.error("validate.kind-rule", "kind " + u.name + " must precede unknown kind '" + n + "'");
  }
}

std::string opNameOf(const Schedule& s, const DependencyGraph& g, int id) {
  return s.opName(g.op(id));
}

// What the dependency graph found (undeclared kinds, ops out of range, duplicates, missing
// peers); false when the schedule is too large for its pipeline to say more.
bool reportGraphProblems(const Schedule& s, const DependencyGraph& g, Reporter& rep) {
  const Pipeline& p = s.pipeline;
  const int nOps = g.size();
  auto name = [&](int id) { return opNameOf(s, g, id); };
  for (const auto& pr : g.problems()) {
    switch (pr.kind) {
      case DependencyGraph::ProblemKind::TooLarge:
        rep.error("validate.size", "the schedule has " + std::to_string(nOps) + " ops, far fewer than the " +
                                       std::to_string(static_cast<long long>(p.stages) * p.microbatches) +
                                       " forwards that " + std::to_string(p.stages) + " stages x " +
                                       std::to_string(p.microbatches) + " micro-batches need");
        return false;
      case DependencyGraph::ProblemKind::BadKind:
        rep.error("validate.kind",
                  where(g.ref(pr.op)) + ": op kind #" + std::to_string(static_cast<int>(g.op(pr.op).kind)) +
                      " is not declared",
                  {g.ref(pr.op)});
        break;
      case DependencyGraph::ProblemKind::OutOfRange: {
        const Op& op = g.op(pr.op);
        std::string msg = where(g.ref(pr.op)) + ": " + s.opName(op);
        if (op.stage < 0 || op.stage >= p.stages)
          msg += " names stage " + std::to_string(op.stage) + ", outside 0.." + std::to_string(p.stages - 1);
        else if (op.microbatch == -1)
          msg += " needs a micro-batch";
        else if (isStageLevelKind(op.kind) || (s.userKind(op.kind) && s.userKind(op.kind)->stageLevel))
          msg += " is a stage-level op and takes no micro-batch";
        else
          msg += " names micro-batch " + std::to_string(op.microbatch) + ", outside 0.." +
                 std::to_string(p.microbatches - 1);
        rep.error("validate.range", msg, {g.ref(pr.op)});
        break;
      }
      case DependencyGraph::ProblemKind::Duplicate:
        rep.error("validate.duplicate",
                  where(g.ref(pr.op)) + ": " + name(pr.op) + " appears twice (first at " +
                      where(g.ref(pr.other)) + ")",
                  {g.ref(pr.op), g.ref(pr.other)});
        break;
      case DependencyGraph::ProblemKind::Missing: {
        // F/B/I/W completeness is reported per (stage, micro-batch) below.
        OpKind mk = pr.missing.kind;
        if (mk == OpKind::F || mk == OpKind::B || mk == OpKind::I || mk == OpKind::W) break;
        std::string miss =
            pr.missing.stage >= 0 && pr.missing.stage < p.stages ? s.opName(pr.missing) : s.kindName(mk);
        rep.error("validate.missing",
                  where(g.ref(pr.op)) + ": " + name(pr.op) + " needs " + miss +
                      ", which the schedule does not have",
                  {g.ref(pr.op)});
        break;
      }
    }
  }
  return true;
}

// Placement and pairs, matched communication, offloads reloaded.
void checkPlacementAndPairs(const Schedule& s, const DependencyGraph& g, Reporter& rep) {
  const Pipeline& p = s.pipeline;
  const int nOps = g.size();
  auto name = [&](int id) { return opNameOf(s, g, id); };
  const StageRoutes& routes = g.routes();
  for (int id = 0; id < nOps; ++id) {
    const Op& op = g.op(id);
    OpRef r = g.ref(id);
    if (op.stage >= 0 && op.stage < p.stages && p.deviceOf(op.stage) != r.device) {
      rep.error("validate.placement",
                where(r) + ": " + name(id) + " belongs to stage " + std::to_string(op.stage) + " on device " +
                    std::to_string(p.deviceOf(op.stage)) + ", not device " + std::to_string(r.device),
                {r});
    }
    if (g.isPairSecond(id)) {
      const Op& a = g.op(id - 1);
      const Op& b = op;
      auto isGrad = [](OpKind k) { return k == OpKind::B || k == OpKind::I; };
      bool shapeOk = (a.kind == OpKind::F && isGrad(b.kind)) || (b.kind == OpKind::F && isGrad(a.kind));
      if (!shapeOk || a.microbatch == b.microbatch)
        rep.error("validate.pair",
                  where(r) + ": the overlapped pair (" + name(id - 1) + ";" + name(id) +
                      ") must be an F and a B or I of different micro-batches",
                  {r});
    }
    // Explicit communication comes in matched pairs: a send nobody receives (or the reverse)
    // hangs a real run.
    if (op.stage >= 0 && op.stage < p.stages && op.microbatch >= 0 && op.microbatch < p.microbatches) {
      auto peer = [&](OpKind k, int st) {
        return st >= 0 && st < p.stages && g.find(Op{k, st, op.microbatch}) >= 0;
      };
      auto unmatched = [&](OpKind k, int st) {
        rep.error("validate.comm",
                  where(r) + ": " + name(id) + " has no matching " + s.opName(Op{k, st, op.microbatch}), {r});
      };
      const int up = routes.prev(op.stage, op.microbatch), down = routes.next(op.stage, op.microbatch);
      if (!routes.runs(op.stage, op.microbatch)) {
        rep.error("validate.route",
                  where(r) + ": " + name(id) + ": micro-batch " + std::to_string(op.microbatch) +
                      " does not run stage " + std::to_string(op.stage) + " (" + routeText(p, op.microbatch) +
                      ")",
                  {r});
      } else if (op.kind == OpKind::SendF) {
        if (down < 0)
          rep.error("validate.comm",
                    where(r) + ": " + name(id) + " sends from the last stage, which has no successor", {r});
        else if (!peer(OpKind::RecvF, down))
          unmatched(OpKind::RecvF, down);
      } else if (op.kind == OpKind::RecvF && up >= 0 && !peer(OpKind::SendF, up)) {
        unmatched(OpKind::SendF, up);
      } else if (op.kind == OpKind::SendB) {
        if (up < 0)
          rep.error("validate.comm",
                    where(r) + ": " + name(id) + " sends from the first stage, which has no predecessor",
                    {r});
        else if (!peer(OpKind::RecvB, up))
          unmatched(OpKind::RecvB, up);
      } else if (op.kind == OpKind::RecvB && down >= 0 && !peer(OpKind::SendB, down)) {
        unmatched(OpKind::SendB, down);
      } else if (op.kind == OpKind::RecvF && up < 0) {
        rep.error("validate.comm",
                  where(r) + ": " + name(id) + " receives into the first stage, which has no predecessor",
                  {r});
      } else if (op.kind == OpKind::RecvB && down < 0) {
        rep.error("validate.comm",
                  where(r) + ": " + name(id) + " receives into the last stage, which has no successor", {r});
      }
    }
    if (op.kind == OpKind::Offload && g.find(Op{OpKind::Reload, op.stage, op.microbatch}) < 0 &&
        op.stage >= 0 && op.stage < p.stages)
      rep.error("validate.missing",
                where(r) + ": " + name(id) + " is never reloaded (no " +
                    s.opName(Op{OpKind::Reload, op.stage, op.microbatch}) + ")",
                {r});
  }
}

// Completeness: one F and one B, or one I and one W, per (stage, micro-batch).
void checkCompleteness(const Schedule& s, const DependencyGraph& g, Reporter& rep) {
  const Pipeline& p = s.pipeline;
  const StageRoutes& routes = g.routes();
  for (int st = 0; st < p.stages; ++st) {
    for (int m = 0; m < p.microbatches; ++m) {
      if (!routes.runs(st, m)) continue;
      int f = g.find(Op{OpKind::F, st, m});
      int b = g.find(Op{OpKind::B, st, m});
      int i = g.find(Op{OpKind::I, st, m});
      int w = g.find(Op{OpKind::W, st, m});
      const bool fullBackward = b >= 0 && i < 0 && w < 0, splitBackward = b < 0 && i >= 0 && w >= 0;
      if (f >= 0 && (fullBackward || splitBackward)) continue;  // the common case
      auto onDev = [&] {
        return " (stage " + std::to_string(st) + " on device " + std::to_string(p.deviceOf(st)) + ")";
      };
      auto op = [&](OpKind k) { return s.opName(Op{k, st, m}); };
      // The op has no place of its own: point at its device's order (a CSV rank's row).
      const std::vector<OpRef> row{OpRef{p.deviceOf(st), -1}};
      if (f < 0)
        rep.errorLazy(
            "validate.missing", [&] { return op(OpKind::F) + " is missing" + onDev(); }, row);
      if (b >= 0 && (i >= 0 || w >= 0)) {
        std::vector<OpRef> rel{g.ref(b)};
        if (i >= 0) rel.push_back(g.ref(i));
        if (w >= 0) rel.push_back(g.ref(w));
        rep.errorLazy(
            "validate.structure",
            [&] {
              return "stage " + std::to_string(st) + " micro-batch " + std::to_string(m) +
                     " has both a full backward " + op(OpKind::B) + " and a split one (I/W)";
            },
            rel);
      } else if (b < 0) {
        if (i < 0 && w < 0)
          rep.errorLazy(
              "validate.missing",
              [&] {
                return op(OpKind::B) + " (or " + op(OpKind::I) + " and " + op(OpKind::W) + ") is missing" +
                       onDev();
              },
              row);
        else if (i < 0)
          rep.errorLazy(
              "validate.missing",
              [&] { return op(OpKind::I) + " is missing" + onDev() + "; " + op(OpKind::W) + " needs it"; },
              {g.ref(w)});
        else if (w < 0)
          rep.errorLazy("validate.missing",
                        [&] { return op(OpKind::W) + " is missing" + onDev() + " after " + op(OpKind::I); },
                        {g.ref(i)});
      }
    }
  }
}

// Order and deadlock: run the device orders; a device advances while its next step's
// dependencies are done, otherwise it waits on the first undone one. A device left waiting
// is reported with the cycle of waits it is in; true then.
bool checkDeadlock(const Schedule& s, const DependencyGraph& g, ValidationReport& report, Reporter& rep) {
  const int nOps = g.size();
  auto name = [&](int id) { return opNameOf(s, g, id); };
  const int nDev = g.devices();
  std::vector<std::uint8_t> done(static_cast<size_t>(nOps), 0);
  std::vector<int> pos(static_cast<size_t>(nDev));
  std::vector<int> blockedOn(static_cast<size_t>(nDev), -1);
  std::vector<int> blockedOp(static_cast<size_t>(nDev), -1);
  std::vector<int> cursorOp(static_cast<size_t>(nDev), 0);   // which op of the step (0/1)
  std::vector<int> cursorDep(static_cast<size_t>(nDev), 0);  // index into its dependencies
  std::vector<int> waitHead(static_cast<size_t>(nOps), -1);
  std::vector<int> nextWaiter(static_cast<size_t>(nDev), -1);
  std::vector<int> ready;
  ready.reserve(static_cast<size_t>(nDev));
  for (int d = 0; d < nDev; ++d) {
    pos[static_cast<size_t>(d)] = g.deviceBegin(d);
    ready.push_back(d);
  }
  while (!ready.empty()) {
    int d = ready.back();
    ready.pop_back();
    auto du = static_cast<size_t>(d);
    const int end = g.deviceBegin(d + 1);
    while (pos[du] < end) {
      int first = pos[du];
      int width = (first + 1 < end && g.isPairSecond(first + 1)) ? 2 : 1;
      int waitFor = -1;
      for (; cursorOp[du] < width && waitFor < 0; ++cursorOp[du], cursorDep[du] = 0) {
        auto deps = g.dependencies(first + cursorOp[du]);
        for (; cursorDep[du] < static_cast<int>(deps.size()); ++cursorDep[du]) {
          int dep = deps[static_cast<size_t>(cursorDep[du])];
          if (!done[static_cast<size_t>(dep)]) {
            waitFor = dep;
            break;
          }
        }
        if (waitFor >= 0) break;
      }
      if (waitFor >= 0) {
        blockedOn[du] = waitFor;
        blockedOp[du] = first + cursorOp[du];
        nextWaiter[du] = waitHead[static_cast<size_t>(waitFor)];
        waitHead[static_cast<size_t>(waitFor)] = d;
        break;
      }
      for (int k = 0; k < width; ++k) {
        auto id = static_cast<size_t>(first) + static_cast<size_t>(k);
        done[id] = 1;
        for (int w = waitHead[id]; w >= 0;) {
          int nx = nextWaiter[static_cast<size_t>(w)];
          blockedOn[static_cast<size_t>(w)] = -1;
          ready.push_back(w);
          w = nx;
        }
        waitHead[id] = -1;
      }
      pos[du] = first + width;
      cursorOp[du] = 0;
      cursorDep[du] = 0;
    }
  }

  int start = -1;
  for (int d = 0; d < nDev; ++d)
    if (pos[static_cast<size_t>(d)] < g.deviceBegin(d + 1)) {
      start = d;
      break;
    }
  if (start >= 0) {
    // Follow "device waits for an op on device" until a device repeats: that is the cycle.
    std::vector<int> seenAt(static_cast<size_t>(nDev), -1);
    std::vector<int> path;
    int d = start;
    while (seenAt[static_cast<size_t>(d)] < 0) {
      seenAt[static_cast<size_t>(d)] = static_cast<int>(path.size());
      path.push_back(d);
      d = g.deviceOf(blockedOn[static_cast<size_t>(d)]);
    }
    std::vector<int> cycle(path.begin() + seenAt[static_cast<size_t>(d)], path.end());
    std::string msg = "deadlock: ";
    std::vector<OpRef> related;
    for (size_t k = 0; k < cycle.size(); ++k) {
      auto du = static_cast<size_t>(cycle[k]);
      int at = blockedOp[du], x = blockedOn[du];
      int xd = g.deviceOf(x);
      report.deadlock.push_back(DeadlockWait{cycle[k], g.ref(at), g.op(x), xd});
      related.push_back(g.ref(at));
      related.push_back(g.ref(x));
      if (k == 0) {
        msg += "device " + std::to_string(cycle[k]) + " waits at " + name(at);
      } else {
        int prevX = blockedOn[static_cast<size_t>(cycle[k - 1])];
        if (g.ref(prevX).step == g.ref(at).step)
          msg += ", which waits";
        else
          msg += ", which waits at " + name(at);
      }
      msg += " for " + name(x) + " on device " + std::to_string(xd);
    }
    int lastX = blockedOn[static_cast<size_t>(cycle.back())];
    int firstAt = blockedOp[static_cast<size_t>(cycle.front())];
    if (g.ref(lastX).step == g.ref(firstAt).step)
      msg += ", closing the cycle";
    else
      msg += ", which is after " + name(firstAt) + " on device " + std::to_string(cycle.front());
    int stuck = 0;
    for (int dd = 0; dd < nDev; ++dd)
      if (pos[static_cast<size_t>(dd)] < g.deviceBegin(dd + 1)) ++stuck;
    if (stuck > static_cast<int>(cycle.size()))
      msg += " (" + std::to_string(stuck - static_cast<int>(cycle.size())) + " more devices wait behind it)";
    rep.error("validate.deadlock", msg, std::move(related));
  }
  return start >= 0;
}

ValidationReport validate(const Schedule& s, const ValidateOptions& options, const DependencyGraph* given) {
  ValidationReport report;
  Reporter rep(report, std::max(1, options.maxDiagnostics));
  if (commSemanticsApplies(s, options.comm)) report.semantics = options.comm.semantics;

  if (!checkPipelineShape(s, report, rep)) {
    rep.finish();
    return report;
  }

  checkKindRules(s, rep);

  DependencyGraph own;
  if (!given) own.rebuild(s);
  const DependencyGraph& g = given ? *given : own;
  if (!reportGraphProblems(s, g, rep)) {  // too large to say more
    rep.finish();
    return report;
  }

  checkPlacementAndPairs(s, g, rep);
  checkCompleteness(s, g, rep);
  checkStageActions(s, g, rep);
  checkChannelOrder(s, g, rep);

  const bool stalled = checkDeadlock(s, g, report, rep);
  if (!stalled && commSemanticsApplies(s, options.comm)) checkCommStreams(s, g, options.comm, report, rep);
  rep.finish();
  return report;
}
}  // namespace

}  // namespace ps::core
