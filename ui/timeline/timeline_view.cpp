#include "timeline/timeline_view.h"
#include "panels/units_text.h"

#include "panels/metrics_text.h"

#include <QApplication>
#include <QContextMenuEvent>
#include <QHelpEvent>
#include <QKeyEvent>
#include <QKeySequence>
#include <QMenu>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QScrollBar>
#include <QToolTip>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>

#ifdef PIPESTUDIO_HAVE_SVG
#include <QSvgGenerator>
#endif

#include "timeline/op_style.h"
#include "document/schedule_edits.h"

namespace ps::ui {

using namespace ps::core;

namespace {

constexpr double kMinBlockPx = 3.0;  // thinner blocks merge (level of detail)
constexpr double kMinCommPx = 6.0;   // SEND / RECV are drawn at least this wide
constexpr double kBreakpointDotPx = 10.0;  // breakpoint dots closer than this merge
bool isCommKind(OpKind k) {
  return k == OpKind::SendF || k == OpKind::RecvF || k == OpKind::SendB || k == OpKind::RecvB;
}
constexpr double kHitSlopPx = 3.0;

std::uint64_t refKey(int device, int step) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(device)) << 32) |
         static_cast<std::uint32_t>(step);
}

// Tooltips are laid out as one line per <br>: a value never breaks inside ("(1.00" / "ms)").
QString noWrap(const QString& html) {
  return QStringLiteral("<div style='white-space:pre'>%1</div>").arg(html);
}

// One formatter across the GUI and CLI (pipestudio/core/io/units.h).
QString fmtMs(double v) {
  return msValue(v);
}

QString fmtBytes(std::int64_t b) {
  return QString::fromStdString(ps::core::formatByteSize(b));
}

// The span of (device, step) in a timeline (ops sorted by device, then start).
const TimelineOp* timedOp(const Timeline& t, int device, int step) {
  auto lo = std::lower_bound(t.ops.begin(), t.ops.end(), device,
                             [](const TimelineOp& o, int d) { return o.device < d; });
  for (auto it = lo; it != t.ops.end() && it->device == device; ++it)
    if (it->step == step) return &*it;
  return nullptr;
}

const Transfer* transferBetween(const Timeline& t, const Op& producer, const Op& consumer) {
  for (const auto& tr : t.transfers)
    if (tr.producer == producer && tr.consumer == consumer) return &tr;
  return nullptr;
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

// The playhead's colour: apart from every op kind's.
QColor playheadColor() {
  return QColor(0xd8, 0x1b, 0x60);
}

void drawArrow(QPainter& p, QPointF a, QPointF b, const QColor& c, const QString& label, bool dashed) {
  QPainterPath path(a);
  const double dx = std::max(18.0, std::abs(b.x() - a.x()) / 2);
  if (std::abs(a.y() - b.y()) < 1) {
    // Same row: arc over the blocks.
    const double lift = std::min(26.0, 10 + std::abs(b.x() - a.x()) / 12);
    path.cubicTo(a + QPointF(dx / 2, -lift), b + QPointF(-dx / 2, -lift), b);
  } else {
    path.cubicTo(a + QPointF(dx, 0), b - QPointF(dx, 0), b);
  }
  QPen pen(c, 2.0);
  if (dashed) pen.setStyle(Qt::DashLine);
  p.setPen(pen);
  p.setBrush(Qt::NoBrush);
  p.drawPath(path);
  // Head along the path's final direction.
  const QPointF tip = b;
  const QPointF from = path.pointAtPercent(0.94);
  const double ang = std::atan2(tip.y() - from.y(), tip.x() - from.x());
  const double len = 7;
  QPolygonF head;
  head << tip << tip - QPointF(len * std::cos(ang - 0.45), len * std::sin(ang - 0.45))
       << tip - QPointF(len * std::cos(ang + 0.45), len * std::sin(ang + 0.45));
  p.setPen(Qt::NoPen);
  p.setBrush(c);
  p.drawPolygon(head);
  if (!label.isEmpty()) {
    const QPointF mid = path.pointAtPercent(0.5);
    QFont f = p.font();
    f.setPointSizeF(f.pointSizeF() * 0.85);
    p.setFont(f);
    const QFontMetricsF fm(f);
    QRectF r(mid.x() - fm.horizontalAdvance(label) / 2 - 3, mid.y() - fm.height() - 2,
             fm.horizontalAdvance(label) + 6, fm.height());
    QColor bg = QApplication::palette().color(QPalette::Base);
    bg.setAlpha(220);
    p.setBrush(bg);
    p.drawRoundedRect(r, 3, 3);
    p.setPen(c);
    p.drawText(r, Qt::AlignCenter, label);
  }
}

}  // namespace

