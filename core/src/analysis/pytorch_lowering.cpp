#include "pipestudio/core/analysis/pytorch_lowering.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_set>

#include "pipestudio/core/analysis/comm_semantics.h"
#include "pipestudio/core/analysis/dependency_graph.h"
#include "pipestudio/core/model/enum_names.h"

namespace ps::core {

namespace {

// The iteration order of a CPython set of small non-negative ints (CPython 3.10 to 3.13 store
// them alike). PyTorch's _add_unshard_reshard evicts stages in the order its `active_stages`
// set yields them, so a byte-exact lowering needs that order: open addressing over a table of
// 8 slots and up, hash = the int, linear probing only when 9 slots fit after the home slot,
// then i = 5i + 1 + (perturb >>= 5); an insert takes the last deleted slot seen on its probe
// path, if any; the table grows to the smallest power of two above 4 x used once
// 5 x filled >= 3 x mask. Checked against the interpreter on random add/discard sequences.
class PythonIntSet {
 public:
  void add(std::int64_t key) {
    std::int64_t freeSlot = -1;
    const size_t mask = table_.size() - 1;
    size_t i = static_cast<size_t>(key) & mask;
    size_t perturb = static_cast<size_t>(key);
    while (true) {
      size_t probes = i + kLinearProbes <= mask ? kLinearProbes : 0;
      for (size_t j = i;; ++j) {
        std::int64_t e = table_[j];
        if (e == kUnused) {
          if (freeSlot >= 0) {
            table_[static_cast<size_t>(freeSlot)] = key;
            ++used_;
            return;
          }
          table_[j] = key;
          ++fill_;
          ++used_;
          if (fill_ * 5 >= mask * 3) resize(used_ > 50000 ? used_ * 2 : used_ * 4);
          return;
        }
        if (e == kDummy)
          freeSlot = static_cast<std::int64_t>(j);
        else if (e == key)
          return;
        if (probes-- == 0) break;
      }
      perturb >>= 5;
      i = (i * 5 + 1 + perturb) & mask;
    }
  }
  void discard(std::int64_t key) {
    const size_t mask = table_.size() - 1;
    size_t i = static_cast<size_t>(key) & mask;
    size_t perturb = static_cast<size_t>(key);
    while (true) {
      size_t probes = i + kLinearProbes <= mask ? kLinearProbes : 0;
      for (size_t j = i;; ++j) {
        if (table_[j] == kUnused) return;
        if (table_[j] == key) {
          table_[j] = kDummy;
          --used_;
          return;
        }
        if (probes-- == 0) break;
      }
      perturb >>= 5;
      i = (i * 5 + 1 + perturb) & mask;
    }
  }
  bool contains(std::int64_t key) const {
    return std::find(table_.begin(), table_.end(), key) != table_.end();
  }
  std::vector<std::int64_t> items() const {
    std::vector<std::int64_t> out;
    for (std::int64_t e : table_)
      if (e >= 0) out.push_back(e);
    return out;
  }

