// TimelineView's painting, as passes in the manner of Qt Creator's tracing library (items,
// selection, notes): each pass paints one concern over the ones before it, with every colour
// from the view's Theme. paintTimeline runs them in order for the viewport, exports and the
// benchmark; tests run single passes.
#include <QApplication>
#include <QFileInfo>
#include <QFontMetricsF>
#include <QPainter>
#include <QPainterPath>
#include <QScrollBar>
#include <algorithm>
#include <cmath>
#include <iterator>
#include <memory>

#ifdef PIPESTUDIO_HAVE_SVG
#include <QSvgGenerator>
#endif

#include "timeline/legend_bar.h"
#include "timeline/op_style.h"
#include "timeline/timeline_internal.h"
#include "timeline/timeline_view.h"

namespace ps::ui {

using namespace ps::core;
using namespace ps::ui::timeline_detail;

namespace {

void drawArrow(QPainter& p, QPointF a, QPointF b, const QColor& c, const QString& label, bool dashed,
               const QColor& labelBackground, std::vector<LabelBox>* taken = nullptr) {
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
    p.save();  // every label at the same size, however many arrows come before it
    const QFontMetricsF fm(p.font());
    LabelBox box{mid.x() - fm.horizontalAdvance(label) / 2 - 4, mid.y() - fm.height() - 2,
                 fm.horizontalAdvance(label) + 8, fm.height() + 1};
    // Labels of arrows that meet (an op's several inputs) would print over each other.
    if (taken) {
      box = placeLabel(box, *taken);
      taken->push_back(box);
    }
    const QRectF r(box.x, box.y, box.w, box.h);
    p.setPen(QPen(c, 1));
    p.setBrush(labelBackground);
    p.drawRoundedRect(r, 3, 3);
    p.setPen(c);
    p.drawText(r, Qt::AlignCenter, label);
    p.restore();
  }
}

// The merged span's colour mixes its ops' colours by time, and idle time within it shows as
// transparency, so warm-up, steady state and bubbles stay visible when zoomed out.
QColor mergedColor(const Theme& th, const std::vector<Block>& row, const LodSpan& sp, int lane, bool twoLanes,
                   QColor c, double pixelsPerMs) {
  double r = 0, g = 0, bl = 0, busy = 0;
  for (size_t i = sp.first; i < sp.last; ++i) {
    const Block& k = row[i];
    if (twoLanes && k.lane != lane) continue;
    const QColor kc = th.blockColor(k.op.kind, k.chunk, k.second.has_value());
    const double w = std::max(1e-12, k.duration());
    r += kc.redF() * w;
    g += kc.greenF() * w;
    bl += kc.blueF() * w;
    busy += w;
  }
  if (busy > 0) c = QColor::fromRgbF(float(r / busy), float(g / busy), float(bl / busy));
  const double spanMs = (sp.x1 - sp.x0) / pixelsPerMs;
  if (spanMs > 0) c.setAlphaF(float(std::clamp(busy / spanMs, 0.25, 1.0)));
  return c;
}

}  // namespace

// The passes, in Pass order. Each gets the view (for its state) and the context of the frame.
struct TimelinePasses {
  // What every pass needs: the target, the axis, the visible rows and time span, the fonts.
  struct Context {
    Context(const TimelineView& v, QPainter& painter, const QRect& rect, const TimeAxis& ax, double y)
        : p(painter),
          target(rect),
          axis(ax),
          scrollY(y),
          theme(v.theme_),
          a(v.displayAnalysis()),
          bi(v.blocks()),
          s(v.displaySchedule(a)),
          plotX0(rect.left() + v.layout_.labelWidth),
          plotW(rect.width() - v.layout_.labelWidth),
          t0(ax.toTime(0)),
          t1(ax.toTime(plotW)),
          plotClip(plotX0, rect.top() + v.layout_.rulerHeight, plotW, rect.height() - v.layout_.rulerHeight),
          // Rows visible after vertical scroll.
          firstRow(std::max(0, static_cast<int>((y - v.layout_.rowGap) / v.layout_.pitch()))),
          lastRow(std::min(bi.devices() - 1, static_cast<int>((y + rect.height()) / v.layout_.pitch()) + 1)),
          font(painter.font()),
          small(font) {
      small.setPointSizeF(font.pointSizeF() * 0.82);
      const QFontMetricsF fm(small);
      digitW = fm.horizontalAdvance(QLatin1Char('0'));
      smallHeight = fm.height();
    }
    QPainter& p;
    QRect target;
    const TimeAxis& axis;
    double scrollY;
    const Theme& theme;
    const Analysis& a;
    const BlockIndex& bi;
    const Schedule& s;
    double plotX0, plotW;
    double t0, t1;  // visible time span
    QRectF plotClip;
    int firstRow, lastRow;
    QFont font, small;
    double digitW = 0, smallHeight = 0;
    double rowY(const RowLayout& l, int d) const { return target.top() + l.rowTop(d) - scrollY; }
  };
  using Fn = void (*)(const TimelineView&, const Context&);

