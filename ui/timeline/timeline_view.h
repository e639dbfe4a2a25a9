#pragma once
// The timeline editor: one row per device, one block per op, painted directly (only what is
// visible, merged when thinner than a few pixels). Dragging a block along its row reorders
// the device's steps with a live re-simulated preview; every edit goes through the document's
// undo stack. Geometry lives in timeline_geometry.h; this widget paints (in passes,
// timeline_paint.cpp, with the colours of its Theme) and forwards input (timeline_input.cpp).
#include <QAbstractScrollArea>
#include <QImage>
#include <QPointer>
#include <memory>
#include <optional>
#include <unordered_set>

#include "document/measured_overlay.h"
#include "document/schedule_document.h"
#include "pipestudio/core/analysis/stepper.h"
#include "timeline/iteration_marks.h"
#include "timeline/theme.h"
#include "timeline/timeline_geometry.h"

namespace ps::ui {

class TimelineView : public QAbstractScrollArea {
  Q_OBJECT
 public:
  enum class LayoutMode { Time, Slots };

  // The view draws `overlay`'s measured lanes; without one it keeps its own, empty until set.
  explicit TimelineView(ScheduleDocument* doc, QWidget* parent = nullptr);
  TimelineView(ScheduleDocument* doc, MeasuredOverlay* overlay, QWidget* parent = nullptr);

  void setLayoutMode(LayoutMode m);
  LayoutMode layoutMode() const { return mode_; }
  void setEditable(bool on) { editable_ = on; }
  // The least a row's height may shrink to before the rows scroll (previews fit thin rows).
  void setMinimumRowHeight(double px) { minRowHeight_ = px; }
  bool isEditable() const { return editable_; }

  // Selection is kept by op identity so it follows the op when it moves.
  std::optional<ps::core::OpRef> selection() const;
  std::optional<ps::core::Op> selectedOp() const { return selected_; }
  void selectOp(std::optional<ps::core::Op> op, bool scrollTo = true);
  void selectRef(ps::core::OpRef ref, bool scrollTo = true);

  void zoomIn();
  void zoomOut();
  Q_INVOKABLE void zoomToFit();
  void zoomBy(double factor, double plotX);
  // Zooms so that the op is comfortably wide, and scrolls to it (Enter, double-click).
  void zoomToOp(ps::core::OpRef ref);
  // The first op in view (top visible row, leftmost block), else the first op at all.
  std::optional<ps::core::OpRef> firstVisibleOp() const;
  const TimeAxis& axis() const { return axis_; }
  const RowLayout& rows() const { return layout_; }
  const BlockIndex& blocks() const { return preview_ ? previewBlocks_ : blocks_; }
  // The re-simulated candidate while a drag is under way, else null.
  const Analysis* previewAnalysis() const { return preview_.get(); }

  // The paint passes in the order they run: each paints one concern over the ones before.
  enum class Pass : unsigned {
    Bands,           // each device's row
    Blocks,          // the planned ops
    Overlay,         // the measured lanes
    Outlines,        // invalid ops, the deadlock cycle
    Arrows,          // unmet dependencies, the deadlock's waits, the selection's dependencies
    Drag,            // drop indicator and the dragged block's ghost
    Hover,           // the pointer's time cursor
    StepMarks,       // step-through: veil, running and blocked ops, breakpoints
    IterationMarks,  // K iterations: iteration ends and optimizer steps
    Labels,          // device and stage labels left of the plot
    Ruler,           // the time axis
    Playhead,        // step-through: the playhead line and its flag on the ruler
    Measure,         // the measured span (Shift+drag) and its length on the ruler
    Count
  };
  static constexpr unsigned passBit(Pass p) { return 1u << static_cast<unsigned>(p); }
  static constexpr unsigned kAllPasses = (1u << static_cast<unsigned>(Pass::Count)) - 1;
  // Paints the timeline as the viewport would show it with `axis` and vertical scroll
  // `scrollY` into `target` (used by paintEvent, exports and the benchmark): the background,
  // then the passes in `passes` (bits of passBit).
  void paintTimeline(QPainter& p, const QRect& target, const TimeAxis& axis, double scrollY,
                     unsigned passes = kAllPasses) const;
  // The colours painted with: the variant for the widget's palette, following its changes.
  const Theme& theme() const { return theme_; }
  // The whole timeline fitted to `size`, for previews and tests.
  QImage renderImage(QSize size) const;
  QSize fullSize(int width) const;
  // File › Export: the legend above the whole timeline, without what belongs to the session
  // (the playhead, the ops running, waiting or blocked at it, breakpoints, the pointer's cursor).
  static constexpr unsigned exportPasses() {
    return kAllPasses & ~(passBit(Pass::Drag) | passBit(Pass::Hover) | passBit(Pass::StepMarks) |
                          passBit(Pass::Playhead) | passBit(Pass::Measure));
  }
  QSize exportSize(int width) const;
  QImage exportImage(int width) const;
  bool exportSvg(const QString& path, int width) const;

