#include "pipestudio/core/analysis/validator.h"

#include <algorithm>
#include <string>

namespace ps::core {

namespace {

// Kinds whose repetition on a stage is allowed (PyTorch re-shards and re-unshards a stage as
// its lookahead window moves).
bool mayRepeat(OpKind k) { return k == OpKind::Unshard || k == OpKind::Reshard; }

// The graph build looks up a few table cells per op through small lambdas; inlining them
// lets the compiler fold the constant kinds.
#if defined(__GNUC__)
#define PS_GRAPH_INLINE __attribute__((always_inline))
#else
#define PS_GRAPH_INLINE
#endif

}  // namespace

// ---------------------------------------------------------------------------------------------
// DependencyGraph

int DependencyGraph::slotOf(const Op& op) const {
  auto kv = static_cast<size_t>(op.kind);
  if (op.stage < 0 || op.stage >= stages_) return -1;
  if (kv < mbKindIndex_.size() && mbKindIndex_[kv] >= 0) {
    if (op.microbatch < 0 || op.microbatch >= microbatches_) return -1;
    return (mbKindIndex_[kv] * stages_ + op.stage) * microbatches_ + op.microbatch;
  }
  return -1;
}

int DependencyGraph::find(const Op& op) const {
  auto kv = static_cast<size_t>(op.kind);
  if (op.stage < 0 || op.stage >= stages_) return -1;
  if (kv < mbKindIndex_.size() && mbKindIndex_[kv] >= 0) {
    if (op.microbatch < 0 || op.microbatch >= microbatches_) return -1;
    return mbTable_[static_cast<size_t>((mbKindIndex_[kv] * stages_ + op.stage) * microbatches_ + op.microbatch)];
  }
  if (kv < stageKindIndex_.size() && stageKindIndex_[kv] >= 0) {
    if (op.microbatch != -1) return -1;
    return stageTable_[static_cast<size_t>(stageKindIndex_[kv] * stages_ + op.stage)];
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
      return mbTable_[static_cast<size_t>((mbKindIndex_[kv] * stages_ + st) * microbatches_ + mb)];
    }
    if (kv < stageKindIndex_.size() && stageKindIndex_[kv] >= 0) {
      if (mb != -1) return -1;
      return stageTable_[static_cast<size_t>(stageKindIndex_[kv] * stages_ + st)];
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
      if (s > 0) {
        if (int snd = at(OpKind::SendF, s - 1, m); snd >= 0)
          emit(snd);
        else
          need(OpKind::F, s - 1, m);
      }
      break;
    case OpKind::B:
    case OpKind::I: {
      need(OpKind::F, s, m);
      if (int r = at(OpKind::RecvB, s, m); r >= 0) emit(r);
      if (s + 1 < stages_) {
        if (int snd = at(OpKind::SendB, s + 1, m); snd >= 0) {
          emit(snd);
        } else {
          int g = gradOf(s + 1, m);
          if (g >= 0)
            emit(g);
          else
            miss(Op{op.kind, s + 1, m});
        }
      }
      if (int r = at(OpKind::R, s, m); r >= 0) emit(r);
      if (int r = at(OpKind::Reload, s, m); r >= 0) emit(r);
      break;
    }
    case OpKind::W: need(OpKind::I, s, m); break;
    case OpKind::R:
    case OpKind::Offload:
    case OpKind::SendF: need(OpKind::F, s, m); break;
    case OpKind::Reload: need(OpKind::Offload, s, m); break;
    case OpKind::SendB: {
      int g = gradOf(s, m);
      if (g >= 0)
        emit(g);
      else
        miss(Op{OpKind::B, s, m});
      break;
    }
    case OpKind::RecvF:
    case OpKind::RecvB: break;  // posting a receive waits for nothing
    case OpKind::ReduceGrad:
      for (int mb = 0; mb < microbatches_; ++mb) {
        int id = at(OpKind::W, s, mb);
        if (id < 0) id = at(OpKind::B, s, mb);
        if (id >= 0) emit(id);
      }
      break;
    case OpKind::Unshard:
    case OpKind::Reshard:
    default: break;
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

DependencyGraph::DependencyGraph(const Schedule& s) { rebuild(s); }

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
      if (kv < static_cast<size_t>(OpKind::kBuiltinCount)) builtinSeen |= std::uint64_t{1} << kv;
      else if (kindOk(k)) present[kv] = 1;
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
      if (auto k = s.kindFromName(name)) precededBy_[static_cast<size_t>(*k)].push_back(static_cast<OpKind>(kFirstUserKind + u));
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
      cell = &mbTable_[static_cast<size_t>((mbKindIndex_[kv] * stages_ + op.stage) * microbatches_ + op.microbatch)];
    } else {
      if (op.microbatch != -1) {
        problems_.push_back(Problem{ProblemKind::OutOfRange, static_cast<int>(id), -1, {}});
        return;
      }
      cell = &stageTable_[static_cast<size_t>(stageKindIndex_[kv] * stages_ + op.stage)];
    }
    if (*cell >= 0) {
      if (!mayRepeat(op.kind)) problems_.push_back(Problem{ProblemKind::Duplicate, static_cast<int>(id), *cell, {}});
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
        [&](const Op& missing) { problems_.push_back(Problem{ProblemKind::Missing, static_cast<int>(id), -1, missing}); });
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
  return {rdeps_.data() + rdepBegin_[static_cast<size_t>(id)], rdeps_.data() + rdepBegin_[static_cast<size_t>(id) + 1]};
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

// ---------------------------------------------------------------------------------------------
// Validator

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
  void errorLazy(const char* code, MakeMessage&& make, std::vector<OpRef> related = {}) {
    if (count_ >= max_) {
      ++count_;
      return;
    }
    error(code, make(), std::move(related));
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

std::string where(const OpRef& r) { return "device " + std::to_string(r.device) + " step " + std::to_string(r.step); }

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
  std::vector<int> unshardAt(static_cast<size_t>(S), -1);   // the UNSHARD in force, or -1
  std::vector<int> reshardAt(static_cast<size_t>(S), -1);   // the last RESHARD, or -1
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
            rep.error("validate.unshard", where(g.ref(id)) + ": " + name(id) + " unshards stage " +
                                              std::to_string(op.stage) + " again; it is unsharded since " +
                                              where(g.ref(unshardAt[st])) + " with no RESHARD between",
                      {g.ref(id), g.ref(unshardAt[st])});
          else {
            unshardAt[st] = id;
            used[st] = 0;
          }
          break;
        case OpKind::Reshard:
          if (unshardAt[st] < 0) {
            rep.error("validate.reshard", where(g.ref(id)) + ": " + name(id) + " reshards stage " +
                                              std::to_string(op.stage) + ", which is not unsharded here (no " +
                                              s.opName(Op{OpKind::Unshard, op.stage, -1}) + " before it)",
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
            rep.error("validate.sharded", where(g.ref(id)) + ": " + name(id) + " runs after " +
                                              name(reshardAt[st]) + " (" + where(g.ref(reshardAt[st])) +
                                              ") with no new UNSHARD: stage " + std::to_string(op.stage) +
                                              " is sharded here",
                      {g.ref(id), g.ref(reshardAt[st])});
          } else {
            rep.error("validate.sharded", where(g.ref(id)) + ": " + name(id) + " runs before " +
                                              s.opName(Op{OpKind::Unshard, op.stage, -1}) + ": stage " +
                                              std::to_string(op.stage) + " is still sharded here",
                      {g.ref(id)});
          }
          break;
      }
    }
    for (int st = 0; st < S; ++st)
      if (s.pipeline.deviceOf(st) == d && unshardAt[static_cast<size_t>(st)] >= 0 && !used[static_cast<size_t>(st)])
        unused(st, "the end of device " + std::to_string(d) + "'s order");
  }
}

}  // namespace