  // ---- bands, blocks and the measured lane -------------------------------------------------------

  static void bands(const TimelineView& v, const Context& c) {
    for (int d = c.firstRow; d <= c.lastRow; ++d)
      c.p.fillRect(QRectF(c.plotX0, c.rowY(v.layout_, d) - 2, c.plotW, v.layout_.rowSpan() + 4),
                   c.theme.band);
  }

  static void blocks(const TimelineView& v, const Context& c) {
    QPainter& p = c.p;
    const Theme& th = c.theme;
    p.setFont(c.small);
    const bool twoLanes = c.bi.hasCopyLane();
    for (int d = c.firstRow; d <= c.lastRow; ++d) {
      const double y = c.rowY(v.layout_, d);
      const auto& row = c.bi.row(d);
      auto [f, l] = c.bi.visibleRange(d, c.t0, c.t1);
      for (int lane = 0; lane < (twoLanes ? 2 : 1); ++lane) {
        const auto [laneOff, laneH] = v.layout_.lane(lane, twoLanes);
        for (const auto& sp : levelOfDetail(row, f, l, c.axis, kMinBlockPx, twoLanes ? lane : -1)) {
          const Block& b = row[sp.dominant];
          const bool ov = b.second.has_value();
          const QColor full = th.blockColor(b.op.kind, b.chunk, ov);
          QColor col =
              sp.merged ? mergedColor(th, row, sp, lane, twoLanes, full, c.axis.pixelsPerMs()) : full;
          QRectF r(c.plotX0 + sp.x0, y + laneOff, std::max(1.0, sp.x1 - sp.x0), laneH);
          if (!sp.merged && r.width() > 5) r.adjust(0, 0, -1, 0);  // a hairline between neighbours
          if (r.width() < kMinCommPx && isCommKind(b.op.kind)) {
            // SEND / RECV of a compute_comms CSV take (almost) no time: a marker wide enough to
            // see and hover, centred on when it was posted.
            r = QRectF(r.center().x() - kMinCommPx / 2, r.top(), kMinCommPx, r.height());
          }
          if (!b.reached) {
            col.setAlphaF(0.35f);
            p.fillRect(r, col);
            p.setPen(QPen(full, 1, Qt::DashLine));
            p.drawRect(r.adjusted(0.5, 0.5, -0.5, -0.5));
          } else {
            p.fillRect(r, col);
          }
          if (sp.merged || r.width() < c.digitW + 3 || r.height() < c.smallHeight) continue;
          QString label = blockLabel(c.s, b.op);
          if (ov) label += QLatin1Char('|') + blockLabel(c.s, *b.second);
          if (r.width() >= c.digitW * label.size() + 3) {
            p.setPen(b.reached ? th.textOn(col) : th.text);
            p.drawText(r, Qt::AlignCenter, label);
          } else if (r.width() >= c.digitW * 2 + 4 && !ov) {
            p.setPen(th.textOn(col));
            p.drawText(r, Qt::AlignCenter, label.left(2));
          }
        }
      }
    }
  }

  static void overlayLanes(const TimelineView& v, const Context& c) {
    // Measured lane: blocks in their op kind's colour (F and B tell apart as on the plan), the
    // deviation from the plan as a band along the bottom edge, the measured critical path
    // outlined.
    if (!v.overlayShown()) return;
    QPainter& p = c.p;
    const Theme& th = c.theme;
    p.setFont(c.small);
    const double bandH = std::max(3.0, std::round(v.layout_.overlayHeight * 0.22));
    for (int d = c.firstRow; d <= c.lastRow && d < v.overlay_.devices(); ++d) {
      const double oy = c.target.top() + v.layout_.overlayTop(d) - c.scrollY;
      const auto& orow = v.overlay_.row(d);
      auto [of, ol] = v.overlay_.visibleRange(d, c.t0, c.t1);
      for (const auto& sp : levelOfDetail(orow, of, ol, c.axis, kMinBlockPx, -1)) {
        const auto& inf = v.overlay_.info(d, sp.dominant);
        const Block& ob = orow[sp.dominant];
        QColor col = th.blockColor(ob.op.kind, ob.chunk, ob.second.has_value());
        if (sp.merged) col.setAlphaF(0.8f);
        QRectF r(c.plotX0 + sp.x0, oy, std::max(1.0, sp.x1 - sp.x0), v.layout_.overlayHeight);
        if (!sp.merged && r.width() > 5) r.adjust(0, 0, -1, 0);
        p.fillRect(r, col);
        p.fillRect(QRectF(r.left(), r.bottom() - bandH, r.width(), bandH),
                   th.deviationColor(deviationBand(inf.deviation)));
        if (sp.merged) continue;
        if (inf.critical) {
          p.setPen(QPen(th.text, 2));
          p.setBrush(Qt::NoBrush);
          p.drawRect(r.adjusted(1, 1, -1, -1));
        }
        if (r.width() < c.digitW * 2 + 4 || r.height() < c.smallHeight) continue;
        QString label = blockLabel(c.s, ob.op);
        if (inf.deviation && r.width() >= c.digitW * (label.size() + 6) + 4)
          label += QStringLiteral(" %1×").arg(*inf.deviation, 0, 'f', 2);
        if (r.width() >= c.digitW * label.size() + 3) {
          p.setPen(th.textOn(col));
          p.drawText(r.adjusted(0, 0, 0, -bandH), Qt::AlignCenter, label);
        }
      }
    }
  }