 private:
  static constexpr std::int64_t kUnused = -1, kDummy = -2;
  static constexpr size_t kLinearProbes = 9;
  void resize(size_t minUsed) {
    size_t size = 8;
    while (size <= minUsed) size <<= 1;
    std::vector<std::int64_t> old(size, kUnused);
    old.swap(table_);
    const size_t mask = size - 1;
    fill_ = used_;
    for (std::int64_t e : old) {
      if (e < 0) continue;
      size_t i = static_cast<size_t>(e) & mask;
      size_t perturb = static_cast<size_t>(e);
      bool placed = false;
      while (!placed) {
        size_t probes = i + kLinearProbes <= mask ? kLinearProbes : 0;
        for (size_t j = i;; ++j) {
          if (table_[j] == kUnused) {
            table_[j] = e;
            placed = true;
            break;
          }
          if (probes-- == 0) break;
        }
        perturb >>= 5;
        i = (i * 5 + 1 + perturb) & mask;
      }
    }
  }
  std::vector<std::int64_t> table_ = std::vector<std::int64_t>(8, kUnused);
  size_t fill_ = 0, used_ = 0;
};

bool isComputeKind(OpKind k) {
  return k == OpKind::F || k == OpKind::B || k == OpKind::I || k == OpKind::W;
}

bool isComputeStep(const Step& st) {
  return st.second || isComputeKind(st.first.kind);
}

// The stages a step computes on, in order (a pair: both).
int stepStages(const Step& st, int out[2]) {
  out[0] = st.first.stage;
  if (st.second && st.second->stage != st.first.stage) {
    out[1] = st.second->stage;
    return 2;
  }
  return 1;
}

// _add_unshard_reshard with max_active_stages = 3 over one rank's compute steps. The window
// at step i is PyTorch's next_stage_indices(3, actions[i:]): the distinct stages in order of
// first use from i, cut at the first step after which at least 3 are known (a pair can make
// it 4). It is built backwards, keeping the first 4 distinct stages from each step with the
// step that first uses each, so the pass is linear in the steps.
// `gatherOrder`: PyTorch 2.15 keeps the active stages in a dict, so evictions and the final
// RESHARDs come in the order the stages were gathered; before, in its set's order.
std::vector<Step> addUnshardReshard(const std::vector<Step>& compute, bool gatherOrder) {
  constexpr int kWindow = 3, kKeep = kWindow + 1;
  struct Entry {
    int stage, step;
  };
  const size_t n = compute.size();
  std::vector<std::vector<Entry>> ahead(n + 1);
  for (size_t i = n; i-- > 0;) {
    int st[2];
    const int k = stepStages(compute[i], st);
    auto& list = ahead[i];
    for (int j = 0; j < k; ++j) list.push_back({st[j], static_cast<int>(i)});
    for (const Entry& e : ahead[i + 1]) {
      if (static_cast<int>(list.size()) >= kKeep) break;
      if (e.stage != st[0] && (k < 2 || e.stage != st[1])) list.push_back(e);
    }
  }
  auto window = [&](size_t i) {
    std::vector<int> next;
    const auto& list = ahead[i];
    for (size_t j = 0; j < list.size();) {
      const int step = list[j].step;
      while (j < list.size() && list[j].step == step) next.push_back(list[j++].stage);
      if (static_cast<int>(next.size()) >= kWindow) break;
    }
    return next;
  };

  std::vector<Step> out;
  out.reserve(n + 8);
  PythonIntSet active;                 // 2.11 to 2.14
  std::vector<std::int64_t> gathered;  // 2.15: in the order gathered
  auto items = [&] { return gatherOrder ? gathered : active.items(); };
  auto contains = [&](int s) {
    return gatherOrder ? std::find(gathered.begin(), gathered.end(), s) != gathered.end()
                       : active.contains(s);
  };
  auto stageStep = [](OpKind k, int stage) { return Step{Op{k, stage, -1}, {}}; };
  for (size_t i = 0; i < n; ++i) {
    const std::vector<int> next = window(i);
    std::vector<int> fetch;
    for (int s : next)
      if (!contains(s)) fetch.push_back(s);
    std::vector<std::int64_t> evict;
    for (std::int64_t s : items())
      if (std::find(next.begin(), next.end(), static_cast<int>(s)) == next.end()) evict.push_back(s);
    for (std::int64_t s : evict) {
      active.discard(s);
      gathered.erase(std::find(gathered.begin(), gathered.end(), s));
      out.push_back(stageStep(OpKind::Reshard, static_cast<int>(s)));
    }
    for (int s : fetch) {
      active.add(s);
      gathered.push_back(s);
      out.push_back(stageStep(OpKind::Unshard, s));
    }
    out.push_back(compute[i]);
  }
  for (std::int64_t s : items()) out.push_back(stageStep(OpKind::Reshard, static_cast<int>(s)));
  return out;
}

std::uint64_t key(const Op& op) {
  return (static_cast<std::uint64_t>(op.kind) << 56) |
         (static_cast<std::uint64_t>(op.stage & 0xFFFFFF) << 32) | static_cast<std::uint32_t>(op.microbatch);
}

bool isSend(OpKind k) {
  return k == OpKind::SendF || k == OpKind::SendB;
}

bool isRecvStep(const Step& st) {
  return !st.second && (st.first.kind == OpKind::RecvF || st.first.kind == OpKind::RecvB);
}

constexpr EnumName<RecvPlacement> kRecvPlacementNames[] = {
    {RecvPlacement::Asap, "asap"},
    {RecvPlacement::Deferred, "pytorch"},
    {RecvPlacement::DeferredSafe, "safe"},
};

// The rank a point-to-point op exchanges with.
int peerRank(const Pipeline& p, const Op& op) {
  int st = -1;
  if (op.kind == OpKind::SendF || op.kind == OpKind::RecvB) st = op.stage + 1;
  if (op.kind == OpKind::SendB || op.kind == OpKind::RecvF) st = op.stage - 1;
  return st >= 0 && st < p.stages ? p.deviceOf(st) : -1;
}

// Each rank posts the receives from a peer in the order that peer sends (Gloo and NCCL match
// the messages between two ranks in posting order).
bool receivesInSendOrder(const Schedule& s) {
  const Pipeline& p = s.pipeline;
  std::map<std::pair<int, int>, std::pair<std::vector<Op>, std::vector<Op>>> channels;
  for (size_t r = 0; r < s.devices.size(); ++r)
    for (const Step& st : s.devices[r]) {
      if (st.second) continue;
      const Op& op = st.first;
      const int peer = peerRank(p, op);
      if (peer < 0 || peer == static_cast<int>(r)) continue;
      if (op.kind == OpKind::SendF)
        channels[{static_cast<int>(r), peer}].first.push_back(Op{OpKind::RecvF, op.stage + 1, op.microbatch});
      else if (op.kind == OpKind::SendB)
        channels[{static_cast<int>(r), peer}].first.push_back(Op{OpKind::RecvB, op.stage - 1, op.microbatch});
      else if (op.kind == OpKind::RecvF || op.kind == OpKind::RecvB)
        channels[{peer, static_cast<int>(r)}].second.push_back(op);
    }
  for (const auto& [pair, c] : channels)
    if (c.first != c.second) return false;
  return true;
}

// The order runs to its end under nccl, each action issued alone (as the runtime issues them).
bool runsUnderNccl(const Schedule& s, const DependencyGraph& g, CommExecution* out = nullptr,
                   CommPlan* planOut = nullptr) {
  CommPlan plan = makeCommPlan(s, g, CommOptions{CommSemantics::Nccl, false});
  CommExecution x = executeWithComms(s, g, plan, {});
  const bool ok = x.complete;
  if (out) *out = std::move(x);
  if (planOut) *planOut = std::move(plan);
  return ok;
}

}  // namespace

PS_ENUM_NAME_FUNCTION(RecvPlacement, kRecvPlacementNames, recvPlacementName);
PS_ENUM_FROM_NAME_FUNCTION(RecvPlacement, kRecvPlacementNames, recvPlacementFromName);

Result<Schedule> deferRecvOps(const Schedule& lowered) {
  const Pipeline& p = lowered.pipeline;
  Schedule out = lowered;
  for (size_t r = 0; r < lowered.devices.size(); ++r) {
    std::vector<Step> result;
    result.reserve(lowered.devices[r].size());
    std::vector<Op> held;  // PyTorch's `deferred` dict: in the order the receives were first held
    auto release = [&](std::vector<Op>::iterator it) {
      result.push_back(Step{*it, {}});
      return held.erase(it);
    };
    for (const Step& st : lowered.devices[r]) {
      const Op& a = st.first;
      if (isRecvStep(st)) {
        if (std::find(held.begin(), held.end(), a) == held.end()) held.push_back(a);
        continue;
      }
      if (!st.second && (a.kind == OpKind::SendF || a.kind == OpKind::SendB)) {
        // The rank-parity rule: the lower-ranked side posts its receives from the peer first.
        const int peer = peerRank(p, a);
        if (static_cast<int>(r) < peer)
          for (auto it = held.begin(); it != held.end();)
            it = peerRank(p, *it) == peer ? release(it) : it + 1;
      }
      for (const Op* sub : {&st.first, st.second ? &*st.second : nullptr}) {
        if (!sub) continue;
        OpKind recv;
        if (sub->kind == OpKind::F)
          recv = OpKind::RecvF;
        else if (sub->kind == OpKind::B || sub->kind == OpKind::I)
          recv = OpKind::RecvB;
        else
          continue;
        if (auto it = std::find(held.begin(), held.end(), Op{recv, sub->stage, sub->microbatch});
            it != held.end())
          release(it);
      }
      result.push_back(st);
    }
    if (!held.empty()) {
      std::string left;
      for (const Op& op : held) left += (left.empty() ? "" : ", ") + pytorchActionText(lowered, op);
      return makeError("csv.lowering", "rank " + std::to_string(r) +
                                           ": receives with no compute op consuming them cannot be deferred "
                                           "(PyTorch: \"leftover RECV ops with no consumer found\"): " +
                                           left);
    }
    out.devices[r] = std::move(result);
  }
  return out;
}

Result<Schedule> deferRecvOpsSafe(const Schedule& asap) {
  PS_ASSIGN_OR_RETURN(Schedule pytorch, deferRecvOps(asap));
  {
    DependencyGraph g(pytorch);
    if (receivesInSendOrder(pytorch) && runsUnderNccl(pytorch, g)) return pytorch;
  }
  // Each rank's order as its other steps (the same in both placements) and, per receive, the
  // number of those steps before it (its anchor). Receives at one anchor keep their Asap order,
  // which posts each peer's messages in its send order. A receive only ever moves to an earlier
  // anchor, never before its Asap one, and the Asap order runs under nccl: so the repairs end.
  const Pipeline& p = asap.pipeline;
  const size_t R = asap.devices.size();
  struct Recv {
    Op op;
    int asapAnchor = 0, anchor = 0, order = 0;
  };
  std::vector<std::vector<Step>> others(R);
  std::vector<std::vector<Recv>> recvs(R);  // in Asap order
  for (size_t r = 0; r < R; ++r) {
    for (const Step& st : asap.devices[r]) {
      if (isRecvStep(st))
        recvs[r].push_back(
            {st.first, static_cast<int>(others[r].size()), 0, static_cast<int>(recvs[r].size())});
      else
        others[r].push_back(st);
    }
    int before = 0;
    for (const Step& st : pytorch.devices[r]) {
      if (!isRecvStep(st)) {
        ++before;
        continue;
      }
      for (Recv& rv : recvs[r])
        if (rv.op == st.first) rv.anchor = before;
    }
  }
  // No receive from a peer after one the peer sends later.
  auto keepSendOrder = [&] {
    for (size_t r = 0; r < R; ++r) {
      std::map<int, int> latest;  // per peer: the smallest anchor of the receives after this one
      for (size_t i = recvs[r].size(); i-- > 0;) {
        Recv& rv = recvs[r][i];
        const int peer = peerRank(p, rv.op);
        if (auto it = latest.find(peer); it != latest.end()) rv.anchor = std::min(rv.anchor, it->second);
        latest[peer] = rv.anchor;
      }
    }
  };
  auto build = [&] {
    Schedule out = asap;
    for (size_t r = 0; r < R; ++r) {
      std::vector<Recv> sorted = recvs[r];
      std::stable_sort(sorted.begin(), sorted.end(), [](const Recv& a, const Recv& b) {
        return a.anchor != b.anchor ? a.anchor < b.anchor : a.order < b.order;
      });
      auto& dev = out.devices[r];
      dev.clear();
      size_t k = 0;
      for (size_t i = 0; i <= others[r].size(); ++i) {
        while (k < sorted.size() && sorted[k].anchor == static_cast<int>(i))
          dev.push_back(Step{sorted[k++].op, {}});
        if (i < others[r].size()) dev.push_back(others[r][i]);
      }
    }
    return out;
  };
  keepSendOrder();
  for (;;) {
    Schedule candidate = build();
    DependencyGraph g(candidate);
    CommExecution x;
    CommPlan plan;
    if (runsUnderNccl(candidate, g, &x, &plan)) return candidate;
    const std::vector<CommWaitLink> cycle = findCommWaitCycle(candidate, g, plan, x);
    // The other steps before each step of the candidate, per rank.
    auto anchorOf = [&](int id) {
      const OpRef ref = g.ref(id);
      int before = 0;
      const auto& dev = candidate.devices[static_cast<size_t>(ref.device)];
      for (int k = 0; k < ref.step; ++k) before += isRecvStep(dev[static_cast<size_t>(k)]) ? 0 : 1;
      return before;
    };
    auto find = [&](int id) -> Recv* {
      for (Recv& rv : recvs[static_cast<size_t>(g.deviceOf(id))])
        if (rv.op == g.op(id)) return &rv;
      return nullptr;
    };
    bool moved = false;
    for (size_t k = 0; k < cycle.size() && !moved; ++k) {
      const CommWaitLink& l = cycle[k];
      const CommWaitLink& next = cycle[(k + 1) % cycle.size()];
      // A receive the cycle waits for: queued behind its rank's stream head (before which it
      // goes), or not yet issued by a host stuck at an earlier step (before which it goes).
      for (int id : {l.waitsFor, l.at}) {
        Recv* rv = isPointToPointKind(g.op(id).kind) && !isSend(g.op(id).kind) ? find(id) : nullptr;
        if (!rv || rv->anchor <= rv->asapAnchor) continue;
        int target = rv->anchor - 1;
        if (id == l.waitsFor && l.reason == CommWaitLink::Reason::Behind) target = anchorOf(next.at);
        if (id == l.at && l.reason == CommWaitLink::Reason::NotIssued) target = anchorOf(l.waitsFor);
        rv->anchor = std::max(rv->asapAnchor, std::min(target, rv->anchor - 1));
        moved = true;
        break;
      }
    }
    if (!moved) {
      // Every receive of the cycle is at its Asap place: no placement of the receives helps.
      return makeError("csv.lowering", "the receives cannot be deferred without a hang under nccl: " +
                                           describeWaitCycle(candidate, g, cycle));
    }
    keepSendOrder();
  }
}

bool hasExplicitComms(const Schedule& s) {
  for (const auto& dev : s.devices)
    for (const auto& st : dev) {
      const OpKind k = st.first.kind;
      if (!st.second &&
          (k == OpKind::SendF || k == OpKind::RecvF || k == OpKind::SendB || k == OpKind::RecvB))
        return true;
    }
  return false;
}

std::vector<Step> addReduceGrad(const std::vector<Step>& steps, int microbatches, bool withWait) {
  std::vector<Step> out;
  out.reserve(steps.size() + 4);
  std::vector<int> count;
  for (const Step& st : steps) {
    out.push_back(st);
    for (const Op* op : {&st.first, st.second ? &*st.second : nullptr}) {
      if (!op || (op->kind != OpKind::B && op->kind != OpKind::W) || op->stage < 0) continue;
      if (static_cast<size_t>(op->stage) >= count.size()) count.resize(static_cast<size_t>(op->stage) + 1, 0);
      if (++count[static_cast<size_t>(op->stage)] == microbatches) {
        out.push_back(Step{Op{OpKind::ReduceGrad, op->stage, -1}, {}});
        if (withWait) out.push_back(Step{Op{OpKind::WaitReduceGrad, op->stage, -1}, {}});
      }
    }
  }
  return out;
}

std::vector<Step> addWaitSend(const std::vector<Step>& steps) {
  std::vector<Step> out;
  out.reserve(steps.size() + steps.size() / 4);
  std::vector<Op> pending;  // sends not yet waited for, in posting order
  for (const Step& st : steps) {
    out.push_back(st);
    if (!st.second && (st.first.kind == OpKind::SendF || st.first.kind == OpKind::SendB))
      pending.push_back(st.first);
    for (const Op* op : {&st.first, st.second ? &*st.second : nullptr}) {
      if (!op || (op->kind != OpKind::B && op->kind != OpKind::I)) continue;
      auto it = std::find(pending.begin(), pending.end(), Op{OpKind::SendF, op->stage, op->microbatch});
      if (it == pending.end()) continue;
      out.push_back(Step{Op{OpKind::WaitSendF, op->stage, op->microbatch}, {}});
      pending.erase(it);
    }
  }
  for (const Op& send : pending)
    out.push_back(Step{
        Op{send.kind == OpKind::SendF ? OpKind::WaitSendF : OpKind::WaitSendB, send.stage, send.microbatch},
        {}});
  return out;
}

Result<PytorchTarget> parsePytorchTarget(std::string_view text) {
  PytorchTarget t;
  auto bad = [&] {
    return makeError("pytorch.version",
                     "PyTorch version '" + std::string(text) +
                         "': PipeStudio writes the compute+comms form of PyTorch 2.11 to 2.15 "
                         "(their lowering is checked against each); for another version write "
                         "compute_only, which that PyTorch lowers itself");
  };
  int parts[3] = {0, 0, 0}, n = 0;
  size_t i = 0;
  while (n < 3) {
    if (i >= text.size() || text[i] < '0' || text[i] > '9') return bad();
    long v = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9' && v < 1000) v = v * 10 + (text[i++] - '0');
    parts[n++] = static_cast<int>(v);
    if (i == text.size()) break;
    if (text[i] != '.') return bad();
    ++i;
  }
  if (n < 2 || i != text.size()) return bad();
  t.major = parts[0];
  t.minor = parts[1];
  if (!t.atLeast(2, 11) || t.atLeast(2, 16)) return bad();
  return t;
}

Status checkPytorchHasNoRoutes(const Schedule& s) {
  if (!s.pipeline.routed()) return Unit{};
  return makeError("pytorch.routes",
                   "the schedule has route groups (its micro-batches run different stages: " +
                       std::to_string(s.pipeline.routes.size()) +
                       " routes), which PyTorch's pipelining schedules and CSV cannot express: every "
                       "micro-batch of a PyTorch schedule runs every stage in order. Save it as .pipe");
}

Result<Schedule> lowerToPytorchComms(const Schedule& s, const PytorchTarget& target) {
  PS_TRY(checkPytorchHasNoRoutes(s));
  if (target.recv != RecvPlacement::Asap && !target.atLeast(2, 13))
    return makeError("pytorch.version",
                     "deferred receives (defer_pp_recv) exist from PyTorch 2.13 on, not in " + target.name() +
                         ": write for --pytorch 2.13 or later");
  const Pipeline& p = s.pipeline;
  const int S = p.stages;
  const auto ranks = s.devices.size();
  auto rankOf = [&](int stage) { return stage >= 0 && stage < S ? p.deviceOf(stage) : -1; };

  // Passes 1 and 2, per rank.
  std::vector<std::vector<Step>> todo(ranks);
  for (size_t r = 0; r < ranks; ++r) {
    std::vector<Step> compute;
    for (const Step& st : s.devices[r])
      if (isComputeStep(st)) compute.push_back(st);
    const bool v215 = target.atLeast(2, 15);
    todo[r] = addReduceGrad(addUnshardReshard(compute, v215), p.microbatches, v215);
  }

  // Pass 3: _add_send_recv.
  auto hasComms = [&](const Op& op) {
    if (op.kind == OpKind::F) return op.stage != S - 1 && rankOf(op.stage + 1) != rankOf(op.stage);
    if (op.kind == OpKind::I || op.kind == OpKind::B)
      return op.stage != 0 && rankOf(op.stage - 1) != rankOf(op.stage);
    return false;
  };
  std::vector<std::unordered_set<std::uint64_t>> prev(ranks);
  auto seen = [&](size_t r, const Op& op) { return prev[r].count(key(op)) > 0; };
  auto ready = [&](size_t r, const Op& op) {
    if (op.kind == OpKind::F && op.stage != 0)
      return seen(r, Op{OpKind::RecvF, op.stage, op.microbatch}) ||
             seen(r, Op{OpKind::F, op.stage - 1, op.microbatch});
    if ((op.kind == OpKind::I || op.kind == OpKind::B) && op.stage != S - 1)
      return seen(r, Op{OpKind::RecvB, op.stage, op.microbatch}) ||
             seen(r, Op{OpKind::I, op.stage + 1, op.microbatch}) ||
             seen(r, Op{OpKind::B, op.stage + 1, op.microbatch});
    return true;
  };
  Schedule out = s;
  for (auto& dev : out.devices) dev.clear();
  std::vector<size_t> head(ranks, 0);
  size_t remaining = 0;
  for (const auto& t : todo) remaining += t.size();
  while (remaining > 0) {
    bool progress = false;
    for (size_t r = 0; r < ranks; ++r) {
      if (head[r] >= todo[r].size()) continue;
      const Step& st = todo[r][head[r]];
      if (!ready(r, st.first) || (st.second && !ready(r, *st.second))) continue;
      out.devices[r].push_back(st);
      for (const Op* op : {&st.first, st.second ? &*st.second : nullptr}) {
        if (!op) continue;
        prev[r].insert(key(*op));
        if (!hasComms(*op)) continue;
        const bool fwd = op->kind == OpKind::F;
        const Op send{fwd ? OpKind::SendF : OpKind::SendB, op->stage, op->microbatch};
        const Op recv{fwd ? OpKind::RecvF : OpKind::RecvB, fwd ? op->stage + 1 : op->stage - 1,
                      op->microbatch};
        out.devices[r].push_back(Step{send, {}});
        prev[r].insert(key(send));
        const auto dst = static_cast<size_t>(rankOf(recv.stage));
        out.devices[dst].push_back(Step{recv, {}});
        prev[dst].insert(key(recv));
      }
      ++head[r];
      --remaining;
      progress = true;
    }
    if (!progress) {
      std::string msg =
          "the order cannot be lowered to compute+comms (PyTorch: \"Malformed compute schedule, can't "
          "schedule "
          "sends/recvs\"): no rank can take its next action:";
      for (size_t r = 0; r < ranks; ++r)
        if (head[r] < todo[r].size()) {
          const Step& st = todo[r][head[r]];
          msg += " rank " + std::to_string(r) + " at " + s.opName(st.first);
          if (st.second) msg += "+" + s.opName(*st.second);
          msg += ";";
        }
      msg.pop_back();
      return makeError("csv.lowering", msg);
    }
  }
  if (target.atLeast(2, 15))
    for (auto& dev : out.devices) dev = addWaitSend(dev);
  // PyTorch runs _defer_recv_ops last (after _add_wait_send in 2.15).
  if (target.recv == RecvPlacement::Deferred) return deferRecvOps(out);
  if (target.recv == RecvPlacement::DeferredSafe) return deferRecvOpsSafe(out);
  return out;
}

}  // namespace ps::core
