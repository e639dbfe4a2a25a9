// TimelineView's input: mouse (select, drag to reorder with a live preview, seek the playhead
// on the ruler), wheel (zoom, pan), keys and the op's context menu.
#include <QApplication>
#include <QContextMenuEvent>
#include <QKeyEvent>
#include <QKeySequence>
#include <QMenu>
#include <QMouseEvent>
#include <QScrollBar>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>

#include "document/metrics_text.h"
#include "pipestudio/core/planning/schedule_edits.h"
#include "timeline/timeline_internal.h"
#include "timeline/timeline_view.h"

namespace ps::ui {

using namespace ps::core;
using namespace ps::ui::timeline_detail;

void TimelineView::report(const QString& text) {
  Q_EMIT statusMessage(text);
}

void TimelineView::mousePressEvent(QMouseEvent* e) {
  setFocus();
  if (e->button() != Qt::LeftButton) return QAbstractScrollArea::mousePressEvent(e);
  if ((e->modifiers() & Qt::ShiftModifier) && e->pos().x() >= layout_.labelWidth &&
      mode_ == LayoutMode::Time) {
    // Measure: Shift+drag from here.
    measuring_ = true;
    measureStartX_ = e->pos().x() - layout_.labelWidth;
    setMeasuredSpan(spanBetween(axis_, measureStartX_, measureStartX_));
    return;
  }
  auto h = hitAt(e->pos());
  if (e->pos().x() >= layout_.labelWidth && mode_ == LayoutMode::Time) {
    // The ruler seeks (and starts stepping); so does the playhead line itself where no block
    // is under the pointer.
    const auto px = playheadX();
    if (e->pos().y() < layout_.rulerHeight || (!h && px && std::abs(e->pos().x() - *px) <= 4)) {
      seeking_ = true;
      Q_EMIT playheadSeekRequested(std::max(0.0, axis_.toTime(e->pos().x() - layout_.labelWidth)));
      return;
    }
  }
  if (!h) {
    selectOp(std::nullopt, false);
    return;
  }
  if (iterationsShown()) {
    // Blocks of later iterations are not steps of the document's schedule.
    report(tr("Editing works on one iteration: set Iterations to 1 to drag or edit ops"));
    return;
  }
  selectRef(OpRef{h->device, h->step}, false);
  pressed_ = true;
  pressPos_ = e->pos();
  dragFrom_ = *h;
  const Block* b = blocks_.block(h->device, h->step);
  grabOffsetMs_ = b ? axis_.toTime(e->pos().x() - layout_.labelWidth) - b->start : 0;
}

void TimelineView::mouseMoveEvent(QMouseEvent* e) {
  hoverX_ = e->pos().x();
  if (measuring_ && (e->buttons() & Qt::LeftButton)) {
    setMeasuredSpan(spanBetween(axis_, measureStartX_, e->pos().x() - layout_.labelWidth));
    report(tr("Span %1 (%2 → %3 ms)")
               .arg(msText(measure_->length()), fmtMs(measure_->from), fmtMs(measure_->to)));
    return;
  }
  if (seeking_ && (e->buttons() & Qt::LeftButton)) {
    Q_EMIT playheadSeekRequested(std::max(0.0, axis_.toTime(e->pos().x() - layout_.labelWidth)));
    return;
  }
  if (mode_ == LayoutMode::Time && e->pos().y() < layout_.rulerHeight && e->pos().x() >= layout_.labelWidth)
    viewport()->setCursor(Qt::SizeHorCursor);
  else
    viewport()->unsetCursor();
  if (pressed_ && editable_ && (e->buttons() & Qt::LeftButton)) {
    if (!dragging_ && (e->pos() - pressPos_).manhattanLength() >= QApplication::startDragDistance()) {
      dragging_ = true;
      dropTarget_ = -1;
    }
    if (dragging_) {
      updateDrag(e->pos());
      return;
    }
  }
  if (hoverX_ >= layout_.labelWidth) {
    double t = axis_.toTime(hoverX_ - layout_.labelWidth);
    if (mode_ == LayoutMode::Slots) {
      // Slots have no simulated time: follow the block under the pointer instead.
      t = -1;
      if (auto h = hitAt(e->pos()))
        if (const TimelineOp* op = timedOp(doc_->analysis().timeline, h->device, h->step)) t = op->start;
    }
    Q_EMIT hoverTimeChanged(t);
  } else {
    Q_EMIT hoverTimeChanged(-1);
  }
  viewport()->update();
}

void TimelineView::updateDrag(QPoint pos) {
  dragPos_ = pos;
  const Block* src = blocks_.block(dragFrom_.device, dragFrom_.step);
  if (!src) return;
  const double scrollY = verticalScrollBar()->value();
  const int rowUnder = layout_.rowAt(pos.y() + scrollY, blocks_.devices());
  const Schedule& s = doc_->schedule();
  if (rowUnder >= 0 && rowUnder != dragFrom_.device) {
    dragRefused_ = true;
    dropTarget_ = -1;
    if (preview_) {
      preview_.reset();
      Q_EMIT previewChanged();
    }
    report(tr("%1 cannot move to device %2: stage %3 is placed on device %4 (%5 placement)")
               .arg(QString::fromStdString(s.opName(src->op)))
               .arg(rowUnder)
               .arg(src->op.stage)
               .arg(s.pipeline.deviceOf(src->op.stage))
               .arg(QString::fromUtf8(placementKindName(s.pipeline.placementKind).data())));
    viewport()->update();
    return;
  }
  dragRefused_ = false;
  const double centre = axis_.toTime(pos.x() - layout_.labelWidth) - grabOffsetMs_ + src->duration() / 2;
  const int target = dropIndex(blocks_.row(dragFrom_.device), dragFrom_.step, centre);
  if (target != dropTarget_) {
    dropTarget_ = target;
    if (target == dragFrom_.step) {
      preview_.reset();
      Q_EMIT previewChanged();
      report(tr("Drop to keep %1 in place").arg(QString::fromStdString(s.opName(src->op))));
    } else if (auto moved = moveStep(s, dragFrom_.device, dragFrom_.step, target)) {
      preview_ = std::make_shared<Analysis>(doc_->analyze(*moved));
      previewBlocks_ =
          BlockIndex::build(preview_->schedule, displayTimeline(*preview_), 1.0, fallbackDuration());
      QString msg = tr("Drop %1 at position %2: makespan %3 → %4")
                        .arg(QString::fromStdString(s.opName(src->op)))
                        .arg(target)
                        .arg(makespanText(doc_->analysis()), makespanText(*preview_));
      if (!preview_->valid()) msg += tr(" · breaks a dependency");
      report(msg);
      Q_EMIT previewChanged();
    }
  }
  viewport()->update();
}

void TimelineView::endDrag(bool apply) {
  const bool wasDragging = dragging_;
  dragging_ = false;
  pressed_ = false;
  const int target = dropTarget_;
  const bool refused = dragRefused_;
  const bool hadPreview = preview_ != nullptr;
  preview_.reset();
  previewBlocks_ = BlockIndex();
  dropTarget_ = -1;
  dragRefused_ = false;
  if (hadPreview) Q_EMIT previewChanged();
  if (wasDragging && apply && !refused && target >= 0 && target != dragFrom_.step) {
    QString err;
    if (!doc_->moveStep(dragFrom_.device, dragFrom_.step, target, &err)) report(err);
  } else if (wasDragging && refused) {
    report(tr("Move refused: an op stays on the device its stage is placed on"));
  }
  viewport()->update();
}

void TimelineView::mouseReleaseEvent(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton) return QAbstractScrollArea::mouseReleaseEvent(e);
  if (measuring_) {
    measuring_ = false;
    setMeasuredSpan(spanBetween(axis_, measureStartX_, e->pos().x() - layout_.labelWidth));
    if (measure_->length() <= 0) {
      setMeasuredSpan(std::nullopt);  // a Shift+click clears
      return;
    }
    report(tr("Span %1 (%2 → %3 ms) · Esc clears")
               .arg(msText(measure_->length()), fmtMs(measure_->from), fmtMs(measure_->to)));
    return;
  }
  if (seeking_) {
    seeking_ = false;
    return;
  }
  if (dragging_) {
    updateDrag(e->pos());
    endDrag(true);
  }
  pressed_ = false;
}

