// Over 800 lines: one Expander class whose statement, expression and op-emission parts share its
// scopes, cursor and output schedule; splitting it would put the whole class in a header.
// Expansion of a parsed .pipe program into the explicit Schedule: header values (with
// overrides), variables, loops, conditionals, templates and per-stage cursors.
#include <charconv>
#include <deque>
#include <limits>
#include <unordered_map>

#include "io/dsl_internal.h"

namespace ps::core::dsl {

namespace {

constexpr int kMaxCallDepth = 64;
constexpr int kMaxBlockDepth = 400;
constexpr std::int64_t kMaxDevices = limits::kMaxDevices;
constexpr std::int64_t kMaxStages = limits::kMaxStages;
constexpr std::int64_t kMaxMicrobatches = limits::kMaxMicrobatches;

// Next micro-batch per (stage, kind): the smallest one not yet emitted.
// Also remembers when each emitted op completes (unit time), for ready() in greedy blocks.
struct Cursor {
  std::vector<std::int64_t> doneAt;  // per micro-batch; -1 = not emitted
  std::int32_t next = 0;
  bool test(std::int32_t m) const {
    return static_cast<size_t>(m) < doneAt.size() && doneAt[static_cast<size_t>(m)] >= 0;
  }
  std::int64_t time(std::int32_t m) const {
    return m >= 0 && static_cast<size_t>(m) < doneAt.size() ? doneAt[static_cast<size_t>(m)] : -1;
  }
  void set(std::int32_t m, std::int64_t when) {
    if (static_cast<size_t>(m) >= doneAt.size()) doneAt.resize(static_cast<size_t>(m) + 1, -1);
    if (doneAt[static_cast<size_t>(m)] < 0) doneAt[static_cast<size_t>(m)] = when;
  }
};

// One per parse: its padding costs nothing worth reordering the members for.
class Expander {  // NOLINT(clang-analyzer-optin.performance.Padding)
 public:
  Expander(const Program& p, std::string_view text, const DslOptions& o, DiagSink& sink)
      : prog_(p), text_(text), opt_(o), sink_(sink) {}

  Schedule run() {
    out_.userKinds = prog_.userKinds;
    checkOverrides();
    exec(prog_.top, true);
    if (!abort_ && !frozen_) freeze(0);
    return std::move(out_);
  }

 private:
  const Program& prog_;
  std::string_view text_;
  const DslOptions& opt_;
  DiagSink& sink_;
  Schedule out_;

  // Header state until the pipeline is frozen (at the first device block).
  std::optional<std::int64_t> devices_, stages_, microbatches_;
  PlacementKind placement_ = PlacementKind::Linear;
  std::vector<int> explicitPlacement_;
  std::uint32_t placementOffset_ = 0;
  std::uint32_t stagesOffset_ = 0;
  bool frozen_ = false;
  std::vector<std::vector<int>> stagesOf_;
  // Route and blocks lines, evaluated when the pipeline is frozen (they may use its sizes).
  std::vector<const Stmt*> routeLines_;
  const Stmt* blocksLine_ = nullptr;
  StageRoutes routes_;  // the frozen pipeline's, for the cursors

  struct Var {
    std::string_view name;
    std::int64_t value;
    bool global;
  };
  std::vector<Var> env_;
  size_t frameBase_ = 0;
  size_t scopeBase_ = 0;
  int curDevice_ = -1;
  int callDepth_ = 0;
  int blockDepth_ = 0;
  long long steps_ = 0;
  long long ops_ = 0;
  bool warnedLarge_ = false;
  long long emitted_ = 0;  // steps emitted through the tracked path (greedy progress)
  bool abort_ = false;
  std::unordered_map<std::uint64_t, Cursor> cursors_;
  std::vector<std::deque<Op>> pendingW_;  // per device: I ops whose W may still be pending
  std::unordered_map<std::uint64_t, std::int64_t> stageCounts_, deviceCounts_;  // emitted ops per kind
  std::int64_t now_ = 0;  // unit-time clock of greedy blocks
  bool inGreedy_ = false;

  // ------------------------------------------------------------------------------------------
  bool err(std::uint32_t off, std::string code, std::string msg, std::string hint = {}) {
    if (!sink_.error(off, std::move(code), std::move(msg), std::move(hint))) abort_ = true;
    return false;
  }
  bool fatal(std::uint32_t off, std::string code, std::string msg) {
    sink_.error(off, std::move(code), std::move(msg));
    abort_ = true;
    return false;
  }

  std::optional<std::int64_t> override(std::string_view name) const {
    auto it = opt_.overrides.find(std::string(name));
    if (it == opt_.overrides.end()) return std::nullopt;
    return static_cast<std::int64_t>(it->second);
  }

  void checkOverrides() {
    for (auto& [name, value] : opt_.overrides) {
      (void)value;
      if (name == "devices" || name == "stages" || name == "microbatches") continue;
      bool found = false;
      for (auto l : prog_.topLets) found = found || l == name;
      if (found) continue;
      std::vector<std::string_view> cands(prog_.topLets.begin(), prog_.topLets.end());
      for (auto w : {"devices", "stages", "microbatches"}) cands.push_back(w);
      std::string message = "--set " + name;
      message += ": the program has no top-level 'let " + name;
      message += "' (only top-level lets, devices, stages and microbatches can be set)";
      if (!sink_.errorNoLocation("dsl.override", message, suggest(name, cands))) abort_ = true;
    }
  }