  // Measured overlay (docs/gui.md, "Measured overlay"): the model's measured timeline drawn as a
  // second lane under each device's planned lane, coloured by its comparison with the plan.
  // Drawn in the time layout only.
  MeasuredOverlay* measuredOverlay() const { return overlayModel_; }
  const OverlayIndex& overlayBlocks() const { return overlay_; }
  // Fill colour of a measured block by its deviation band.
  static QColor deviationColor(DeviationBand band);

  // Iterations (docs/gui.md, "Iterations"): with K > 1 asked for in the document, the time
  // layout shows the core's K-iteration timeline and marks each device's iteration ends.
  bool iterationsShown() const;
  const std::vector<IterationMark>& iterationMarks() const { return marks_iter_; }

  // Ops outlined as invalid (errors naming them), for tests and the diagnostics dock.
  bool isOutlinedInvalid(ps::core::OpRef ref) const;
  // Viewport position of the centre of a block (for tests and scrolling).
  std::optional<QPoint> blockCenter(ps::core::OpRef ref) const;
  void ensureVisible(ps::core::OpRef ref);

  // Step-through (docs/gui.md, "Step-through"): the playhead at a time on this view's axis
  // (nullopt hides it); the ops running, waiting and blocked at the playhead, each with the device it
  // runs on; breakpoint markers on the ops they match.
  struct StepMarks {
    std::vector<std::pair<int, ps::core::Op>> running;
    std::vector<std::pair<int, ps::core::Op>> blocked;  // stuck: filled red, dashed outline
    std::vector<ps::core::Breakpoint> breakpoints;
    bool dimFuture = false;                             // veil what lies after the playhead (while stepping)
    std::vector<std::pair<int, ps::core::Op>> waiting;  // an input on its way: dashed, muted
    // A hung run at its stop: the step each device was in by the engine's post-mortem
    // (core::findHang): a thick outline in the deadlock colour and a "stuck" badge; the tooltip
    // adds `note` (what it waits for) and `hang` (the wait cycle).
    struct Stuck {
      int device = -1;
      ps::core::Op op;
      QString note;
    };
    std::vector<Stuck> stuck;
    QString hang;  // "wait cycle: rank 1 waits in 1F0 for 0F0 on rank 0, ..."
  };
  void setPlayhead(std::optional<double> axisMs, const QString& label = {});
  std::optional<double> playhead() const { return playhead_; }
  void setStepMarks(StepMarks marks);
  const StepMarks& stepMarks() const { return marks_; }
  // Viewport x of the playhead, when shown.
  std::optional<double> playheadX() const;

  // Measuring (Perfetto): Shift+drag anywhere on the plot or the ruler spans two times; the
  // span stays shown with its length until Esc or the next Shift+click.
  std::optional<TimeSpan> measuredSpan() const { return measure_; }
  void setMeasuredSpan(std::optional<TimeSpan> span);

  // Find (docs/gui.md, "Finding ops"): the ops matching the search, outlined; the current one
  // is selected. Empty clears.
  void setSearchMatches(std::vector<ps::core::OpRef> matches);
  const std::vector<ps::core::OpRef>& searchMatches() const { return searchMatches_; }

  // The timeline's keys and gestures, for Help › Keyboard Shortcuts: (keys, what they do).
  static std::vector<std::pair<QString, QString>> inputHelp();