void TimelineView::mouseDoubleClickEvent(QMouseEvent* e) {
  if (auto h = hitAt(e->pos())) {
    selectRef(OpRef{h->device, h->step}, false);
    const Block* b = blocks().block(h->device, h->step);
    if (b) {
      // Zoom so that the op is comfortably wide.
      const double want = plotWidth() / 12 / std::max(1e-9, b->duration());
      zoomBy(std::max(1.0, want / axis_.pixelsPerMs()), e->pos().x() - layout_.labelWidth);
    }
  }
}

void TimelineView::zoomToOp(OpRef ref) {
  const Block* b = blocks().block(ref.device, ref.step);
  if (!b) return;
  const double want = plotWidth() / 12 / std::max(1e-9, b->duration());
  zoomBy(std::max(1.0, want / axis_.pixelsPerMs()), axis_.toX((b->start + b->end) / 2));
  ensureVisible(ref);
}

std::optional<OpRef> TimelineView::firstVisibleOp() const {
  const double t0 = axis_.toTime(0), t1 = axis_.toTime(plotWidth());
  const double scrollY = verticalScrollBar()->value();
  std::optional<OpRef> any;
  for (int d = 0; d < blocks().devices(); ++d) {
    const auto& row = blocks().row(d);
    if (row.empty()) continue;
    if (!any) any = OpRef{d, row.front().step};
    if (layout_.rowBottom(d) < scrollY + layout_.rulerHeight) continue;  // scrolled away above
    auto [f, l] = blocks().visibleRange(d, t0, t1);
    if (f < l && f < row.size()) return OpRef{d, row[f].step};
  }
  return any;
}