  bool step(std::uint32_t off) {
    if (++steps_ > opt_.maxSteps)
      return fatal(off, "dsl.limit",
                   "expansion ran more than " + std::to_string(opt_.maxSteps) +
                       " statements and loop iterations (a runaway loop?)");
    return true;
  }

  // ------------------------------------------------------------------------------------------
  // Header

  std::int64_t devicesNow() const {
    if (frozen_) return out_.pipeline.devices;
    return devices_.value_or(1);
  }
  std::int64_t stagesNow() const {
    if (frozen_) return out_.pipeline.stages;
    if (stages_) return *stages_;
    if (placement_ == PlacementKind::Explicit && !explicitPlacement_.empty())
      return static_cast<std::int64_t>(explicitPlacement_.size());
    return devicesNow();
  }
  std::int64_t microbatchesNow() const {
    if (frozen_) return out_.pipeline.microbatches;
    return microbatches_.value_or(1);
  }

  bool freeze(std::uint32_t off) {
    if (frozen_) return true;
    // Sizes given only through overrides still apply.
    if (!devices_)
      if (auto v = override("devices")) devices_ = *v;
    if (!stages_)
      if (auto v = override("stages")) stages_ = *v;
    if (!microbatches_)
      if (auto v = override("microbatches")) microbatches_ = *v;
    auto checkRange = [&](std::int64_t v, std::int64_t hi, const char* what) {
      if (v < 1 || v > hi) {
        fatal(off, "dsl.header",
              std::string(what) + " must be in 1.." + std::to_string(hi) + ", got " + std::to_string(v));
        return false;
      }
      return true;
    };
    std::int64_t D = devicesNow(), S = stagesNow(), M = microbatchesNow();
    frozen_ = true;
    if (!checkRange(D, kMaxDevices, "devices") || !checkRange(S, kMaxStages, "stages") ||
        !checkRange(M, kMaxMicrobatches, "microbatches"))
      return false;
    Result<Pipeline> p = Pipeline();
    if (placement_ == PlacementKind::Explicit) {
      if (stages_ && *stages_ != static_cast<std::int64_t>(explicitPlacement_.size()))
        return fatal(stagesOffset_, "dsl.header",
                     "stages " + std::to_string(*stages_) +
                         " disagrees with the explicit placement, which lists " +
                         std::to_string(explicitPlacement_.size()) + " stages");
      p = Pipeline::makeExplicit(static_cast<int>(D), static_cast<int>(M), explicitPlacement_);
    } else {
      p = Pipeline::make(static_cast<int>(D), static_cast<int>(S), static_cast<int>(M), placement_);
    }
    if (!p.ok()) return fatal(placementOffset_ ? placementOffset_ : off, "dsl.header", p.error().message);
    out_.pipeline = std::move(p.value());
    if (!applyRoutes()) return false;
    routes_ = StageRoutes(out_.pipeline);
    out_.devices.assign(static_cast<size_t>(D), {});
    stagesOf_.assign(static_cast<size_t>(D), {});
    pendingW_.assign(static_cast<size_t>(D), {});
    for (int s = 0; s < out_.pipeline.stages; ++s)
      stagesOf_[static_cast<size_t>(out_.pipeline.deviceOf(s))].push_back(s);
    return true;
  }

  // A route or blocks line's items as integers: expressions and a..b ranges (b excluded).
  // `budget` bounds the integers of all such lines together (a route lists each stage once).
  bool evalItems(const Stmt& s, std::vector<int>& out, std::int64_t& budget) {
    for (const auto& [from, to] : s.items) {
      std::int64_t a = 0, b = 0;
      if (!eval(from, a)) return false;
      if (to < 0)
        b = a + 1;
      else if (!eval(to, b))
        return false;
      if (a < 0 || b > kMaxStages)
        return fatal(s.offset, "dsl.header", "stage " + std::to_string(a < 0 ? a : b) + " is out of range");
      budget -= std::max<std::int64_t>(0, b - a);
      if (budget < 0)
        return fatal(s.offset, "dsl.header",
                     "the route and blocks lines list more stages than the pipeline has");
      for (std::int64_t v = a; v < b; ++v) out.push_back(static_cast<int>(v));
    }
    return true;
  }

  // The route groups and stage blocks of the header, on the frozen pipeline. A problem is
  // reported at the route line it concerns (else the first route or the blocks line).
  bool applyRoutes() {
    if (routeLines_.empty() && !blocksLine_) return true;
    Pipeline p = out_.pipeline;
    std::int64_t budget = static_cast<std::int64_t>(routeLines_.size() + 1) * p.stages;
    for (const Stmt* line : routeLines_) {
      std::int64_t first = 0, end = 0;
      if (!eval(line->e1, first) || !eval(line->e2, end)) return false;
      if (first < 0 || end > kMaxMicrobatches || end <= first)
        return fatal(line->offset, "dsl.header",
                     "route micro-batches " + std::to_string(first) + ".." + std::to_string(end) +
                         " are not a range of micro-batches");
      Route r;
      r.firstMicrobatch = static_cast<int>(first);
      r.microbatchCount = static_cast<int>(end - first);
      if (!evalItems(*line, r.stages, budget)) return false;
      p.routes.push_back(std::move(r));
    }
    if (blocksLine_ && !evalItems(*blocksLine_, p.stageBlock, budget)) return false;
    int route = -1;
    if (auto problem = p.routeProblem(&route)) {
      const Stmt* at = route >= 0             ? routeLines_[static_cast<size_t>(route)]
                       : !routeLines_.empty() ? routeLines_.front()
                                              : blocksLine_;
      return fatal(at ? at->offset : 0, "dsl.header", *problem);
    }
    out_.pipeline = std::move(p);
    return true;
  }

