#include "pipestudio/core/simulator.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <queue>
#include <string>

#include "pipestudio/core/validator.h"

namespace ps::core {

// ---------------------------------------------------------------------------------------------
// Duration expressions of user kinds: a tiny recursive-descent evaluator.
namespace {

class ExprEval {
 public:
  ExprEval(std::string_view text, const StageCost& c) : t_(text), c_(c) {}

  Result<double> run() {
    skip();
    if (pos_ >= t_.size()) return 0.0;  // no expression: takes no time
    double v = sum();
    skip();
    if (!err_.empty()) return fail();
    if (pos_ < t_.size()) {
      err_ = "unexpected '" + std::string(1, t_[pos_]) + "'";
      return fail();
    }
    return v;
  }

 private:
  Diagnostic fail() const {
    return makeError("simulate.duration", "duration expression '" + std::string(t_) + "': " + err_ + " at column " +
                                              std::to_string(errPos_ + 1));
  }
  void skip() {
    while (pos_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[pos_]))) ++pos_;
  }
  void setErr(std::string e) {
    if (err_.empty()) {
      err_ = std::move(e);
      errPos_ = pos_;
    }
  }
  double sum() {
    double v = product();
    for (;;) {
      skip();
      if (pos_ < t_.size() && (t_[pos_] == '+' || t_[pos_] == '-')) {
        char op = t_[pos_++];
        double r = product();
        v = op == '+' ? v + r : v - r;
      } else {
        return v;
      }
    }
  }
  double product() {
    double v = unary();
    for (;;) {
      skip();
      if (pos_ < t_.size() && (t_[pos_] == '*' || t_[pos_] == '/')) {
        char op = t_[pos_++];
        double r = unary();
        if (op == '*') {
          v *= r;
        } else if (r == 0) {
          setErr("division by zero");
          v = 0;
        } else {
          v /= r;
        }
      } else {
        return v;
      }
    }
  }
  double unary() {
    skip();
    if (pos_ < t_.size() && t_[pos_] == '-') {
      ++pos_;
      return -unary();
    }
    if (pos_ < t_.size() && t_[pos_] == '+') {
      ++pos_;
      return unary();
    }
    return primary();
  }
  double primary() {
    skip();
    if (pos_ >= t_.size()) {
      setErr("expected a number, F, B, I, W, R or '('");
      return 0;
    }
    char ch = t_[pos_];
    if (ch == '(') {
      ++pos_;
      double v = sum();
      skip();
      if (pos_ < t_.size() && t_[pos_] == ')') ++pos_;
      else setErr("expected ')'");
      return v;
    }
    if (std::isdigit(static_cast<unsigned char>(ch)) || ch == '.') {
      std::string num;
      while (pos_ < t_.size() && (std::isdigit(static_cast<unsigned char>(t_[pos_])) || t_[pos_] == '.' ||
                                  t_[pos_] == 'e' || t_[pos_] == 'E' ||
                                  ((t_[pos_] == '-' || t_[pos_] == '+') && !num.empty() &&
                                   (num.back() == 'e' || num.back() == 'E'))))
        num += t_[pos_++];
      char* end = nullptr;
      double v = std::strtod(num.c_str(), &end);
      if (end != num.c_str() + num.size()) setErr("bad number '" + num + "'");
      return v;
    }
    if (std::isalpha(static_cast<unsigned char>(ch)) || ch == '_') {
      size_t b = pos_;
      while (pos_ < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[pos_])) || t_[pos_] == '_')) ++pos_;
      std::string_view id = t_.substr(b, pos_ - b);
      if (id == "F") return c_.F;
      if (id == "B") return c_.B;
      if (id == "I") return c_.I;
      if (id == "W") return c_.W;
      if (id == "R") return c_.R;
      pos_ = b;
      setErr("unknown name '" + std::string(id) + "' (expected F, B, I, W or R)");
      pos_ = t_.size();
      return 0;
    }
    setErr("unexpected '" + std::string(1, ch) + "'");
    pos_ = t_.size();
    return 0;
  }

  std::string_view t_;
  const StageCost& c_;
  size_t pos_ = 0;
  std::string err_;
  size_t errPos_ = 0;
};

}  // namespace

