#include "timeline/timeline_view.h"

#include <QEvent>
#include <QHelpEvent>
#include <QPainter>
#include <QScrollBar>
#include <QToolTip>
#include <algorithm>
#include <cmath>

#include "document/metrics_text.h"
#include "pipestudio/core/planning/schedule_edits.h"
#include "timeline/timeline_internal.h"

namespace ps::ui {

using namespace ps::core;
using namespace ps::ui::timeline_detail;

namespace {

// Tooltips are laid out as one line per <br>: a value never breaks inside ("(1.00" / "ms)").
QString noWrap(const QString& html) {
  return QStringLiteral("<div style='white-space:pre'>%1</div>").arg(html);
}

QString fmtBytes(std::int64_t b) {
  return QString::fromStdString(ps::core::formatByteSize(b));
}

std::int64_t memoryAt(const Timeline& t, int device, double time) {
  if (device < 0 || device >= static_cast<int>(t.memory.size())) return -1;
  const auto& m = t.memory[static_cast<size_t>(device)];
  if (m.empty()) return -1;
  auto it =
      std::upper_bound(m.begin(), m.end(), time, [](double v, const MemorySample& s) { return v < s.time; });
  if (it == m.begin()) return m.front().bytes;
  return std::prev(it)->bytes;
}

}  // namespace

TimelineView::TimelineView(ScheduleDocument* doc, QWidget* parent)
    : TimelineView(doc, new MeasuredOverlay(doc), parent) {
  overlayModel_->setParent(this);
}

TimelineView::TimelineView(ScheduleDocument* doc, MeasuredOverlay* overlay, QWidget* parent)
    : QAbstractScrollArea(parent), doc_(doc), overlayModel_(overlay) {
  Q_ASSERT(overlay && overlay->document() == doc);
  setMouseTracking(true);
  viewport()->setMouseTracking(true);
  setFocusPolicy(Qt::StrongFocus);
  setFrameShape(QFrame::NoFrame);
  setHorizontalScrollBarPolicy(Qt::ScrollBarAsNeeded);
  setVerticalScrollBarPolicy(Qt::ScrollBarAsNeeded);
  viewport()->setAttribute(Qt::WA_OpaquePaintEvent);
  setMinimumSize(320, 140);
  theme_ = Theme::forPalette(palette());
  // The model recompares on the document's changed() before this view rebuilds on it.
  connect(overlayModel_, &MeasuredOverlay::changed, this, &TimelineView::overlayModelChanged);
  connect(doc_, &ScheduleDocument::changed, this, &TimelineView::documentChanged);
  if (overlayModel_->active()) overlayModelChanged(MeasuredOverlay::Change::Replaced);
  rebuild();
}

void TimelineView::setLayoutMode(LayoutMode m) {
  if (mode_ == m) return;
  mode_ = m;
  if (m == LayoutMode::Slots) doc_->setSlotsWanted(true);  // emits changed -> rebuild
  fitted_ = true;
  rebuild();
}

bool TimelineView::iterationsShownFor(const Analysis& a) const {
  return mode_ == LayoutMode::Time && a.iterations && !a.iterations->unrolled.devices.empty();
}

bool TimelineView::iterationsShown() const {
  return iterationsShownFor(displayAnalysis());
}

const Timeline& TimelineView::displayTimeline(const Analysis& a) const {
  if (mode_ == LayoutMode::Slots && a.slots) return *a.slots;
  if (iterationsShownFor(a)) return a.iterations->timeline;
  return a.timeline;
}

const Schedule& TimelineView::displaySchedule(const Analysis& a) const {
  return iterationsShownFor(a) ? a.iterations->unrolled : a.schedule;
}

std::function<double(const Op&)> TimelineView::fallbackDuration() const {
  if (mode_ == LayoutMode::Slots) return {};  // one slot each
  QPointer<ScheduleDocument> doc = doc_;
  return [doc](const Op& op) { return doc ? doc->modelDuration(op) : 1.0; };
}

// ---- step-through ------------------------------------------------------------------------------

void TimelineView::setPlayhead(std::optional<double> axisMs, const QString& label) {
  if (playhead_ == axisMs && playheadLabel_ == label) return;
  playhead_ = axisMs;
  playheadLabel_ = label;
  viewport()->update();
}

void TimelineView::setStepMarks(StepMarks marks) {
  marks_ = std::move(marks);
  viewport()->update();
}

std::optional<double> TimelineView::playheadX() const {
  if (!playhead_) return std::nullopt;
  return layout_.labelWidth + axis_.toX(*playhead_);
}

void TimelineView::setMeasuredSpan(std::optional<TimeSpan> span) {
  measure_ = span;
  viewport()->update();
}

void TimelineView::setSearchMatches(std::vector<OpRef> matches) {
  searchMatches_ = std::move(matches);
  viewport()->update();
}

std::vector<std::pair<QString, QString>> TimelineView::inputHelp() {
  return {
      {tr("← / →"), tr("move the selected op earlier / later among its device's compute ops (its own "
                       "SEND/RECV go along)")},
      {tr("Ctrl+← / Ctrl+→"), tr("select the previous / next op on the device")},
      {tr("↑ / ↓"), tr("select the op on the device above / below")},
      {tr("Home / End"), tr("select the device's first / last op")},
      {tr("any arrow, nothing selected"), tr("select the first op in view")},
      {tr("Enter"), tr("zoom to the selected op")},
      {tr("W / S"), tr("zoom in / out around the pointer (or the middle)")},
      {tr("A / D"), tr("pan left / right")},
      {tr("Ctrl+wheel, Ctrl++ / Ctrl+-"), tr("zoom around the pointer / the middle; Ctrl+0 fits")},
      {tr("wheel, Shift+wheel"), tr("pan")},
      {tr("double-click"), tr("zoom to an op")},
      {tr("drag a block"), tr("reorder it along its row (the preview re-simulates; Esc cancels)")},
      {tr("Shift+drag"), tr("measure the time between two points (Esc clears)")},
      {tr("click or drag the ruler"), tr("move the step-through playhead")},
      {tr("Esc"), tr("cancel a drag, clear the measured span, else clear the selection")},
      {tr("Ctrl+F, then Enter / Shift+Enter (F3 / Shift+F3)"), tr("find ops; the next / previous match")},
  };
}

// ---- measured overlay ---------------------------------------------------------------------------

void TimelineView::overlayModelChanged(MeasuredOverlay::Change change) {
  const Comparison* c = overlayModel_->comparison();
  const Timeline* m = overlayModel_->timeline();
  overlay_ = c && m ? OverlayIndex::build(*c, *m, static_cast<int>(doc_->analysis().schedule.devices.size()))
                    : OverlayIndex{};
  // Recompared after an edit: the document's changed() rebuilds this view next.
  if (change == MeasuredOverlay::Change::Recompared) return;
  fitted_ = true;
  rebuild();
}

double TimelineView::contentEnd() const {
  return overlayShown() ? std::max(blocks().endTime(), overlay_.endTime()) : blocks().endTime();
}

QColor TimelineView::deviationColor(DeviationBand band) {
  return Theme::lightVariant().deviationColor(band);  // the same in both variants
}

void TimelineView::changeEvent(QEvent* e) {
  // The theme follows the palette (a style, the platform's dark mode, --palette dark).
  if (e->type() == QEvent::PaletteChange || e->type() == QEvent::ApplicationPaletteChange) {
    theme_ = Theme::forPalette(palette());
    viewport()->update();
  }
  QAbstractScrollArea::changeEvent(e);
}

QString TimelineView::overlayTooltip(int device, size_t i) const {
  const Block& b = overlay_.row(device)[i];
  const auto& inf = overlay_.info(device, i);
  const Schedule& s = doc_->analysis().schedule;
  QString t = QStringLiteral("<b>%1</b> measured on device %2<br>")
                  .arg(QString::fromStdString(s.opName(b.op)))
                  .arg(device);
  const Timeline* measured = overlayModel_->timeline();
  if (measured && static_cast<size_t>(b.step) < measured->ops.size()) {
    const auto& o = measured->ops[static_cast<size_t>(b.step)];
    t += tr("%1 – %2 ms (%3 ms)").arg(fmtMs(o.start), fmtMs(o.end), fmtMs(o.duration()));
  }
  if (inf.deviation)
    t += tr("<br>measured / planned: <b>%1×</b>").arg(*inf.deviation, 0, 'f', 2);
  else if (!inf.matched)
    t += tr("<br>not in the plan");
  if (inf.critical) t += tr("<br>on the measured critical path");
  return t;
}

void TimelineView::documentChanged() {
  if (dragging_) endDrag(false);
  rebuild();
}

namespace {
void collectOutlines(const Analysis& a, std::unordered_set<std::uint64_t>& invalid,
                     std::unordered_set<std::uint64_t>& cycle) {
  invalid.clear();
  cycle.clear();
  for (const auto& d : a.diagnostics) {
    if (d.severity != Severity::Error) continue;
    for (const auto& r : d.related) invalid.insert(refKey(r.device, r.step));
  }
  for (const auto& w : a.validation.deadlock) cycle.insert(refKey(w.at.device, w.at.step));
}
}  // namespace

void TimelineView::rebuild() {
  const Analysis& a = doc_->analysis();
  const bool iter = iterationsShownFor(a);
  blocks_ = BlockIndex::build(displaySchedule(a), displayTimeline(a), 1.0, fallbackDuration());
  marks_iter_ = iter ? ps::ui::iterationMarks(*a.iterations) : std::vector<IterationMark>{};
  collectOutlines(a, invalid_, cycle_);
  if (iter) {
    // Outlines and selection name steps of the one-iteration schedule, not of the K shown.
    invalid_.clear();
    cycle_.clear();
    if (selected_) {
      selected_.reset();
      Q_EMIT selectionChanged();
    }
  }
  fitRowHeight();
  if (selected_ && !doc_->find(*selected_)) {
    selected_.reset();
    Q_EMIT selectionChanged();
  }
  if (fitted_) {
    axis_.setPixelsPerMs(TimeAxis::fitScale(contentEnd(), plotWidth()));
    axis_.setOffsetPx(0);
  }
  updateScrollBars();
  viewport()->update();
}

double TimelineView::plotWidth() const {
  return std::max(10.0, viewport()->width() - layout_.labelWidth - 12.0);
}

void TimelineView::updateScrollBars() {
  const double content = axis_.contentWidth(contentEnd());
  const int hmax = static_cast<int>(std::max(0.0, std::ceil(content - plotWidth())));
  horizontalScrollBar()->blockSignals(true);
  horizontalScrollBar()->setRange(0, hmax);
  horizontalScrollBar()->setPageStep(static_cast<int>(plotWidth()));
  horizontalScrollBar()->setSingleStep(20);
  horizontalScrollBar()->setValue(static_cast<int>(axis_.offsetPx()));
  horizontalScrollBar()->blockSignals(false);
  axis_.setOffsetPx(std::clamp(axis_.offsetPx(), 0.0, static_cast<double>(hmax)));
  const double h = layout_.contentHeight(blocks().devices()) + layout_.rowGap;
  const int vmax = static_cast<int>(std::max(0.0, std::ceil(h - viewport()->height())));
  verticalScrollBar()->setRange(0, vmax);
  verticalScrollBar()->setPageStep(viewport()->height());
  verticalScrollBar()->setSingleStep(static_cast<int>(layout_.rowHeight));
}

void TimelineView::fitRowHeight() {
  // Few devices: taller rows fill the view; many: a readable minimum and a scroll bar.
  const int D = std::max(1, blocks().devices());
  // Thin rows (previews) close up their gaps too when there are many.
  layout_.rowGap = minRowHeight_ < 26 && D > 6 ? (D > 12 ? 2 : 3) : 8;
  // The ruler, the gap above the first row, each row's gap below it and the bottom margin.
  const double avail = viewport()->height() - layout_.rulerHeight - 2 * layout_.rowGap - D * layout_.rowGap;
  if (overlayShown()) {
    // Planned and measured lanes of equal height, so durations compare at a glance.
    layout_.rowHeight =
        std::clamp(std::floor((avail / D - layout_.overlayGap) / 2), std::min(22.0, minRowHeight_), 52.0);
    layout_.overlayHeight = layout_.rowHeight;
  } else {
    layout_.overlayHeight = 0;
    layout_.rowHeight = std::clamp(std::floor(avail / D), minRowHeight_, 60.0);
  }
}

void TimelineView::resizeEvent(QResizeEvent* e) {
  QAbstractScrollArea::resizeEvent(e);
  fitRowHeight();
  if (fitted_) axis_.setPixelsPerMs(TimeAxis::fitScale(contentEnd(), plotWidth()));
  updateScrollBars();
}

void TimelineView::scrollContentsBy(int, int) {
  axis_.setOffsetPx(horizontalScrollBar()->value());
  viewport()->update();
}

void TimelineView::zoomBy(double factor, double plotX) {
  const double fit = TimeAxis::fitScale(contentEnd(), plotWidth());
  axis_.zoomAround(plotX, factor, fit * 0.5, std::max(fit * 50000, 2000.0));
  fitted_ = false;
  updateScrollBars();
  viewport()->update();
}

void TimelineView::zoomIn() {
  zoomBy(1.5, plotWidth() / 2);
}
void TimelineView::zoomOut() {
  zoomBy(1 / 1.5, plotWidth() / 2);
}
void TimelineView::zoomToFit() {
  fitted_ = true;
  axis_.setPixelsPerMs(TimeAxis::fitScale(contentEnd(), plotWidth()));
  axis_.setOffsetPx(0);
  updateScrollBars();
  viewport()->update();
}

std::optional<OpRef> TimelineView::selection() const {
  if (!selected_) return std::nullopt;
  return doc_->find(*selected_);
}

void TimelineView::selectOp(std::optional<Op> op, bool scrollTo) {
  // K iterations shown: the blocks are not the document's steps, so nothing is selectable.
  if (op && iterationsShown()) op.reset();
  selected_ = op;
  if (scrollTo && op)
    if (auto r = doc_->find(*op)) ensureVisible(*r);
  viewport()->update();
  Q_EMIT selectionChanged();
}

void TimelineView::selectRef(OpRef ref, bool scrollTo) {
  const Op* op = opAt(doc_->schedule(), ref);
  selectOp(op ? std::optional<Op>(*op) : std::nullopt, scrollTo);
}

void TimelineView::ensureVisible(OpRef ref) {
  const Block* b = blocks().block(ref.device, ref.step);
  if (!b) return;
  const double w = plotWidth();
  const double x0 = axis_.toX(b->start), x1 = axis_.toX(b->end);
  if (x0 < 0 || x1 > w) {
    const double target = axis_.offsetPx() + (x0 + x1) / 2 - w / 2;
    fitted_ = false;
    axis_.setOffsetPx(std::max(0.0, target));
    updateScrollBars();
    horizontalScrollBar()->setValue(static_cast<int>(axis_.offsetPx()));
  }
  const int top = static_cast<int>(layout_.rowTop(ref.device) - layout_.rulerHeight - layout_.rowGap);
  const int bottom = static_cast<int>(layout_.rowBottom(ref.device) + layout_.rowGap);
  auto* vs = verticalScrollBar();
  if (top < vs->value())
    vs->setValue(top);
  else if (bottom > vs->value() + viewport()->height())
    vs->setValue(bottom - viewport()->height());
  viewport()->update();
}

QRectF TimelineView::blockRect(const Block& b, const TimeAxis& axis, double scrollY,
                               const QRect& target) const {
  const double x0 = target.left() + layout_.labelWidth + axis.toX(b.start);
  const double x1 = target.left() + layout_.labelWidth + axis.toX(b.end);
  const auto [off, h] = layout_.lane(b.lane, blocks().hasCopyLane());
  const double y = target.top() + layout_.rowTop(b.device) - scrollY + off;
  return QRectF(x0, y, std::max(1.0, x1 - x0), h);
}

std::optional<QPoint> TimelineView::blockCenter(OpRef ref) const {
  const Block* b = blocks().block(ref.device, ref.step);
  if (!b) return std::nullopt;
  return blockRect(*b, axis_, verticalScrollBar()->value(), viewport()->rect()).center().toPoint();
}

bool TimelineView::isOutlinedInvalid(OpRef ref) const {
  return invalid_.count(refKey(ref.device, ref.step)) > 0;
}

std::optional<TimelineView::Hit> TimelineView::hitAt(QPoint pos) const {
  const double scrollY = verticalScrollBar()->value();
  if (pos.x() < layout_.labelWidth || pos.y() < layout_.rulerHeight) return std::nullopt;
  const double y = pos.y() + scrollY;
  const int d = layout_.rowAt(y, blocks().devices());
  if (d < 0 || y < layout_.rowTop(d) || y > layout_.rowBottom(d)) return std::nullopt;
  const double t = axis_.toTime(pos.x() - layout_.labelWidth);
  const int lane = layout_.laneAt(y - layout_.rowTop(d), blocks().hasCopyLane());
  auto i = blocks().hitTest(d, t, kHitSlopPx / axis_.pixelsPerMs(), blocks().hasCopyLane() ? lane : -1);
  if (!i) return std::nullopt;
  return Hit{d, static_cast<int>(*i)};
}

// ---- tooltip ----------------------------------------------------------------------------------

QString TimelineView::tooltipFor(const Block& b) const {
  const Analysis& a = displayAnalysis();
  if (iterationsShownFor(a)) {
    // The K-iteration run: its own op names and times, nothing of the one-iteration analysis.
    const auto& r = *a.iterations;
    const QString name = QString::fromStdString(r.unrolled.opName(b.op));
    QString html = QStringLiteral("<b>%1</b> &nbsp;<span style='color:gray'>device %2</span>")
                       .arg(name.toHtmlEscaped())
                       .arg(b.device);
    if (const TimelineOp* t = timedOp(r.timeline, b.device, b.step))
      html += tr("<br>start %1 ms &nbsp;end %2 ms &nbsp;(%3 ms)")
                  .arg(fmtMs(t->start), fmtMs(t->end), fmtMs(t->duration()));
    html += tr("<br>%1 iterations, %2 boundary; edit with Iterations = 1")
                .arg(r.iterations)
                .arg(QString::fromStdString(std::string(iterationBoundaryName(r.boundary))));
    return html;
  }
  const Schedule& s = a.schedule;
  QString name = QString::fromStdString(s.opName(b.op));
  if (b.second) name += QStringLiteral(" + ") + QString::fromStdString(s.opName(*b.second));
  QString html = QStringLiteral("<b>%1</b> &nbsp;<span style='color:gray'>device %2, step %3</span>")
                     .arg(name.toHtmlEscaped())
                     .arg(b.device)
                     .arg(b.step);
  const TimelineOp* t = timedOp(a.timeline, b.device, b.step);
  if (!t || !b.reached) {
    html += tr("<br>not reached: the simulation stalled before this op");
    return html;
  }
  html += tr("<br>start %1 ms &nbsp;end %2 ms &nbsp;(%3 ms)")
              .arg(fmtMs(t->start), fmtMs(t->end), fmtMs(t->duration()));
  // Waiting: the gap since the device's previous op, and the dependency that arrived last.
  const TimelineOp* prev = b.step > 0 ? timedOp(a.timeline, b.device, b.step - 1) : nullptr;
  const double prevEnd = prev ? prev->end : 0.0;
  const double wait = t->start - prevEnd;
  if (wait > 1e-6) {
    QString on;
    double latest = -1;
    for (const Op& dep : doc_->dependencies(b.op)) {
      auto ref = doc_->find(dep);
      if (!ref) continue;
      const TimelineOp* dt = timedOp(a.timeline, ref->device, ref->step);
      if (!dt) continue;
      double arrive = dt->end;
      if (const Transfer* tr = transferBetween(a.timeline, dep, b.op)) arrive = std::max(arrive, tr->end);
      if (arrive > latest) {
        latest = arrive;
        on = QString::fromStdString(s.opName(dep)) + tr(" on device %1").arg(ref->device);
      }
    }
    html += tr("<br>waited %1 ms").arg(fmtMs(wait));
    if (!on.isEmpty()) html += tr(" for %1").arg(on.toHtmlEscaped());
  } else {
    html += tr("<br>no waiting");
  }
  const std::int64_t mem = memoryAt(a.timeline, b.device, t->end);
  if (mem >= 0) html += tr("<br>memory after: %1").arg(fmtBytes(mem));
  for (const auto& d : a.diagnostics) {
    for (const auto& r : d.related)
      if (r.device == b.device && r.step == b.step) {
        html += QStringLiteral("<br><span style='color:%1'>%2</span>")
                    .arg(Theme::html(theme_.error), QString::fromStdString(d.message).toHtmlEscaped());
        break;
      }
  }
  for (const auto& m : marks_.stuck)
    if (m.device == b.device && (m.op == b.op || (b.second && m.op == *b.second))) {
      html +=
          QStringLiteral("<br><span style='color:%1'><b>%2</b> %3</span>")
              .arg(Theme::html(theme_.deadlock), tr("Stuck here when the run hung:"), m.note.toHtmlEscaped());
      if (!marks_.hang.isEmpty())
        html += QStringLiteral("<br><span style='color:%1'>%2</span>")
                    .arg(Theme::html(theme_.deadlock), marks_.hang.toHtmlEscaped());
      break;
    }
  return html;
}

bool TimelineView::viewportEvent(QEvent* e) {
  if (e->type() == QEvent::ToolTip) {
    auto* he = static_cast<QHelpEvent*>(e);
    if (auto h = hitAt(he->pos()); h && !dragging_) {
      if (const Block* b = blocks().block(h->device, h->step)) {
        QToolTip::showText(he->globalPos(), noWrap(tooltipFor(*b)), viewport());
        return true;
      }
    }
    if (overlayShown() && !dragging_ && he->pos().x() >= layout_.labelWidth) {
      const double y = he->pos().y() + verticalScrollBar()->value();
      const int d = layout_.rowAt(y, overlay_.devices());
      if (d >= 0 && y >= layout_.overlayTop(d) && y <= layout_.overlayBottom(d)) {
        const double t = axis_.toTime(he->pos().x() - layout_.labelWidth);
        if (auto i = overlay_.hitTest(d, t, kHitSlopPx / axis_.pixelsPerMs())) {
          QToolTip::showText(he->globalPos(), noWrap(overlayTooltip(d, *i)), viewport());
          return true;
        }
      }
    }
    QToolTip::hideText();
    e->ignore();
    return true;
  }
  return QAbstractScrollArea::viewportEvent(e);
}

}  // namespace ps::ui