  bool execHeader(const Stmt& s) {
    if (frozen_) return err(s.offset, "dsl.header", "header lines come before the first device block");
    switch (s.header) {
      case HeaderWord::Name:
        out_.name = s.text;
        return true;
      case HeaderWord::Profile:
        out_.profile = s.text;
        return true;
      case HeaderWord::Devices:
      case HeaderWord::Stages:
      case HeaderWord::Microbatches: {
        std::int64_t v = 0;
        if (auto o = override(s.name))
          v = *o;
        else if (!eval(s.e1, v))
          return false;
        if (s.header == HeaderWord::Devices)
          devices_ = v;
        else if (s.header == HeaderWord::Stages)
          stages_ = v, stagesOffset_ = s.offset;
        else
          microbatches_ = v;
        return true;
      }
      case HeaderWord::Placement:
        placement_ = s.placement;
        placementOffset_ = s.offset;
        explicitPlacement_.clear();
        for (size_t i = 0; i < s.ints.size(); ++i) {
          if (s.ints[i] < 0 || s.ints[i] > kMaxDevices)
            return err(s.intOffsets[i], "dsl.header",
                       "device " + std::to_string(s.ints[i]) + " is out of range");
          explicitPlacement_.push_back(static_cast<int>(s.ints[i]));
        }
        return true;
      case HeaderWord::Route:
        routeLines_.push_back(&s);
        return true;
      case HeaderWord::Blocks:
        blocksLine_ = &s;
        return true;
      case HeaderWord::Partition:
        out_.partition.clear();
        for (size_t i = 0; i < s.ints.size(); ++i) {
          if (s.ints[i] < 0 || s.ints[i] > std::numeric_limits<int>::max())
            return err(s.intOffsets[i], "dsl.header",
                       "partition entry " + std::to_string(s.ints[i]) + " is out of range");
          out_.partition.push_back(static_cast<int>(s.ints[i]));
        }
        return true;
    }
    return true;
  }

  // ------------------------------------------------------------------------------------------
  // Variables and expressions

  Var* findVar(std::string_view name) {
    for (size_t i = env_.size(); i-- > frameBase_;)
      if (env_[i].name == name) return &env_[i];
    for (size_t i = 0; i < frameBase_; ++i)
      if (env_[i].global && env_[i].name == name) return &env_[i];
    return nullptr;
  }

  std::vector<std::string_view> visibleNames() const {
    std::vector<std::string_view> v = {"devices", "stages", "microbatches", "d"};
    for (size_t i = 0; i < env_.size(); ++i)
      if (i >= frameBase_ || env_[i].global) v.push_back(env_[i].name);
    return v;
  }

  bool needDevice(std::uint32_t off, std::string_view what) {
    if (curDevice_ >= 0) return true;
    return err(off, "dsl.context",
               std::string(what) + " needs a current device (use it inside 'device N { ... }')");
  }

  // The device a placement query is about: argument `index` of `v` when given, otherwise the
  // current device (`what` names the call for the error); checked to be in range.
  bool deviceArg(std::uint32_t off, const std::vector<std::int64_t>& v, size_t index, std::string_view what,
                 std::string_view name, std::int64_t& dev) {
    dev = curDevice_;
    if (v.size() > index)
      dev = v[index];
    else if (!needDevice(off, what))
      return false;
    if (dev < 0 || dev >= out_.pipeline.devices)
      return err(off, "dsl.range",
                 std::string(name) + ": device " + std::to_string(dev) + " is out of range");
    return true;
  }

  bool eval(std::int32_t idx, std::int64_t& out) {
    if (idx < 0) return false;
    const Expr& e = prog_.exprs[static_cast<size_t>(idx)];
    std::int64_t a = 0, b = 0;
    switch (e.op) {
      case ExprOp::Int:
        out = e.value;
        return true;
      case ExprOp::Var: {
        if (e.name == "d") {
          if (!needDevice(e.offset, "'d'")) return false;
          out = curDevice_;
          return true;
        }
        if (e.name == "devices") return out = devicesNow(), true;
        if (e.name == "stages") return out = stagesNow(), true;
        if (e.name == "microbatches") return out = microbatchesNow(), true;
        if (Var* v = findVar(e.name)) return out = v->value, true;
        return err(e.offset, "dsl.unknown-name", "unknown variable '" + std::string(e.name) + "'",
                   suggest(e.name, visibleNames()));
      }
      case ExprOp::Neg:
        if (!eval(e.a, a)) return false;
        if (a == std::numeric_limits<std::int64_t>::min())
          return err(e.offset, "dsl.overflow", "integer overflow");
        out = -a;
        return true;
      case ExprOp::Not:
        if (!eval(e.a, a)) return false;
        out = a == 0;
        return true;
      case ExprOp::And:
        if (!eval(e.a, a)) return false;
        if (a == 0) return out = 0, true;
        if (!eval(e.b, b)) return false;
        out = b != 0;
        return true;
      case ExprOp::Or:
        if (!eval(e.a, a)) return false;
        if (a != 0) return out = 1, true;
        if (!eval(e.b, b)) return false;
        out = b != 0;
        return true;
      case ExprOp::Call:
        return call(e, out);
      case ExprOp::Ready:
      case ExprOp::Count:
        return query(e, out);
      default:
        break;
    }
    if (!eval(e.a, a) || !eval(e.b, b)) return false;
    switch (e.op) {
      case ExprOp::Add:
        if (__builtin_add_overflow(a, b, &out))
          return err(e.offset, "dsl.overflow", "integer overflow in '+'");
        return true;
      case ExprOp::Sub:
        if (__builtin_sub_overflow(a, b, &out))
          return err(e.offset, "dsl.overflow", "integer overflow in '-'");
        return true;
      case ExprOp::Mul:
        if (__builtin_mul_overflow(a, b, &out))
          return err(e.offset, "dsl.overflow", "integer overflow in '*'");
        return true;
      case ExprOp::Div:
      case ExprOp::Mod:
        if (b == 0)
          return err(e.offset, "dsl.div-zero", e.op == ExprOp::Div ? "division by zero" : "modulo by zero");
        if (a == std::numeric_limits<std::int64_t>::min() && b == -1)
          return err(e.offset, "dsl.overflow", "integer overflow in division");
        out = e.op == ExprOp::Div ? a / b : a % b;
        return true;
      case ExprOp::Eq:
        out = a == b;
        return true;
      case ExprOp::Ne:
        out = a != b;
        return true;
      case ExprOp::Lt:
        out = a < b;
        return true;
      case ExprOp::Le:
        out = a <= b;
        return true;
      case ExprOp::Gt:
        out = a > b;
        return true;
      case ExprOp::Ge:
        out = a >= b;
        return true;
      default:
        return err(e.offset, "dsl.internal", "unknown expression");
    }
  }