Result<double> evaluateDurationExpression(std::string_view expr, const StageCost& stage) {
  return ExprEval(expr, stage).run();
}

Result<SimulationModel> makeSimulationModel(const Schedule& s, const CostProfile& p,
                                            const std::vector<int>& layersPerStage) {
  const std::vector<int>& part = layersPerStage.empty() ? s.partition : layersPerStage;
  auto costs = stageCosts(p, s.pipeline.stages, part);
  if (!costs) return costs.errors();
  SimulationModel m;
  m.profile = p;
  m.stages = std::move(*costs);
  return m;
}

// ---------------------------------------------------------------------------------------------
// The simulation: flat arrays, op ids precomputed once per call, a worklist of devices.
namespace {

constexpr int kNone = -1;

// One entry of a device's order, with everything the hot loop touches in one place.
// Kept small (48 bytes): a million-op simulation streams these records several times.
struct StepRec {
  double dur = 0, ready = 0, start = 0;  // ends at start + dur
  int device = 0;
  int firstOp = 0;  // DependencyGraph op id of its first op
  int pending = 0;  // dependencies not yet scheduled
  int edgeBegin = 0, edgeEnd = 0;  // its successors in Compiled::edges
  std::uint8_t ops = 1;
  std::uint8_t copy = 0;  // runs on the copy stream
};

// A dependency from a producer step to a consumer step.
struct Edge {
  int consumerStep = 0;
  std::uint8_t producerSlot = 0, consumerSlot = 0;  // which op of each step (0, or 1 in a pair)
  double cost = 0;  // transfer time when the two steps are on different devices
};

// The schedule flattened for the hot loop. Op ids are the DependencyGraph's: device by
// device, step by step, both ops of a pair in order, so steps are contiguous per device.
struct Compiled {
  int D = 0, S = 0, M = 0;
  DependencyGraph g;
  std::vector<StepRec> steps;
  std::vector<int> opStep;
  std::vector<int> devBegin;  // steps of device d: [devBegin[d], devBegin[d + 1])
  std::vector<Edge> edges;
  std::vector<char> recomputed;  // per (stage, mb): the schedule has its R
  std::vector<int> count;
  // Memory sweep state.
  std::vector<std::int64_t> stash, offloaded;
  std::vector<int> live;

