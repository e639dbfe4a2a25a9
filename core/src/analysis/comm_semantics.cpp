// Communication semantics (comm_semantics.h): the streams of point-to-point operations, their
// execution under nccl and dualpipe, and the wait cycle of a stalled execution.
#include "pipestudio/core/analysis/comm_semantics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "pipestudio/core/model/enum_names.h"
#include "pipestudio/core/model/timeline.h"

namespace ps::core {

namespace {

constexpr EnumName<CommSemantics> kCommSemanticsNames[] = {
    {CommSemantics::Posted, "posted"},
    {CommSemantics::Nccl, "nccl"},
    {CommSemantics::DualPipe, "dualpipe"},
};

bool isSend(OpKind k) {
  return k == OpKind::SendF || k == OpKind::SendB;
}

// Ops that run on the device's compute stream and so come before a later point-to-point op of
// the rank on its communication stream (ProcessGroupNCCL makes the NCCL stream wait for the
// current stream when an op is issued). The copy stream's collectives do not.
bool onComputeStream(const Op& op) {
  return !isPointToPointKind(op.kind) && !runsOnCopyStream(op.kind) && op.kind != OpKind::Reshard;
}

constexpr double kNever = std::numeric_limits<double>::quiet_NaN();

}  // namespace

PS_ENUM_NAME_FUNCTION(CommSemantics, kCommSemanticsNames, commSemanticsName);
PS_ENUM_FROM_NAME_FUNCTION(CommSemantics, kCommSemanticsNames, commSemanticsFromName);

std::string_view commSemanticsDescription(CommSemantics c) {
  switch (c) {
    case CommSemantics::Posted:
      return "SEND/RECV are posted and take no device time; a consumer waits for its data (PyTorch's "
             "runtime over Gloo)";
    case CommSemantics::Nccl:
      return "each rank runs its SEND/RECV in order on one communication stream, and a send completes only "
             "when "
             "the peer's receive runs (PyTorch's runtime over NCCL)";
    case CommSemantics::DualPipe:
      return "the SEND/RECV posted between two compute ops are one batch, and every compute op waits for all "
             "transfers posted before it (DeepSeek's DualPipe)";
  }
  return "";
}

bool isPointToPointKind(OpKind k) {
  return k == OpKind::SendF || k == OpKind::RecvF || k == OpKind::SendB || k == OpKind::RecvB;
}

bool commSemanticsApplies(const Schedule& s, const CommOptions& comm) {
  if (comm.semantics == CommSemantics::Posted) return false;
  for (const auto& dev : s.devices)
    for (const auto& st : dev)
      if (!st.second && isPointToPointKind(st.first.kind)) return true;
  return false;
}

CommSemantics defaultCommSemantics(const Schedule& s, bool fromPytorchCsv) {
  return fromPytorchCsv && commSemanticsApplies(s, {CommSemantics::Nccl}) ? CommSemantics::Nccl
                                                                          : CommSemantics::Posted;
}

std::string defaultCommReason(const Schedule& s, bool fromPytorchCsv) {
  const bool comms = commSemanticsApplies(s, {CommSemantics::Nccl});
  if (!comms) return "transfers are implied (no explicit SEND/RECV): every semantics agrees";
  if (fromPytorchCsv)
    return "a compute+comms CSV, which PyTorch's runtime runs over NCCL on GPUs (--comm posted: over Gloo)";
  return "explicit SEND/RECV as the engine and PyTorch's runtime over Gloo run them (--comm nccl: on GPUs)";
}

int pointToPointPeerStage(const StageRoutes& routes, const Op& op) {
  switch (op.kind) {
    case OpKind::SendF:
    case OpKind::RecvB:
      return routes.next(op.stage, op.microbatch);
    case OpKind::SendB:
    case OpKind::RecvF:
      return routes.prev(op.stage, op.microbatch);
    default:
      return -1;
  }
}

CommPlan makeCommPlan(const Schedule& s, const DependencyGraph& g, const CommOptions& options) {
  CommPlan plan;
  plan.options = options;
  const Pipeline& p = s.pipeline;
  const int n = g.size();
  plan.entryOf.assign(static_cast<size_t>(n), -1);
  plan.matchOf.assign(static_cast<size_t>(n), -1);
  const bool batched = options.batchConsecutive || options.semantics == CommSemantics::DualPipe;
  // Per directed pair of ranks, the sends in posting order and the receives in posting order.
  std::map<std::pair<int, int>, std::pair<std::vector<int>, std::vector<int>>> channels;
  for (int d = 0; d < g.devices(); ++d) {
    plan.entryBegin.push_back(static_cast<int>(plan.entryOpBegin.size()));
    bool lastWasComm = false;
    for (int id = g.deviceBegin(d); id < g.deviceBegin(d + 1); ++id) {
      const Op& op = g.op(id);
      const int ps = pointToPointPeerStage(g.routes(), op);
      const bool cross = isPointToPointKind(op.kind) && !g.isPairSecond(id) && op.stage >= 0 &&
                         op.stage < p.stages && ps >= 0 && ps < p.stages && p.deviceOf(ps) != d;
      if (!cross) {
        // A point-to-point op within one rank (never written by PyTorch) is only posted.
        lastWasComm = isPointToPointKind(op.kind) && lastWasComm;
        continue;
      }
      if (!(batched && lastWasComm)) plan.entryOpBegin.push_back(static_cast<int>(plan.entryOps.size()));
      plan.entryOf[static_cast<size_t>(id)] = static_cast<int>(plan.entryOpBegin.size()) - 1;
      plan.entryOps.push_back(id);
      lastWasComm = true;
      const int peer = p.deviceOf(ps);
      if (isSend(op.kind))
        channels[{d, peer}].first.push_back(id);
      else
        channels[{peer, d}].second.push_back(id);
    }
  }
  plan.entryBegin.push_back(static_cast<int>(plan.entryOpBegin.size()));
  plan.entryOpBegin.push_back(static_cast<int>(plan.entryOps.size()));
  for (const auto& [pair, ops] : channels) {
    const auto& [sends, recvs] = ops;
    const size_t k = std::min(sends.size(), recvs.size());
    for (size_t i = 0; i < k; ++i) {
      plan.matchOf[static_cast<size_t>(sends[i])] = recvs[i];
      plan.matchOf[static_cast<size_t>(recvs[i])] = sends[i];
    }
    for (size_t i = k; i < sends.size(); ++i) plan.unmatched.push_back(sends[i]);
    for (size_t i = k; i < recvs.size(); ++i) plan.unmatched.push_back(recvs[i]);
  }
  std::sort(plan.unmatched.begin(), plan.unmatched.end());
  return plan;
}

namespace {

// The dataflow of an execution under nccl/dualpipe. Every time is the maximum of the times it
// depends on, so the order of evaluation does not matter: devices are advanced while they can
// and woken when what they wait for is done.
class Executor {
 public:
  Executor(const DependencyGraph& g, const CommPlan& plan, const CommCosts& costs, int stages)
      : g_(g), plan_(plan), costs_(costs), stages_(stages) {}