  bool doneBy(std::int32_t stage, OpKind kind, std::int32_t mb) {
    if (stage < 0 || stage >= out_.pipeline.stages) return false;
    std::int64_t t = cursor(stage, static_cast<std::uint16_t>(kind)).time(mb);
    return t >= 0 && t <= now_;
  }

  // ready(K): the op `next K` would emit exists and its dependencies have completed by now
  // (unit time inside greedy blocks). count(K): K ops emitted on this device (or the stage).
  bool query(const Expr& e, std::int64_t& out) {
    if (!freeze(e.offset)) return false;
    std::string fname = e.op == ExprOp::Ready ? "ready()" : "count()";
    if (!needDevice(e.offset, fname)) return false;
    OpItem it;
    it.kind = e.kind;
    it.qualMode = e.qualMode;
    it.qual = e.qual;
    it.offset = e.offset;
    const auto& st = stagesOf_[static_cast<size_t>(curDevice_)];
    const bool anyStage = e.qualMode == QualMode::None && st.size() != 1;
    std::int32_t stage = -1;
    if (!anyStage && !resolveStage(it, stage)) return false;
    if (e.op == ExprOp::Count) {
      out = anyStage ? deviceCounts_[key(curDevice_, e.kind)] : stageCounts_[key(stage, e.kind)];
      return true;
    }
    const auto kind = static_cast<OpKind>(e.kind);
    const int M = out_.pipeline.microbatches;
    if (kind == OpKind::W) {
      auto& q = pendingW_[static_cast<size_t>(curDevice_)];
      out = 0;
      for (const Op& i : q) {
        if ((!anyStage && i.stage != stage) || cursor(i.stage, e.kind).test(i.microbatch)) continue;
        out = doneBy(i.stage, OpKind::I, i.microbatch);
        break;
      }
      return true;
    }
    if (anyStage)
      return err(e.offset, "dsl.stage",
                 fname + ": device " + std::to_string(curDevice_) +
                     " holds several stages; name one (e.g. ready(" + kindName(e.kind) + "@c0))");
    if (stage >= out_.pipeline.stages) return err(e.offset, "dsl.range", fname + ": stage out of range");
    if (isStageLevelKind(kind) ||
        (isUserKind(kind) && out_.userKind(kind) && out_.userKind(kind)->stageLevel)) {
      out = stageCounts_[key(stage, e.kind)] == 0;
      return true;
    }
    Cursor& c = cursor(stage, e.kind);
    skipDone(c, stage);
    const std::int32_t m = c.next;
    if (m >= M) return out = 0, true;
    switch (kind) {
      case OpKind::F:
        out = routes_.prev(stage, m) < 0 || doneBy(routes_.prev(stage, m), OpKind::F, m);
        break;
      case OpKind::B:
      case OpKind::I:
        out = doneBy(stage, OpKind::F, m) &&
              (routes_.next(stage, m) < 0 || doneBy(routes_.next(stage, m), OpKind::B, m));
        break;
      case OpKind::R:
        out = doneBy(stage, OpKind::F, m);
        break;
      default:
        out = 1;
        break;
    }
    return true;
  }

