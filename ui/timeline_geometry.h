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

#include "pipestudio/core/cost_profile.h"
#include "pipestudio/core/schedule.h"
#include "pipestudio/core/timeline.h"

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

// Vertical layout: a time ruler on top, then one row per device.
struct RowLayout {
  double rulerHeight = 26;
  double rowHeight = 34;
  double rowGap = 8;
  double labelWidth = 132;  // device/stage labels left of the plot

  double rowTop(int device) const { return rulerHeight + rowGap + device * (rowHeight + rowGap); }
  double rowBottom(int device) const { return rowTop(device) + rowHeight; }
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

// Nice tick spacing (1, 2, 5 x 10^k ms) for a ruler at `pixelsPerMs` with ticks at least
// minSpacingPx apart.
double tickStep(double pixelsPerMs, double minSpacingPx);

}  // namespace ps::ui