  CommExecution run() {
    const int n = g_.size(), D = g_.devices();
    const auto E = static_cast<size_t>(plan_.entryOpBegin.size() - 1);
    x_.start.assign(static_cast<size_t>(n), kNever);
    x_.end.assign(static_cast<size_t>(n), kNever);
    done_.assign(static_cast<size_t>(n), 0);
    waitHead_.assign(static_cast<size_t>(n), -1);
    nextWaiter_.assign(static_cast<size_t>(D), -1);
    cursor_.resize(static_cast<size_t>(D));
    free_.assign(static_cast<size_t>(D), 0.0);
    copyFree_.assign(static_cast<size_t>(D), 0.0);
    head_.resize(static_cast<size_t>(D));
    prevDone_.assign(static_cast<size_t>(D), 0.0);
    prevOp_.assign(static_cast<size_t>(D), -1);
    issuedUpTo_.resize(static_cast<size_t>(D));
    issued_.assign(E, kNever);
    started_.assign(E, kNever);
    left_.resize(E);
    waitingComm_.assign(static_cast<size_t>(D), 0);
    unsharded_.assign(static_cast<size_t>(std::max(stages_, 0)), 0.0);
    for (size_t e = 0; e < E; ++e) left_[e] = plan_.entryOpBegin[e + 1] - plan_.entryOpBegin[e];
    for (int d = 0; d < D; ++d) {
      cursor_[static_cast<size_t>(d)] = g_.deviceBegin(d);
      head_[static_cast<size_t>(d)] = plan_.entryBegin[static_cast<size_t>(d)];
      issuedUpTo_[static_cast<size_t>(d)] = plan_.entryBegin[static_cast<size_t>(d)];
    }
    for (int d = D - 1; d >= 0; --d) work_.push_back(d);
    while (!work_.empty() || !streams_.empty()) {
      if (!streams_.empty()) {
        const int d = streams_.back();
        streams_.pop_back();
        tryStart(d);
        continue;
      }
      const int d = work_.back();
      work_.pop_back();
      advance(d);
    }
    x_.stepsDone.assign(static_cast<size_t>(D), 0);
    for (int d = 0; d < D; ++d) {
      int steps = 0;
      for (int id = g_.deviceBegin(d); id < g_.deviceBegin(d + 1); ++id) {
        if (!done_[static_cast<size_t>(id)]) break;
        if (!g_.isPairSecond(id)) ++steps;
      }
      x_.stepsDone[static_cast<size_t>(d)] = steps;
      if (cursor_[static_cast<size_t>(d)] < g_.deviceBegin(d + 1) ||
          head_[static_cast<size_t>(d)] < plan_.entryBegin[static_cast<size_t>(d) + 1])
        x_.complete = false;
    }
    x_.hostAt = cursor_;
    x_.streamAt = head_;
    x_.entryIssued.assign(E, 0);
    x_.entryStarted.assign(E, 0);
    for (int d = 0; d < D; ++d)
      for (int e = plan_.entryBegin[static_cast<size_t>(d)]; e < issuedUpTo_[static_cast<size_t>(d)]; ++e)
        x_.entryIssued[static_cast<size_t>(e)] = 1;
    for (size_t e = 0; e < E; ++e) x_.entryStarted[e] = !std::isnan(started_[e]);
    return std::move(x_);
  }