ValidationReport validateSchedule(const Schedule& s) { return validateSchedule(s, ValidateOptions{}); }

namespace {
ValidationReport validate(const Schedule& s, const ValidateOptions& options, const DependencyGraph* given);
}  // namespace

ValidationReport validateSchedule(const Schedule& s, const ValidateOptions& options) {
  return validate(s, options, nullptr);
}

ValidationReport validateSchedule(const Schedule& s, const ValidateOptions& options, const DependencyGraph& graph) {
  return validate(s, options, &graph);
}

namespace {
ValidationReport validate(const Schedule& s, const ValidateOptions& options, const DependencyGraph* given) {
  ValidationReport report;
  Reporter rep(report, std::max(1, options.maxDiagnostics));
  const Pipeline& p = s.pipeline;

  if (p.devices < 1 || p.stages < 1 || p.microbatches < 1) {
    rep.error("validate.pipeline", "the pipeline needs at least one device, stage and micro-batch (devices " +
                                       std::to_string(p.devices) + ", stages " + std::to_string(p.stages) +
                                       ", micro-batches " + std::to_string(p.microbatches) + ")");
    rep.finish();
    return report;
  }
  if (p.stageToDevice.size() != static_cast<size_t>(p.stages)) {
    rep.error("validate.placement", "the placement lists " + std::to_string(p.stageToDevice.size()) +
                                        " stages but the pipeline has " + std::to_string(p.stages));
    rep.finish();
    return report;
  }
  for (int st = 0; st < p.stages; ++st) {
    int d = p.deviceOf(st);
    if (d < 0 || d >= p.devices) {
      rep.error("validate.placement", "stage " + std::to_string(st) + " is placed on device " + std::to_string(d) +
                                          ", outside 0.." + std::to_string(p.devices - 1));
    }
  }
  if (s.devices.size() != static_cast<size_t>(p.devices))
    rep.error("validate.devices", "the schedule has " + std::to_string(s.devices.size()) +
                                      " device orders but the pipeline has " + std::to_string(p.devices) + " devices");
  if (report.diagnostics.size() > 0) {
    rep.finish();
    return report;
  }

  // Declared kinds' rules must name kinds.
  for (const auto& u : s.userKinds) {
    for (const auto& n : u.after)
      if (!s.kindFromName(n)) rep.error("validate.kind-rule", "kind " + u.name + " must follow unknown kind '" + n + "'");
    for (const auto& n : u.before)
      if (!s.kindFromName(n)) rep.error("validate.kind-rule", "kind " + u.name + " must precede unknown kind '" + n + "'");
  }

  DependencyGraph own;
  if (!given) own.rebuild(s);
  const DependencyGraph& g = given ? *given : own;
  const int nOps = g.size();
  auto name = [&](int id) { return s.opName(g.op(id)); };

  for (const auto& pr : g.problems()) {
    switch (pr.kind) {
      case DependencyGraph::ProblemKind::TooLarge:
        rep.error("validate.size", "the schedule has " + std::to_string(nOps) + " ops, far fewer than the " +
                                       std::to_string(static_cast<long long>(p.stages) * p.microbatches) +
                                       " forwards that " + std::to_string(p.stages) + " stages x " +
                                       std::to_string(p.microbatches) + " micro-batches need");
        rep.finish();
        return report;
      case DependencyGraph::ProblemKind::BadKind:
        rep.error("validate.kind", where(g.ref(pr.op)) + ": op kind #" +
                                       std::to_string(static_cast<int>(g.op(pr.op).kind)) + " is not declared",
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
                  where(g.ref(pr.op)) + ": " + name(pr.op) + " appears twice (first at " + where(g.ref(pr.other)) + ")",
                  {g.ref(pr.op), g.ref(pr.other)});
        break;
      case DependencyGraph::ProblemKind::Missing: {
        // F/B/I/W completeness is reported per (stage, micro-batch) below.
        OpKind mk = pr.missing.kind;
        if (mk == OpKind::F || mk == OpKind::B || mk == OpKind::I || mk == OpKind::W) break;
        std::string miss = pr.missing.stage >= 0 && pr.missing.stage < p.stages ? s.opName(pr.missing)
                                                                                 : s.kindName(mk);
        rep.error("validate.missing",
                  where(g.ref(pr.op)) + ": " + name(pr.op) + " needs " + miss + ", which the schedule does not have",
                  {g.ref(pr.op)});
        break;
      }
    }
  }

  // Placement and pairs.
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
      auto peer = [&](OpKind k, int st) { return st >= 0 && st < p.stages && g.find(Op{k, st, op.microbatch}) >= 0; };
      auto unmatched = [&](OpKind k, int st) {
        rep.error("validate.comm",
                  where(r) + ": " + name(id) + " has no matching " + s.opName(Op{k, st, op.microbatch}), {r});
      };
      if (op.kind == OpKind::SendF) {
        if (op.stage == p.stages - 1)
          rep.error("validate.comm", where(r) + ": " + name(id) + " sends from the last stage, which has no successor", {r});
        else if (!peer(OpKind::RecvF, op.stage + 1))
          unmatched(OpKind::RecvF, op.stage + 1);
      } else if (op.kind == OpKind::RecvF && op.stage > 0 && !peer(OpKind::SendF, op.stage - 1)) {
        unmatched(OpKind::SendF, op.stage - 1);
      } else if (op.kind == OpKind::SendB) {
        if (op.stage == 0)
          rep.error("validate.comm", where(r) + ": " + name(id) + " sends from the first stage, which has no predecessor", {r});
        else if (!peer(OpKind::RecvB, op.stage - 1))
          unmatched(OpKind::RecvB, op.stage - 1);
      } else if (op.kind == OpKind::RecvB && op.stage < p.stages - 1 && !peer(OpKind::SendB, op.stage + 1)) {
        unmatched(OpKind::SendB, op.stage + 1);
      }
    }
    if (op.kind == OpKind::RecvF && op.stage == 0)
      rep.error("validate.comm", where(r) + ": " + name(id) + " receives into the first stage, which has no predecessor", {r});
    if (op.kind == OpKind::RecvB && op.stage == p.stages - 1)
      rep.error("validate.comm", where(r) + ": " + name(id) + " receives into the last stage, which has no successor", {r});
    if (op.kind == OpKind::Offload && g.find(Op{OpKind::Reload, op.stage, op.microbatch}) < 0 &&
        op.stage >= 0 && op.stage < p.stages)
      rep.error("validate.missing",
                where(r) + ": " + name(id) + " is never reloaded (no " +
                    s.opName(Op{OpKind::Reload, op.stage, op.microbatch}) + ")",
                {r});
  }

  // Completeness: one F and one B, or one I and one W, per (stage, micro-batch).
  for (int st = 0; st < p.stages; ++st) {
    for (int m = 0; m < p.microbatches; ++m) {
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
      if (f < 0) rep.errorLazy("validate.missing", [&] { return op(OpKind::F) + " is missing" + onDev(); }, row);
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
              [&] { return op(OpKind::B) + " (or " + op(OpKind::I) + " and " + op(OpKind::W) + ") is missing" + onDev(); },
              row);
        else if (i < 0)
          rep.errorLazy(
              "validate.missing", [&] { return op(OpKind::I) + " is missing" + onDev() + "; " + op(OpKind::W) + " needs it"; },
              {g.ref(w)});
        else if (w < 0)
          rep.errorLazy(
              "validate.missing", [&] { return op(OpKind::W) + " is missing" + onDev() + " after " + op(OpKind::I); },
              {g.ref(i)});
      }
    }
  }

  checkStageActions(s, g, rep);

  // Order and deadlock: run the device orders; a device advances while its next step's
  // dependencies are done, otherwise it waits on the first undone one.
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
        auto id = static_cast<size_t>(first + k);
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
  rep.finish();
  return report;
}
}  // namespace

}  // namespace ps::core
