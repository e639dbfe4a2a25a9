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
// The simulation: flat arrays, op ids precomputed, one heap of step completions.
namespace {

constexpr int kNone = -1;

// The schedule flattened for the hot loop. Op ids are the DependencyGraph's: device by
// device, step by step, both ops of a pair in order.
struct Compiled {
  int D = 0, S = 0, M = 0;
  DependencyGraph g;
  std::vector<int> opStep;
  // Per step (devices' step lists flattened in order).
  std::vector<int> stepDevice, stepIndex, stepFirstOp, stepOps;
  std::vector<double> stepDur;
  std::vector<char> stepCopy;
  std::vector<int> devBegin;  // steps of device d: [devBegin[d], devBegin[d + 1])
  std::vector<char> hasR;     // per F op: its (stage, mb) is recomputed

  const Op& op(int id) const { return g.op(id); }
  int lookup(OpKind k, int stage, int mb) const { return g.find(Op{k, stage, mb}); }
};

Result<Compiled> compile(const Schedule& s, const SimulationModel& model, const SimulationOptions&) {
  Compiled c;
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
  size_t nSteps = 0;
  for (const auto& dev : s.devices) nSteps += dev.size();
  c.opStep.resize(nOps);
  c.stepDevice.reserve(nSteps);
  c.stepIndex.reserve(nSteps);
  c.stepFirstOp.reserve(nSteps);
  c.stepOps.reserve(nSteps);
  c.devBegin.reserve(static_cast<size_t>(c.D) + 1);
  int opId = 0;
  for (int d = 0; d < c.D; ++d) {
    c.devBegin.push_back(static_cast<int>(c.stepDevice.size()));
    const auto& dev = s.devices[static_cast<size_t>(d)];
    for (size_t i = 0; i < dev.size(); ++i) {
      const int stepId = static_cast<int>(c.stepDevice.size());
      const int width = dev[i].overlapped() ? 2 : 1;
      c.stepDevice.push_back(d);
      c.stepIndex.push_back(static_cast<int>(i));
      c.stepFirstOp.push_back(opId);
      c.stepOps.push_back(width);
      for (int k = 0; k < width; ++k) c.opStep[static_cast<size_t>(opId++)] = stepId;
    }
  }
  c.devBegin.push_back(static_cast<int>(c.stepDevice.size()));

  // Durations: per (user kind, stage) once, then per step.
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
  c.hasR.assign(nOps, 0);
  bool anyR = false;
  for (size_t i = 0; i < nOps && !anyR; ++i) anyR = g.op(static_cast<int>(i)).kind == OpKind::R;
  if (anyR)
    for (size_t i = 0; i < nOps; ++i) {
      const Op& op = g.op(static_cast<int>(i));
      if (op.kind == OpKind::F && c.lookup(OpKind::R, op.stage, op.microbatch) != kNone) c.hasR[i] = 1;
    }

  auto opDuration = [&](int id) -> double {
    const Op& op = g.op(id);
    const StageCost& sc = model.stages[static_cast<size_t>(op.stage)];
    switch (op.kind) {
      case OpKind::F: return sc.F;
      case OpKind::B: return sc.B;
      case OpKind::I: return sc.I;
      case OpKind::W: return sc.W;
      case OpKind::R: return sc.R;
      case OpKind::Offload:
      case OpKind::Reload: {
        if (prof.hostBandwidthBytesPerMs <= 0) return 0.0;
        bool recomputed = c.lookup(OpKind::R, op.stage, op.microbatch) != kNone;
        auto bytes = static_cast<double>(recomputed ? sc.inputBytes : sc.activationBytes);
        return bytes / prof.hostBandwidthBytesPerMs;
      }
      default:
        if (isUserKind(op.kind))
          return userDur[(static_cast<size_t>(op.kind) - kFirstUserKind) * static_cast<size_t>(c.S) +
                         static_cast<size_t>(op.stage)];
        return 0.0;
    }
  };
  c.stepDur.resize(nSteps);
  c.stepCopy.resize(nSteps);
  for (size_t st = 0; st < nSteps; ++st) {
    int first = c.stepFirstOp[st];
    c.stepCopy[st] = runsOnCopyStream(g.op(first).kind) && c.stepOps[st] == 1;
    double dur = opDuration(first);
    if (c.stepOps[st] == 2) dur = prof.overlapFactor * (dur + opDuration(first + 1));
    c.stepDur[st] = dur;
  }
  return c;
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
  auto compiled = compile(s, model, o);
  if (!compiled) return compiled.errors();
  const Compiled& c = *compiled;
  const CostProfile& prof = model.profile;
  const size_t nSteps = c.stepDevice.size();
  const size_t D = static_cast<size_t>(c.D);

  // --- Timing: discrete events in completion order, so that transfers queue on each link's
  // channel in the order their data becomes ready.
  // Dependencies inside an overlapped pair do not delay it.
  std::vector<int> pending(nSteps, 0);
  for (size_t st = 0; st < nSteps; ++st) {
    const int first = c.stepFirstOp[st];
    for (int op = first; op < first + c.stepOps[st]; ++op)
      for (int dep : c.g.dependencies(op))
        if (c.opStep[static_cast<size_t>(dep)] != static_cast<int>(st)) ++pending[st];
  }
  std::vector<double> ready(nSteps, 0.0), start(nSteps, 0.0), end(nSteps, 0.0);
  std::vector<int> head(c.devBegin.begin(), c.devBegin.end() - 1);
  std::vector<double> devFree(D, 0.0), copyFree(D, 0.0);
  std::vector<double> channelFree(D * D, 0.0);

  Timeline tl;
  tl.source = TimelineSource::Simulated;
  tl.label = s.name;
  tl.devices = c.D;

  using Event = std::pair<double, int>;  // (end time, step)
  std::vector<Event> heapStore;
  heapStore.reserve(D * 4 + 16);
  std::priority_queue<Event, std::vector<Event>, std::greater<>> heap(std::greater<>{}, std::move(heapStore));

  auto runDevice = [&](int d) {
    int& h = head[static_cast<size_t>(d)];
    const int stop = c.devBegin[static_cast<size_t>(d) + 1];
    double& free = devFree[static_cast<size_t>(d)];
    while (h < stop && pending[static_cast<size_t>(h)] == 0) {
      auto st = static_cast<size_t>(h);
      double t0;
      if (c.stepCopy[st]) {
        double& cf = copyFree[static_cast<size_t>(d)];
        t0 = std::max({free, ready[st], cf});
        cf = t0 + c.stepDur[st];
      } else {
        t0 = std::max(free, ready[st]);
        free = t0 + c.stepDur[st];
      }
      start[st] = t0;
      end[st] = t0 + c.stepDur[st];
      heap.emplace(end[st], h);
      ++h;
    }
  };

  const bool fixedComm = prof.fixedCommMs.has_value();
  const double fixedCommMs = prof.fixedCommMs.value_or(0.0);
  for (int d = 0; d < c.D; ++d) runDevice(d);
  while (!heap.empty()) {
    auto [t, stepId] = heap.top();
    heap.pop();
    auto st = static_cast<size_t>(stepId);
    const int srcDev = c.stepDevice[st];
    const int firstOp = c.stepFirstOp[st];
    for (int op = firstOp; op < firstOp + c.stepOps[st]; ++op) {
      for (const int consumer : c.g.dependents(op)) {
        const auto cs = static_cast<size_t>(c.opStep[static_cast<size_t>(consumer)]);
        if (cs == st) continue;
        const int dstDev = c.stepDevice[cs];
        double arrival = t;
        if (dstDev != srcDev) {
          const Op& prod = c.op(op);
          const Op& cons = c.op(consumer);
          const int lowStage = std::min(prod.stage, cons.stage);
          const std::int64_t bytes = model.stages[static_cast<size_t>(lowStage)].outputBytes;
          double cost = fixedComm ? fixedCommMs
                                  : prof.link.latencyMs + (prof.link.bandwidthBytesPerMs > 0
                                                               ? static_cast<double>(bytes) / prof.link.bandwidthBytesPerMs
                                                               : 0.0);
          if (cost > 0) {
            double& ch = channelFree[static_cast<size_t>(srcDev) * D + static_cast<size_t>(dstDev)];
            double ts = std::max(t, ch);
            ch = ts + cost;
            arrival = ch;
            if (o.recordTransfers) tl.transfers.push_back(Transfer{srcDev, dstDev, prod, cons, bytes, ts, arrival});
          }
        }
        if (arrival > ready[cs]) ready[cs] = arrival;
        if (--pending[cs] == 0 && head[static_cast<size_t>(dstDev)] == static_cast<int>(cs)) runDevice(dstDev);
      }
    }
  }

  bool stalled = false;
  for (int d = 0; d < c.D; ++d)
    if (head[static_cast<size_t>(d)] < c.devBegin[static_cast<size_t>(d) + 1]) stalled = true;

  // --- Ops of the timeline, sorted by (device, start), and per-device busy / span.
  size_t done = 0;
  for (int d = 0; d < c.D; ++d)
    done += static_cast<size_t>(head[static_cast<size_t>(d)] - c.devBegin[static_cast<size_t>(d)]);
  tl.ops.reserve(static_cast<size_t>(c.g.size()));
  TimelineMetrics& m = tl.metrics;
  m.devices.resize(D);
  double first = std::numeric_limits<double>::infinity(), last = -first, busySum = 0;
  for (int d = 0; d < c.D; ++d) {
    DeviceMetrics& dm = m.devices[static_cast<size_t>(d)];
    dm.device = d;
    const size_t segBegin = tl.ops.size();
    bool anyCopy = false;
    const int b = c.devBegin[static_cast<size_t>(d)], e = head[static_cast<size_t>(d)];
    if (e > b) {
      dm.start = std::numeric_limits<double>::infinity();
      dm.end = -dm.start;
    }
    for (int h = b; h < e; ++h) {
      auto st = static_cast<size_t>(h);
      const bool pair = c.stepOps[st] == 2;
      for (int op = c.stepFirstOp[st]; op < c.stepFirstOp[st] + c.stepOps[st]; ++op)
        tl.ops.push_back(TimelineOp{d, c.stepIndex[st], c.op(op), pair, start[st], end[st]});
      dm.start = std::min(dm.start, start[st]);
      dm.end = std::max(dm.end, end[st]);
      if (c.stepCopy[st]) anyCopy = true;
      else dm.busy += c.stepDur[st];
    }
    if (anyCopy)
      std::stable_sort(tl.ops.begin() + static_cast<std::ptrdiff_t>(segBegin), tl.ops.end(),
                       [](const TimelineOp& x, const TimelineOp& y) { return x.start < y.start; });
    if (e > b) {
      first = std::min(first, dm.start);
      last = std::max(last, dm.end);
    }
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
  std::vector<std::int64_t> stash(static_cast<size_t>(c.g.size()), 0);  // per F op: activations resident on the device
  std::vector<std::int64_t> offloaded(static_cast<size_t>(c.g.size()), 0);
  std::vector<int> live(D * static_cast<size_t>(c.M), 0);  // live F..B/I stashes per (device, mb)
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
    dm.peakMemoryTime = std::isfinite(dm.start) ? dm.start : 0.0;
    int inflight = 0;
    bool overLimit = false;
    std::vector<MemorySample>* curve = o.recordMemory ? &tl.memory[static_cast<size_t>(d)] : nullptr;
    if (curve) curve->push_back(MemorySample{dm.peakMemoryTime, cur});
    if (limit > 0 && cur > limit) {
      overLimit = true;
      Diagnostic diag = makeError("simulate.memory", "device " + std::to_string(d) + " needs " + formatBytes(cur) +
                                                         " for weights, gradients and optimizer state alone, over its limit of " +
                                                         formatBytes(limit));
      tl.diagnostics.push_back(std::move(diag));
    }

    const int b = c.devBegin[static_cast<size_t>(d)], e = head[static_cast<size_t>(d)];
    copySteps.clear();
    for (int h = b; h < e; ++h)
      if (c.stepCopy[static_cast<size_t>(h)]) copySteps.push_back(h);

    auto apply = [&](double time, std::int64_t delta, int opId) {
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
        dm.peakMemoryOp = OpRef{d, c.stepIndex[static_cast<size_t>(c.opStep[static_cast<size_t>(opId)])]};
      }
      if (limit > 0 && cur > limit && !overLimit) {
        overLimit = true;
        const Op& op = c.op(opId);
        Diagnostic diag = makeError("simulate.memory", "device " + std::to_string(d) + " exceeds its memory limit at " +
                                                           formatMs(time) + " during " + s.opName(op) + ": " +
                                                           formatBytes(cur) + " > " + formatBytes(limit));
        diag.related.push_back(dm.peakMemoryOp.device >= 0 && cur == dm.peakMemoryBytes
                                   ? dm.peakMemoryOp
                                   : OpRef{d, c.stepIndex[static_cast<size_t>(c.opStep[static_cast<size_t>(opId)])]});
        tl.diagnostics.push_back(std::move(diag));
      }
    };
    auto fOf = [&](const Op& op) { return c.lookup(OpKind::F, op.stage, op.microbatch); };
    auto inflightDelta = [&](const Op& op, int delta) {
      if (op.microbatch < 0) return;
      int& n = live[static_cast<size_t>(d) * static_cast<size_t>(c.M) + static_cast<size_t>(op.microbatch)];
      if (delta > 0) {
        if (n++ == 0) dm.peakInflightMicrobatches = std::max(dm.peakInflightMicrobatches, ++inflight);
      } else if (n > 0) {
        if (--n == 0) --inflight;
      }
    };
    // Memory effect of one op at its start (phase 0) or end (phase 1).
    auto effect = [&](int opId, int phase, double time) {
      const Op& op = c.op(opId);
      const StageCost& sc = model.stages[static_cast<size_t>(op.stage)];
      switch (op.kind) {
        case OpKind::F:
          if (phase == 0) {
            std::int64_t bytes = c.hasR[static_cast<size_t>(opId)] ? sc.inputBytes : sc.activationBytes;
            stash[static_cast<size_t>(opId)] = bytes;
            inflightDelta(op, +1);
            apply(time, bytes, opId);
          }
          break;
        case OpKind::R:
          if (phase == 0) {
            int f = fOf(op);
            if (f != kNone) stash[static_cast<size_t>(f)] += sc.activationBytes;
            apply(time, sc.activationBytes, opId);
          }
          break;
        case OpKind::B:
        case OpKind::I:
          if (phase == 1) {
            int f = fOf(op);
            std::int64_t freed = 0;
            if (f != kNone) {
              std::int64_t& st = stash[static_cast<size_t>(f)];
              freed = op.kind == OpKind::B ? st : std::max<std::int64_t>(0, st - std::min(st, sc.weightGradStashBytes));
              st -= freed;
            }
            inflightDelta(op, -1);
            apply(time, -freed, opId);
          }
          break;
        case OpKind::W:
          if (phase == 1) {
            int f = fOf(op);
            if (f != kNone) {
              std::int64_t freed = stash[static_cast<size_t>(f)];
              stash[static_cast<size_t>(f)] = 0;
              apply(time, -freed, opId);
            }
          }
          break;
        case OpKind::Offload:
          if (phase == 1) {
            int f = fOf(op);
            if (f != kNone) {
              std::int64_t moved = stash[static_cast<size_t>(f)];
              offloaded[static_cast<size_t>(f)] = moved;
              stash[static_cast<size_t>(f)] = 0;
              apply(time, -moved, opId);
            }
          }
          break;
        case OpKind::Reload:
          if (phase == 0) {
            int f = fOf(op);
            if (f != kNone) {
              std::int64_t back = offloaded[static_cast<size_t>(f)];
              offloaded[static_cast<size_t>(f)] = 0;
              stash[static_cast<size_t>(f)] += back;
              apply(time, back, opId);
            }
          }
          break;
        default:
          if (const UserKind* u = s.userKind(op.kind)) {
            if (phase == 0) apply(time, u->memory.transientBytes, opId);
            else apply(time, u->memory.deltaBytes - u->memory.transientBytes, opId);
          }
          break;
      }
    };
    auto stepEffect = [&](int h, int phase) {
      auto st = static_cast<size_t>(h);
      double time = phase == 0 ? start[st] : end[st];
      // Frees of a pair before its allocations would hide its true peak: starts first.
      for (int op = c.stepFirstOp[st]; op < c.stepFirstOp[st] + c.stepOps[st]; ++op) effect(op, phase, time);
    };

    // Two ordered streams: compute steps (skipping copy steps) and copy steps.
    int ci = b;
    size_t qi = 0;
    int cPhase = 0, qPhase = 0;
    auto nextCompute = [&] {
      while (ci < e && c.stepCopy[static_cast<size_t>(ci)]) ++ci;
    };
    nextCompute();
    while (ci < e || qi < copySteps.size()) {
      double tc = std::numeric_limits<double>::infinity(), tq = tc;
      if (ci < e) tc = cPhase == 0 ? start[static_cast<size_t>(ci)] : end[static_cast<size_t>(ci)];
      if (qi < copySteps.size()) {
        auto st = static_cast<size_t>(copySteps[qi]);
        tq = qPhase == 0 ? start[st] : end[st];
      }
      // Earlier first; at a tie, an end (free) before a start (allocation).
      bool takeCompute = tc < tq || (tc == tq && (cPhase == 1 || qPhase == 0));
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
      if (dg.code.find("deadlock") != std::string::npos) {
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
        int h = head[static_cast<size_t>(d)];
        if (h >= c.devBegin[static_cast<size_t>(d) + 1]) continue;
        auto st = static_cast<size_t>(h);
        int op = c.stepFirstOp[st];
        std::string waits;
        for (int o2 = op; o2 < op + c.stepOps[st] && waits.empty(); ++o2)
          for (int dep : c.g.dependencies(o2)) {
            auto ds = static_cast<size_t>(c.opStep[static_cast<size_t>(dep)]);
            if (head[static_cast<size_t>(c.stepDevice[ds])] <= static_cast<int>(ds)) {
              waits = s.opName(c.op(dep)) + " on device " + std::to_string(c.stepDevice[ds]);
              break;
            }
          }
        msg += " device " + std::to_string(d) + " at " + s.opName(c.op(op)) + " waits for " +
               (waits.empty() ? std::string("?") : waits) + ";";
        diag.related.push_back(OpRef{d, c.stepIndex[st]});
      }
      msg.pop_back();
      diag.message = msg;
      tl.diagnostics.push_back(std::move(diag));
    }
  }
  return tl;
}

}  // namespace ps::core