 private:
  double duration(int id) const {
    return costs_.duration.empty() ? 1.0 : costs_.duration[static_cast<size_t>(id)];
  }
  bool isEntryOp(int id) const { return plan_.entryOf[static_cast<size_t>(id)] >= 0; }

  void wait(int d, int op) {
    nextWaiter_[static_cast<size_t>(d)] = waitHead_[static_cast<size_t>(op)];
    waitHead_[static_cast<size_t>(op)] = d;
  }
  void finish(int op, double start, double end) {
    x_.start[static_cast<size_t>(op)] = start;
    x_.end[static_cast<size_t>(op)] = end;
    done_[static_cast<size_t>(op)] = 1;
    for (int w = waitHead_[static_cast<size_t>(op)]; w >= 0;) {
      const int nx = nextWaiter_[static_cast<size_t>(w)];
      work_.push_back(w);
      w = nx;
    }
    waitHead_[static_cast<size_t>(op)] = -1;
  }

  // When `dep`'s data is there for a consumer on `device`: an implied transfer (between compute
  // ops of two devices) adds its time; a received tensor is there when its transfer completed.
  double arrival(int dep, int device) const {
    const double t = x_.end[static_cast<size_t>(dep)];
    if (g_.deviceOf(dep) != device && !isEntryOp(dep) && !costs_.impliedTransfer.empty())
      return t + costs_.impliedTransfer[static_cast<size_t>(dep)];
    return t;
  }

