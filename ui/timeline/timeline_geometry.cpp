#include "timeline/timeline_geometry.h"

#include <algorithm>
#include <cmath>

namespace ps::ui {

namespace {

size_t totalSize(const std::vector<std::vector<Block>>& rows) {
  size_t n = 0;
  for (const auto& r : rows) n += r.size();
  return n;
}

// Blocks [first, last) of a row that may show in [t0, t1]: from the first whose running maximum
// end (monotonic) reaches t0 to `last`, the end of those that start by t1.
std::pair<size_t, size_t> visibleSpan(const std::vector<double>& prefixEnd, double t0, std::ptrdiff_t last) {
  const auto first =
      static_cast<size_t>(std::lower_bound(prefixEnd.begin(), prefixEnd.end(), t0) - prefixEnd.begin());
  return {first, std::max(first, static_cast<size_t>(last))};
}

}  // namespace

double TimeAxis::fitScale(double durationMs, double widthPx) {
  if (durationMs <= 0 || widthPx <= 0) return 1.0;
  return widthPx / durationMs;
}

void TimeAxis::zoomAround(double x, double factor, double minScale, double maxScale) {
  const double t = toTime(x);
  pxPerMs_ = std::clamp(pxPerMs_ * factor, minScale, maxScale);
  offsetPx_ = std::max(0.0, t * pxPerMs_ - x);
}

std::pair<double, double> RowLayout::lane(int laneIndex, bool twoLanes) const {
  if (!twoLanes) return {0.0, rowHeight};
  const double copyH = std::max(6.0, std::round(rowHeight * 0.28));
  const double computeH = rowHeight - copyH - 2;
  return laneIndex == 0 ? std::pair{0.0, computeH} : std::pair{computeH + 2, copyH};
}

int RowLayout::laneAt(double offsetInRow, bool twoLanes) const {
  if (!twoLanes) return 0;
  const auto [top, h] = lane(1, true);
  (void)h;
  return offsetInRow >= top - 1 ? 1 : 0;
}

bool runsOnCopyLane(ps::core::OpKind k) {
  // The simulator's copy stream: OFFLOAD/RELOAD and the data-parallel UNSHARD / REDUCE_GRAD.
  return ps::core::runsOnCopyStream(k);
}

int RowLayout::rowAt(double y, int devices) const {
  if (devices <= 0 || y < rulerHeight) return -1;
  const int r = static_cast<int>(std::floor((y - rulerHeight - rowGap / 2) / pitch()));
  return std::clamp(r, 0, devices - 1);
}

BlockIndex BlockIndex::build(const ps::core::Schedule& s, const ps::core::Timeline& timeline,
                             double fallbackMs, const std::function<double(const ps::core::Op&)>& duration) {
  BlockIndex idx;
  const int D = static_cast<int>(s.devices.size());
  idx.rows_.resize(static_cast<size_t>(D));

  // Stage -> chunk (its index among the stages of its device).
  std::vector<int> chunkOf(static_cast<size_t>(std::max(0, s.pipeline.stages)), 0);
  {
    std::vector<int> seen(static_cast<size_t>(std::max(0, s.pipeline.devices)), 0);
    for (int st = 0; st < s.pipeline.stages && st < static_cast<int>(s.pipeline.stageToDevice.size()); ++st) {
      const int d = s.pipeline.stageToDevice[static_cast<size_t>(st)];
      if (d >= 0 && d < static_cast<int>(seen.size()))
        chunkOf[static_cast<size_t>(st)] = seen[static_cast<size_t>(d)]++;
    }
  }
  auto chunk = [&](int stage) {
    return stage >= 0 && stage < static_cast<int>(chunkOf.size()) ? chunkOf[static_cast<size_t>(stage)] : 0;
  };

  // Timeline ops by (device, step); an overlapped pair has two entries with one span.
  std::vector<std::vector<std::pair<double, double>>> times(static_cast<size_t>(D));
  std::vector<std::vector<char>> has(static_cast<size_t>(D));
  for (int d = 0; d < D; ++d) {
    times[static_cast<size_t>(d)].assign(s.devices[static_cast<size_t>(d)].size(), {0.0, 0.0});
    has[static_cast<size_t>(d)].assign(s.devices[static_cast<size_t>(d)].size(), 0);
  }
  for (const auto& op : timeline.ops) {
    if (op.device < 0 || op.device >= D || op.step < 0) continue;
    auto& row = times[static_cast<size_t>(op.device)];
    if (static_cast<size_t>(op.step) >= row.size()) continue;
    auto& slot = row[static_cast<size_t>(op.step)];
    auto& h = has[static_cast<size_t>(op.device)][static_cast<size_t>(op.step)];
    if (!h) {
      slot = {op.start, op.end};
      h = 1;
    } else {
      slot = {std::min(slot.first, op.start), std::max(slot.second, op.end)};
    }
  }

  for (int d = 0; d < D; ++d) {
    const auto& steps = s.devices[static_cast<size_t>(d)];
    auto& row = idx.rows_[static_cast<size_t>(d)];
    row.reserve(steps.size());
    double cursor = 0;
    for (size_t i = 0; i < steps.size(); ++i) {
      Block b;
      b.device = d;
      b.step = static_cast<int>(i);
      b.op = steps[i].first;
      b.second = steps[i].second;
      b.chunk = chunk(b.op.stage);
      b.lane = !b.second && runsOnCopyLane(b.op.kind) ? 1 : 0;
      if (b.lane == 1) idx.copyLane_ = true;
      if (has[static_cast<size_t>(d)][i]) {
        const auto [st, en] = times[static_cast<size_t>(d)][i];
        b.start = st;
        b.end = std::max(en, st);
        b.reached = true;
      } else {
        b.start = cursor;
        const double d = duration ? duration(b.op) : fallbackMs;
        b.end = cursor + (d > 0 ? d : fallbackMs);
        b.reached = false;
      }
      cursor = std::max(cursor, b.end);
      idx.endTime_ = std::max(idx.endTime_, b.end);
      row.push_back(b);
    }
    idx.finishRow(static_cast<size_t>(d));
  }
  return idx;
}

void BlockIndex::finishRow(size_t d) {
  prefixEnd_.resize(rows_.size());
  suffixStart_.resize(rows_.size());
  const auto& r = rows_[d];
  auto& pe = prefixEnd_[d];
  auto& ss = suffixStart_[d];
  pe.resize(r.size());
  ss.resize(r.size());
  double m = -1e300;
  for (size_t i = 0; i < r.size(); ++i) pe[i] = m = std::max(m, r[i].end);
  m = 1e300;
  for (size_t i = r.size(); i-- > 0;) ss[i] = m = std::min(m, r[i].start);
}

const Block* BlockIndex::block(int device, int step) const {
  if (device < 0 || device >= devices()) return nullptr;
  const auto& r = rows_[static_cast<size_t>(device)];
  if (step < 0 || static_cast<size_t>(step) >= r.size()) return nullptr;
  return &r[static_cast<size_t>(step)];
}

size_t BlockIndex::size() const {
  return totalSize(rows_);
}

std::pair<size_t, size_t> BlockIndex::visibleRange(int device, double t0, double t1) const {
  if (device < 0 || device >= devices()) return {0, 0};
  const auto& ss = suffixStart_[static_cast<size_t>(device)];
  // The last block whose suffix minimum start is by t1.
  const auto last = std::upper_bound(ss.begin(), ss.end(), t1) - ss.begin();
  return visibleSpan(prefixEnd_[static_cast<size_t>(device)], t0, last);
}

std::optional<size_t> BlockIndex::hitTest(int device, double t, double toleranceMs, int lane) const {
  auto [first, last] = visibleRange(device, t - toleranceMs, t + toleranceMs);
  if (first >= last) return std::nullopt;
  const auto& r = rows_[static_cast<size_t>(device)];
  // Prefer the block that contains t, else the nearest within tolerance.
  std::optional<size_t> best;
  double bestDist = 0;
  for (size_t i = first; i < last; ++i) {
    const Block& b = r[i];
    if (lane >= 0 && b.lane != lane) continue;
    double dist = t < b.start ? b.start - t : (t > b.end ? t - b.end : 0.0);
    if (dist > toleranceMs) continue;  // the range may hold blocks of the other lane
    if (!best || dist < bestDist) {
      best = i;
      bestDist = dist;
    }
    if (dist == 0) break;
  }
  return best;
}

std::vector<LodSpan> levelOfDetail(const std::vector<Block>& row, size_t first, size_t last,
                                   const TimeAxis& axis, double minPx, int lane) {
  std::vector<LodSpan> out;
  last = std::min(last, row.size());
  size_t i = first;
  while (i < last) {
    const Block& b = row[i];
    if (lane >= 0 && b.lane != lane) {
      ++i;
      continue;
    }
    const double x0 = axis.toX(b.start), x1 = axis.toX(b.end);
    if (x1 - x0 >= minPx) {
      out.push_back({x0, x1, i, i + 1, false, i});
      ++i;
      continue;
    }
    // Merge thin neighbours until the span is wide enough or a visible gap breaks it.
    LodSpan span{x0, x1, i, i + 1, true, i};
    double longest = b.duration();
    size_t j = i + 1;
    while (j < last && span.x1 - span.x0 < minPx) {
      const Block& n = row[j];
      if (lane >= 0 && n.lane != lane) break;
      const double nx0 = axis.toX(n.start), nx1 = axis.toX(n.end);
      if (nx0 - span.x1 > minPx || nx1 - nx0 >= minPx) break;
      span.x1 = std::max(span.x1, nx1);
      if (n.duration() > longest) {
        longest = n.duration();
        span.dominant = j;
      }
      ++j;
    }
    span.last = j;
    span.merged = span.last - span.first > 1;
    out.push_back(span);
    i = j;
  }
  return out;
}

int dropIndex(const std::vector<Block>& row, int draggedStep, double t) {
  int before = 0;
  for (size_t i = 0; i < row.size(); ++i) {
    if (static_cast<int>(i) == draggedStep) continue;
    const double centre = (row[i].start + row[i].end) / 2;
    if (centre < t) ++before;
  }
  return before;
}

double dropIndicatorTime(const std::vector<Block>& row, int draggedStep, int targetIndex) {
  // The other blocks in order; the indicator sits between others[target-1] and others[target].
  const Block* prev = nullptr;
  const Block* next = nullptr;
  int k = 0;
  for (size_t i = 0; i < row.size(); ++i) {
    if (static_cast<int>(i) == draggedStep) continue;
    if (k == targetIndex - 1) prev = &row[i];
    if (k == targetIndex) {
      next = &row[i];
      break;
    }
    ++k;
  }
  if (prev && next) return (prev->end + next->start) / 2;
  if (prev) return prev->end;
  if (next) return next->start;
  return 0;
}

double tickStep(double pixelsPerMs, double minSpacingPx) {
  if (pixelsPerMs <= 0) return 1;
  const double raw = minSpacingPx / pixelsPerMs;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) return m * mag;
  return 10 * mag;
}

