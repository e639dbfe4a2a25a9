// The dependency graph: dense op ids and their dependencies by the rules of dependency_graph.h.
#include "pipestudio/core/analysis/dependency_graph.h"

#include <algorithm>
#include <string>

namespace ps::core {

namespace {

// Kinds whose repetition on a stage is allowed (PyTorch re-shards and re-unshards a stage as
// its lookahead window moves).
bool mayRepeat(OpKind k) {
  return k == OpKind::Unshard || k == OpKind::Reshard;
}

// The cell of (kind, stage, micro-batch) in a kinds x stages x micro-batches table (a stage-level
// table: one micro-batch), all in size_t: the product can pass INT_MAX before the bounds check
// on the table's size. Callers have checked every index is in range.
size_t tableCell(int kindIndex, int stages, int stage, int microbatches = 1, int microbatch = 0) {
  return (static_cast<size_t>(kindIndex) * static_cast<size_t>(stages) + static_cast<size_t>(stage)) *
             static_cast<size_t>(microbatches) +
         static_cast<size_t>(microbatch);
}

// The graph build looks up a few table cells per op through small lambdas; inlining them
// lets the compiler fold the constant kinds.
#if defined(__GNUC__)
#define PS_GRAPH_INLINE __attribute__((always_inline))
#else
#define PS_GRAPH_INLINE
#endif

}  // namespace

int DependencyGraph::find(const Op& op) const {
  auto kv = static_cast<size_t>(op.kind);
  if (op.stage < 0 || op.stage >= stages_) return -1;
  if (kv < mbKindIndex_.size() && mbKindIndex_[kv] >= 0) {
    if (op.microbatch < 0 || op.microbatch >= microbatches_) return -1;
    return mbTable_[tableCell(mbKindIndex_[kv], stages_, op.stage, microbatches_, op.microbatch)];
  }
  if (kv < stageKindIndex_.size() && stageKindIndex_[kv] >= 0) {
    if (op.microbatch != -1) return -1;
    return stageTable_[tableCell(stageKindIndex_[kv], stages_, op.stage)];
  }
  return -1;
}

int DependencyGraph::idAt(OpRef r) const {
  if (r.device < 0 || r.device >= devices() || r.step < 0) return -1;
  // Steps map to ids monotonically; pairs take two ids, so search.
  int lo = deviceBegin(r.device), hi = deviceBegin(r.device + 1);
  auto first = refs_.begin() + lo, last = refs_.begin() + hi;
  auto it = std::lower_bound(first, last, r.step, [](const OpRef& a, int step) { return a.step < step; });
  if (it == last || it->step != r.step) return -1;
  return static_cast<int>(it - refs_.begin());
}

template <typename Emit, typename Miss>
void DependencyGraph::forEachDependency(const Op& op, Emit&& emit, Miss&& miss) const {
  const int s = op.stage, m = op.microbatch;
  // find(), inlined: the graph build makes several lookups per op, most for absent kinds.
  auto at = [&](OpKind k, int st, int mb) PS_GRAPH_INLINE -> int {
    const auto kv = static_cast<size_t>(k);
    if (st < 0 || st >= stages_) return -1;
    if (kv < mbKindIndex_.size() && mbKindIndex_[kv] >= 0) {
      if (mb < 0 || mb >= microbatches_) return -1;
      return mbTable_[tableCell(mbKindIndex_[kv], stages_, st, microbatches_, mb)];
    }
    if (kv < stageKindIndex_.size() && stageKindIndex_[kv] >= 0) {
      if (mb != -1) return -1;
      return stageTable_[tableCell(stageKindIndex_[kv], stages_, st)];
    }
    return -1;
  };
  auto need = [&](OpKind k, int st, int mb) PS_GRAPH_INLINE {
    int id = at(k, st, mb);
    if (id >= 0)
      emit(id);
    else
      miss(Op{k, st, mb});
  };
  auto gradOf = [&](int st, int mb) PS_GRAPH_INLINE {
    int id = at(OpKind::I, st, mb);
    return id >= 0 ? id : at(OpKind::B, st, mb);
  };
  const bool perMb = m >= 0;
  switch (op.kind) {
    // PyTorch's runtime posts a RECV without waiting (_batch_p2p) and waits for its data at
    // the compute action that consumes it (_wait_batch_p2p): the consumer follows its posted
    // RECV on its own device and the data itself, i.e. the peer's SEND (or, without one, the
    // producing op).
    case OpKind::F:
      if (int r = at(OpKind::RecvF, s, m); r >= 0) emit(r);
      if (const int up = routes_.prev(s, m); up >= 0) {
        if (int snd = at(OpKind::SendF, up, m); snd >= 0)
          emit(snd);
        else
          need(OpKind::F, up, m);
      }
      break;
    case OpKind::B:
    case OpKind::I: {
      need(OpKind::F, s, m);
      if (int r = at(OpKind::RecvB, s, m); r >= 0) emit(r);
      if (const int down = routes_.next(s, m); down >= 0) {
        if (int snd = at(OpKind::SendB, down, m); snd >= 0) {
          emit(snd);
        } else {
          int g = gradOf(down, m);
          if (g >= 0)
            emit(g);
          else
            miss(Op{op.kind, down, m});
        }
      }
      if (int r = at(OpKind::R, s, m); r >= 0) emit(r);
      if (int r = at(OpKind::Reload, s, m); r >= 0) emit(r);
      break;
    }
    case OpKind::W:
      need(OpKind::I, s, m);
      break;
    case OpKind::R:
    case OpKind::Offload:
    case OpKind::SendF:
      need(OpKind::F, s, m);
      break;
    case OpKind::Reload:
      need(OpKind::Offload, s, m);
      break;
    case OpKind::SendB: {
      int g = gradOf(s, m);
      if (g >= 0)
        emit(g);
      else
        miss(Op{OpKind::B, s, m});
      break;
    }
    case OpKind::RecvF:
    case OpKind::RecvB:
      break;  // posting a receive waits for nothing
    case OpKind::WaitSendF:
      need(OpKind::SendF, s, m);
      break;
    case OpKind::WaitSendB:
      need(OpKind::SendB, s, m);
      break;
    case OpKind::WaitReduceGrad:
      need(OpKind::ReduceGrad, s, -1);
      break;
    case OpKind::ReduceGrad:
      for (int mb = 0; mb < microbatches_; ++mb) {
        int id = at(OpKind::W, s, mb);
        if (id < 0) id = at(OpKind::B, s, mb);
        if (id >= 0) emit(id);
      }
      break;
    case OpKind::Unshard:
    case OpKind::Reshard:
    default:
      break;
  }
  // Relates op to every present op of kind k on its stage (and micro-batch when both are
  // per micro-batch). Returns how many it found.
  auto relate = [&](OpKind k) {
    auto kv = static_cast<size_t>(k);
    bool kPerMb = kv < mbKindIndex_.size() && mbKindIndex_[kv] >= 0;
    bool kStage = kv < stageKindIndex_.size() && stageKindIndex_[kv] >= 0;
    int found = 0;
    if (kStage) {
      if (int id = at(k, s, -1); id >= 0) {
        emit(id);
        ++found;
      }
    } else if (kPerMb) {
      if (perMb) {
        if (int id = at(k, s, m); id >= 0) {
          emit(id);
          ++found;
        }
      } else {
        for (int mb = 0; mb < microbatches_; ++mb)
          if (int id = at(k, s, mb); id >= 0) {
            emit(id);
            ++found;
          }
      }
    }
    return found;
  };
  if (isUserKind(op.kind)) {
    size_t u = static_cast<size_t>(op.kind) - kFirstUserKind;
    if (u < afterKinds_.size())
      for (OpKind k : afterKinds_[u])
        if (relate(k) == 0) miss(Op{k, s, isStageLevelKind(k) ? -1 : (perMb ? m : 0)});
  }
  if (auto kv = static_cast<size_t>(op.kind); kv < precededBy_.size())
    for (OpKind x : precededBy_[kv]) relate(x);
}

DependencyGraph::DependencyGraph(const Schedule& s) {
  rebuild(s);
}

void DependencyGraph::rebuild(const Schedule& s) {
  // Clear instead of reallocating: a caller that rebuilds for every simulation keeps its
  // (large) buffers mapped.
  deviceBegin_.clear();
  depBegin_.clear();
  deps_.clear();
  rdepBegin_.clear();
  rdeps_.clear();
  for (auto& v : precededBy_) v.clear();
  for (auto& v : afterKinds_) v.clear();
  problems_.clear();
  schedule_ = &s;
  stages_ = s.pipeline.stages;
  microbatches_ = s.pipeline.microbatches;
  routes_ = StageRoutes(s.pipeline);
  const size_t kindValues = kFirstUserKind + s.userKinds.size();
  const size_t nDev = s.devices.size();

  std::vector<std::uint8_t> present(kindValues, 0);
  auto kindOk = [&](OpKind k) {
    auto kv = static_cast<size_t>(k);
    return kv < static_cast<size_t>(OpKind::kBuiltinCount) || (kv >= kFirstUserKind && kv < kindValues);
  };
  // First pass: the op count and the kinds that occur (built-in kinds as a bit set, so the
  // common case writes no table per op). The kinds fix the tables' layout, so the second pass
  // can copy and index each op in one go.
  size_t nOps = 0;
  {
    std::uint64_t builtinSeen = 0;
    static_assert(static_cast<size_t>(OpKind::kBuiltinCount) <= 64);
    auto see = [&](OpKind k) {
      auto kv = static_cast<size_t>(k);
      if (kv < static_cast<size_t>(OpKind::kBuiltinCount))
        builtinSeen |= std::uint64_t{1} << kv;
      else if (kindOk(k))
        present[kv] = 1;
    };
    for (const auto& dev : s.devices)
      for (const auto& st : dev) {
        see(st.first.kind);
        ++nOps;
        if (st.second) {
          see(st.second->kind);
          ++nOps;
        }
      }
    for (size_t kv = 0; kv < static_cast<size_t>(OpKind::kBuiltinCount) && kv < kindValues; ++kv)
      if (builtinSeen >> kv & 1) present[kv] = 1;
  }
  // ops_, refs_ and pairSecond_ are resized and overwritten below (no clearing pass when the
  // size does not change, as in a drag loop).
  ops_.resize(nOps);
  refs_.resize(nOps);
  pairSecond_.resize(nOps);
  deviceBegin_.reserve(nDev + 1);

  // Which kinds are per micro-batch and which per stage.
  mbKindIndex_.assign(kindValues, -1);
  stageKindIndex_.assign(kindValues, -1);
  auto stageLevel = [&](size_t kv) {
    if (kv >= kFirstUserKind) return s.userKinds[kv - kFirstUserKind].stageLevel;
    return isStageLevelKind(static_cast<OpKind>(kv));
  };
  int nMb = 0, nStage = 0;
  for (size_t kv = 0; kv < kindValues; ++kv) {
    if (!present[kv]) continue;
    if (stageLevel(kv))
      stageKindIndex_[kv] = nStage++;
    else
      mbKindIndex_[kv] = nMb++;
  }

  // User kinds' rules, resolved to kind values.
  afterKinds_.resize(s.userKinds.size());
  precededBy_.resize(kindValues);
  for (size_t u = 0; u < s.userKinds.size(); ++u) {
    for (const auto& name : s.userKinds[u].after)
      if (auto k = s.kindFromName(name)) afterKinds_[u].push_back(*k);
    for (const auto& name : s.userKinds[u].before)
      if (auto k = s.kindFromName(name))
        precededBy_[static_cast<size_t>(*k)].push_back(static_cast<OpKind>(kFirstUserKind + u));
  }

  // Copies the ops in id order (device by device, step by step, pairs first then second),
  // calling index(id, op) on each.
  auto copyOps = [&](auto&& index) {
    Op* ops = ops_.data();
    OpRef* refs = refs_.data();
    std::uint8_t* second = pairSecond_.data();
    size_t id = 0;
    for (size_t d = 0; d < nDev; ++d) {
      deviceBegin_.push_back(static_cast<int>(id));
      const auto& dev = s.devices[d];
      for (size_t i = 0; i < dev.size(); ++i) {
        const Step& st = dev[i];
        const OpRef r{static_cast<int>(d), static_cast<int>(i)};
        ops[id] = st.first;
        refs[id] = r;
        second[id] = 0;
        index(id++, st.first);
        if (st.second) {
          ops[id] = *st.second;
          refs[id] = r;
          second[id] = 1;
          index(id++, *st.second);
        }
      }
    }
    deviceBegin_.push_back(static_cast<int>(id));
  };

  const long long cells = static_cast<long long>(std::max(stages_, 0)) * std::max(microbatches_, 0);
  if (stages_ < 1 || microbatches_ < 1 || cells > 2LL * static_cast<long long>(nOps) + 4096 ||
      cells * nMb > (1LL << 31) - 1) {
    copyOps([](size_t, const Op&) {});
    problems_.push_back(Problem{ProblemKind::TooLarge, -1, -1, {}});
    mbKindIndex_.assign(kindValues, -1);
    stageKindIndex_.assign(kindValues, -1);
    depBegin_.assign(nOps + 1, 0);
    mbTable_.clear();
    stageTable_.clear();
    schedule_ = nullptr;
    return;
  }
  mbTable_.assign(static_cast<size_t>(cells * nMb), -1);
  stageTable_.assign(static_cast<size_t>(stages_) * static_cast<size_t>(nStage), -1);

  std::vector<std::uint8_t>& indexed = indexed_;
  indexed.resize(nOps);  // every entry is written below
  copyOps([&](size_t id, const Op& op) PS_GRAPH_INLINE {
    indexed[id] = 0;
    if (!kindOk(op.kind)) {
      problems_.push_back(Problem{ProblemKind::BadKind, static_cast<int>(id), -1, {}});
      return;
    }
    auto kv = static_cast<size_t>(op.kind);
    if (op.stage < 0 || op.stage >= stages_) {
      problems_.push_back(Problem{ProblemKind::OutOfRange, static_cast<int>(id), -1, {}});
      return;
    }
    int* cell = nullptr;
    if (mbKindIndex_[kv] >= 0) {
      if (op.microbatch < 0 || op.microbatch >= microbatches_) {
        problems_.push_back(Problem{ProblemKind::OutOfRange, static_cast<int>(id), -1, {}});
        return;
      }
      cell = &mbTable_[tableCell(mbKindIndex_[kv], stages_, op.stage, microbatches_, op.microbatch)];
    } else {
      if (op.microbatch != -1) {
        problems_.push_back(Problem{ProblemKind::OutOfRange, static_cast<int>(id), -1, {}});
        return;
      }
      cell = &stageTable_[tableCell(stageKindIndex_[kv], stages_, op.stage)];
    }
    if (*cell >= 0) {
      if (!mayRepeat(op.kind))
        problems_.push_back(Problem{ProblemKind::Duplicate, static_cast<int>(id), *cell, {}});
      // Repeats of UNSHARD/RESHARD are indexed by their first occurrence.
      indexed[id] = mayRepeat(op.kind) ? 1 : 0;
      return;
    }
    *cell = static_cast<int>(id);
    indexed[id] = 1;
  });

  depBegin_.resize(nOps + 1);
  deps_.reserve(nOps * 2);
  for (size_t id = 0; id < nOps; ++id) {
    depBegin_[id] = static_cast<int>(deps_.size());
    if (!indexed[id]) continue;
    forEachDependency(
        ops_[id], [&](int dep) { deps_.push_back(dep); },
        [&](const Op& missing) {
          problems_.push_back(Problem{ProblemKind::Missing, static_cast<int>(id), -1, missing});
        });
  }
  depBegin_[nOps] = static_cast<int>(deps_.size());
  schedule_ = nullptr;
}

std::span<const int> DependencyGraph::dependents(int id) const {
  if (rdepBegin_.empty()) {
    const size_t n = ops_.size();
    rdepBegin_.assign(n + 1, 0);
    for (int d : deps_) ++rdepBegin_[static_cast<size_t>(d) + 1];
    for (size_t i = 0; i < n; ++i) rdepBegin_[i + 1] += rdepBegin_[i];
    rdeps_.resize(deps_.size());
    std::vector<int> fill(rdepBegin_.begin(), rdepBegin_.end() - 1);
    for (size_t i = 0; i < n; ++i)
      for (int k = depBegin_[i]; k < depBegin_[i + 1]; ++k) {
        int d = deps_[static_cast<size_t>(k)];
        rdeps_[static_cast<size_t>(fill[static_cast<size_t>(d)]++)] = static_cast<int>(i);
      }
  }
  return {rdeps_.data() + rdepBegin_[static_cast<size_t>(id)],
          rdeps_.data() + rdepBegin_[static_cast<size_t>(id) + 1]};
}

std::vector<int> DependencyGraph::dependenciesFor(const Op& op, std::vector<Op>* missing) const {
  std::vector<int> out;
  if (op.stage < 0 || op.stage >= stages_) return out;
  forEachDependency(
      op, [&](int id) { out.push_back(id); },
      [&](const Op& m) {
        if (missing) missing->push_back(m);
      });
  return out;
}

std::vector<Op> dependenciesOf(const Schedule& s, const Op& op) {
  DependencyGraph g(s);
  std::vector<Op> out;
  for (int id : g.dependenciesFor(op)) out.push_back(g.op(id));
  return out;
}

}  // namespace ps::core
