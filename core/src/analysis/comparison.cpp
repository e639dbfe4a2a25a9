// Planned-versus-measured comparison: op matching, deviations and error tables.
#include "pipestudio/core/analysis/comparison.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "analysis/timeline_index.h"
#include "pipestudio/core/analysis/pytorch_lowering.h"
#include "pipestudio/core/model/enum_names.h"

namespace ps::core {

constexpr EnumName<Alignment> kAlignmentNames[] = {{Alignment::Absolute, "absolute"},
                                                   {Alignment::Scaled, "scaled"}};

PS_ENUM_NAME_FUNCTION(Alignment, kAlignmentNames, alignmentName);
PS_ENUM_FROM_NAME_FUNCTION(Alignment, kAlignmentNames, alignmentFromName);

namespace {

struct Span {
  double origin = 0;
  double makespan = 0;
};

Span spanOf(const Timeline& t) {
  if (t.ops.empty()) return {};
  double a = std::numeric_limits<double>::infinity();
  double b = -std::numeric_limits<double>::infinity();
  for (const auto& o : t.ops) {
    a = std::min(a, o.start);
    b = std::max(b, o.end);
  }
  return {a, b - a};
}

struct Accumulator {
  ErrorStats stats;
  double absErrorSum = 0;
  size_t withDeviation = 0;