  // ---- outlines, arrows, selection and drag -------------------------------------------------------

  static void outlines(const TimelineView& v, const Context& c) {
    // Errors red, the deadlock cycle dashed orange.
    c.p.setBrush(Qt::NoBrush);
    auto outline = [&](std::uint64_t key, const QPen& pen) {
      const int d = keyDevice(key);
      if (d < c.firstRow || d > c.lastRow) return;
      const Block* b = c.bi.block(d, keyStep(key));
      if (!b || b->end < c.t0 || b->start > c.t1) return;
      c.p.setPen(pen);
      c.p.drawRect(v.blockRect(*b, c.axis, c.scrollY, c.target).adjusted(1, 1, -1, -1));
    };
    if (v.invalid_.size() < 20000)
      for (auto k : v.invalid_) outline(k, QPen(c.theme.error, 2));
    for (auto k : v.cycle_) outline(k, QPen(c.theme.deadlock, 2, Qt::DashLine));
    searchMatches(v, c);
  }

  static std::optional<std::pair<QRectF, const Block*>> placedBlock(const TimelineView& v, const Context& c,
                                                                    const Op& op) {
    auto ref = v.doc_->find(op);
    if (!ref) return std::nullopt;
    const Block* b = c.bi.block(ref->device, ref->step);
    if (!b) return std::nullopt;
    return std::make_pair(v.blockRect(*b, c.axis, c.scrollY, c.target), b);
  }

  static void arrows(const TimelineView& v, const Context& c) {
    QPainter& p = c.p;
    const Theme& th = c.theme;
    p.setRenderHint(QPainter::Antialiasing, true);
    // Labels a little larger than the blocks' numbers, bold: they name times between devices.
    QFont labelFont = c.font;
    labelFont.setPointSizeF(c.font.pointSizeF() * 0.9);
    labelFont.setBold(true);
    p.setFont(labelFont);
    std::vector<LabelBox> taken;
    auto arrow = [&](QPointF from, QPointF to, const QColor& col, const QString& label, bool dashed) {
      drawArrow(p, from, to, col, label, dashed, th.labelBackground, &taken);
    };
    auto rightOf = [](const QRectF& r) { return QPointF(r.right(), r.center().y()); };
    auto leftOf = [](const QRectF& r) { return QPointF(r.left(), r.center().y()); };
    // Unmet dependencies of invalid ops: the dependency ends after the op starts (or sits later
    // in the same device's order).
    if (!v.preview_ && v.invalid_.size() <= 400) {
      for (auto k : v.invalid_) {
        const Block* b = c.bi.block(keyDevice(k), keyStep(k));
        if (!b) continue;
        const QRectF rb = v.blockRect(*b, c.axis, c.scrollY, c.target);
        for (const Op& dep : v.doc_->dependencies(b->op)) {
          auto placed = placedBlock(v, c, dep);
          if (!placed) continue;
          const Block* db = placed->second;
          const bool unmet =
              (db->device == b->device && db->step > b->step) || db->end > b->start + 1e-9 || !db->reached;
          if (!unmet) continue;
          // With a deadlock, the cycle's arrows below carry the story; keep these unlabelled.
          const QString label =
              c.a.validation.deadlock.empty()
                  ? TimelineView::tr("needs %1").arg(QString::fromStdString(c.s.opName(dep)))
                  : QString();
          arrow(rightOf(placed->first), leftOf(rb), th.error, label, false);
        }
      }
    }
    // Deadlock: each stuck op points at what it waits for.
    for (const auto& w : c.a.validation.deadlock) {
      const Block* b = c.bi.block(w.at.device, w.at.step);
      auto placed = placedBlock(v, c, w.waitsFor);
      if (!b || !placed) continue;
      arrow(v.blockRect(*b, c.axis, c.scrollY, c.target).center(), placed->first.center(), th.deadlock,
            TimelineView::tr("waits for"), true);
    }
    // Selection and its dependency arrows, labelled with the transfer time between devices.
    if (!v.selected_) return;
    auto sel = placedBlock(v, c, *v.selected_);
    if (!sel) return;
    const QRectF rs = sel->first;
    const Block* sb = sel->second;
    auto commLabel = [&](const Op& prod, const Op& cons, int devA, int devB) -> QString {
      if (devA == devB) return {};
      if (const Transfer* t = transferBetween(c.a.timeline, prod, cons))
        return QStringLiteral("+%1 ms").arg(fmtMs(t->end - t->start));
      return {};
    };
    for (const Op& dep : v.doc_->dependencies(sb->op))
      if (auto placed = placedBlock(v, c, dep))
        arrow(rightOf(placed->first), leftOf(rs), th.arrowIn,
              commLabel(dep, sb->op, placed->second->device, sb->device), false);
    for (const Op& nxt : v.doc_->dependents(sb->op))
      if (auto placed = placedBlock(v, c, nxt))
        arrow(rightOf(rs), leftOf(placed->first), th.arrowOut,
              commLabel(sb->op, nxt, sb->device, placed->second->device), false);
    p.setBrush(Qt::NoBrush);
    p.setPen(QPen(th.highlight, 2.5));
    p.drawRoundedRect(rs.adjusted(-2, -2, 2, 2), 3, 3);
  }