  bool call(const Expr& e, std::int64_t& out) {
    std::vector<std::int64_t> v(e.args.size());
    for (size_t i = 0; i < e.args.size(); ++i)
      if (!eval(e.args[i], v[i])) return false;
    auto arity = [&](size_t lo, size_t hi) {
      if (v.size() >= lo && v.size() <= hi) return true;
      std::string want = lo == hi         ? std::to_string(lo)
                         : hi == SIZE_MAX ? "at least " + std::to_string(lo)
                                          : std::to_string(lo) + " or " + std::to_string(hi);
      err(e.offset, "dsl.arity",
          std::string(e.name) + "() takes " + want + " argument" + (lo == 1 && hi == 1 ? "" : "s") +
              ", got " + std::to_string(v.size()));
      return false;
    };
    if (e.name == "min" || e.name == "max") {
      if (!arity(1, SIZE_MAX)) return false;
      out = v[0];
      for (auto x : v) out = e.name == "min" ? std::min(out, x) : std::max(out, x);
      return true;
    }
    if (e.name == "abs") {
      if (!arity(1, 1)) return false;
      if (v[0] == std::numeric_limits<std::int64_t>::min())
        return err(e.offset, "dsl.overflow", "integer overflow in abs()");
      out = v[0] < 0 ? -v[0] : v[0];
      return true;
    }
    // Placement queries need the pipeline.
    if (!freeze(e.offset)) return false;
    if (e.name == "stage") {  // stage(c): the c-th stage (ascending) on the current device
      std::int64_t dev = 0;
      if (!arity(1, 2) || !deviceArg(e.offset, v, 1, "stage(c)", "stage()", dev)) return false;
      auto& st = stagesOf_[static_cast<size_t>(dev)];
      if (v[0] < 0 || v[0] >= static_cast<std::int64_t>(st.size()))
        return err(e.offset, "dsl.range",
                   "stage(" + std::to_string(v[0]) + "): device " + std::to_string(dev) + " holds " +
                       std::to_string(st.size()) + " stage" + (st.size() == 1 ? "" : "s"));
      out = st[static_cast<size_t>(v[0])];
      return true;
    }
    if (e.name == "nstages") {  // stages on the current (or given) device
      std::int64_t dev = 0;
      if (!arity(0, 1) || !deviceArg(e.offset, v, 0, "nstages()", "nstages()", dev)) return false;
      out = static_cast<std::int64_t>(stagesOf_[static_cast<size_t>(dev)].size());
      return true;
    }
    if (e.name == "device_of" || e.name == "chunk_of") {
      if (!arity(1, 1)) return false;
      if (v[0] < 0 || v[0] >= out_.pipeline.stages)
        return err(e.offset, "dsl.range",
                   std::string(e.name) + "(" + std::to_string(v[0]) + "): stage out of range 0.." +
                       std::to_string(out_.pipeline.stages - 1));
      int s = static_cast<int>(v[0]);
      int dev = out_.pipeline.deviceOf(s);
      if (e.name == "device_of") {
        out = dev;
      } else {
        auto& st = stagesOf_[static_cast<size_t>(dev)];
        out = std::find(st.begin(), st.end(), s) - st.begin();
      }
      return true;
    }
    return err(e.offset, "dsl.unknown-name", "unknown function '" + std::string(e.name) + "'");
  }

  // ------------------------------------------------------------------------------------------
  // Ops

  std::string kindName(std::uint16_t k) const { return out_.kindName(static_cast<OpKind>(k)); }

  bool resolveStage(const OpItem& it, std::int32_t& stage) {
    const auto& st = stagesOf_[static_cast<size_t>(curDevice_)];
    switch (it.qualMode) {
      case QualMode::None:
        if (st.size() == 1) {
          stage = st[0];
          return true;
        }
        if (st.empty())
          return err(it.offset, "dsl.stage", "device " + std::to_string(curDevice_) + " holds no stage");
        {
          std::string list;
          for (size_t i = 0; i < st.size() && i < 8; ++i) list += (i ? ", " : "") + std::to_string(st[i]);
          if (st.size() > 8) list += ", ...";
          return err(it.offset, "dsl.stage",
                     "device " + std::to_string(curDevice_) + " holds stages " + list +
                         ": name the stage of " + kindName(it.kind) + " (e.g. " + kindName(it.kind) + "0@s" +
                         std::to_string(st[0]) + " or @c0 for the device's first stage)");
        }
      case QualMode::StageLiteral:
        stage = it.qual;
        return true;
      case QualMode::StageExpr:
      case QualMode::ChunkExpr:
      case QualMode::ChunkLiteral: {
        std::int64_t v = it.qual;
        if (it.qualMode != QualMode::ChunkLiteral && !eval(it.qual, v)) return false;
        if (it.qualMode == QualMode::StageExpr) {
          if (v < 0 || v > std::numeric_limits<std::int32_t>::max())
            return err(it.offset, "dsl.range", "stage " + std::to_string(v) + " is out of range");
          stage = static_cast<std::int32_t>(v);
          return true;
        }
        if (v < 0 || v >= static_cast<std::int64_t>(st.size()))
          return err(it.offset, "dsl.range",
                     "chunk " + std::to_string(v) + " of device " + std::to_string(curDevice_) +
                         ": the device holds " + std::to_string(st.size()) + " stage" +
                         (st.size() == 1 ? "" : "s"));
        stage = st[static_cast<size_t>(v)];
        return true;
      }
    }
    return false;
  }

  // B and I share one cursor: a micro-batch's backward is either B or I (+ W).
  static std::uint16_t cursorFamily(std::uint16_t kind) {
    return kind == static_cast<std::uint16_t>(OpKind::I) ? static_cast<std::uint16_t>(OpKind::B) : kind;
  }
  // Moves a cursor past the micro-batches that have their op, and past those whose route does
  // not run the stage.
  void skipDone(Cursor& c, std::int32_t stage) const {
    while (c.next < out_.pipeline.microbatches && (c.test(c.next) || !routes_.runs(stage, c.next))) ++c.next;
  }

  Cursor& cursor(std::int32_t stage, std::uint16_t kind) {
    return cursors_[(static_cast<std::uint64_t>(static_cast<std::uint32_t>(stage)) << 16) |
                    cursorFamily(kind)];
  }