void TimelineView::focusInEvent(QFocusEvent* e) {
  QAbstractScrollArea::focusInEvent(e);
  viewport()->update();  // the focus frame
}

void TimelineView::focusOutEvent(QFocusEvent* e) {
  QAbstractScrollArea::focusOutEvent(e);
  viewport()->update();
}

void TimelineView::leaveEvent(QEvent*) {
  hoverX_ = -1;
  Q_EMIT hoverTimeChanged(-1);
  viewport()->update();
}

void TimelineView::wheelEvent(QWheelEvent* e) {
  const double dy = e->angleDelta().y();
  if (e->modifiers() & Qt::ControlModifier) {
    zoomBy(std::pow(1.0015, dy), e->position().x() - layout_.labelWidth);
    e->accept();
    return;
  }
  if ((e->modifiers() & Qt::ShiftModifier) || verticalScrollBar()->maximum() == 0) {
    const double d = e->angleDelta().x() != 0 ? e->angleDelta().x() : dy;
    horizontalScrollBar()->setValue(horizontalScrollBar()->value() - static_cast<int>(d));
    e->accept();
    return;
  }
  QAbstractScrollArea::wheelEvent(e);
}

void TimelineView::moveSelection(int delta) {
  auto ref = selection();
  if (!ref) return;
  if (iterationsShown()) {
    report(tr("Editing works on one iteration: set Iterations to 1 to drag or edit ops"));
    return;
  }
  // Among the compute ops, carrying the op's own SEND/RECV (a compute_comms CSV): one press
  // never posts a receive after the op that needs it.
  QString err;
  if (!doc_->moveOp(ref->device, ref->step, delta, &err)) report(err);
  if (auto r = selection()) ensureVisible(*r);
}

void TimelineView::keyPressEvent(QKeyEvent* e) {
  if (dragging_ && e->key() == Qt::Key_Escape) {
    endDrag(false);
    report(tr("Drag cancelled"));
    return;
  }
  const bool ctrl = e->modifiers() & Qt::ControlModifier;
  auto ref = selection();
  const int key = e->key();
  if (!(e->modifiers() & (Qt::ControlModifier | Qt::AltModifier | Qt::MetaModifier))) {
    // WASD as in Perfetto and Chrome's trace viewer: W / S zoom around the pointer (the middle
    // when it is elsewhere), A / D pan.
    const double pointer = hoverX_ >= layout_.labelWidth ? hoverX_ - layout_.labelWidth : plotWidth() / 2;
    switch (key) {
      case Qt::Key_W:
        zoomBy(kKeyZoomFactor, pointer);
        return;
      case Qt::Key_S:
        zoomBy(1 / kKeyZoomFactor, pointer);
        return;
      case Qt::Key_A:
      case Qt::Key_D: {
        const int step = static_cast<int>(plotWidth() * kKeyPanFraction);
        horizontalScrollBar()->setValue(horizontalScrollBar()->value() + (key == Qt::Key_A ? -step : step));
        return;
      }
      default:
        break;
    }
  }
  if (key == Qt::Key_Escape && measure_ && !dragging_) {
    setMeasuredSpan(std::nullopt);
    report(tr("Span cleared"));
    return;
  }
  const bool navigation = key == Qt::Key_Left || key == Qt::Key_Right || key == Qt::Key_Up ||
                          key == Qt::Key_Down || key == Qt::Key_Home || key == Qt::Key_End;
  if (!ref && navigation && !(e->modifiers() & Qt::AltModifier)) {
    // Keyboard only: the first key selects an op to start from (the first one in view).
    if (auto first = firstVisibleOp()) {
      selectRef(*first, true);
      report(tr("Selected %1 · Ctrl+← / Ctrl+→ and ↑ / ↓ walk, ← / → move it, Enter zooms to it, F9 sets a "
                "breakpoint")
                 .arg(QString::fromStdString(doc_->schedule().opName(*selectedOp()))));
    }
    return;
  }
  switch (key) {
    case Qt::Key_Home:
    case Qt::Key_End: {
      // The first or last op of the selection's device.
      const auto& row = doc_->schedule().devices[static_cast<size_t>(ref->device)];
      if (!row.empty())
        selectRef(OpRef{ref->device, key == Qt::Key_Home ? 0 : static_cast<int>(row.size()) - 1});
      return;
    }
    case Qt::Key_Return:
    case Qt::Key_Enter:
      if (ref) zoomToOp(*ref);
      return;
    case Qt::Key_Left:
    case Qt::Key_Right: {
      const int delta = e->key() == Qt::Key_Left ? -1 : 1;
      if (!ref) return;
      if (ctrl || !editable_) {
        // Walk the selection without editing.
        const auto& row = doc_->schedule().devices[static_cast<size_t>(ref->device)];
        const int to = std::clamp(ref->step + delta, 0, static_cast<int>(row.size()) - 1);
        selectRef(OpRef{ref->device, to});
      } else {
        moveSelection(delta);
      }
      return;
    }
    case Qt::Key_Up:
    case Qt::Key_Down: {
      if (!ref) return;
      const int d = ref->device + (e->key() == Qt::Key_Up ? -1 : 1);
      if (d < 0 || d >= blocks().devices()) return;
      const Block* b = blocks().block(ref->device, ref->step);
      if (!b) return;
      if (auto i = blocks().hitTest(d, (b->start + b->end) / 2, blocks().endTime()))
        selectRef(OpRef{d, static_cast<int>(*i)});
      return;
    }
    case Qt::Key_Plus:
    case Qt::Key_Equal:
      zoomIn();
      return;
    case Qt::Key_Minus:
      zoomOut();
      return;
    case Qt::Key_0:
      zoomToFit();
      return;
    case Qt::Key_Escape:
      selectOp(std::nullopt, false);
      return;
    default:
      break;
  }
  QAbstractScrollArea::keyPressEvent(e);
}