  static void drag(const TimelineView& v, const Context& c) {
    // The moved block (already in place in the live preview) and the ghost under the pointer.
    if (!v.dragging_) return;
    QPainter& p = c.p;
    const Theme& th = c.theme;
    p.setRenderHint(QPainter::Antialiasing, true);
    if (v.preview_ && v.dropTarget_ >= 0 && !v.dragRefused_) {
      if (const Block* nb = v.previewBlocks_.block(v.dragFrom_.device, v.dropTarget_)) {
        const QRectF r = v.blockRect(*nb, c.axis, c.scrollY, c.target);
        p.setPen(QPen(th.highlight, 3));
        p.drawLine(QPointF(r.left() - 2, r.top() - 5), QPointF(r.left() - 2, r.bottom() + 5));
        p.setPen(QPen(th.highlight, 1.5, Qt::DashLine));
        p.setBrush(Qt::NoBrush);
        p.drawRect(r.adjusted(0, 0, -1, 0));
      }
    }
    const Block* src = v.blocks_.block(v.dragFrom_.device, v.dragFrom_.step);
    if (!src) return;
    const double w = std::max(6.0, c.axis.contentWidth(src->duration()));
    const int rowUnder = v.layout_.rowAt(v.dragPos_.y() + c.scrollY, c.bi.devices());
    const double y = c.rowY(v.layout_, std::max(0, rowUnder));
    QRectF g(v.dragPos_.x() - c.axis.contentWidth(v.grabOffsetMs_), y, w, v.layout_.rowHeight);
    QColor col = v.dragRefused_ ? th.error : th.blockColor(src->op.kind, src->chunk, src->second.has_value());
    col.setAlphaF(0.55f);
    p.setPen(QPen(v.dragRefused_ ? th.error : th.highlight, 1.5));
    p.setBrush(col);
    p.drawRoundedRect(g, 2, 2);
  }

  static void hover(const TimelineView& v, const Context& c) {
    if (v.hoverX_ < c.plotX0 || v.dragging_) return;
    QColor hc = c.theme.text;
    hc.setAlphaF(0.35f);
    c.p.setPen(QPen(hc, 1, Qt::DashLine));
    c.p.drawLine(QPointF(v.hoverX_, c.plotClip.top()), QPointF(v.hoverX_, c.plotClip.bottom()));
  }

  // ---- step-through and iterations ---------------------------------------------------------------

