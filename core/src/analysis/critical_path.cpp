// Measured critical path and bubble attribution over any Timeline.
#include "pipestudio/core/analysis/critical_path.h"

#include <algorithm>
#include <limits>
#include <map>

#include "analysis/timeline_index.h"
#include "pipestudio/core/model/enum_names.h"

namespace ps::core {

namespace detail {

TimelineIndex::TimelineIndex(const Timeline& t) : t_(&t) {
  int devices = t.devices;
  for (const auto& o : t.ops) devices = std::max(devices, o.device + 1);
  byDevice_.resize(static_cast<size_t>(std::max(devices, 0)));
  ops_.reserve(t.ops.size());
  for (size_t i = 0; i < t.ops.size(); ++i) {
    ops_.emplace(opKey(t.ops[i].op), i);
    if (t.ops[i].device >= 0) byDevice_[static_cast<size_t>(t.ops[i].device)].push_back(i);
  }
  pos_.assign(t.ops.size(), 0);
  prefixMaxEnd_.resize(byDevice_.size());
  for (size_t d = 0; d < byDevice_.size(); ++d) {
    auto& v = byDevice_[d];
    std::stable_sort(v.begin(), v.end(), [&](size_t a, size_t b) {
      if (t.ops[a].start != t.ops[b].start) return t.ops[a].start < t.ops[b].start;
      return t.ops[a].end < t.ops[b].end;
    });
    auto& pm = prefixMaxEnd_[d];
    pm.resize(v.size());
    double m = -std::numeric_limits<double>::infinity();
    for (size_t k = 0; k < v.size(); ++k) {
      pos_[v[k]] = k;
      m = std::max(m, t.ops[v[k]].end);
      pm[k] = m;
    }
  }
  for (size_t i = 0; i < t.transfers.size(); ++i)
    transfers_[opKey(t.transfers[i].producer)].emplace(opKey(t.transfers[i].consumer), i);
}

std::optional<size_t> TimelineIndex::find(const Op& op) const {
  auto it = ops_.find(opKey(op));
  if (it == ops_.end()) return std::nullopt;
  return it->second;
}

std::optional<size_t> TimelineIndex::transfer(const Op& producer, const Op& consumer) const {
  auto it = transfers_.find(opKey(producer));
  if (it == transfers_.end()) return std::nullopt;
  auto jt = it->second.find(opKey(consumer));
  if (jt == it->second.end()) return std::nullopt;
  return jt->second;
}

const std::vector<size_t>& TimelineIndex::onDevice(int device) const {
  static const std::vector<size_t> none;
  if (device < 0 || device >= devices()) return none;
  return byDevice_[static_cast<size_t>(device)];
}

std::optional<size_t> TimelineIndex::sibling(size_t op) const {
  const TimelineOp& o = t_->ops[op];
  if (!o.overlapped) return std::nullopt;
  const auto& v = onDevice(o.device);
  size_t p = pos_[op];
  for (size_t k : {p - 1, p + 1}) {
    if (k >= v.size()) continue;  // p - 1 wraps for p == 0
    const TimelineOp& q = t_->ops[v[k]];
    if (q.overlapped && q.start == o.start && v[k] != op) return v[k];
  }
  return std::nullopt;
}

std::optional<size_t> TimelineIndex::previousOnDevice(size_t op) const {
  const TimelineOp& o = t_->ops[op];
  if (o.device < 0 || o.device >= devices()) return std::nullopt;
  const auto& v = byDevice_[static_cast<size_t>(o.device)];
  const auto& pm = prefixMaxEnd_[static_cast<size_t>(o.device)];
  auto sib = sibling(op);
  std::optional<size_t> best;
  double bestEnd = -std::numeric_limits<double>::infinity();
  for (size_t k = pos_[op]; k-- > 0;) {
    if (pm[k] <= bestEnd) break;  // nothing earlier ends later than what we have
    size_t cand = v[k];
    if (sib && cand == *sib) continue;
    const TimelineOp& c = t_->ops[cand];
    if (!occupiesCompute(c.op.kind)) continue;
    if (c.end <= o.start + kTimeEps && c.end > bestEnd) {
      best = cand;
      bestEnd = c.end;
    }
  }
  return best;
}

std::vector<Arrival> arrivalsOf(const TimelineIndex& ix, const DependencyGraph& g, size_t op,
                                std::vector<Op>* missing) {
  const Timeline& t = ix.timeline();
  std::vector<Arrival> out;
  auto sib = ix.sibling(op);
  auto collect = [&](size_t consumer) {
    const TimelineOp& c = t.ops[consumer];
    std::vector<Op> lacking;
    for (int id : g.dependenciesFor(c.op, missing ? &lacking : nullptr)) {
      const Op& dep = g.op(id);
      auto d = ix.find(dep);
      if (!d) {
        if (missing) missing->push_back(dep);
        continue;
      }
      if (*d == op || (sib && *d == *sib)) continue;
      Arrival a;
      a.op = *d;
      a.time = t.ops[*d].end;
      if (auto tr = ix.transfer(dep, c.op)) {
        a.transfer = tr;
        a.time = std::max(a.time, t.transfers[*tr].end);
      }
      out.push_back(a);
    }
    if (missing) missing->insert(missing->end(), lacking.begin(), lacking.end());
  };
  collect(op);
  if (sib) collect(*sib);
  return out;
}

}  // namespace detail

using detail::kTimeEps;

constexpr EnumName<CriticalLink> kCriticalLinkNames[] = {{CriticalLink::Start, "start"},
                                                         {CriticalLink::Dependency, "dependency"},
                                                         {CriticalLink::DeviceOrder, "device"}};
constexpr EnumName<BubbleCause> kBubbleCauseNames[] = {{BubbleCause::Unexplained, "unexplained"},
                                                       {BubbleCause::Dependency, "dependency"},
                                                       {BubbleCause::Tail, "tail"}};

PS_ENUM_NAME_FUNCTION(CriticalLink, kCriticalLinkNames, criticalLinkName);
PS_ENUM_NAME_FUNCTION(BubbleCause, kBubbleCauseNames, bubbleCauseName);

CriticalPath criticalPath(const Timeline& t, const Schedule& plan) {
  CriticalPath cp;
  if (t.ops.empty()) return cp;
  DependencyGraph g(plan);
  detail::TimelineIndex ix(t);

  size_t cur = 0;
  for (size_t i = 1; i < t.ops.size(); ++i) {
    const TimelineOp& a = t.ops[i];
    const TimelineOp& b = t.ops[cur];
    if (a.end > b.end || (a.end == b.end && a.start > b.start)) cur = i;
  }
  std::vector<char> visited(t.ops.size(), 0);
  std::vector<CriticalStep> reversed;
  while (true) {
    visited[cur] = 1;
    if (auto s = ix.sibling(cur)) visited[*s] = 1;
    const TimelineOp& c = t.ops[cur];
    std::optional<detail::Arrival> dep;
    for (const auto& a : detail::arrivalsOf(ix, g, cur))
      if (!visited[a.op] && (!dep || a.time > dep->time)) dep = a;
    std::optional<size_t> prev = ix.previousOnDevice(cur);
    if (prev && visited[*prev]) prev.reset();

    CriticalStep step;
    step.op = cur;
    if (dep && (!prev || dep->time >= t.ops[*prev].end - kTimeEps)) {
      step.via = CriticalLink::Dependency;
      step.arrival = dep->time;
      step.transfer = dep->transfer;
      if (dep->transfer) cp.transferMs += std::max(0.0, dep->time - t.ops[dep->op].end);
      reversed.push_back(step);
      cur = dep->op;
    } else if (prev) {
      step.via = CriticalLink::DeviceOrder;
      step.arrival = t.ops[*prev].end;
      reversed.push_back(step);
      cur = *prev;
    } else {
      step.via = CriticalLink::Start;
      step.arrival = c.start;
      reversed.push_back(step);
      break;
    }
  }
  cp.steps.assign(reversed.rbegin(), reversed.rend());
  for (auto& s : cp.steps) {
    const TimelineOp& o = t.ops[s.op];
    s.waitMs = std::max(0.0, o.start - s.arrival);
    cp.computeMs += o.duration();
    cp.waitMs += s.waitMs;
  }
  cp.start = t.ops[cp.steps.front().op].start;
  cp.end = t.ops[cp.steps.back().op].end;
  return cp;
}

std::vector<DeviceBubbles> attributeBubbles(const Timeline& t, const Schedule& plan, double minGapMs) {
  detail::TimelineIndex ix(t);
  DependencyGraph g(plan);
  std::vector<DeviceBubbles> out(static_cast<size_t>(ix.devices()));
  if (t.ops.empty()) return out;
  double origin = std::numeric_limits<double>::infinity();
  double finish = -std::numeric_limits<double>::infinity();
  for (const auto& o : t.ops) {
    origin = std::min(origin, o.start);
    finish = std::max(finish, o.end);
  }
  minGapMs = std::max(minGapMs, kTimeEps);
  for (int d = 0; d < ix.devices(); ++d) {
    DeviceBubbles& db = out[static_cast<size_t>(d)];
    db.device = d;
    std::map<int, double> waited;
    double busyUntil = origin;
    double busy = 0;
    for (size_t i : ix.onDevice(d)) {
      const TimelineOp& o = t.ops[i];
      if (!detail::occupiesCompute(o.op.kind)) continue;
      if (o.start > busyUntil + minGapMs) {
        double gapStart = busyUntil;
        std::optional<detail::Arrival> last;
        for (const auto& a : detail::arrivalsOf(ix, g, i))
          if (!last || a.time > last->time) last = a;
        double explainedUntil = gapStart;
        if (last && last->time > gapStart + kTimeEps) {
          Bubble b;
          b.device = d;
          b.start = gapStart;
          b.end = std::min(last->time, o.start);
          b.cause = BubbleCause::Dependency;
          b.before = i;
          b.waitedFor = t.ops[last->op].op;
          b.waitedOp = last->op;
          b.waitedOnDevice = t.ops[last->op].device;
          b.transfer = last->transfer;
          explainedUntil = b.end;
          db.dependencyMs += b.duration();
          waited[b.waitedOnDevice] += b.duration();
          db.bubbles.push_back(b);
        }
        if (o.start - explainedUntil > minGapMs) {
          Bubble b;
          b.device = d;
          b.start = explainedUntil;
          b.end = o.start;
          b.cause = BubbleCause::Unexplained;
          b.before = i;
          db.unexplainedMs += b.duration();
          db.bubbles.push_back(b);
        }
      }
      if (o.end > busyUntil) {
        busy += o.end - std::max(busyUntil, o.start);
        busyUntil = o.end;
      }
    }
    if (finish - busyUntil > minGapMs) {
      Bubble b;
      b.device = d;
      b.start = busyUntil;
      b.end = finish;
      b.cause = BubbleCause::Tail;
      db.tailMs += b.duration();
      db.bubbles.push_back(b);
    }
    db.idleMs = std::max(0.0, (finish - origin) - busy);
    for (auto& [dev, ms] : waited) db.waitedOn.push_back(DeviceWait{dev, ms});
    std::stable_sort(db.waitedOn.begin(), db.waitedOn.end(),
                     [](const DeviceWait& a, const DeviceWait& b) { return a.ms > b.ms; });
  }
  return out;
}

}  // namespace ps::core
