#pragma once
// Pure timeline geometry: time <-> x, row layout, the blocks of each device row, hit testing,
// level of detail and drop targets. No painting and no widgets, so every rule here is unit
// tested and the TimelineView only paints and forwards input.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "pipestudio/core/analysis/comparison.h"
#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/core/model/schedule.h"
#include "pipestudio/core/model/timeline.h"

namespace ps::ui {

// Horizontal mapping between milliseconds and content pixels. `offsetPx` is the scroll
// position: the content pixel shown at the left edge of the plot area.
class TimeAxis {
 public:
  TimeAxis() = default;
  TimeAxis(double pixelsPerMs, double offsetPx) : pxPerMs_(pixelsPerMs), offsetPx_(offsetPx) {}

  double pixelsPerMs() const { return pxPerMs_; }
  double offsetPx() const { return offsetPx_; }
  void setPixelsPerMs(double v) { pxPerMs_ = v; }
  void setOffsetPx(double v) { offsetPx_ = v; }

  // Plot-area x (0 = left edge of the plot) of time t, and back.
  double toX(double t) const { return t * pxPerMs_ - offsetPx_; }
  double toTime(double x) const { return (x + offsetPx_) / pxPerMs_; }
  double contentWidth(double durationMs) const { return durationMs * pxPerMs_; }

  // Scale that shows [0, durationMs] in widthPx (with nothing to show, 1 px per ms).
  static double fitScale(double durationMs, double widthPx);
  // Zooms by `factor` keeping the time under plot-area x fixed; the scale is clamped to
  // [minScale, maxScale] and the offset never goes below 0.
  void zoomAround(double x, double factor, double minScale, double maxScale);

 private:
  double pxPerMs_ = 1.0;
  double offsetPx_ = 0.0;
};

// A measured span (Perfetto's ruler selection): the times between two pointer positions.
struct TimeSpan {
  double from = 0;
  double to = 0;
  double length() const { return to - from; }
};
// The span between plot-area x0 and x1 on `axis`, ordered and never before 0.
TimeSpan spanBetween(const TimeAxis& axis, double x0, double x1);

// A label's box (arrows' "+0.32 ms"): placed where it wants to be, or moved up past the boxes
// already placed so that no two overlap (at most `tries` steps, then where it wanted).
struct LabelBox {
  double x = 0, y = 0, w = 0, h = 0;
  bool intersects(const LabelBox& o) const {
    return x < o.x + o.w && o.x < x + w && y < o.y + o.h && o.y < y + h;
  }
};
LabelBox placeLabel(LabelBox want, const std::vector<LabelBox>& taken, int tries = 6);

// WASD (Perfetto, Chrome's trace viewer): W / S zoom by this factor (in / out), A / D pan by
// this fraction of the plot's width.
inline constexpr double kKeyZoomFactor = 1.25;
inline constexpr double kKeyPanFraction = 0.15;

// Vertical layout: a time ruler on top, then one row per device.
struct RowLayout {
  double rulerHeight = 26;
  double rowHeight = 34;
  double rowGap = 8;
  double labelWidth = 132;  // device/stage labels left of the plot
  // Measured overlay: a second lane of this height under each row's planned lane (0: none).
  double overlayHeight = 0;
  double overlayGap = 3;  // between the planned and the measured lane

  bool hasOverlay() const { return overlayHeight > 0; }
  // Height of a device row with everything in it (planned lane, and measured lane if any).
  double rowSpan() const { return rowHeight + (hasOverlay() ? overlayGap + overlayHeight : 0.0); }
  double pitch() const { return rowSpan() + rowGap; }
  double rowTop(int device) const { return rulerHeight + rowGap + device * pitch(); }
  // Top of the measured lane of a row (content y).
  double overlayTop(int device) const { return rowTop(device) + rowHeight + overlayGap; }
  double overlayBottom(int device) const { return overlayTop(device) + overlayHeight; }
  double rowBottom(int device) const { return rowTop(device) + rowHeight; }  // planned lane
  double rowCenter(int device) const { return rowTop(device) + rowHeight / 2; }
  // Vertical extent (offset from rowTop, height) of a lane. With a copy lane (OFFLOAD/RELOAD
  // run on a copy stream beside compute) compute takes the top of the row, copies a strip
  // at the bottom.
  std::pair<double, double> lane(int laneIndex, bool twoLanes) const;
  // Lane at y within a row (offset from rowTop).
  int laneAt(double offsetInRow, bool twoLanes) const;
  double contentHeight(int devices) const { return rowTop(devices); }
  // Device whose row (including half the gap around it) holds content y; -1 above the first
  // row, `devices` clamps to the last row.
  int rowAt(double y, int devices) const;
};

// One drawable entry of a device's order: an op or an overlapped pair at step `step`.
struct Block {
  int device = 0;
  int step = 0;
  ps::core::Op op;
  std::optional<ps::core::Op> second;  // overlapped pair
  double start = 0;
  double end = 0;
  bool reached = true;  // false: the simulation stalled before this op (placed after the rest)
  int chunk = 0;        // index of the op's stage among the stages on its device
  int lane = 0;         // 0 compute, 1 copy stream (OFFLOAD / RELOAD)
  double duration() const { return end - start; }
};

// Copy-stream kinds run beside compute on their device.
bool runsOnCopyLane(ps::core::OpKind k);

// Blocks of every device, one per step in order. Within a lane ops run one after another;
// copies may overlap compute, so visibility uses a running maximum of ends and a trailing
// minimum of starts (both monotonic) for binary search.
class BlockIndex {
 public:
  // Times come from `timeline` (matched by device and step). Steps the timeline lacks (a
  // stalled simulation) follow the last timed op of their row, lasting `fallbackMs` or what
  // `duration` says for the op.
  static BlockIndex build(const ps::core::Schedule& s, const ps::core::Timeline& timeline,
                          double fallbackMs = 1.0,
                          const std::function<double(const ps::core::Op&)>& duration = {});