  // Records an emitted op for `next`: marks its micro-batch, and an I makes its W pending.
  static std::uint64_t key(std::int64_t a, std::uint16_t kind) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 16) | kind;
  }
  void track(const Op& op) {
    auto k = static_cast<std::uint16_t>(op.kind);
    ++stageCounts_[key(op.stage, k)];
    ++deviceCounts_[key(curDevice_, k)];
    if (op.microbatch < 0 || op.microbatch >= out_.pipeline.microbatches || op.stage < 0) return;
    cursor(op.stage, k).set(op.microbatch, inGreedy_ ? now_ + 1 : now_);
    if (op.kind == OpKind::I) pendingW_[static_cast<size_t>(curDevice_)].push_back(op);
  }

  enum class Res { Error, Ok, Skip };

  // `next W`: the W of the oldest I on this device (and stage, when one is named) whose W has
  // not run yet.
  Res nextWeight(const OpItem& it, Op& op, bool anyStage) {
    auto& q = pendingW_[static_cast<size_t>(curDevice_)];
    auto done = [&](const Op& i) {
      return cursor(i.stage, static_cast<std::uint16_t>(OpKind::W)).test(i.microbatch);
    };
    while (!q.empty() && done(q.front())) q.pop_front();
    for (auto itq = q.begin(); itq != q.end(); ++itq) {
      if ((anyStage || itq->stage == op.stage) && !done(*itq)) {
        op.stage = itq->stage;
        op.microbatch = itq->microbatch;
        q.erase(itq);
        return Res::Ok;
      }
    }
    if (it.optional) return Res::Skip;
    std::string where =
        "device " + std::to_string(curDevice_) + (anyStage ? "" : ", stage " + std::to_string(op.stage));
    err(it.offset, "dsl.cursor", "next W on " + where + ": no I is waiting for its W",
        "W follows the I of the same micro-batch; use next? W to emit it only when one is waiting");
    return Res::Error;
  }

  Res resolve(const OpItem& it, Op& op) {
    op.kind = static_cast<OpKind>(it.kind);
    const bool isW = op.kind == OpKind::W;
    const bool anyStageW = isW && it.mbMode == MbMode::Next && it.qualMode == QualMode::None &&
                           stagesOf_[static_cast<size_t>(curDevice_)].size() > 1;
    if (!anyStageW && !resolveStage(it, op.stage)) return Res::Error;
    switch (it.mbMode) {
      case MbMode::None:
        op.microbatch = -1;
        return Res::Ok;
      case MbMode::Literal:
        op.microbatch = it.mb;
        break;
      case MbMode::Expr: {
        std::int64_t v = 0;
        if (!eval(it.mb, v)) return Res::Error;
        if (v < 0 || v > std::numeric_limits<std::int32_t>::max()) {
          err(it.offset, "dsl.range",
              kindName(it.kind) + ": micro-batch " + std::to_string(v) + " is out of range");
          return Res::Error;
        }
        op.microbatch = static_cast<std::int32_t>(v);
        break;
      }
      case MbMode::Next: {
        if (!anyStageW && op.stage >= out_.pipeline.stages) {
          err(it.offset, "dsl.range",
              "next " + kindName(it.kind) + ": stage " + std::to_string(op.stage) + " is out of range");
          return Res::Error;
        }
        if (isW) {
          Res r = nextWeight(it, op, anyStageW);
          if (r != Res::Ok) return r;
          break;
        }
        Cursor& c = cursor(op.stage, it.kind);
        skipDone(c, op.stage);
        if (c.next >= out_.pipeline.microbatches) {
          if (it.optional) return Res::Skip;
          err(it.offset, "dsl.cursor",
              "next " + kindName(it.kind) + " on device " + std::to_string(curDevice_) + ", stage " +
                  std::to_string(op.stage) +
                  (routes_.routed()
                       ? std::string(": every micro-batch whose route runs the stage")
                       : ": all " + std::to_string(out_.pipeline.microbatches) + " micro-batches") +
                  " already " + (routes_.routed() ? "has its " : "have their ") +
                  (it.kind == static_cast<std::uint16_t>(OpKind::I) ||
                           it.kind == static_cast<std::uint16_t>(OpKind::B)
                       ? std::string("B or I")
                       : kindName(it.kind)),
              "use next? to emit nothing once every micro-batch is done");
          return Res::Error;
        }
        op.microbatch = c.next;
        break;
      }
    }
    if (prog_.usesCursors) track(op);
    return Res::Ok;
  }