// ---- Measured overlay ------------------------------------------------------------------------

DeviationBand deviationBand(std::optional<double> deviation, double goodMax, double badMin) {
  if (!deviation || !std::isfinite(*deviation)) return DeviationBand::Unknown;
  if (*deviation <= goodMax) return DeviationBand::Good;
  if (*deviation >= badMin) return DeviationBand::Bad;
  return DeviationBand::Warn;
}

OverlayIndex OverlayIndex::build(const ps::core::Comparison& c, const ps::core::Timeline& measured,
                                 int devices) {
  OverlayIndex idx;
  const size_t D = static_cast<size_t>(std::max(0, devices));
  idx.rows_.resize(D);
  idx.info_.resize(D);
  idx.prefixEnd_.resize(D);
  std::vector<const ps::core::OpMatch*> matchOf(measured.ops.size(), nullptr);
  for (const auto& m : c.matches)
    if (m.measured < matchOf.size()) matchOf[m.measured] = &m;
  std::vector<char> critical(measured.ops.size(), 0);
  for (const auto& st : c.criticalPath.steps)
    if (st.op < critical.size()) critical[st.op] = 1;

  // Ops sorted by (device, start) in a Timeline; sort per row anyway after alignment.
  std::vector<std::vector<std::pair<Block, Info>>> tmp(D);
  for (size_t i = 0; i < measured.ops.size(); ++i) {
    const auto& o = measured.ops[i];
    if (o.device < 0 || static_cast<size_t>(o.device) >= D) {
      ++idx.dropped_;
      continue;
    }
    Block b;
    b.device = o.device;
    b.step = static_cast<int>(i);
    b.op = o.op;
    b.start = c.align(o.start);
    b.end = std::max(b.start, c.align(o.end));
    Info inf;
    if (const auto* m = matchOf[i]) {
      inf.matched = true;
      inf.deviation = m->deviation;
    }
    inf.critical = critical[i] != 0;
    tmp[static_cast<size_t>(o.device)].push_back({b, inf});
  }
  for (size_t d = 0; d < D; ++d) {
    auto& t = tmp[d];
    std::stable_sort(t.begin(), t.end(),
                     [](const auto& a, const auto& b) { return a.first.start < b.first.start; });
    double run = 0;
    for (auto& [b, inf] : t) {
      idx.rows_[d].push_back(b);
      idx.info_[d].push_back(inf);
      run = std::max(run, b.end);
      idx.prefixEnd_[d].push_back(run);
      idx.endTime_ = std::max(idx.endTime_, b.end);
    }
  }
  return idx;
}