 Q_SIGNALS:
  void selectionChanged();
  void hoverTimeChanged(double simulatedMs);  // negative when the pointer leaves
  void statusMessage(const QString& text);
  // The live drag preview started, changed or ended (previewAnalysis() is null then).
  void previewChanged();
  // Step-through: a click or drag on the time ruler (or the playhead) asks to move it there.
  void playheadSeekRequested(double axisMs);
  // The op's context menu asked for a breakpoint "when device starts op" (toggle).
  void breakpointToggleRequested(int device, ps::core::Op op);

 protected:
  void paintEvent(QPaintEvent* e) override;
  void resizeEvent(QResizeEvent* e) override;
  void scrollContentsBy(int dx, int dy) override;
  void mousePressEvent(QMouseEvent* e) override;
  void mouseMoveEvent(QMouseEvent* e) override;
  void mouseReleaseEvent(QMouseEvent* e) override;
  void mouseDoubleClickEvent(QMouseEvent* e) override;
  void wheelEvent(QWheelEvent* e) override;
  void keyPressEvent(QKeyEvent* e) override;
  void contextMenuEvent(QContextMenuEvent* e) override;
  void leaveEvent(QEvent* e) override;
  void focusInEvent(QFocusEvent* e) override;
  void focusOutEvent(QFocusEvent* e) override;
  bool viewportEvent(QEvent* e) override;
  void changeEvent(QEvent* e) override;

 private:
  struct Hit {
    int device = -1;
    int step = -1;
  };
  void documentChanged();
  void rebuild();
  void overlayModelChanged(MeasuredOverlay::Change change);
  bool overlayShown() const { return overlayModel_->active() && mode_ == LayoutMode::Time; }
  double contentEnd() const;
  QString overlayTooltip(int device, size_t i) const;
  void updateScrollBars();
  void fitRowHeight();
  std::function<double(const ps::core::Op&)> fallbackDuration() const;
  const ps::core::Timeline& displayTimeline(const Analysis& a) const;
  const ps::core::Schedule& displaySchedule(const Analysis& a) const;
  bool iterationsShownFor(const Analysis& a) const;
  const Analysis& displayAnalysis() const { return preview_ ? *preview_ : doc_->analysis(); }
  double plotWidth() const;
  std::optional<Hit> hitAt(QPoint viewportPos) const;
  QRectF blockRect(const Block& b, const TimeAxis& axis, double scrollY, const QRect& target) const;
  QString tooltipFor(const Block& b) const;
  // The passes, one function each, and what they share (timeline_paint.cpp).
  friend struct TimelinePasses;
  // The legend and the timeline into `size` (exports).
  void paintExport(QPainter& p, QSize size) const;
  void updateDrag(QPoint pos);
  void endDrag(bool apply);
  void moveSelection(int delta);
  void report(const QString& text);

  QPointer<ScheduleDocument> doc_;
  Theme theme_;
  LayoutMode mode_ = LayoutMode::Time;
  bool editable_ = true;
  double minRowHeight_ = 26;
  TimeAxis axis_;
  RowLayout layout_;
  BlockIndex blocks_;
  std::unordered_set<std::uint64_t> invalid_;  // (device << 32 | step) with errors
  std::unordered_set<std::uint64_t> cycle_;    // ops in a deadlock cycle
  bool fitted_ = true;
  std::vector<IterationMark> marks_iter_;  // of the shown K-iteration timeline
  std::optional<ps::core::Op> selected_;

  // Drag state.
  bool pressed_ = false;
  bool dragging_ = false;
  QPoint pressPos_;
  Hit dragFrom_;
  double grabOffsetMs_ = 0;
  int dropTarget_ = -1;
  QPoint dragPos_;
  bool dragRefused_ = false;
  std::shared_ptr<const Analysis> preview_;
  BlockIndex previewBlocks_;

  QPointer<MeasuredOverlay> overlayModel_;
  OverlayIndex overlay_;  // the model's measured blocks, placed

  double hoverX_ = -1;  // viewport x of the pointer, -1 when outside

  std::optional<double> playhead_;
  QString playheadLabel_;
  StepMarks marks_;
  bool seeking_ = false;    // dragging the playhead
  bool measuring_ = false;  // Shift+dragging a span
  double measureStartX_ = 0;
  std::optional<TimeSpan> measure_;
  std::vector<ps::core::OpRef> searchMatches_;
};

}  // namespace ps::ui