  static void stepMarks(const TimelineView& v, const Context& c) {
    if (v.dragging_) return;
    QPainter& p = c.p;
    const Theme& th = c.theme;
    // The rectangles of an op: its planned block, and its measured block when the overlay shows.
    auto rectsOf = [&](int device, const Op& op) {
      std::vector<QRectF> out;
      if (auto placed = placedBlock(v, c, op)) out.push_back(placed->first);
      if (v.overlayShown() && device >= 0 && device < v.overlay_.devices()) {
        const double oy = c.target.top() + v.layout_.overlayTop(device) - c.scrollY;
        for (const Block& b : v.overlay_.row(device))
          if (b.op == op) {
            const double x0 = c.plotX0 + c.axis.toX(b.start);
            const double x1 = std::isfinite(b.end) ? c.plotX0 + c.axis.toX(b.end) : c.plotX0 + c.plotW;
            out.push_back(QRectF(x0, oy, std::max(1.0, x1 - x0), v.layout_.overlayHeight));
          }
      }
      return out;
    };
    if (v.playhead_ && v.marks_.dimFuture) {
      // What has not happened yet is veiled, so the steps read as progress.
      const double x = std::max(c.plotX0, c.plotX0 + c.axis.toX(*v.playhead_));
      QColor veil = th.base;
      veil.setAlphaF(0.45f);
      p.fillRect(QRectF(x, c.target.top() + v.layout_.rulerHeight, c.plotX0 + c.plotW - x, c.target.height()),
                 veil);
    }
    p.setRenderHint(QPainter::Antialiasing, true);
    p.setBrush(Qt::NoBrush);
    for (const auto& [d, op] : v.marks_.blocked)
      for (const QRectF& r : rectsOf(d, op)) {
        QColor fill = th.error;
        fill.setAlphaF(0.22f);
        p.fillRect(r, fill);
        p.setPen(QPen(th.error, 2.5, Qt::DashLine));
        p.drawRect(r.adjusted(1, 1, -1, -1));
      }
    // A hung run's stuck steps: a thick outline in the deadlock colour and a "stuck" badge in
    // the block's top-left corner.
    if (!v.marks_.stuck.empty()) {
      p.save();
      QFont f = p.font();
      f.setBold(true);
      f.setPointSizeF(std::max(6.0, f.pointSizeF() * 0.8));
      const QFontMetricsF fm(f);
      const QString badge = TimelineView::tr("stuck");
      for (const auto& m : v.marks_.stuck)
        for (const QRectF& r : rectsOf(m.device, m.op)) {
          p.setBrush(Qt::NoBrush);
          p.setPen(QPen(th.deadlock, 3.5));
          p.drawRect(r.adjusted(-2, -2, 2, 2));
          // Inside the block's top-left corner: a block in the first row has no room above it.
          const QRectF br(r.left() + 1, r.top() + 1, std::min(fm.horizontalAdvance(badge) + 8, r.width() - 2),
                          std::min(fm.height(), r.height() - 2));
          p.setPen(Qt::NoPen);
          p.setBrush(th.deadlock);
          p.drawRoundedRect(br, 3, 3);
          p.setFont(f);
          p.setPen(Qt::white);
          p.drawText(br, Qt::AlignCenter, badge);
        }
      p.restore();
    }
    for (const auto& [d, op] : v.marks_.waiting)
      for (const QRectF& r : rectsOf(d, op)) {
        p.setPen(QPen(th.muted, 1.5, Qt::DashLine));
        p.drawRect(r.adjusted(1, 1, -1, -1));
      }
    for (const auto& [d, op] : v.marks_.running)
      for (const QRectF& r : rectsOf(d, op)) {
        p.setPen(QPen(th.playhead, 3));
        p.drawRect(r.adjusted(-1, -1, 1, 1));
      }
    if (!v.marks_.breakpoints.empty()) breakpoints(v, c);
  }

  static void measure(const TimelineView& v, const Context& c);

  static void searchMatches(const TimelineView& v, const Context& c) {
    // Find: every match outlined in the selection colour, a dotted frame (the selection itself
    // keeps its solid one).
    if (v.searchMatches_.empty()) return;
    QPainter& p = c.p;
    p.setBrush(Qt::NoBrush);
    p.setPen(QPen(c.theme.highlight, 2, Qt::DotLine));
    for (const OpRef& r : v.searchMatches_) {
      if (r.device < c.firstRow || r.device > c.lastRow) continue;
      const Block* b = c.bi.block(r.device, r.step);
      if (!b || b->end < c.t0 || b->start > c.t1) continue;
      p.drawRect(v.blockRect(*b, c.axis, c.scrollY, c.target).adjusted(-1, -1, 1, 1));
    }
  }