size_t OverlayIndex::size() const {
  return totalSize(rows_);
}

std::pair<size_t, size_t> OverlayIndex::visibleRange(int device, double t0, double t1) const {
  if (device < 0 || device >= devices()) return {0, 0};
  const auto& row = rows_[static_cast<size_t>(device)];
  // The last block starting by t1 (measured blocks are sorted by start).
  const auto last =
      std::upper_bound(row.begin(), row.end(), t1, [](double t, const Block& b) { return t < b.start; });
  return visibleSpan(prefixEnd_[static_cast<size_t>(device)], t0, last - row.begin());
}

std::optional<size_t> OverlayIndex::hitTest(int device, double t, double toleranceMs) const {
  auto [f, l] = visibleRange(device, t - toleranceMs, t + toleranceMs);
  std::optional<size_t> best;
  double bestDist = 0;
  for (size_t i = f; i < l; ++i) {
    const Block& b = rows_[static_cast<size_t>(device)][i];
    const double dist = t < b.start ? b.start - t : (t > b.end ? t - b.end : 0.0);
    if (dist <= toleranceMs && (!best || dist < bestDist)) {
      best = i;
      bestDist = dist;
    }
  }
  return best;
}

std::vector<DotCluster> clusterDots(std::vector<std::pair<double, double>> dots, double minGapPx) {
  std::sort(dots.begin(), dots.end());
  std::vector<DotCluster> out;
  double firstX = 0, sumX = 0, sumY = 0;
  for (const auto& [x, y] : dots) {
    if (out.empty() || x - firstX >= minGapPx) {
      out.push_back({x, y, 0});
      firstX = x;
      sumX = sumY = 0;
    }
    DotCluster& c = out.back();
    ++c.count;
    sumX += x;
    sumY += y;
    c.x = sumX / c.count;
    c.y = sumY / c.count;
  }
  return out;
}

LabelBox placeLabel(LabelBox want, const std::vector<LabelBox>& taken, int tries) {
  LabelBox b = want;
  for (int i = 0; i <= tries; ++i) {
    const auto hit =
        std::find_if(taken.begin(), taken.end(), [&](const LabelBox& t) { return t.intersects(b); });
    if (hit == taken.end()) return b;
    b.y = hit->y - b.h - 1;  // just above the one in the way
  }
  return want;
}

TimeSpan spanBetween(const TimeAxis& axis, double x0, double x1) {
  const double a = std::max(0.0, axis.toTime(std::min(x0, x1)));
  const double b = std::max(0.0, axis.toTime(std::max(x0, x1)));
  return TimeSpan{a, b};
}

}  // namespace ps::ui