  // Runs device d's program order as far as it can.
  void advance(int d) {
    const auto du = static_cast<size_t>(d);
    const int end = g_.deviceBegin(d + 1);
    while (cursor_[du] < end) {
      const int first = cursor_[du];
      const int width = (first + 1 < end && g_.isPairSecond(first + 1)) ? 2 : 1;
      const Op& op = g_.op(first);
      double ready = 0;
      for (int k = 0; k < width; ++k)
        for (int dep : g_.dependencies(first + k)) {
          if (dep == first || (width == 2 && dep == first + 1)) continue;
          if (!done_[static_cast<size_t>(dep)]) {
            wait(d, dep);
            return;
          }
          ready = std::max(ready, arrival(dep, d));
        }
      if (isEntryOp(first)) {
        // Issued: on the stream once the compute issued before it has ended (and, for a send,
        // its data is ready); the host goes on at once. A batch is issued with its last op.
        const int e = plan_.entryOf[static_cast<size_t>(first)];
        const double t = std::max(ready, free_[du]);
        double& is = issued_[static_cast<size_t>(e)];
        is = std::isnan(is) ? t : std::max(is, t);
        ++cursor_[du];
        if (cursor_[du] >= end || plan_.entryOf[static_cast<size_t>(cursor_[du])] != e) {
          issuedUpTo_[du] = e + 1;
          streams_.push_back(d);
        }
        continue;
      }
      if (isPointToPointKind(op.kind) && width == 1) {
        // Within one rank: posted, no time.
        finish(first, ready, ready);
        ++cursor_[du];
        continue;
      }
      const bool compute = onComputeStream(op) || width == 2;
      if (compute && plan_.options.semantics == CommSemantics::DualPipe) {
        // Every transfer posted before this compute op first.
        if (head_[du] < issuedUpTo_[du]) {
          waitingComm_[du] = 1;
          return;
        }
        ready = std::max(ready, prevDone_[du]);
      }
      if (compute)
        for (int k = 0; k < width; ++k) {
          const int st = g_.op(first + k).stage;
          if (st >= 0 && st < stages_) ready = std::max(ready, unsharded_[static_cast<size_t>(st)]);
        }
      const double dur = duration(first);
      double start;
      if (compute) {
        start = std::max(free_[du], ready);
        free_[du] = start + dur;
      } else {
        start = std::max({free_[du], ready, copyFree_[du]});
        if (runsOnCopyStream(op.kind)) copyFree_[du] = start + dur;
        if (op.kind == OpKind::Unshard && op.stage >= 0 && op.stage < stages_)
          unsharded_[static_cast<size_t>(op.stage)] = start + dur;
      }
      for (int k = 0; k < width; ++k) finish(first + k, start, start + dur);
      cursor_[du] += width;
    }
  }

  // Starts the entry at the head of d's stream once it is issued, and runs every transfer whose
  // peer op has started too.
  void tryStart(int d) {
    const auto du = static_cast<size_t>(d);
    const int e = head_[du];
    if (e >= plan_.entryBegin[du + 1] || e >= issuedUpTo_[du]) return;
    const auto eu = static_cast<size_t>(e);
    if (!std::isnan(started_[eu])) return;
    const double is = issued_[eu];
    started_[eu] = std::max(is, prevDone_[du]);
    if (prevOp_[du] >= 0 && prevDone_[du] > is) {
      const int op0 = plan_.entryOps[static_cast<size_t>(plan_.entryOpBegin[eu])];
      x_.headOfLine.push_back({op0, prevOp_[du], is, prevDone_[du]});
    }
    for (int i = plan_.entryOpBegin[eu]; i < plan_.entryOpBegin[eu + 1]; ++i) {
      const int op = plan_.entryOps[static_cast<size_t>(i)];
      const int m = plan_.matchOf[static_cast<size_t>(op)];
      if (m < 0) continue;
      const auto em = static_cast<size_t>(plan_.entryOf[static_cast<size_t>(m)]);
      if (std::isnan(started_[em])) continue;
      // Both sides are at the heads of their streams: the transfer runs.
      const int send = isSend(g_.op(op).kind) ? op : m, recv = send == op ? m : op;
      const double from = std::max(started_[eu], started_[em]);
      const double cost = costs_.transfer.empty() ? 0.0 : costs_.transfer[static_cast<size_t>(send)];
      x_.pairs.push_back({send, recv, from, from + cost});
      complete(op, from + cost);
      complete(m, from + cost);
    }
  }