TimelineView::TimelineView(ScheduleDocument* doc, QWidget* parent) : QAbstractScrollArea(parent), doc_(doc) {
  setMouseTracking(true);
  viewport()->setMouseTracking(true);
  setFocusPolicy(Qt::StrongFocus);
  setFrameShape(QFrame::NoFrame);
  setHorizontalScrollBarPolicy(Qt::ScrollBarAsNeeded);
  setVerticalScrollBarPolicy(Qt::ScrollBarAsNeeded);
  viewport()->setAttribute(Qt::WA_OpaquePaintEvent);
  setMinimumSize(320, 140);
  connect(doc_, &ScheduleDocument::changed, this, &TimelineView::documentChanged);
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

// ---- measured overlay ---------------------------------------------------------------------------

void TimelineView::setOverlay(const Timeline& measured, ComparisonOptions options) {
  measured_ = measured;
  overlayOptions_ = options;
  fitted_ = true;
  rebuild();
}

void TimelineView::setOverlayAlignment(Alignment a) {
  overlayOptions_.alignment = a;
  if (measured_) {
    fitted_ = true;
    rebuild();
  }
}

void TimelineView::clearOverlay() {
  if (!measured_) return;
  measured_.reset();
  fitted_ = true;
  rebuild();
}

void TimelineView::rebuildOverlay() {
  const bool had = comparison_.has_value();
  if (!measured_) {
    comparison_.reset();
    overlay_ = {};
    if (had) Q_EMIT overlayChanged();
    return;
  }
  const Analysis& a = doc_->analysis();
  comparison_ = compareTimelines(a.schedule, a.timeline, *measured_, overlayOptions_);
  overlay_ = OverlayIndex::build(*comparison_, *measured_, static_cast<int>(a.schedule.devices.size()));
  Q_EMIT overlayChanged();
}

double TimelineView::contentEnd() const {
  return overlayShown() ? std::max(blocks().endTime(), overlay_.endTime()) : blocks().endTime();
}

QColor TimelineView::deviationColor(DeviationBand band) {
  switch (band) {
    case DeviationBand::Good: return QColor(0x43, 0xa0, 0x47);
    case DeviationBand::Warn: return QColor(0xff, 0xb3, 0x00);
    case DeviationBand::Bad: return QColor(0xe5, 0x39, 0x35);
    case DeviationBand::Unknown: break;
  }
  return QColor(0x9e, 0x9e, 0x9e);
}

QString TimelineView::overlayTooltip(int device, size_t i) const {
  const Block& b = overlay_.row(device)[i];
  const auto& inf = overlay_.info(device, i);
  const Schedule& s = doc_->analysis().schedule;
  QString t = QStringLiteral("<b>%1</b> measured on device %2<br>").arg(QString::fromStdString(s.opName(b.op))).arg(device);
  if (measured_ && static_cast<size_t>(b.step) < measured_->ops.size()) {
    const auto& o = measured_->ops[static_cast<size_t>(b.step)];
    t += tr("%1 – %2 ms (%3 ms)").arg(fmtMs(o.start), fmtMs(o.end), fmtMs(o.duration()));
  }
  if (inf.deviation) t += tr("<br>measured / planned: <b>%1×</b>").arg(*inf.deviation, 0, 'f', 2);
  else if (!inf.matched) t += tr("<br>not in the plan");
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
  rebuildOverlay();
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
  const double avail = viewport()->height() - layout_.rulerHeight - layout_.rowGap - D * layout_.rowGap;
  if (overlayShown()) {
    // Planned and measured lanes of equal height, so durations compare at a glance.
    layout_.rowHeight = std::clamp(std::floor((avail / D - layout_.overlayGap) / 2), 22.0, 52.0);
    layout_.overlayHeight = layout_.rowHeight;
  } else {
    layout_.overlayHeight = 0;
    layout_.rowHeight = std::clamp(std::floor(avail / D), 26.0, 60.0);
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

// ---- painting --------------------------------------------------------------------------------

void TimelineView::paintEvent(QPaintEvent*) {
  QPainter p(viewport());
  paintTimeline(p, viewport()->rect(), axis_, verticalScrollBar()->value());
}

void TimelineView::paintTimeline(QPainter& p, const QRect& target, const TimeAxis& axis,
                                 double scrollY) const {
  const QPalette pal = palette();
  const Analysis& a = displayAnalysis();
  const BlockIndex& bi = blocks();
  const Schedule& s = displaySchedule(a);
  const int D = bi.devices();
  const bool dark = pal.color(QPalette::Base).lightnessF() < 0.5;
  const QColor base = pal.color(QPalette::Base);
  const QColor band = dark ? base.lighter(118) : QColor(0xf4, 0xf6, 0xf9);
  const QColor textCol = pal.color(QPalette::Text);
  QColor muted = textCol;
  muted.setAlphaF(0.6f);
  const QColor red(0xe5, 0x39, 0x35);
  const QColor cycleCol(0xff, 0x6f, 0x00);

  p.fillRect(target, base);
  const double plotX0 = target.left() + layout_.labelWidth;
  const double plotW = target.width() - layout_.labelWidth;
  const double t0 = axis.toTime(0), t1 = axis.toTime(plotW);
  const QRectF plotClip(plotX0, target.top() + layout_.rulerHeight, plotW,
                        target.height() - layout_.rulerHeight);

  // Rows visible after vertical scroll.
  const double pitch = layout_.pitch();
  const int firstRow = std::max(0, static_cast<int>((scrollY - layout_.rowGap) / pitch));
  const int lastRow = std::min(D - 1, static_cast<int>((scrollY + target.height()) / pitch) + 1);

  QFont font = p.font();
  QFont small = font;
  small.setPointSizeF(font.pointSizeF() * 0.82);
  const QFontMetricsF fmSmall(small);
  const double digitW = fmSmall.horizontalAdvance(QLatin1Char('0'));

  p.save();
  p.setClipRect(plotClip);
  for (int d = firstRow; d <= lastRow; ++d) {
    const double y = target.top() + layout_.rowTop(d) - scrollY;
    p.fillRect(QRectF(plotX0, y - 2, plotW, layout_.rowSpan() + 4), band);
    const auto& row = bi.row(d);
    auto [f, l] = bi.visibleRange(d, t0, t1);
    p.setFont(small);
    const bool twoLanes = bi.hasCopyLane();
    for (int lane = 0; lane < (twoLanes ? 2 : 1); ++lane) {
      const auto [laneOff, laneH] = layout_.lane(lane, twoLanes);
      const auto spans = levelOfDetail(row, f, l, axis, kMinBlockPx, twoLanes ? lane : -1);
      for (const auto& sp : spans) {
        const Block& b = row[sp.dominant];
        const bool ov = b.second.has_value();
        QColor c = blockColor(b.op.kind, b.chunk, ov);
        if (sp.merged) {
          // Zoomed out: the span's colour mixes its ops' colours by time, and idle time within
          // it shows as transparency, so warm-up, steady state and bubbles stay visible.
          double r = 0, g = 0, bl = 0, busy = 0;
          for (size_t i = sp.first; i < sp.last; ++i) {
            const Block& k = row[i];
            if (twoLanes && k.lane != lane) continue;
            const QColor kc = blockColor(k.op.kind, k.chunk, k.second.has_value());
            const double w = std::max(1e-12, k.duration());
            r += kc.redF() * w;
            g += kc.greenF() * w;
            bl += kc.blueF() * w;
            busy += w;
          }
          if (busy > 0) c = QColor::fromRgbF(float(r / busy), float(g / busy), float(bl / busy));
          const double spanMs = (sp.x1 - sp.x0) / axis.pixelsPerMs();
          if (spanMs > 0) c.setAlphaF(float(std::clamp(busy / spanMs, 0.25, 1.0)));
        }
        QRectF r(plotX0 + sp.x0, y + laneOff, std::max(1.0, sp.x1 - sp.x0), laneH);
        if (!sp.merged && r.width() > 5) r.adjust(0, 0, -1, 0);  // a hairline between neighbours
        if (r.width() < kMinCommPx && isCommKind(b.op.kind)) {
          // SEND / RECV of a compute_comms CSV take (almost) no time: a marker wide enough to
          // see and hover, centred on when it was posted.
          r = QRectF(r.center().x() - kMinCommPx / 2, r.top(), kMinCommPx, r.height());
        }
        if (!b.reached) {
          c.setAlphaF(0.35f);
          p.fillRect(r, c);
          p.setPen(QPen(blockColor(b.op.kind, b.chunk, ov), 1, Qt::DashLine));
          p.drawRect(r.adjusted(0.5, 0.5, -0.5, -0.5));
        } else {
          p.fillRect(r, c);
        }
        if (!sp.merged && r.width() >= digitW + 3 && r.height() >= fmSmall.height()) {
          QString label = blockLabel(s, b.op);
          if (ov) label += QLatin1Char('|') + blockLabel(s, *b.second);
          if (r.width() >= digitW * label.size() + 3) {
            p.setPen(b.reached ? textColorOn(c) : textCol);
            p.drawText(r, Qt::AlignCenter, label);
          } else if (r.width() >= digitW * 2 + 4 && !ov) {
            p.setPen(textColorOn(c));
            p.drawText(r, Qt::AlignCenter, label.left(2));
          }
        }
      }
    }
    if (overlayShown() && d < overlay_.devices()) {
      // Measured lane: blocks in their op kind's colour (F and B tell apart as on the plan),
      // the deviation from the plan as a band along the bottom edge, the measured critical
      // path outlined.
      const double oy = target.top() + layout_.overlayTop(d) - scrollY;
      const auto& orow = overlay_.row(d);
      auto [of, ol] = overlay_.visibleRange(d, t0, t1);
      const auto spans = levelOfDetail(orow, of, ol, axis, kMinBlockPx, -1);
      for (const auto& sp : spans) {
        const auto& inf = overlay_.info(d, sp.dominant);
        const Block& ob = orow[sp.dominant];
        QColor c = blockColor(ob.op.kind, ob.chunk, ob.second.has_value());
        if (sp.merged) c.setAlphaF(0.8f);
        QRectF r(plotX0 + sp.x0, oy, std::max(1.0, sp.x1 - sp.x0), layout_.overlayHeight);
        if (!sp.merged && r.width() > 5) r.adjust(0, 0, -1, 0);
        p.fillRect(r, c);
        const double bandH = std::max(3.0, std::round(layout_.overlayHeight * 0.22));
        p.fillRect(QRectF(r.left(), r.bottom() - bandH, r.width(), bandH), deviationColor(deviationBand(inf.deviation)));
        if (sp.merged) continue;
        if (inf.critical) {
          p.setPen(QPen(textCol, 2));
          p.setBrush(Qt::NoBrush);
          p.drawRect(r.adjusted(1, 1, -1, -1));
        }
        if (r.width() >= digitW * 2 + 4 && r.height() >= fmSmall.height()) {
          const Block& b = orow[sp.dominant];
          QString label = blockLabel(s, b.op);
          if (inf.deviation && r.width() >= digitW * (label.size() + 6) + 4)
            label += QStringLiteral(" %1×").arg(*inf.deviation, 0, 'f', 2);
          if (r.width() >= digitW * label.size() + 3) {
            p.setPen(textColorOn(c));
            p.drawText(r.adjusted(0, 0, 0, -bandH), Qt::AlignCenter, label);
          }
        }
      }
    }
  }

  // Outlines: errors red, deadlock cycle dashed orange.
  p.setBrush(Qt::NoBrush);
  auto outline = [&](std::uint64_t key, const QPen& pen) {
    const int d = static_cast<int>(key >> 32), st = static_cast<int>(key & 0xffffffffu);
    if (d < firstRow || d > lastRow) return;
    const Block* b = bi.block(d, st);
    if (!b || b->end < t0 || b->start > t1) return;
    p.setPen(pen);
    p.drawRect(blockRect(*b, axis, scrollY, target).adjusted(1, 1, -1, -1));
  };
  if (invalid_.size() < 20000)
    for (auto k : invalid_) outline(k, QPen(red, 2));
  for (auto k : cycle_) outline(k, QPen(cycleCol, 2, Qt::DashLine));

  p.setRenderHint(QPainter::Antialiasing, true);
  auto centerOf = [&](const Op& op) -> std::optional<std::pair<QRectF, const Block*>> {
    auto ref = doc_->find(op);
    if (!ref) return std::nullopt;
    const Block* b = bi.block(ref->device, ref->step);
    if (!b) return std::nullopt;
    return std::make_pair(blockRect(*b, axis, scrollY, target), b);
  };
  // Unmet dependencies of invalid ops: the dependency ends after the op starts (or sits later
  // in the same device's order).
  if (!preview_ && invalid_.size() <= 400) {
    for (auto k : invalid_) {
      const Block* b = bi.block(static_cast<int>(k >> 32), static_cast<int>(k & 0xffffffffu));
      if (!b) continue;
      const QRectF rb = blockRect(*b, axis, scrollY, target);
      for (const Op& dep : doc_->dependencies(b->op)) {
        auto c = centerOf(dep);
        if (!c) continue;
        const Block* db = c->second;
        const bool unmet =
            (db->device == b->device && db->step > b->step) || db->end > b->start + 1e-9 || !db->reached;
        if (!unmet) continue;
        // With a deadlock, the cycle's arrows below carry the story; keep these unlabelled.
        const QString label = a.validation.deadlock.empty()
                                  ? tr("needs %1").arg(QString::fromStdString(s.opName(dep)))
                                  : QString();
        drawArrow(p, QPointF(c->first.right(), c->first.center().y()), QPointF(rb.left(), rb.center().y()),
                  red, label, false);
      }
    }
  }
  // Deadlock: each stuck op points at what it waits for.
  for (const auto& w : a.validation.deadlock) {
    const Block* b = bi.block(w.at.device, w.at.step);
    auto c = centerOf(w.waitsFor);
    if (!b || !c) continue;
    const QRectF rb = blockRect(*b, axis, scrollY, target);
    drawArrow(p, QPointF(rb.center().x(), rb.center().y()),
              QPointF(c->first.center().x(), c->first.center().y()), cycleCol, tr("waits for"), true);
  }

  // Selection and its dependency arrows.
  if (selected_) {
    if (auto sel = centerOf(*selected_)) {
      const QRectF rs = sel->first;
      const Block* sb = sel->second;
      const Timeline& tl = a.timeline;
      QColor arrowIn = dark ? QColor(0x90, 0xca, 0xf9) : QColor(0x15, 0x65, 0xc0);
      QColor arrowOut = dark ? QColor(0xa5, 0xd6, 0xa7) : QColor(0x2e, 0x7d, 0x32);
      auto commLabel = [&](const Op& prod, const Op& cons, int devA, int devB) -> QString {
        if (devA == devB) return {};
        if (const Transfer* t = transferBetween(tl, prod, cons))
          return QStringLiteral("+%1 ms").arg(fmtMs(t->end - t->start));
        return {};
      };
      for (const Op& dep : doc_->dependencies(sb->op)) {
        auto c = centerOf(dep);
        if (!c) continue;
        drawArrow(p, QPointF(c->first.right(), c->first.center().y()), QPointF(rs.left(), rs.center().y()),
                  arrowIn, commLabel(dep, sb->op, c->second->device, sb->device), false);
      }
      for (const Op& nxt : doc_->dependents(sb->op)) {
        auto c = centerOf(nxt);
        if (!c) continue;
        drawArrow(p, QPointF(rs.right(), rs.center().y()), QPointF(c->first.left(), c->first.center().y()),
                  arrowOut, commLabel(sb->op, nxt, sb->device, c->second->device), false);
      }
      p.setBrush(Qt::NoBrush);
      p.setPen(QPen(pal.color(QPalette::Highlight), 2.5));
      p.drawRoundedRect(rs.adjusted(-2, -2, 2, 2), 3, 3);
    }
  }

  // Drag: the moved block (already in place in the live preview) and the ghost under the pointer.
  if (dragging_) {
    const Block* src = blocks_.block(dragFrom_.device, dragFrom_.step);
    if (preview_ && dropTarget_ >= 0 && !dragRefused_) {
      if (const Block* nb = previewBlocks_.block(dragFrom_.device, dropTarget_)) {
        const QRectF r = blockRect(*nb, axis, scrollY, target);
        p.setPen(QPen(pal.color(QPalette::Highlight), 3));
        p.drawLine(QPointF(r.left() - 2, r.top() - 5), QPointF(r.left() - 2, r.bottom() + 5));
        p.setPen(QPen(pal.color(QPalette::Highlight), 1.5, Qt::DashLine));
        p.setBrush(Qt::NoBrush);
        p.drawRect(r.adjusted(0, 0, -1, 0));
      }
    }
    if (src) {
      const double w = std::max(6.0, axis.contentWidth(src->duration()));
      const int rowUnder = layout_.rowAt(dragPos_.y() + scrollY, D);
      const double y = target.top() + layout_.rowTop(std::max(0, rowUnder)) - scrollY;
      QRectF g(dragPos_.x() - axis.contentWidth(grabOffsetMs_), y, w, layout_.rowHeight);
      QColor c = dragRefused_ ? red : blockColor(src->op.kind, src->chunk, src->second.has_value());
      c.setAlphaF(0.55f);
      p.setPen(QPen(dragRefused_ ? red : pal.color(QPalette::Highlight), 1.5));
      p.setBrush(c);
      p.drawRoundedRect(g, 2, 2);
    }
  }
  p.setRenderHint(QPainter::Antialiasing, false);

  // Hover cursor.
  if (hoverX_ >= plotX0 && !dragging_) {
    QColor hc = textCol;
    hc.setAlphaF(0.35f);
    p.setPen(QPen(hc, 1, Qt::DashLine));
    p.drawLine(QPointF(hoverX_, plotClip.top()), QPointF(hoverX_, plotClip.bottom()));
  }
  if (!dragging_) paintStepMarks(p, target, axis, scrollY);
  paintIterationMarks(p, target, axis, scrollY);
  p.restore();

  // Row labels (fixed on the left).
  const QRectF labels(target.left(), target.top() + layout_.rulerHeight, layout_.labelWidth,
                      target.height() - layout_.rulerHeight);
  p.save();
  p.setClipRect(labels);
  p.fillRect(labels, base);
  QFont bold = font;
  bold.setBold(true);
  for (int d = firstRow; d <= lastRow; ++d) {
    const double y = target.top() + layout_.rowTop(d) - scrollY;
    const QRectF lr(target.left() + 10, y, layout_.labelWidth - 18, layout_.rowHeight);
    p.setFont(bold);
    p.setPen(textCol);
    p.drawText(lr, Qt::AlignLeft | Qt::AlignTop, tr("Device %1").arg(d));
    QStringList st;
    for (int sIdx : s.pipeline.stagesOn(d)) st << QStringLiteral("s%1").arg(sIdx);
    QString stages = st.join(QStringLiteral(" · "));
    p.setFont(small);
    p.setPen(muted);
    p.drawText(lr, Qt::AlignLeft | Qt::AlignBottom, fmSmall.elidedText(stages, Qt::ElideRight, lr.width()));
    if (overlayShown()) {
      const QRectF ml(lr.left(), target.top() + layout_.overlayTop(d) - scrollY, lr.width(), layout_.overlayHeight);
      QString m = tr("measured");
      if (comparison_)
        for (const auto& e : comparison_->byDevice)
          if (e.device == d && e.plannedMs > 0) m += QStringLiteral(" %1×").arg(e.ratio, 0, 'f', 2);
      p.setPen(textCol);
      p.drawText(ml, Qt::AlignLeft | Qt::AlignVCenter, fmSmall.elidedText(m, Qt::ElideRight, ml.width()));
    }
  }
  p.restore();
  // Separator between labels and plot.
  QColor sep = textCol;
  sep.setAlphaF(0.12f);
  p.setPen(sep);
  p.drawLine(QPointF(plotX0 - 0.5, target.top()), QPointF(plotX0 - 0.5, target.bottom()));

  // Ruler.
  const QRectF ruler(target.left(), target.top(), target.width(), layout_.rulerHeight);
  p.fillRect(ruler, base);
  p.setPen(sep);
  p.drawLine(QPointF(target.left(), ruler.bottom() - 0.5), QPointF(target.right(), ruler.bottom() - 0.5));
  p.setFont(small);
  const double step = tickStep(axis.pixelsPerMs(), 90);
  const bool slots = mode_ == LayoutMode::Slots && a.slots;
  p.save();
  p.setClipRect(QRectF(plotX0, ruler.top(), plotW, ruler.height()));
  for (double t = std::floor(std::max(0.0, t0) / step) * step; t <= t1 + step; t += step) {
    const double x = plotX0 + axis.toX(t);
    p.setPen(sep);
    p.drawLine(QPointF(x, ruler.bottom() - 6), QPointF(x, ruler.bottom()));
    p.setPen(muted);
    const QString txt =
        slots ? QString::number(t, 'g', 6) : QString::number(t, 'g', 6) + QStringLiteral(" ms");
    p.drawText(QRectF(x + 4, ruler.top(), 120, ruler.height() - 4), Qt::AlignLeft | Qt::AlignVCenter, txt);
  }
  p.restore();
  p.setPen(muted);
  p.drawText(QRectF(target.left() + 10, ruler.top(), layout_.labelWidth - 14, ruler.height() - 4),
             Qt::AlignLeft | Qt::AlignVCenter, slots ? tr("slot") : tr("time"));
  // The playhead's flag on the ruler, with its time.
  if (playhead_) {
    const double x = plotX0 + axis.toX(*playhead_);
    if (x >= plotX0 - 1 && x <= plotX0 + plotW + 1) {
      p.save();
      p.setClipRect(QRectF(plotX0 - 6, ruler.top(), plotW + 12, ruler.height()));
      p.setRenderHint(QPainter::Antialiasing, true);
      const QString txt = playheadLabel_.isEmpty() ? fmtMs(*playhead_) + QStringLiteral(" ms") : playheadLabel_;
      const double w = fmSmall.horizontalAdvance(txt) + 10;
      // Keep the flag inside the plot near the right edge.
      const double left = std::min(x, plotX0 + plotW - w);
      const QRectF flag(left, ruler.top() + 2, w, ruler.height() - 9);
      p.setPen(Qt::NoPen);
      p.setBrush(playheadColor());
      p.drawRoundedRect(flag, 3, 3);
      QPolygonF tip;
      tip << QPointF(x - 5, ruler.bottom() - 7) << QPointF(x + 5, ruler.bottom() - 7) << QPointF(x, ruler.bottom());
      p.drawPolygon(tip);
      p.setPen(Qt::white);
      p.setFont(small);
      p.drawText(flag, Qt::AlignCenter, txt);
      p.restore();
    }
  }
  p.setFont(font);
}

void TimelineView::paintStepMarks(QPainter& p, const QRect& target, const TimeAxis& axis, double scrollY) const {
  const BlockIndex& bi = blocks();
  const double plotX0 = target.left() + layout_.labelWidth;
  const double plotW = target.width() - layout_.labelWidth;
  const QColor ph = playheadColor();
  const QColor red(0xe5, 0x39, 0x35);
  // The rectangles of an op: its planned block, and its measured block when the overlay shows.
  auto rectsOf = [&](int device, const Op& op) {
    std::vector<QRectF> out;
    if (auto ref = doc_->find(op))
      if (const Block* b = bi.block(ref->device, ref->step)) out.push_back(blockRect(*b, axis, scrollY, target));
    if (overlayShown() && device >= 0 && device < overlay_.devices()) {
      const double oy = target.top() + layout_.overlayTop(device) - scrollY;
      for (const Block& b : overlay_.row(device))
        if (b.op == op) {
          const double x0 = plotX0 + axis.toX(b.start);
          const double x1 = std::isfinite(b.end) ? plotX0 + axis.toX(b.end) : plotX0 + plotW;
          out.push_back(QRectF(x0, oy, std::max(1.0, x1 - x0), layout_.overlayHeight));
        }
    }
    return out;
  };
  if (playhead_ && marks_.dimFuture) {
    // What has not happened yet is veiled, so the steps read as progress.
    const double x = std::max(plotX0, plotX0 + axis.toX(*playhead_));
    QColor veil = palette().color(QPalette::Base);
    veil.setAlphaF(0.45f);
    p.fillRect(QRectF(x, target.top() + layout_.rulerHeight, plotX0 + plotW - x, target.height()), veil);
  }
  p.setRenderHint(QPainter::Antialiasing, true);
  p.setBrush(Qt::NoBrush);
  for (const auto& [d, op] : marks_.blocked)
    for (const QRectF& r : rectsOf(d, op)) {
      QColor fill = red;
      fill.setAlphaF(0.22f);
      p.fillRect(r, fill);
      p.setPen(QPen(red, 2.5, Qt::DashLine));
      p.drawRect(r.adjusted(1, 1, -1, -1));
    }
  for (const auto& [d, op] : marks_.running)
    for (const QRectF& r : rectsOf(d, op)) {
      p.setPen(QPen(ph, 3));
      p.drawRect(r.adjusted(-1, -1, 1, 1));
    }
  // Breakpoints: a red dot at the start (or end) of each op they match.
  if (!marks_.breakpoints.empty()) {
    const double t0 = axis.toTime(0), t1 = axis.toTime(plotW);
    p.setPen(QPen(Qt::white, 1.2));
    p.setBrush(red);
    QFont countFont = p.font();
    countFont.setPointSizeF(countFont.pointSizeF() * 0.75);
    countFont.setBold(true);
    for (int d = 0; d < bi.devices(); ++d) {
      const auto& row = bi.row(d);
      auto [f, l] = bi.visibleRange(d, t0, t1);
      std::vector<std::pair<double, double>> dots;
      for (size_t i = f; i < l && i < row.size(); ++i) {
        const Block& b = row[i];
        for (const Op* op : {&b.op, b.second ? &*b.second : nullptr}) {
          if (!op) continue;
          TimelineOp t;
          t.device = d;
          t.step = b.step;
          t.op = *op;
          for (const auto& bp : marks_.breakpoints) {
            if (!bp.matches(t, bp.on)) continue;
            const QRectF r = blockRect(b, axis, scrollY, target);
            const double x = bp.on == StepEventKind::Start ? r.left() + 5 : r.right() - 5;
            dots.emplace_back(x, r.top() + 5);
            break;
          }
        }
      }
      // Zoomed out, dots closer than a dot's width would blur into a line: one dot per
      // cluster, with the number of breakpoint hits it stands for.
      for (const DotCluster& g : clusterDots(std::move(dots), kBreakpointDotPx)) {
        const QPointF center(g.x, g.y);
        if (g.count == 1) {
          p.drawEllipse(center, 4.5, 4.5);
          continue;
        }
        const QString n = QString::number(g.count);
        const double w = std::max(11.0, QFontMetricsF(countFont).horizontalAdvance(n) + 6);
        const QRectF pill(center.x() - w / 2, center.y() - 5.5, w, 11);
        p.drawRoundedRect(pill, 5.5, 5.5);
        p.save();
        p.setFont(countFont);
        p.setPen(Qt::white);
        p.drawText(pill, Qt::AlignCenter, n);
        p.restore();
      }
    }
  }
  // The playhead line.
  if (playhead_) {
    const double x = plotX0 + axis.toX(*playhead_);
    p.setPen(QPen(ph, 2));
    p.drawLine(QPointF(x, target.top() + layout_.rulerHeight), QPointF(x, target.bottom()));
  }
  p.setRenderHint(QPainter::Antialiasing, false);
}

QSize TimelineView::fullSize(int width) const {
  return QSize(width, static_cast<int>(layout_.contentHeight(blocks().devices()) + layout_.rowGap));
}

QImage TimelineView::renderImage(QSize size) const {
  QImage img(size, QImage::Format_ARGB32_Premultiplied);
  QPainter p(&img);
  TimeAxis ax(TimeAxis::fitScale(contentEnd(), size.width() - layout_.labelWidth - 12), 0);
  paintTimeline(p, QRect(QPoint(0, 0), size), ax, 0);
  return img;
}

void TimelineView::renderSvg(const QString& path, QSize size) const {
#ifdef PIPESTUDIO_HAVE_SVG
  QSvgGenerator gen;
  gen.setFileName(path);
  gen.setSize(size);
  gen.setViewBox(QRect(QPoint(0, 0), size));
  gen.setTitle(QString::fromStdString(doc_->schedule().name));
  QPainter p(&gen);
  TimeAxis ax(TimeAxis::fitScale(contentEnd(), size.width() - layout_.labelWidth - 12), 0);
  paintTimeline(p, QRect(QPoint(0, 0), size), ax, 0);
#else
  Q_UNUSED(path);
  Q_UNUSED(size);
#endif
}

// ---- iteration boundary --------------------------------------------------------------------

void TimelineView::paintIterationMarks(QPainter& p, const QRect& target, const TimeAxis& axis,
                                       double scrollY) const {
  if (marks_iter_.empty() || dragging_) return;
  const int K = displayAnalysis().iterations ? displayAnalysis().iterations->iterations : 0;
  const double plotX0 = target.left() + layout_.labelWidth;
  const QColor line(0x6a, 0x1b, 0x9a);
  QColor shade = line;
  shade.setAlphaF(0.18f);
  QFont small = p.font();
  small.setPointSizeF(small.pointSizeF() * 0.78);
  p.save();
  p.setFont(small);
  for (const IterationMark& m : marks_iter_) {
    const double top = target.top() + layout_.rowTop(m.device) - scrollY;
    const double h = layout_.rowHeight;
    const double xs = plotX0 + axis.toX(m.stepStart);
    const double xe = plotX0 + axis.toX(m.end);
    // The optimizer step shaded across the whole lane, the iteration end as a line.
    if (xe > xs) p.fillRect(QRectF(xs, top - 2, xe - xs, h + 4), shade);
    p.setPen(QPen(line, 2));
    p.drawLine(QPointF(xe, top - 3), QPointF(xe, top + h + 3));
    if (m.iteration + 1 < K || K == 0) {
      p.setPen(line);
      p.drawText(QPointF(xe + 3, top + h + 1), tr("iteration %1").arg(m.iteration + 2));
    }
  }
  p.restore();
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
      html += tr("<br>start %1 ms &nbsp;end %2 ms &nbsp;(%3 ms)").arg(fmtMs(t->start), fmtMs(t->end), fmtMs(t->duration()));
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
        html += QStringLiteral("<br><span style='color:#e53935'>%1</span>")
                    .arg(QString::fromStdString(d.message).toHtmlEscaped());
        break;
      }
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

// ---- input ------------------------------------------------------------------------------------

void TimelineView::report(const QString& text) {
  Q_EMIT statusMessage(text);
}

void TimelineView::mousePressEvent(QMouseEvent* e) {
  setFocus();
  if (e->button() != Qt::LeftButton) return QAbstractScrollArea::mousePressEvent(e);
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
  const int n = static_cast<int>(doc_->schedule().devices[static_cast<size_t>(ref->device)].size());
  const int to = ref->step + delta;
  if (to < 0 || to >= n) {
    report(delta < 0 ? tr("Already the first op on device %1").arg(ref->device)
                     : tr("Already the last op on device %1").arg(ref->device));
    return;
  }
  QString err;
  if (!doc_->moveStep(ref->device, ref->step, to, &err)) report(err);
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
  switch (e->key()) {
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
    if (bp.device == ref.device && bp.kind == op->kind && bp.stage == op->stage && bp.microbatch == op->microbatch &&
        bp.on == StepEventKind::Start)
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