void TimelineView::contextMenuEvent(QContextMenuEvent* e) {
  auto h = hitAt(e->pos());
  if (!h || !editable_) return;
  if (iterationsShown()) {
    report(tr("Editing works on one iteration: set Iterations to 1 to drag or edit ops"));
    return;
  }
  const OpRef ref{h->device, h->step};
  selectRef(ref, false);
  const Schedule& s = doc_->schedule();
  const Op* op = opAt(s, ref);
  if (!op) return;
  QMenu menu(this);
  const QString name = QString::fromStdString(s.opName(*op));
  QAction* split = menu.addAction(tr("Split %1 into I + W").arg(name));
  split->setEnabled(op->kind == OpKind::B &&
                    !s.devices[static_cast<size_t>(ref.device)][static_cast<size_t>(ref.step)].overlapped());
  QAction* merge = menu.addAction(tr("Merge I + W into B"));
  merge->setEnabled(op->kind == OpKind::I || op->kind == OpKind::W);
  menu.addSeparator();
  QAction* rec = menu.addAction(tr("Recompute stage %1").arg(op->stage));
  rec->setCheckable(true);
  rec->setChecked(stageRecomputes(s, op->stage));
  QAction* off =
      menu.addAction(tr("Offload micro-batch %1 between forward and backward").arg(op->microbatch));
  off->setEnabled(op->microbatch >= 0);
  menu.addSeparator();
  QAction* brk = menu.addAction(tr("Break When Device %1 Starts %2").arg(ref.device).arg(name));
  brk->setCheckable(true);
  for (const auto& bp : marks_.breakpoints)
    if (bp.device == ref.device && bp.kind == op->kind && bp.stage == op->stage &&
        bp.microbatch == op->microbatch && bp.on == StepEventKind::Start)
      brk->setChecked(true);
  brk->setShortcut(QKeySequence(Qt::Key_F9));
  menu.addSeparator();
  QAction* zoom = menu.addAction(tr("Zoom to fit"));
  QAction* chosen = menu.exec(e->globalPos());
  if (chosen == brk) {
    Q_EMIT breakpointToggleRequested(ref.device, *op);
    return;
  }
  QString err;
  bool ok = true;
  if (chosen == split)
    ok = doc_->splitBackward(ref, &err);
  else if (chosen == merge)
    ok = doc_->mergeInputWeight(ref, &err);
  else if (chosen == rec)
    ok = doc_->toggleRecompute(op->stage, &err);
  else if (chosen == off)
    ok = doc_->addOffloadReload(ref, &err);
  else if (chosen == zoom)
    zoomToFit();
  if (!ok) report(err);
}

}  // namespace ps::ui