  void complete(int op, double t) {
    const auto eu = static_cast<size_t>(plan_.entryOf[static_cast<size_t>(op)]);
    finish(op, started_[eu], t);
    if (--left_[eu] > 0) return;
    const int d = g_.deviceOf(op);
    const auto du = static_cast<size_t>(d);
    double last = 0;
    int lastOp = -1;
    for (int i = plan_.entryOpBegin[eu]; i < plan_.entryOpBegin[eu + 1]; ++i) {
      const int o = plan_.entryOps[static_cast<size_t>(i)];
      if (x_.end[static_cast<size_t>(o)] >= last) {
        last = x_.end[static_cast<size_t>(o)];
        lastOp = o;
      }
    }
    prevDone_[du] = std::max(prevDone_[du], last);
    prevOp_[du] = lastOp;
    ++head_[du];
    if (waitingComm_[du]) {
      waitingComm_[du] = 0;
      work_.push_back(d);
    }
    streams_.push_back(d);
  }

  const DependencyGraph& g_;
  const CommPlan& plan_;
  const CommCosts& costs_;
  int stages_;
  CommExecution x_;
  std::vector<std::uint8_t> done_;
  std::vector<int> waitHead_, nextWaiter_;
  std::vector<int> cursor_, head_, issuedUpTo_, prevOp_, left_;
  std::vector<double> free_, copyFree_, prevDone_, issued_, started_, unsharded_;
  std::vector<std::uint8_t> waitingComm_;
  std::vector<int> work_, streams_;  // devices to advance; devices whose stream head may start
};

}  // namespace

CommExecution executeWithComms(const Schedule& s, const DependencyGraph& g, const CommPlan& plan,
                               const CommCosts& costs) {
  Executor ex(g, plan, costs, s.pipeline.stages);
  return ex.run();
}

std::vector<CommWaitLink> findCommWaitCycle(const Schedule& s, const DependencyGraph& g, const CommPlan& plan,
                                            const CommExecution& x) {
  (void)s;
  using Reason = CommWaitLink::Reason;
  const int D = g.devices();
  auto done = [&](int op) { return !std::isnan(x.end[static_cast<size_t>(op)]); };
  auto entryEnd = [&](int d) { return plan.entryBegin[static_cast<size_t>(d) + 1]; };
  // The first op of an entry that has not run.
  auto pendingOp = [&](int e) {
    for (int i = plan.entryOpBegin[static_cast<size_t>(e)]; i < plan.entryOpBegin[static_cast<size_t>(e) + 1];
         ++i)
      if (!done(plan.entryOps[static_cast<size_t>(i)])) return plan.entryOps[static_cast<size_t>(i)];
    return plan.entryOps[static_cast<size_t>(plan.entryOpBegin[static_cast<size_t>(e)])];
  };
  auto atHead = [&](int op) {
    const int d = g.deviceOf(op);
    return plan.entryOf[static_cast<size_t>(op)] == x.streamAt[static_cast<size_t>(d)];
  };
  // Agents: 2d = device d's host and compute stream, 2d + 1 = its communication stream.
  struct Wait {
    CommWaitLink link;
    int next = -1;
  };
  auto waitOf = [&](int agent) -> std::optional<Wait> {
    const int d = agent / 2;
    if (agent % 2 == 0) {
      const int c = x.hostAt[static_cast<size_t>(d)];
      if (c >= g.deviceBegin(d + 1)) return std::nullopt;
      const int width = (c + 1 < g.deviceBegin(d + 1) && g.isPairSecond(c + 1)) ? 2 : 1;
      const int h = x.streamAt[static_cast<size_t>(d)];
      if (plan.options.semantics == CommSemantics::DualPipe && plan.entryOf[static_cast<size_t>(c)] < 0 &&
          h < entryEnd(d) && x.entryIssued[static_cast<size_t>(h)])
        return Wait{{d, c, pendingOp(h), d, Reason::Data}, 2 * d + 1};
      for (int k = 0; k < width; ++k)
        for (int dep : g.dependencies(c + k)) {
          if (done(dep) || dep == c || dep == c + width - 1) continue;
          const int dd = g.deviceOf(dep);
          if (dd == d && dep > c) return Wait{{d, c + k, dep, d, Reason::Later}, 2 * d};
          if (plan.entryOf[static_cast<size_t>(dep)] >= 0)
            return Wait{{d, c + k, dep, dd, atHead(dep) ? Reason::Data : Reason::Behind}, 2 * dd + 1};
          return Wait{{d, c + k, dep, dd, Reason::Data}, 2 * dd};
        }
      return std::nullopt;
    }
    const int h = x.streamAt[static_cast<size_t>(d)];
    if (h >= entryEnd(d)) return std::nullopt;
    const int op = pendingOp(h);
    if (!x.entryIssued[static_cast<size_t>(h)])
      return Wait{{d, op, x.hostAt[static_cast<size_t>(d)], d, Reason::NotIssued}, 2 * d};
    const int m = plan.matchOf[static_cast<size_t>(op)];
    if (m < 0) return std::nullopt;  // nothing on the peer to meet: an unmatched op, no cycle
    const int q = g.deviceOf(m);
    if (!atHead(m)) return Wait{{d, op, m, q, Reason::Behind}, 2 * q + 1};
    if (!x.entryIssued[static_cast<size_t>(plan.entryOf[static_cast<size_t>(m)])])
      return Wait{{d, op, m, q, Reason::Data}, 2 * q + 1};
    return std::nullopt;
  };
  for (int startAgent = 0; startAgent < 2 * D; ++startAgent) {
    std::vector<int> seenAt(static_cast<size_t>(2 * D), -1);
    std::vector<Wait> path;
    int a = startAgent;
    while (seenAt[static_cast<size_t>(a)] < 0) {
      auto w = waitOf(a);
      if (!w) {
        a = -1;
        break;
      }
      seenAt[static_cast<size_t>(a)] = static_cast<int>(path.size());
      path.push_back(*w);
      a = w->next;
    }
    if (a < 0) continue;
    std::vector<CommWaitLink> cycle;
    for (size_t k = static_cast<size_t>(seenAt[static_cast<size_t>(a)]); k < path.size(); ++k)
      cycle.push_back(path[k].link);
    // Start at the lowest rank, for a stable message.
    auto lowest = std::min_element(
        cycle.begin(), cycle.end(),
        [](const CommWaitLink& l1, const CommWaitLink& l2) { return l1.device < l2.device; });
    std::rotate(cycle.begin(), lowest, cycle.end());
    return cycle;
  }
  return {};
}

std::string describeWaitCycle(const Schedule& s, const DependencyGraph& g,
                              const std::vector<CommWaitLink>& cycle) {
  using Reason = CommWaitLink::Reason;
  if (cycle.empty()) return {};
  auto act = [&](int id) { return pytorchActionText(s, g.op(id)); };
  std::string msg;
  for (size_t k = 0; k < cycle.size(); ++k) {
    const CommWaitLink& l = cycle[k];
    if (k == 0)
      msg += "rank " + std::to_string(l.device) + " waits in " + act(l.at);
    else if (cycle[k - 1].waitsFor == l.at)
      msg += ", which waits";
    else if (cycle[k - 1].reason == Reason::Behind)
      msg += ", queued behind " + act(l.at) + ", which waits";
    else
      msg += ", which waits in " + act(l.at);
    msg += " for " + act(l.waitsFor);
    if (l.waitsOnDevice != l.device) msg += " on rank " + std::to_string(l.waitsOnDevice);
    if (l.reason == Reason::Later) msg += ", which comes after it on rank " + std::to_string(l.device);
    if (l.reason == Reason::NotIssued) msg += " (issued after it)";
  }
  const CommWaitLink& last = cycle.back();
  const CommWaitLink& first = cycle.front();
  if (last.waitsFor == first.at)
    msg += ", closing the cycle";
  else if (last.reason == Reason::Behind)
    msg += ", queued behind " + act(first.at) + ", closing the cycle";
  else
    msg += ", which rank " + std::to_string(first.device) + " reaches only after " + act(first.at) +
           ", closing the cycle";
  return msg;
}

}  // namespace ps::core