  bool execOps(const Stmt& s) {
    if (curDevice_ < 0)
      return err(s.offset, "dsl.context",
                 "ops belong to a device: write them after 'device N:' or inside 'device N { }'");
    auto& list = out_.devices[static_cast<size_t>(curDevice_)];
    const auto& ops = s.ops;
    ops_ += static_cast<long long>(ops.size());
    if (!warnedLarge_ && ops_ > opt_.largeOps && opt_.onLargeExpansion) {
      warnedLarge_ = true;
      opt_.onLargeExpansion(makeWarning("dsl.large",
                                        "the program expands to more than " + std::to_string(opt_.largeOps) +
                                            " ops (expansion stops at " + std::to_string(opt_.maxOps) +
                                            "); expanding and simulating this many takes a while",
                                        sink_.location(s.offset)));
    }
    if (ops_ > opt_.maxOps)
      return fatal(s.offset, "dsl.limit",
                   "the expanded schedule has more than " + std::to_string(opt_.maxOps) + " ops");
    const auto& st = stagesOf_[static_cast<size_t>(curDevice_)];
    const std::int32_t onlyStage = st.size() == 1 ? st[0] : -1;
    const bool tracking = prog_.usesCursors;
    if (list.empty()) list.reserve(ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      const OpItem& it = ops[i];
      Step step;
      // The explicit form's common case: F3 on a one-stage device.
      if (it.mbMode == MbMode::Literal && it.qualMode == QualMode::None && onlyStage >= 0 && !it.pairFirst &&
          !tracking) {
        step.first.kind = static_cast<OpKind>(it.kind);
        step.first.stage = onlyStage;
        step.first.microbatch = it.mb;
        list.push_back(step);
        continue;
      }
      Res a = resolve(it, step.first);
      if (it.pairFirst && i + 1 < ops.size()) {
        Op second;
        Res b = resolve(ops[++i], second);
        if (a == Res::Ok && b == Res::Ok)
          step.second = second;
        else if (a == Res::Skip && b == Res::Ok)
          step.first = second, a = Res::Ok;  // one half left
        else if (b == Res::Error)
          a = Res::Error;
      }
      if (a == Res::Ok) {
        list.push_back(step);
        ++emitted_;
      }
      if (abort_) return false;
    }
    return true;
  }

  // ------------------------------------------------------------------------------------------
  // Statements

  struct ScopeGuard {
    Expander& x;
    size_t savedSize, savedScope;
    explicit ScopeGuard(Expander& e) : x(e), savedSize(e.env_.size()), savedScope(e.scopeBase_) {
      e.scopeBase_ = e.env_.size();
    }
    ~ScopeGuard() {
      x.env_.resize(savedSize);
      x.scopeBase_ = savedScope;
    }
  };

  bool execBlock(const std::vector<Stmt>& body, std::uint32_t off) {
    if (blockDepth_ >= kMaxBlockDepth)
      return fatal(off, "dsl.limit", "blocks nested too deeply while expanding");
    ++blockDepth_;
    ScopeGuard g(*this);
    bool r = exec(body, false);
    --blockDepth_;
    return r;
  }

  bool bindNew(std::string_view name, std::int64_t value, bool global, std::uint32_t off) {
    for (size_t i = scopeBase_; i < env_.size(); ++i)
      if (env_[i].name == name)
        return err(off, "dsl.redefined", "'" + std::string(name) + "' is already defined here");
    env_.push_back({name, value, global});
    return true;
  }

  bool deviceIndex(std::int32_t e, std::uint32_t off, int& dev) {
    std::int64_t v = 0;
    if (!eval(e, v)) return false;
    if (v < 0 || v >= out_.pipeline.devices)
      return err(
          off, "dsl.range",
          "device " + std::to_string(v) + " is out of range 0.." + std::to_string(out_.pipeline.devices - 1));
    dev = static_cast<int>(v);
    return true;
  }

  // Returns false only when expansion must stop.
  bool exec(const std::vector<Stmt>& stmts, bool topLevel) {
    for (const Stmt& s : stmts) {
      if (abort_) return false;
      if (!step(s.offset)) return false;
      switch (s.kind) {
        case StmtKind::Header:
          execHeader(s);
          break;
        case StmtKind::Let: {
          std::int64_t v = 0;
          std::optional<std::int64_t> o = topLevel ? override(s.name) : std::nullopt;
          if (o)
            v = *o;
          else if (!eval(s.e1, v))
            break;
          bindNew(s.name, v, topLevel, s.offset);
          break;
        }
        case StmtKind::Assign: {
          Var* var = findVar(s.name);
          if (!var) {
            err(s.offset, "dsl.unknown-name",
                "assignment to undefined variable '" + std::string(s.name) + "' (declare it with 'let')",
                suggest(s.name, visibleNames()));
            break;
          }
          std::int64_t v = 0;
          if (eval(s.e1, v)) var->value = v;
          break;
        }
        case StmtKind::Device: {
          if (!freeze(s.offset)) return false;
          int dev = 0;
          if (!deviceIndex(s.e1, s.offset, dev)) break;
          int saved = curDevice_;
          curDevice_ = dev;
          execBlock(s.body, s.offset);
          curDevice_ = saved;
          break;
        }
        case StmtKind::DeviceAll: {
          if (!freeze(s.offset)) return false;
          int saved = curDevice_;
          for (int dev = 0; dev < out_.pipeline.devices && !abort_; ++dev) {
            curDevice_ = dev;
            execBlock(s.body, s.offset);
          }
          curDevice_ = saved;
          break;
        }
        case StmtKind::Ops:
          execOps(s);
          break;
        case StmtKind::For: {
          std::int64_t from = 0, to = 0, by = 1;
          if (!eval(s.e1, from) || !eval(s.e2, to)) break;
          if (s.e3 >= 0) {
            if (!eval(s.e3, by)) break;
            if (by == 0) {
              err(s.offset, "dsl.range", "a for loop's step cannot be 0");
              break;
            }
          }
          for (std::int64_t i = from; by > 0 ? i < to : i > to;) {
            if (abort_ || !step(s.offset)) return false;
            {
              ScopeGuard g(*this);
              env_.push_back({s.name, i, false});
              if (blockDepth_ >= kMaxBlockDepth)
                return fatal(s.offset, "dsl.limit", "blocks nested too deeply");
              ++blockDepth_;
              exec(s.body, false);
              --blockDepth_;
            }
            if (__builtin_add_overflow(i, by, &i)) break;
          }
          break;
        }
        case StmtKind::Repeat: {
          std::int64_t n = 0;
          if (!eval(s.e1, n)) break;
          for (std::int64_t i = 0; i < n; ++i) {
            if (abort_ || !step(s.offset)) return false;
            execBlock(s.body, s.offset);
          }
          break;
        }
        case StmtKind::If: {
          std::int64_t c = 0;
          if (!eval(s.e1, c)) break;
          if (c != 0)
            execBlock(s.body, s.offset);
          else if (!s.elseBody.empty())
            execBlock(s.elseBody, s.offset);
          break;
        }
        case StmtKind::Call:
          execCall(s);
          break;
        case StmtKind::Greedy: {
          if (!freeze(s.offset)) return false;
          int saved = curDevice_;
          bool savedGreedy = inGreedy_;
          inGreedy_ = true;
          // Unit-time steps: every device runs the body once per step; an op emitted at
          // step t completes at t + 1. Stops at the first step in which nothing is emitted.
          for (;;) {
            long long before = emitted_;
            for (int dev = 0; dev < out_.pipeline.devices && !abort_; ++dev) {
              curDevice_ = dev;
              execBlock(s.body, s.offset);
            }
            ++now_;
            if (abort_ || emitted_ == before || !step(s.offset)) break;
          }
          inGreedy_ = savedGreedy;
          curDevice_ = saved;
          break;
        }
        case StmtKind::Assert: {
          std::int64_t c = 0;
          if (eval(s.e1, c) && c == 0) err(s.offset, "dsl.assert", s.text);
          break;
        }
      }
    }
    return !abort_;
  }