  static void breakpoints(const TimelineView& v, const Context& c) {
    // A red dot at the start (or end) of each op a breakpoint matches.
    QPainter& p = c.p;
    p.setPen(QPen(c.theme.onAccent, 1.2));
    p.setBrush(c.theme.error);
    QFont countFont = c.small;
    countFont.setPointSizeF(countFont.pointSizeF() * 0.75);
    countFont.setBold(true);
    for (int d = 0; d < c.bi.devices(); ++d) {
      const auto& row = c.bi.row(d);
      auto [f, l] = c.bi.visibleRange(d, c.t0, c.t1);
      std::vector<std::pair<double, double>> dots;
      for (size_t i = f; i < l && i < row.size(); ++i) {
        const Block& b = row[i];
        for (const Op* op : {&b.op, b.second ? &*b.second : nullptr}) {
          if (!op) continue;
          TimelineOp t;
          t.device = d;
          t.step = b.step;
          t.op = *op;
          for (const auto& bp : v.marks_.breakpoints) {
            if (!bp.matches(t, bp.on)) continue;
            const QRectF r = v.blockRect(b, c.axis, c.scrollY, c.target);
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
        p.setPen(c.theme.onAccent);
        p.drawText(pill, Qt::AlignCenter, n);
        p.restore();
      }
    }
  }

  static void iterationMarks(const TimelineView& v, const Context& c) {
    if (v.marks_iter_.empty() || v.dragging_) return;
    QPainter& p = c.p;
    const int K = c.a.iterations ? c.a.iterations->iterations : 0;
    const QColor line = c.theme.iteration;
    QColor shade = line;
    shade.setAlphaF(0.18f);
    QFont small = c.small;
    small.setPointSizeF(small.pointSizeF() * 0.78);
    p.setFont(small);
    for (const IterationMark& m : v.marks_iter_) {
      const double top = c.rowY(v.layout_, m.device);
      const double h = v.layout_.rowHeight;
      const double xs = c.plotX0 + c.axis.toX(m.stepStart);
      const double xe = c.plotX0 + c.axis.toX(m.end);
      // The optimizer step shaded across the whole lane, the iteration end as a line.
      if (xe > xs) p.fillRect(QRectF(xs, top - 2, xe - xs, h + 4), shade);
      p.setPen(QPen(line, 2));
      p.drawLine(QPointF(xe, top - 3), QPointF(xe, top + h + 3));
      if (m.iteration + 1 < K || K == 0) {
        p.setPen(line);
        p.drawText(QPointF(xe + 3, top + h + 1), TimelineView::tr("iteration %1").arg(m.iteration + 2));
      }
    }
  }

  // ---- labels, ruler and playhead ----------------------------------------------------------------

  static void labels(const TimelineView& v, const Context& c) {
    // Row labels, fixed on the left, and the separator between them and the plot.
    QPainter& p = c.p;
    const Theme& th = c.theme;
    const QRectF labels(c.target.left(), c.target.top() + v.layout_.rulerHeight, v.layout_.labelWidth,
                        c.target.height() - v.layout_.rulerHeight);
    p.save();
    p.setClipRect(labels);
    p.fillRect(labels, th.base);
    QFont bold = c.font;
    bold.setBold(true);
    const QFontMetricsF fmSmall(c.small);
    // Thin rows (a preview of many devices): one small label, on every k-th row that has room.
    const bool thin = v.layout_.rowHeight < QFontMetricsF(bold).height() + fmSmall.height();
    const int every =
        thin ? std::max(1, static_cast<int>(std::ceil(fmSmall.height() / v.layout_.pitch()))) : 1;
    for (int d = c.firstRow; d <= c.lastRow; ++d) {
      const QRectF lr(c.target.left() + 10, c.rowY(v.layout_, d), v.layout_.labelWidth - 18,
                      v.layout_.rowHeight);
      if (thin) {
        if (d % every != 0) continue;
        p.setFont(c.small);
        p.setPen(th.text);
        p.drawText(QRectF(lr.left(), lr.center().y() - fmSmall.height() / 2, lr.width(), fmSmall.height()),
                   Qt::AlignLeft | Qt::AlignVCenter, TimelineView::tr("Device %1").arg(d));
        continue;
      }
      p.setFont(bold);
      p.setPen(th.text);
      p.drawText(lr, Qt::AlignLeft | Qt::AlignTop, TimelineView::tr("Device %1").arg(d));
      QStringList st;
      for (int sIdx : c.s.pipeline.stagesOn(d)) st << QStringLiteral("s%1").arg(sIdx);
      p.setFont(c.small);
      p.setPen(th.muted);
      p.drawText(lr, Qt::AlignLeft | Qt::AlignBottom,
                 fmSmall.elidedText(st.join(QStringLiteral(" · ")), Qt::ElideRight, lr.width()));
      if (v.overlayShown()) {
        const QRectF ml(lr.left(), c.target.top() + v.layout_.overlayTop(d) - c.scrollY, lr.width(),
                        v.layout_.overlayHeight);
        QString m = TimelineView::tr("measured");
        if (const Comparison* cmp = v.overlayModel_->comparison())
          for (const auto& e : cmp->byDevice)
            if (e.device == d && e.plannedMs > 0) m += QStringLiteral(" %1×").arg(e.ratio, 0, 'f', 2);
        p.setPen(th.text);
        p.drawText(ml, Qt::AlignLeft | Qt::AlignVCenter, fmSmall.elidedText(m, Qt::ElideRight, ml.width()));
      }
    }
    p.restore();
    p.setPen(th.separator);
    p.drawLine(QPointF(c.plotX0 - 0.5, c.target.top()), QPointF(c.plotX0 - 0.5, c.target.bottom()));
  }

  static void ruler(const TimelineView& v, const Context& c) {
    QPainter& p = c.p;
    const Theme& th = c.theme;
    const QRectF ruler(c.target.left(), c.target.top(), c.target.width(), v.layout_.rulerHeight);
    p.fillRect(ruler, th.base);
    p.setPen(th.separator);
    p.drawLine(QPointF(c.target.left(), ruler.bottom() - 0.5),
               QPointF(c.target.right(), ruler.bottom() - 0.5));
    p.setFont(c.small);
    const double step = tickStep(c.axis.pixelsPerMs(), 90);
    const bool slots = v.mode_ == TimelineView::LayoutMode::Slots && c.a.slots;
    p.save();
    p.setClipRect(QRectF(c.plotX0, ruler.top(), c.plotW, ruler.height()));
    // Ticks counted in whole steps (a sum of steps would drift from the multiples it labels).
    const auto firstTick = static_cast<long long>(std::floor(std::max(0.0, c.t0) / step));
    const auto lastTick = static_cast<long long>(std::floor((c.t1 + step) / step));
    for (long long k = firstTick; k <= lastTick; ++k) {
      const double t = static_cast<double>(k) * step;
      const double x = c.plotX0 + c.axis.toX(t);
      p.setPen(th.separator);
      p.drawLine(QPointF(x, ruler.bottom() - 6), QPointF(x, ruler.bottom()));
      p.setPen(th.muted);
      const QString txt =
          slots ? QString::number(t, 'g', 6) : QString::number(t, 'g', 6) + QStringLiteral(" ms");
      p.drawText(QRectF(x + 4, ruler.top(), 120, ruler.height() - 4), Qt::AlignLeft | Qt::AlignVCenter, txt);
    }
    p.restore();
    p.setPen(th.muted);
    p.drawText(QRectF(c.target.left() + 10, ruler.top(), v.layout_.labelWidth - 14, ruler.height() - 4),
               Qt::AlignLeft | Qt::AlignVCenter, slots ? TimelineView::tr("slot") : TimelineView::tr("time"));
  }

  static void playhead(const TimelineView& v, const Context& c) {
    // The line across the rows, and its flag on the ruler with the time.
    if (!v.playhead_) return;
    QPainter& p = c.p;
    const Theme& th = c.theme;
    const double x = c.plotX0 + c.axis.toX(*v.playhead_);
    p.setRenderHint(QPainter::Antialiasing, true);
    if (!v.dragging_) {
      p.save();
      p.setClipRect(c.plotClip);
      p.setPen(QPen(th.playhead, 2));
      p.drawLine(QPointF(x, c.target.top() + v.layout_.rulerHeight), QPointF(x, c.target.bottom()));
      p.restore();
    }
    if (x < c.plotX0 - 1 || x > c.plotX0 + c.plotW + 1) return;
    const QRectF ruler(c.target.left(), c.target.top(), c.target.width(), v.layout_.rulerHeight);
    p.setClipRect(QRectF(c.plotX0 - 6, ruler.top(), c.plotW + 12, ruler.height()));
    const QString txt =
        v.playheadLabel_.isEmpty() ? fmtMs(*v.playhead_) + QStringLiteral(" ms") : v.playheadLabel_;
    const double w = QFontMetricsF(c.small).horizontalAdvance(txt) + 10;
    // Keep the flag inside the plot near the right edge.
    const double left = std::min(x, c.plotX0 + c.plotW - w);
    const QRectF flag(left, ruler.top() + 2, w, ruler.height() - 9);
    p.setPen(Qt::NoPen);
    p.setBrush(th.playhead);
    p.drawRoundedRect(flag, 3, 3);
    QPolygonF tip;
    tip << QPointF(x - 5, ruler.bottom() - 7) << QPointF(x + 5, ruler.bottom() - 7)
        << QPointF(x, ruler.bottom());
    p.drawPolygon(tip);
    p.setPen(th.onAccent);
    p.setFont(c.small);
    p.drawText(flag, Qt::AlignCenter, txt);
  }
};

// ---- the measured span and search matches ------------------------------------------------------

void TimelinePasses::measure(const TimelineView& v, const Context& c) {
  if (!v.measure_) return;
  QPainter& p = c.p;
  const Theme& th = c.theme;
  const double x0 = c.plotX0 + c.axis.toX(v.measure_->from), x1 = c.plotX0 + c.axis.toX(v.measure_->to);
  p.save();
  p.setClipRect(QRectF(c.plotX0, c.target.top(), c.plotW, c.target.height()));
  QColor band = th.highlight;
  band.setAlphaF(0.12f);
  p.fillRect(QRectF(x0, c.target.top() + v.layout_.rulerHeight, std::max(1.0, x1 - x0), c.target.height()),
             band);
  p.setPen(QPen(th.highlight, 1.5));
  for (double x : {x0, x1}) p.drawLine(QPointF(x, c.target.top()), QPointF(x, c.target.bottom()));
  // Its length on the ruler, between the two lines when it fits.
  const QString txt = msText(v.measure_->length());
  QFont f = c.small;
  f.setBold(true);
  p.setFont(f);
  const double w = QFontMetricsF(f).horizontalAdvance(txt) + 12;
  const double mid = (x0 + x1) / 2;
  const QRectF flag(std::clamp(mid - w / 2, c.plotX0, c.plotX0 + c.plotW - w), c.target.top() + 3, w,
                    v.layout_.rulerHeight - 8);
  p.setPen(Qt::NoPen);
  p.setBrush(th.highlight);
  p.drawRoundedRect(flag, 3, 3);
  p.setPen(th.onAccent);
  p.drawText(flag, Qt::AlignCenter, txt);
  p.restore();
}

void TimelineView::paintEvent(QPaintEvent*) {
  QPainter p(viewport());
  paintTimeline(p, viewport()->rect(), axis_, verticalScrollBar()->value());
  if (hasFocus()) {
    // Keyboard focus is visible (Tab into the timeline): a frame in the selection colour.
    p.setPen(QPen(theme_.highlight, 2));
    p.setBrush(Qt::NoBrush);
    p.drawRect(QRectF(viewport()->rect()).adjusted(1, 1, -1, -1));
  }
}

void TimelineView::paintTimeline(QPainter& p, const QRect& target, const TimeAxis& axis, double scrollY,
                                 unsigned passes) const {
  const TimelinePasses::Context ctx(*this, p, target, axis, scrollY);
  // Indexed by Pass: the order of the enum is the order of painting.
  using P = TimelinePasses;
  static constexpr P::Fn kPasses[] = {
      &P::bands,     &P::blocks,         &P::overlayLanes, &P::outlines, &P::arrows,   &P::drag,   &P::hover,
      &P::stepMarks, &P::iterationMarks, &P::labels,       &P::ruler,    &P::playhead, &P::measure};
  static_assert(std::size(kPasses) == static_cast<size_t>(Pass::Count));
  p.fillRect(target, theme_.base);
  for (unsigned i = 0; i < std::size(kPasses); ++i) {
    if (!(passes & (1u << i))) continue;
    // Each pass starts from the same painter state and leaves nothing behind; the ones before
    // the labels paint inside the plot.
    p.save();
    if (i < static_cast<unsigned>(Pass::Labels)) p.setClipRect(ctx.plotClip);
    kPasses[i](*this, ctx);
    p.restore();
  }
}

// ---- exports ------------------------------------------------------------------------------------

QSize TimelineView::fullSize(int width) const {
  return QSize(width, static_cast<int>(layout_.contentHeight(blocks().devices()) + layout_.rowGap));
}

namespace {
// The legend an export draws above the timeline, as the window's legend shows it.
std::unique_ptr<LegendBar> exportLegend(const TimelineView& v, const Schedule& s, bool overlay) {
  auto legend = std::make_unique<LegendBar>();
  legend->setPalette(v.palette());
  legend->setFont(v.font());
  legend->setSchedule(s);
  legend->setOverlayShown(overlay);
  return legend;
}
}  // namespace

QSize TimelineView::exportSize(int width) const {
  const auto legend = exportLegend(*this, displaySchedule(doc_->analysis()), overlayShown());
  return QSize(width, legend->heightForWidth(width) + fullSize(width).height());
}

void TimelineView::paintExport(QPainter& p, QSize size) const {
  const auto legend = exportLegend(*this, displaySchedule(doc_->analysis()), overlayShown());
  const int lh = legend->heightForWidth(size.width());
  legend->paintLegend(p, QRect(0, 0, size.width(), lh));
  TimeAxis ax(TimeAxis::fitScale(contentEnd(), size.width() - layout_.labelWidth - 12), 0);
  paintTimeline(p, QRect(0, lh, size.width(), size.height() - lh), ax, 0, exportPasses());
}

QImage TimelineView::exportImage(int width) const {
  const QSize size = exportSize(width);
  QImage img(size, QImage::Format_ARGB32_Premultiplied);
  img.fill(theme_.base);
  QPainter p(&img);
  paintExport(p, size);
  return img;
}

bool TimelineView::exportSvg(const QString& path, int width) const {
#ifdef PIPESTUDIO_HAVE_SVG
  const QSize size = exportSize(width);
  QSvgGenerator gen;
  gen.setFileName(path);
  gen.setSize(size);
  gen.setViewBox(QRect(QPoint(0, 0), size));
  gen.setTitle(QString::fromStdString(doc_->schedule().name));
  {
    QPainter p(&gen);
    paintExport(p, size);
  }
  return QFileInfo(path).isFile();
#else
  Q_UNUSED(path);
  Q_UNUSED(width);
  return false;
#endif
}

QImage TimelineView::renderImage(QSize size) const {
  QImage img(size, QImage::Format_ARGB32_Premultiplied);
  QPainter p(&img);
  TimeAxis ax(TimeAxis::fitScale(contentEnd(), size.width() - layout_.labelWidth - 12), 0);
  paintTimeline(p, QRect(QPoint(0, 0), size), ax, 0);
  return img;
}

}  // namespace ps::ui