  void add(const OpMatch& m) {
    ++stats.count;
    stats.plannedMs += m.plannedMs;
    stats.measuredMs += m.measuredMs;
    if (m.deviation) {
      double d = *m.deviation;
      if (withDeviation == 0) {
        stats.minDeviation = d;
        stats.maxDeviation = d;
      } else {
        stats.minDeviation = std::min(stats.minDeviation, d);
        stats.maxDeviation = std::max(stats.maxDeviation, d);
      }
      absErrorSum += std::abs(d - 1.0);
      ++withDeviation;
    }
  }
  ErrorStats finish() {
    stats.ratio = stats.plannedMs > 0 ? stats.measuredMs / stats.plannedMs : 0;
    stats.meanAbsError = withDeviation ? absErrorSum / static_cast<double>(withDeviation) : 0;
    return stats;
  }
};

}  // namespace

Comparison compareTimelines(const Schedule& plan, const Timeline& planned, const Timeline& measured,
                            const ComparisonOptions& options) {
  Comparison c;
  c.alignment = options.alignment;
  Span ps = spanOf(planned);
  Span ms = spanOf(measured);
  c.plannedOrigin = ps.origin;
  c.measuredOrigin = ms.origin;
  c.plannedMakespan = ps.makespan;
  c.measuredMakespan = ms.makespan;
  c.relativeError = ps.makespan > 0 ? (ms.makespan - ps.makespan) / ps.makespan : 0;
  c.scale = (options.alignment == Alignment::Scaled && ms.makespan > 0 && ps.makespan > 0)
                ? ps.makespan / ms.makespan
                : 1.0;

  // Measured ops by (kind, stage, micro-batch), in time order, consumed as they match.
  std::unordered_map<std::uint64_t, std::vector<size_t>> byKey;
  {
    std::vector<size_t> order(measured.ops.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return measured.ops[a].start < measured.ops[b].start; });
    for (size_t i : order) byKey[detail::opKey(measured.ops[i].op)].push_back(i);
  }
  std::vector<char> used(measured.ops.size(), 0);
  std::vector<size_t> plannedOrder(planned.ops.size());
  for (size_t i = 0; i < plannedOrder.size(); ++i) plannedOrder[i] = i;
  std::stable_sort(plannedOrder.begin(), plannedOrder.end(), [&](size_t a, size_t b) {
    const auto& x = planned.ops[a];
    const auto& y = planned.ops[b];
    return std::tie(x.device, x.start) < std::tie(y.device, y.start);
  });
  size_t moved = 0;
  for (size_t pi : plannedOrder) {
    const TimelineOp& p = planned.ops[pi];
    auto it = byKey.find(detail::opKey(p.op));
    if (it == byKey.end()) {
      c.unmatchedPlanned.push_back(pi);
      continue;
    }
    std::optional<size_t> pick;
    for (size_t mi : it->second) {
      if (used[mi]) continue;
      if (measured.ops[mi].device == p.device) {
        pick = mi;
        break;
      }
      if (!pick) pick = mi;
    }
    if (!pick) {
      c.unmatchedPlanned.push_back(pi);
      continue;
    }
    used[*pick] = 1;
    const TimelineOp& m = measured.ops[*pick];
    if (m.device != p.device) {
      if (moved++ < 5) {
        Diagnostic d = makeWarning("compare.device", plan.opName(p.op) + " was planned on device " +
                                                         std::to_string(p.device) + " but ran on device " +
                                                         std::to_string(m.device));
        d.related.push_back(OpRef{p.device, p.step});
        c.diagnostics.push_back(std::move(d));
      }
    }
    OpMatch om;
    om.device = p.device;
    om.op = p.op;
    om.planned = pi;
    om.measured = *pick;
    om.plannedStart = p.start - ps.origin;
    om.plannedEnd = p.end - ps.origin;
    om.measuredStart = c.align(m.start);
    om.measuredEnd = c.align(m.end);
    om.plannedMs = p.duration();
    om.measuredMs = m.duration();
    if (om.plannedMs > 1e-12) om.deviation = om.measuredMs / om.plannedMs;
    c.matches.push_back(om);
  }
  if (moved > 5)
    c.diagnostics.push_back(makeWarning(
        "compare.device", std::to_string(moved - 5) + " more op(s) ran on another device than planned"));
  for (size_t i = 0; i < measured.ops.size(); ++i)
    if (!used[i]) c.unmatchedMeasured.push_back(i);
  std::stable_sort(c.unmatchedMeasured.begin(), c.unmatchedMeasured.end(), [&](size_t a, size_t b) {
    return std::tie(measured.ops[a].device, measured.ops[a].start) <
           std::tie(measured.ops[b].device, measured.ops[b].start);
  });
  if (!c.unmatchedPlanned.empty()) {
    Diagnostic d =
        makeWarning("compare.missing", std::to_string(c.unmatchedPlanned.size()) +
                                           " planned op(s) have no measured counterpart, first " +
                                           plan.opName(planned.ops[c.unmatchedPlanned.front()].op));
    c.diagnostics.push_back(std::move(d));
    // Fewer than half the plan's ops found: the trace is not of this plan (or barely), and
    // error figures over the few matches would read as a result.
    const size_t plannedOps = c.matches.size() + c.unmatchedPlanned.size();
    if (c.matches.size() * 2 < plannedOps)
      c.diagnostics.push_back(
          makeError("compare.unmatched", "only " + std::to_string(c.matches.size()) + " of the plan's " +
                                             std::to_string(plannedOps) + " ops were found in the trace (" +
                                             std::to_string(c.unmatchedPlanned.size()) + " not measured, " +
                                             std::to_string(c.unmatchedMeasured.size()) +
                                             " measured op(s) not in the plan): is the trace of this plan?"));
  }

  // Error tables.
  std::map<std::uint16_t, Accumulator> kinds;
  std::map<int, Accumulator> devices;
  Accumulator all;
  for (const auto& m : c.matches) {
    kinds[static_cast<std::uint16_t>(m.op.kind)].add(m);
    devices[m.device].add(m);
    all.add(m);
  }
  for (auto& [k, acc] : kinds) {
    acc.stats.kind = static_cast<OpKind>(k);
    acc.stats.label = plan.kindName(static_cast<OpKind>(k));
    c.byKind.push_back(acc.finish());
  }
  for (auto& [d, acc] : devices) {
    acc.stats.device = d;
    acc.stats.label = "device " + std::to_string(d);
    c.byDevice.push_back(acc.finish());
  }
  all.stats.label = "all";
  c.overall = all.finish();