  const Op& op(int id) const { return g.op(id); }
};

// Scratch reused by successive calls on one thread (the GUI re-simulates on every drag
// step): large buffers stay mapped instead of being faulted in again each time.
Compiled& scratch() {
  thread_local Compiled c;
  return c;
}

Status compile(const Schedule& s, const SimulationModel& model, Compiled& c) {
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
  c.g = DependencyGraph(s);
  const DependencyGraph& g = c.g;
  for (const auto& pr : g.problems()) {
    using PK = DependencyGraph::ProblemKind;
    if (pr.kind == PK::TooLarge)
      return makeError("simulate.size", "the schedule has far fewer ops than its " + std::to_string(c.S) +
                                            " stages x " + std::to_string(c.M) + " micro-batches need");
    if (pr.kind == PK::BadKind || pr.kind == PK::OutOfRange) {
      OpRef r = g.ref(pr.op);
      Diagnostic e = makeError("simulate.op", "device " + std::to_string(r.device) + " step " + std::to_string(r.step) +
                                                  ": " + s.opName(g.op(pr.op)) +
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
    for (int st = 0; st < c.S; ++st) {
      auto v = evaluateDurationExpression(s.userKinds[u].durationExpr, model.stages[static_cast<size_t>(st)]);
      if (!v) {
        Diagnostic e = v.error();
        e.message = "kind " + s.userKinds[u].name + ": " + e.message;
        return e;
      }
      userDur[u * static_cast<size_t>(c.S) + static_cast<size_t>(st)] = std::max(0.0, *v);
    }
  }
  c.recomputed.assign(SM, 0);
  for (size_t i = 0; i < nOps; ++i) {
    const Op& op = g.op(static_cast<int>(i));
    if (op.kind == OpKind::R && op.microbatch >= 0)
      c.recomputed[static_cast<size_t>(op.stage) * static_cast<size_t>(c.M) + static_cast<size_t>(op.microbatch)] = 1;
  }
  // F, B, I, W, R per stage in one table: the common case is one load.
  std::vector<double> kindDur(5 * static_cast<size_t>(c.S));
  for (int st = 0; st < c.S; ++st) {
    const StageCost& sc = model.stages[static_cast<size_t>(st)];
    const double v[5] = {sc.F, sc.B, sc.I, sc.W, sc.R};
    for (int k = 0; k < 5; ++k) kindDur[static_cast<size_t>(k) * static_cast<size_t>(c.S) + static_cast<size_t>(st)] = v[k];
  }
  auto opDuration = [&](int id) -> double {
    const Op& op = g.op(id);
    if (static_cast<std::uint16_t>(op.kind) <= static_cast<std::uint16_t>(OpKind::R))
      return kindDur[static_cast<size_t>(op.kind) * static_cast<size_t>(c.S) + static_cast<size_t>(op.stage)];
    const StageCost& sc = model.stages[static_cast<size_t>(op.stage)];
    switch (op.kind) {
      case OpKind::F: return sc.F;
      case OpKind::B: return sc.B;
      case OpKind::I: return sc.I;
      case OpKind::W: return sc.W;
      case OpKind::R: return sc.R;
      case OpKind::Offload:
      case OpKind::Reload: {
        if (prof.hostBandwidthBytesPerMs <= 0 || op.microbatch < 0) return 0.0;
        bool rec = c.recomputed[static_cast<size_t>(op.stage) * static_cast<size_t>(c.M) + static_cast<size_t>(op.microbatch)];
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
  c.steps.assign(nSteps, StepRec{});
  c.opStep.resize(nOps);
  c.devBegin.clear();
  int opId = 0, stepId = 0;
  for (int d = 0; d < c.D; ++d) {
    c.devBegin.push_back(stepId);
    const auto& dev = s.devices[static_cast<size_t>(d)];
    for (size_t i = 0; i < dev.size(); ++i, ++stepId) {
      StepRec& r = c.steps[static_cast<size_t>(stepId)];
      r.device = d;
      r.firstOp = opId;
      r.ops = dev[i].overlapped() ? 2 : 1;
      r.copy = r.ops == 1 && runsOnCopyStream(dev[i].first.kind);
      r.dur = opDuration(opId);
      if (r.ops == 2) r.dur = prof.overlapFactor * (r.dur + opDuration(opId + 1));
      for (int k = 0; k < r.ops; ++k) c.opStep[static_cast<size_t>(opId++)] = stepId;
    }
  }
  c.devBegin.push_back(stepId);

  // Successor edges by producer step (dependencies inside an overlapped pair do not delay it).
  std::vector<int>& count = c.count;
  count.assign(nSteps + 1, 0);
  for (size_t st = 0; st < nSteps; ++st) {
    StepRec& r = c.steps[st];
    for (int op = r.firstOp; op < r.firstOp + r.ops; ++op)
      for (int dep : g.dependencies(op)) {
        const int ds = c.opStep[static_cast<size_t>(dep)];
        if (ds == static_cast<int>(st)) continue;
        ++r.pending;
        ++count[static_cast<size_t>(ds) + 1];
      }
  }
  for (size_t i = 0; i < nSteps; ++i) count[i + 1] += count[i];
  for (size_t i = 0; i < nSteps; ++i) {
    c.steps[i].edgeBegin = count[i];
    c.steps[i].edgeEnd = count[i];  // advanced while filling
  }
  c.edges.resize(static_cast<size_t>(count[nSteps]));
  const bool fixedComm = prof.fixedCommMs.has_value();
  for (size_t st = 0; st < nSteps; ++st) {
    const StepRec& r = c.steps[st];
    for (int op = r.firstOp; op < r.firstOp + r.ops; ++op)
      for (int dep : g.dependencies(op)) {
        const int ds = c.opStep[static_cast<size_t>(dep)];
        if (ds == static_cast<int>(st)) continue;
        StepRec& prod = c.steps[static_cast<size_t>(ds)];
        Edge& e = c.edges[static_cast<size_t>(prod.edgeEnd++)];
        e.consumerStep = static_cast<int>(st);
        e.producerSlot = static_cast<std::uint8_t>(dep - prod.firstOp);
        e.consumerSlot = static_cast<std::uint8_t>(op - r.firstOp);
        if (prod.device != r.device) {
          // What travels is the output of the lower stage (activations forward, their
          // gradients backward).
          const int low = std::min(g.op(dep).stage, g.op(op).stage);
          const auto bytes = static_cast<double>(model.stages[static_cast<size_t>(low)].outputBytes);
          e.cost = fixedComm ? *prof.fixedCommMs
                             : prof.link.latencyMs +
                                   (prof.link.bandwidthBytesPerMs > 0 ? bytes / prof.link.bandwidthBytesPerMs : 0.0);
        }
      }
  }
  return okStatus();
}

std::string formatMs(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g ms", v);
  return buf;
}

std::string formatBytes(std::int64_t b) {
  char buf[64];
  double v = static_cast<double>(b);
  if (std::llabs(b) >= (1LL << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", v / (1LL << 30));
  else if (std::llabs(b) >= (1LL << 20)) std::snprintf(buf, sizeof buf, "%.2f MiB", v / (1LL << 20));
  else std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  return buf;
}

}  // namespace

Result<Timeline> simulate(const Schedule& s, const SimulationModel& model, const SimulationOptions& o) {
  Compiled& c = scratch();
  if (auto st = compile(s, model, c); !st) return st.errors();
  const CostProfile& prof = model.profile;
  const size_t D = static_cast<size_t>(c.D);
  const size_t M = static_cast<size_t>(c.M);
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
  std::vector<int> work;
  std::vector<char> queued(D, 1);
  work.reserve(D);
  for (int d = c.D - 1; d >= 0; --d) work.push_back(d);
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
      if (r.copy) {
        double& cf = copyFree[static_cast<size_t>(d)];
        r.start = std::max({free, r.ready, cf});
        cf = r.start + r.dur;
      } else {
        r.start = std::max(free, r.ready);
        free = r.start + r.dur;
      }
      const double end = r.start + r.dur;
      for (int k = r.edgeBegin; k < r.edgeEnd; ++k) {
        const Edge& e = c.edges[static_cast<size_t>(k)];
        StepRec& cons = steps[static_cast<size_t>(e.consumerStep)];
        double arrival = end;
        if (cons.device != d && e.cost > 0) {
          double& ch = channelFree[static_cast<size_t>(d) * D + static_cast<size_t>(cons.device)];
          const double ts = std::max(end, ch);
          ch = ts + e.cost;
          arrival = ch;
          if (o.recordTransfers) {
            const Op& prod = c.op(r.firstOp + e.producerSlot);
            const Op& con = c.op(cons.firstOp + e.consumerSlot);
            const std::int64_t bytes = model.stages[static_cast<size_t>(std::min(prod.stage, con.stage))].outputBytes;
            tl.transfers.push_back(Transfer{d, cons.device, prod, con, bytes, ts, arrival});
          }
        }
        if (arrival > cons.ready) cons.ready = arrival;
        if (--cons.pending == 0 && cons.device != d && head[static_cast<size_t>(cons.device)] == e.consumerStep &&
            !queued[static_cast<size_t>(cons.device)]) {
          queued[static_cast<size_t>(cons.device)] = 1;
          work.push_back(cons.device);
        }
      }
    }
    head[static_cast<size_t>(d)] = h;
    devFree[static_cast<size_t>(d)] = free;
  }
  // Transfers stay in the order they were scheduled: per link direction, in time order.

  bool stalled = false;
  for (int d = 0; d < c.D; ++d)
    if (head[static_cast<size_t>(d)] < c.devBegin[static_cast<size_t>(d) + 1]) stalled = true;

  // --- Ops of the timeline, sorted by (device, start), and per-device busy / span.
  size_t done = static_cast<size_t>(c.g.size());
  if (stalled) {
    done = 0;
    for (int d = 0; d < c.D; ++d)
      for (int h = c.devBegin[static_cast<size_t>(d)]; h < head[static_cast<size_t>(d)]; ++h)
        done += steps[static_cast<size_t>(h)].ops;
  }
  std::vector<char> hasCopy(D, 0);
  tl.ops.reserve(done);
  TimelineMetrics& m = tl.metrics;
  m.devices.resize(D);
  double first = std::numeric_limits<double>::infinity(), last = -first, busySum = 0;
  for (int d = 0; d < c.D; ++d) {
    DeviceMetrics& dm = m.devices[static_cast<size_t>(d)];
    dm.device = d;
    const size_t segBegin = tl.ops.size();
    bool anyCopy = false;
    const int b = c.devBegin[static_cast<size_t>(d)], e = head[static_cast<size_t>(d)];
    double lo = std::numeric_limits<double>::infinity(), hi = -lo, busy = 0;
    for (int h = b; h < e; ++h) {
      const StepRec& r = steps[static_cast<size_t>(h)];
      const bool pair = r.ops == 2;
      for (int op = r.firstOp; op < r.firstOp + r.ops; ++op)
        tl.ops.push_back(TimelineOp{d, h - b, c.op(op), pair, r.start, r.start + r.dur});
      lo = std::min(lo, r.start);
      hi = std::max(hi, r.start + r.dur);
      if (r.copy) anyCopy = true;
      else busy += r.dur;
    }
    dm.busy = busy;
    if (e > b) {
      dm.start = lo;
      dm.end = hi;
      first = std::min(first, lo);
      last = std::max(last, hi);
    }
    hasCopy[static_cast<size_t>(d)] = anyCopy;
    if (anyCopy)
      std::stable_sort(tl.ops.begin() + static_cast<std::ptrdiff_t>(segBegin), tl.ops.end(),
                       [](const TimelineOp& x, const TimelineOp& y) { return x.start < y.start; });
    busySum += dm.busy;
    m.lowerBound = std::max(m.lowerBound, dm.busy);
  }
  m.ops = done;
  if (last >= first) {
    m.makespan = last - first;
    if (m.makespan > 0) {
      m.bubbleRatio = 1.0 - busySum / (static_cast<double>(D) * m.makespan);
      m.efficiency = m.lowerBound / m.makespan;
    }
  }

  // --- Memory: walk each device's compute stream and copy stream in time order (each is
  // ordered by itself), frees before allocations at equal times.
  const std::int64_t limit = o.memoryLimitBytes.value_or(prof.deviceMemoryBytes);
  const size_t SM = static_cast<size_t>(c.S) * M;
  std::vector<std::int64_t>& stash = c.stash;  // per (stage, mb): activations resident on the device
  std::vector<std::int64_t>& offloaded = c.offloaded;  // per (stage, mb): activations on the host
  std::vector<int>& live = c.live;                     // F..B/I stashes alive per (device, mb)
  stash.assign(SM, 0);
  offloaded.assign(SM, 0);
  live.assign(D * M, 0);
  if (o.recordMemory) tl.memory.resize(D);
  std::vector<int> copySteps;
  for (int d = 0; d < c.D; ++d) {
    DeviceMetrics& dm = m.devices[static_cast<size_t>(d)];
    std::int64_t staticBytes = 0;
    for (int st = 0; st < c.S; ++st)
      if (s.pipeline.stageToDevice.size() == static_cast<size_t>(c.S) && s.pipeline.deviceOf(st) == d)
        staticBytes += model.stages[static_cast<size_t>(st)].staticBytes;
    dm.staticBytes = staticBytes;
    std::int64_t cur = staticBytes;
    dm.peakMemoryBytes = cur;
    dm.peakMemoryTime = dm.start;
    int inflight = 0;
    bool overLimit = false;
    std::vector<MemorySample>* curve = o.recordMemory ? &tl.memory[static_cast<size_t>(d)] : nullptr;
    const int b = c.devBegin[static_cast<size_t>(d)], e = head[static_cast<size_t>(d)];
    if (curve) {
      curve->reserve(static_cast<size_t>(e - b) + 2);
      curve->push_back(MemorySample{dm.peakMemoryTime, cur});
    }
    if (limit > 0 && cur > limit) {
      overLimit = true;
      tl.diagnostics.push_back(makeError("simulate.memory", "device " + std::to_string(d) + " needs " + formatBytes(cur) +
                                                                " for weights, gradients and optimizer state alone, over its limit of " +
                                                                formatBytes(limit)));
    }
    copySteps.clear();
    if (hasCopy[static_cast<size_t>(d)])
      for (int h = b; h < e; ++h)
        if (steps[static_cast<size_t>(h)].copy) copySteps.push_back(h);

    int curStep = 0;  // step index of the op being applied (the peak's op)
    auto apply = [&](double time, std::int64_t delta, const Op& op) {
      if (delta == 0) return;
      cur += delta;
      if (curve) {
        // Changes at one instant collapse into one sample, but the first (static) sample stays.
        if (curve->size() > 1 && curve->back().time == time) curve->back().bytes = cur;
        else curve->push_back(MemorySample{time, cur});
      }
      if (cur > dm.peakMemoryBytes) {
        dm.peakMemoryBytes = cur;
        dm.peakMemoryTime = time;
        dm.peakMemoryOp = OpRef{d, curStep};
      }
      if (limit > 0 && cur > limit && !overLimit) {
        overLimit = true;
        Diagnostic diag = makeError("simulate.memory", "device " + std::to_string(d) + " exceeds its memory limit at " +
                                                           formatMs(time) + " during " + s.opName(op) + ": " +
                                                           formatBytes(cur) + " > " + formatBytes(limit));
        diag.related.push_back(OpRef{d, curStep});
        tl.diagnostics.push_back(std::move(diag));
      }
    };
    auto inflightDelta = [&](const Op& op, int delta) {
      if (op.microbatch < 0) return;
      int& n = live[static_cast<size_t>(d) * M + static_cast<size_t>(op.microbatch)];
      if (delta > 0) {
        if (n++ == 0) dm.peakInflightMicrobatches = std::max(dm.peakInflightMicrobatches, ++inflight);
      } else if (n > 0) {
        if (--n == 0) --inflight;
      }
    };
    // Memory effect of one op at its start (phase 0) or end (phase 1).
    auto effect = [&](const Op& op, int phase, double time) {
      const StageCost& sc = model.stages[static_cast<size_t>(op.stage)];
      const size_t sm = op.microbatch >= 0 ? static_cast<size_t>(op.stage) * M + static_cast<size_t>(op.microbatch) : 0;
      switch (op.kind) {
        case OpKind::F:
          if (phase == 0 && op.microbatch >= 0) {
            const std::int64_t bytes = c.recomputed[sm] ? sc.inputBytes : sc.activationBytes;
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
                op.kind == OpKind::B ? st : std::max<std::int64_t>(0, st - std::min(st, sc.weightGradStashBytes));
            st -= freed;
            inflightDelta(op, -1);
            apply(time, -freed, op);
          }
          break;
        case OpKind::W:
          if (phase == 1 && op.microbatch >= 0) {
            const std::int64_t freed = stash[sm];
            stash[sm] = 0;
            apply(time, -freed, op);
          }
          break;
        case OpKind::Offload:
          if (phase == 1 && op.microbatch >= 0) {
            const std::int64_t moved = stash[sm];
            offloaded[sm] += moved;
            stash[sm] = 0;
            apply(time, -moved, op);
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
        default:
          if (const UserKind* u = s.userKind(op.kind)) {
            if (phase == 0) apply(time, u->memory.transientBytes, op);
            else apply(time, u->memory.deltaBytes - u->memory.transientBytes, op);
          }
          break;
      }
    };
    auto stepEffect = [&](int h, int phase) {
      const StepRec& r = steps[static_cast<size_t>(h)];
      const double time = phase == 0 ? r.start : r.start + r.dur;
      curStep = h - b;
      for (int op = r.firstOp; op < r.firstOp + r.ops; ++op) effect(c.op(op), phase, time);
    };

    // Two ordered streams: compute steps (skipping copy steps) and copy steps.
    if (copySteps.empty()) {
      for (int h = b; h < e; ++h) {
        stepEffect(h, 0);
        stepEffect(h, 1);
      }
      continue;
    }
    int ci = b;
    size_t qi = 0;
    int cPhase = 0, qPhase = 0;
    auto nextCompute = [&] {
      while (ci < e && steps[static_cast<size_t>(ci)].copy) ++ci;
    };
    nextCompute();
    while (ci < e || qi < copySteps.size()) {
      double tc = std::numeric_limits<double>::infinity(), tq = tc;
      if (ci < e) {
        const StepRec& r = steps[static_cast<size_t>(ci)];
        tc = cPhase == 0 ? r.start : r.start + r.dur;
      }
      if (qi < copySteps.size()) {
        const StepRec& r = steps[static_cast<size_t>(copySteps[qi])];
        tq = qPhase == 0 ? r.start : r.start + r.dur;
      }
      // Earlier first; at a tie, an end (free) before a start (allocation).
      const bool takeCompute = tc < tq || (tc == tq && (cPhase == 1 || qPhase == 0));
      if (takeCompute) {
        stepEffect(ci, cPhase);
        if (cPhase == 0) {
          cPhase = 1;
        } else {
          cPhase = 0;
          ++ci;
          nextCompute();
        }
      } else {
        stepEffect(copySteps[qi], qPhase);
        if (qPhase == 0) {
          qPhase = 1;
        } else {
          qPhase = 0;
          ++qi;
        }
      }
    }
  }

  if (stalled) {
    tl.complete = false;
    ValidationReport report = validateSchedule(s);
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
        const StepRec& r = steps[static_cast<size_t>(h)];
        std::string waits;
        for (int op = r.firstOp; op < r.firstOp + r.ops && waits.empty(); ++op)
          for (int dep : c.g.dependencies(op)) {
            const StepRec& ds = steps[static_cast<size_t>(c.opStep[static_cast<size_t>(dep)])];
            if (head[static_cast<size_t>(ds.device)] <= c.opStep[static_cast<size_t>(dep)] && &ds != &r) {
              waits = s.opName(c.op(dep)) + " on device " + std::to_string(ds.device);
              break;
            }
          }
        msg += " device " + std::to_string(d) + " at " + s.opName(c.op(r.firstOp)) + " waits for " +
               (waits.empty() ? std::string("?") : waits) + ";";
        diag.related.push_back(OpRef{d, h - c.devBegin[static_cast<size_t>(d)]});
      }
      msg.pop_back();
      diag.message = msg;
      tl.diagnostics.push_back(std::move(diag));
    }
  }
  return tl;
}

}  // namespace ps::core