  int devices() const { return static_cast<int>(rows_.size()); }
  const std::vector<Block>& row(int device) const { return rows_[static_cast<size_t>(device)]; }
  const Block* block(int device, int step) const;
  double endTime() const { return endTime_; }
  size_t size() const;
  bool hasCopyLane() const { return copyLane_; }

  // Half-open index range [first, last) of blocks in `row` overlapping [t0, t1].
  std::pair<size_t, size_t> visibleRange(int device, double t0, double t1) const;
  // Block at time t in the row (in `lane`, or any lane when -1), accepting `toleranceMs`
  // either side (for thin blocks).
  std::optional<size_t> hitTest(int device, double t, double toleranceMs = 0, int lane = -1) const;

 private:
  void finishRow(size_t d);
  std::vector<std::vector<Block>> rows_;
  std::vector<std::vector<double>> prefixEnd_;    // max end of blocks [0, i]
  std::vector<std::vector<double>> suffixStart_;  // min start of blocks [i, n)
  double endTime_ = 0;
  bool copyLane_ = false;
};

// What the painter draws for a run of blocks: a single block when it is wide enough, or a
// merged span of blocks that are each thinner than the minimum width (level of detail).
struct LodSpan {
  double x0 = 0, x1 = 0;
  size_t first = 0, last = 0;  // blocks [first, last)
  bool merged = false;
  size_t dominant = 0;  // the block whose colour stands for a merged span (the longest)
};

// Groups blocks [first, last) of `row` for painting at the axis' scale: blocks narrower than
// minPx are merged with their neighbours until the span is at least minPx wide or a visible
// gap (> minPx) separates them. Only blocks of `lane` (-1: all, for single-lane rows) take
// part. Output spans are in x order and do not overlap.
std::vector<LodSpan> levelOfDetail(const std::vector<Block>& row, size_t first, size_t last,
                                   const TimeAxis& axis, double minPx, int lane = -1);

// Where a dragged step lands: its index in the device's order after the move when dropped at
// time t (the number of other blocks whose centre lies before t).
int dropIndex(const std::vector<Block>& row, int draggedStep, double t);
// Time at which to draw the drop indicator for that target: the gap between the neighbours
// the dragged block would end up between.
double dropIndicatorTime(const std::vector<Block>& row, int draggedStep, int targetIndex);

// ---- Measured overlay ------------------------------------------------------------------------

// How far a measured op's duration is from the planned one (measured / predicted).
enum class DeviationBand : std::uint8_t {
  Unknown,  // unmatched op (e.g. a measured SEND/RECV) or a plan that gives it no time
  Good,     // <= goodMax (1.1 by default): as planned or faster
  Warn,     // between
  Bad,      // >= badMin (1.5 by default)
};
DeviationBand deviationBand(std::optional<double> deviation, double goodMax = 1.1, double badMin = 1.5);

// The measured lane: every op of the measured timeline, placed on the planned time axis
// (Comparison::align), with its deviation and whether it lies on the measured critical path.
// Blocks reuse `Block` (step = index of the op in the measured Timeline::ops) so the level of
// detail and visibility rules are the planned lane's.
class OverlayIndex {
 public:
  struct Info {
    std::optional<double> deviation;
    bool matched = false;
    bool critical = false;
  };
  // Rows for devices [0, devices); measured ops on other devices are counted in dropped().
  static OverlayIndex build(const ps::core::Comparison& c, const ps::core::Timeline& measured, int devices);

  bool empty() const { return size() == 0; }
  int devices() const { return static_cast<int>(rows_.size()); }
  const std::vector<Block>& row(int device) const { return rows_[static_cast<size_t>(device)]; }
  const Info& info(int device, size_t i) const { return info_[static_cast<size_t>(device)][i]; }
  size_t size() const;
  size_t dropped() const { return dropped_; }
  double endTime() const { return endTime_; }  // aligned end of the last measured op
  std::pair<size_t, size_t> visibleRange(int device, double t0, double t1) const;
  std::optional<size_t> hitTest(int device, double t, double toleranceMs = 0) const;

 private:
  std::vector<std::vector<Block>> rows_;
  std::vector<std::vector<Info>> info_;
  std::vector<std::vector<double>> prefixEnd_;
  double endTime_ = 0;
  size_t dropped_ = 0;
};

// Nice tick spacing (1, 2, 5 x 10^k ms) for a ruler at `pixelsPerMs` with ticks at least
// minSpacingPx apart.
double tickStep(double pixelsPerMs, double minSpacingPx);

// Breakpoint dots of one row (x, y in pixels): dots closer than `minGapPx` to the previous
// cluster's first dot join it, so a zoomed-out row shows one dot per cluster with a count
// instead of a smeared line. Clusters come out in x order; a cluster sits at its dots' mean.
struct DotCluster {
  double x = 0, y = 0;
  int count = 0;
};
std::vector<DotCluster> clusterDots(std::vector<std::pair<double, double>> dots, double minGapPx);

}  // namespace ps::ui