  void execCall(const Stmt& s) {
    const Template* t = nullptr;
    for (auto& tp : prog_.templates)
      if (tp.name == s.name) t = &tp;
    if (!t) {
      std::vector<std::string_view> names;
      for (auto& tp : prog_.templates) names.push_back(tp.name);
      err(s.offset, "dsl.unknown-name", "unknown template '" + std::string(s.name) + "'",
          suggest(s.name, names));
      return;
    }
    if (t->params.size() != s.args.size()) {
      err(s.offset, "dsl.arity",
          "template " + std::string(t->name) + " takes " + std::to_string(t->params.size()) + " argument" +
              (t->params.size() == 1 ? "" : "s") + ", got " + std::to_string(s.args.size()));
      return;
    }
    if (callDepth_ >= kMaxCallDepth) {
      fatal(s.offset, "dsl.recursion",
            "templates call each other more than " + std::to_string(kMaxCallDepth) +
                " deep (endless recursion?)");
      return;
    }
    std::vector<std::int64_t> vals(s.args.size());
    for (size_t i = 0; i < s.args.size(); ++i)
      if (!eval(s.args[i], vals[i])) return;
    size_t savedFrame = frameBase_, savedScope = scopeBase_, savedSize = env_.size();
    frameBase_ = scopeBase_ = env_.size();
    for (size_t i = 0; i < vals.size(); ++i) env_.push_back({t->params[i], vals[i], false});
    ++callDepth_;
    ++blockDepth_;
    if (blockDepth_ < kMaxBlockDepth)
      exec(t->body, false);
    else
      fatal(s.offset, "dsl.limit", "blocks nested too deeply while expanding");
    --blockDepth_;
    --callDepth_;
    env_.resize(savedSize);
    frameBase_ = savedFrame;
    scopeBase_ = savedScope;
  }
};

}  // namespace

Schedule expandProgram(const Program& program, std::string_view text, const DslOptions& options,
                       DiagSink& sink) {
  Expander x(program, text, options, sink);
  return x.run();
}

}  // namespace ps::core::dsl

namespace ps::core {

Result<Schedule> parseDsl(std::string_view text, const DslOptions& options) {
  try {
    if (text.size() >= 0x7fffffffu) {
      SourceLocation loc;
      loc.file = options.filename;
      return makeError("dsl.limit", "input is larger than 2 GiB", loc);
    }
    dsl::DiagSink sink(text, options);
    dsl::Program prog = dsl::parseProgram(text, sink);
    if (sink.any()) return sink.take();
    Schedule s = dsl::expandProgram(prog, text, options, sink);
    if (sink.any()) return sink.take();
    return s;
  } catch (const std::bad_alloc&) {
    SourceLocation loc;
    loc.file = options.filename;
    return makeError("dsl.limit", "out of memory while reading the schedule", loc);
  } catch (const std::exception& e) {
    SourceLocation loc;
    loc.file = options.filename;
    return makeError("dsl.internal", std::string("internal error: ") + e.what(), loc);
  }
}

Status parseOverride(std::string_view a, DslOptions& options) {
  auto eq = a.find('=');
  if (eq == std::string_view::npos || eq == 0)
    return makeError("dsl.override", "expected name=value, got '" + std::string(a) + "'");
  std::string_view name = a.substr(0, eq), val = a.substr(eq + 1);
  long long v = 0;
  auto r = std::from_chars(val.data(), val.data() + val.size(), v);
  if (val.empty() || r.ec != std::errc() || r.ptr != val.data() + val.size())
    return makeError("dsl.override",
                     "value of " + std::string(name) + " must be an integer, got '" + std::string(val) + "'");
  options.overrides[std::string(name)] = v;
  return okStatus();
}

}  // namespace ps::core