  if (options.analyseMeasured) {
    c.criticalPath = criticalPath(measured, plan);
    c.bubbles = attributeBubbles(measured, plan, options.minGapMs);
  }
  return c;
}

namespace {

// The actions PyTorch's runtime adds when it lowers a compute-only order, by the pass that adds
// them: 1 SEND/RECV, 2 UNSHARD/RESHARD, 3 REDUCE_GRAD; 0 for any other kind.
int runtimePass(OpKind k) {
  switch (k) {
    case OpKind::SendF:
    case OpKind::RecvF:
    case OpKind::SendB:
    case OpKind::RecvB:
      return 1;
    case OpKind::Unshard:
    case OpKind::Reshard:
      return 2;
    case OpKind::ReduceGrad:
      return 3;
    default:
      return 0;
  }
}

}  // namespace

Result<std::optional<Schedule>> loweredPlanFor(const Schedule& plan, const Timeline& measured) {
  std::set<int> shown;
  for (const auto& o : measured.ops)
    if (int pass = runtimePass(o.op.kind)) shown.insert(pass);
  if (shown.empty()) return std::optional<Schedule>();
  for (const auto& dev : plan.devices)
    for (const auto& st : dev)
      if (!st.second && runtimePass(st.first.kind)) return std::optional<Schedule>();
  PS_ASSIGN_OR_RETURN(Schedule lowered, lowerToPytorchComms(plan));
  // A pass whose actions the trace never shows is not the runtime's (an older PyTorch).
  for (auto& dev : lowered.devices)
    dev.erase(std::remove_if(dev.begin(), dev.end(),
                             [&](const Step& st) {
                               const int pass = st.second ? 0 : runtimePass(st.first.kind);
                               return pass && !shown.count(pass);
                             }),
              dev.end());
  return std::optional<Schedule>(std::move(lowered));
}

namespace {

// Keys in the order written (the order docs/debugger.md lists them).
using json = nlohmann::ordered_json;

// Rounds to 1 ns so the JSON stays readable (times are in ms).
double r6(double v) {
  return std::isfinite(v) ? std::round(v * 1e6) / 1e6 : 0.0;
}

json statsJson(const ErrorStats& s) {
  json j{{"count", s.count},
         {"planned_ms", r6(s.plannedMs)},
         {"measured_ms", r6(s.measuredMs)},
         {"ratio", r6(s.ratio)},
         {"mean_abs_error", r6(s.meanAbsError)},
         {"min_deviation", r6(s.minDeviation)},
         {"max_deviation", r6(s.maxDeviation)}};
  if (s.kind) j["kind"] = s.label;
  if (s.device >= 0) j["device"] = s.device;
  return j;
}

}  // namespace

std::string comparisonToJson(const Comparison& c, const Schedule& plan, const Timeline& planned,
                             const Timeline& measured) {
  json j;
  auto name = [&](const Op& op) { return plan.opName(op); };
  j["planned"] = {{"label", planned.label}, {"makespan", r6(c.plannedMakespan)}, {"ops", planned.ops.size()}};
  j["measured"] = {{"label", measured.label},
                   {"makespan", r6(c.measuredMakespan)},
                   {"ops", measured.ops.size()},
                   {"complete", measured.complete}};
  j["makespan_predicted"] = r6(c.plannedMakespan);
  j["makespan_measured"] = r6(c.measuredMakespan);
  j["relative_error"] = r6(c.relativeError);
  j["alignment"] = std::string(alignmentName(c.alignment));
  j["scale"] = r6(c.scale);
  j["matched"] = c.matches.size();
  json up = json::array();
  for (size_t i : c.unmatchedPlanned)
    up.push_back({{"device", planned.ops[i].device}, {"op", name(planned.ops[i].op)}});
  json um = json::array();
  for (size_t i : c.unmatchedMeasured)
    um.push_back({{"device", measured.ops[i].device}, {"op", name(measured.ops[i].op)}});
  j["unmatched_planned"] = up;
  j["unmatched_measured"] = um;
  json bk = json::array();
  for (const auto& s : c.byKind) bk.push_back(statsJson(s));
  json bd = json::array();
  for (const auto& s : c.byDevice) bd.push_back(statsJson(s));
  j["error_by_kind"] = bk;
  j["error_by_device"] = bd;
  j["error_overall"] = statsJson(c.overall);
  json ops = json::array();
  for (const auto& m : c.matches) {
    json o{{"device", m.device},
           {"op", name(m.op)},
           {"planned_start", r6(m.plannedStart)},
           {"planned_end", r6(m.plannedEnd)},
           {"measured_start", r6(m.measuredStart)},
           {"measured_end", r6(m.measuredEnd)},
           {"planned_ms", r6(m.plannedMs)},
           {"measured_ms", r6(m.measuredMs)}};
    o["deviation"] = m.deviation ? json(r6(*m.deviation)) : json(nullptr);
    if (measured.ops[m.measured].device != m.device) o["measured_device"] = measured.ops[m.measured].device;
    ops.push_back(std::move(o));
  }
  j["matches"] = ops;

  const CriticalPath& cp = c.criticalPath;
  json steps = json::array();
  for (const auto& s : cp.steps) {
    const TimelineOp& o = measured.ops[s.op];
    json st{{"op", name(o.op)},
            {"device", o.device},
            {"start", r6(o.start)},
            {"end", r6(o.end)},
            {"via", std::string(criticalLinkName(s.via))},
            {"wait_ms", r6(s.waitMs)}};
    if (s.transfer) {
      const Transfer& t = measured.transfers[*s.transfer];
      st["transfer"] = {
          {"src", t.srcDevice}, {"dst", t.dstDevice}, {"start", r6(t.start)}, {"end", r6(t.end)}};
    }
    steps.push_back(std::move(st));
  }
  j["critical_path"] = {{"start", r6(cp.start)},          {"end", r6(cp.end)},
                        {"compute_ms", r6(cp.computeMs)}, {"transfer_ms", r6(cp.transferMs)},
                        {"wait_ms", r6(cp.waitMs)},       {"steps", steps}};

  json bubbles = json::array();
  for (const auto& db : c.bubbles) {
    json waited = json::array();
    for (const auto& w : db.waitedOn) waited.push_back({{"device", w.device}, {"ms", r6(w.ms)}});
    json gaps = json::array();
    for (const auto& b : db.bubbles) {
      json g{{"start", r6(b.start)},
             {"end", r6(b.end)},
             {"ms", r6(b.duration())},
             {"cause", std::string(bubbleCauseName(b.cause))}};
      if (b.before) g["before"] = name(measured.ops[*b.before].op);
      if (b.cause == BubbleCause::Dependency) {
        g["waited_for"] = name(b.waitedFor);
        g["waited_on_device"] = b.waitedOnDevice;
      }
      gaps.push_back(std::move(g));
    }
    bubbles.push_back({{"device", db.device},
                       {"idle_ms", r6(db.idleMs)},
                       {"dependency_ms", r6(db.dependencyMs)},
                       {"unexplained_ms", r6(db.unexplainedMs)},
                       {"tail_ms", r6(db.tailMs)},
                       {"waited_on", waited},
                       {"gaps", gaps}});
  }
  j["bubbles"] = bubbles;
  json diags = json::array();
  for (const auto& d : c.diagnostics)
    diags.push_back({{"severity", severityName(d.severity)}, {"code", d.code}, {"message", d.message}});
  j["diagnostics"] = diags;
  return j.dump(2) + "\n";
}

}  // namespace ps::core
