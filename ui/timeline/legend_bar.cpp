#include "timeline/legend_bar.h"

#include <QPainter>
#include <QResizeEvent>
#include <set>
#include <tuple>

#include "timeline/theme.h"

namespace ps::ui {

using namespace ps::core;

LegendBar::LegendBar(QWidget* parent) : QWidget(parent) {
  QSizePolicy sp(QSizePolicy::Expanding, QSizePolicy::Preferred);
  sp.setHeightForWidth(true);
  setSizePolicy(sp);
}

int LegendBar::lineHeight() const {
  return fontMetrics().height() + 8;
}

QSize LegendBar::sizeHint() const {
  return QSize(400, heightForWidth(width() > 0 ? width() : 400));
}

QSize LegendBar::minimumSizeHint() const {
  return QSize(100, lineHeight() + 6);
}

std::vector<LegendBar::Entry> LegendBar::allEntries() const {
  std::vector<Entry> all = entries_;
  if (overlay_) {
    const Theme th = Theme::forPalette(palette());
    all.push_back({tr("Measured ≤1.1×"), th.deviationColor(DeviationBand::Good), 0, tr("≤1.1×"), {}});
    all.push_back({tr("<1.5×"), th.deviationColor(DeviationBand::Warn), 0, {}, {}});
    all.push_back({tr("≥1.5×"), th.deviationColor(DeviationBand::Bad), 0, {}, {}});
    all.push_back({tr("unplanned"), th.deviationColor(DeviationBand::Unknown), 0, tr("unpl."), {}});
    all.push_back({tr("critical path"), th.text, 4, tr("critical"), {}});
  }
  return all;
}

std::vector<QRect> LegendBar::rectsFor(int width, bool compact) const {
  const QFontMetrics fm = fontMetrics();
  const int lh = lineHeight();
  const int gap = compact ? 10 : 16;
  std::vector<QRect> out;
  int x = 12, line = 0;
  for (const Entry& e : allEntries()) {
    const QString& label = compact && !e.shortLabel.isEmpty() ? e.shortLabel : e.label;
    const int w = 24 + fm.horizontalAdvance(label) + 2;
    if (x > 12 && x + w > width - 4) {
      x = 12;
      ++line;
    }
    out.emplace_back(x, 3 + line * lh, w, lh);
    x += w + gap;
  }
  return out;
}

int LegendBar::lineCount(const std::vector<QRect>& rects) const {
  return rects.empty() ? 1 : (rects.back().bottom() - 3) / lineHeight() + 1;
}

bool LegendBar::compactAt(int width) const {
  // Long labels while they fit on two lines; a narrower window gets the short ones.
  return lineCount(rectsFor(width, false)) > 2;
}

std::vector<QRect> LegendBar::entryRects(int width) const {
  return rectsFor(width, compactAt(width));
}

int LegendBar::heightForWidth(int width) const {
  return lineCount(entryRects(width)) * lineHeight() + 6;
}

QStringList LegendBar::labels() const {
  QStringList out;
  for (const Entry& e : allEntries()) out << e.label;
  return out;
}

void LegendBar::resizeEvent(QResizeEvent* e) {
  QWidget::resizeEvent(e);
  // The parent layout asks for our height again at the new width (wrapped lines).
  if (heightForWidth(width()) != height()) updateGeometry();
}

void LegendBar::setSchedule(const Schedule& s) {
  std::set<std::uint16_t> kinds;
  bool overlapped = false;
  int maxChunks = 1;
  for (const auto& row : s.devices)
    for (const auto& st : row) {
      kinds.insert(static_cast<std::uint16_t>(st.first.kind));
      if (st.second) {
        overlapped = true;
        kinds.insert(static_cast<std::uint16_t>(st.second->kind));
      }
    }
  for (int d = 0; d < s.pipeline.devices; ++d)
    maxChunks = std::max(maxChunks, static_cast<int>(s.pipeline.stagesOn(d).size()));
  entries_.clear();
  // Kinds that draw alike share an entry (SEND/RECV, UNSHARD/RESHARD).
  static const std::tuple<OpKind, const char*, const char*> names[] = {
      {OpKind::F, QT_TR_NOOP("Forward"), "F"},
      {OpKind::B, QT_TR_NOOP("Backward"), "B"},
      {OpKind::I, QT_TR_NOOP("Input grad"), "I"},
      {OpKind::W, QT_TR_NOOP("Weight grad"), "W"},
      {OpKind::R, QT_TR_NOOP("Recompute"), "R"},
      {OpKind::Offload, QT_TR_NOOP("Offload"), "OFFLOAD"},
      {OpKind::Reload, QT_TR_NOOP("Reload"), "RELOAD"},
      {OpKind::SendF, QT_TR_NOOP("Send/Recv"), "SEND/RECV"},
      {OpKind::SendB, QT_TR_NOOP("Send/Recv grad"), "SEND/RECV B"},
      {OpKind::Unshard, QT_TR_NOOP("Unshard"), "UNSHARD"},
      {OpKind::ReduceGrad, QT_TR_NOOP("Reduce grad"), "REDUCE"}};
  const Theme th = Theme::forPalette(palette());
  std::vector<QColor> later;  // the later-chunk shade of each compute kind present
  for (const auto& [k, label, shortLabel] : names) {
    bool present = kinds.count(static_cast<std::uint16_t>(k)) > 0;
    if (k == OpKind::SendF) present = present || kinds.count(static_cast<std::uint16_t>(OpKind::RecvF));
    if (k == OpKind::SendB) present = present || kinds.count(static_cast<std::uint16_t>(OpKind::RecvB));
    if (k == OpKind::Unshard) present = present || kinds.count(static_cast<std::uint16_t>(OpKind::Reshard));
    if (present || k == OpKind::F)
      entries_.push_back({tr(label), th.kindColor(k), 0, QString::fromLatin1(shortLabel), {}});
    if ((present || k == OpKind::F) && (k == OpKind::F || k == OpKind::B || k == OpKind::I || k == OpKind::W))
      later.push_back(th.blockColor(k, 1, false));
  }
  for (auto k : kinds)
    if (isUserKind(static_cast<OpKind>(k)))
      entries_.push_back({QString::fromStdString(s.kindName(static_cast<OpKind>(k))),
                          th.kindColor(static_cast<OpKind>(k)),
                          0,
                          {},
                          {}});
  if (overlapped) entries_.push_back({tr("Overlapped F+B"), th.overlapColor(), 0, tr("F+B"), {}});
  if (maxChunks > 1)
    entries_.push_back(
        {tr("Later chunk (lighter)"), th.blockColor(OpKind::F, 1, false), 3, tr("later chunk"), later});
  entries_.push_back({tr("Invalid"), th.error, 1, {}, {}});
  entries_.push_back({tr("Deadlock"), th.deadlock, 2, {}, {}});
  QStringList tip;
  for (const Entry& e : entries_) tip << e.label;
  setToolTip(tip.join(QStringLiteral(" · ")));
  updateGeometry();
  update();
}

void LegendBar::setOverlayShown(bool on) {
  overlay_ = on;
  updateGeometry();
  update();
}

void LegendBar::paintEvent(QPaintEvent*) {
  QPainter p(this);
  paintLegend(p, rect());
}

void LegendBar::paintLegend(QPainter& p, const QRect& area) const {
  const Theme th = Theme::forPalette(palette());
  p.save();
  p.fillRect(area, th.base);
  p.setFont(font());
  const QFontMetrics fm = fontMetrics();
  const int h = 12;
  QColor text = th.text;
  text.setAlphaF(0.8f);
  const bool compact = compactAt(area.width());
  const std::vector<Entry> all = allEntries();
  const std::vector<QRect> rects = rectsFor(area.width(), compact);
  for (size_t i = 0; i < all.size(); ++i) {
    const Entry& e = all[i];
    const QRect r = rects[i].translated(area.topLeft());
    const QRect sw(r.x(), r.y() + (r.height() - h) / 2, 18, h);
    switch (e.style) {
      case 0:
        p.fillRect(sw, e.color);
        break;
      case 3:
        if (e.chunk.empty()) {
          p.fillRect(sw, e.color);
        } else {  // one stripe per kind: every kind's later chunk is lighter, not only F's
          const int n = static_cast<int>(e.chunk.size());
          for (int k = 0; k < n; ++k) {
            const int x0 = sw.left() + sw.width() * k / n, x1 = sw.left() + sw.width() * (k + 1) / n;
            p.fillRect(QRect(x0, sw.top(), x1 - x0, sw.height()), e.chunk[static_cast<size_t>(k)]);
          }
        }
        break;
      case 1:
        p.setPen(QPen(e.color, 2));
        p.setBrush(Qt::NoBrush);
        p.drawRect(sw.adjusted(1, 1, -1, -1));
        break;
      case 2:
        p.setPen(QPen(e.color, 2, Qt::DashLine));
        p.setBrush(Qt::NoBrush);
        p.drawRect(sw.adjusted(1, 1, -1, -1));
        break;
      case 4:
        p.fillRect(sw, th.deviationColor(DeviationBand::Good));
        p.setPen(QPen(e.color, 2));
        p.setBrush(Qt::NoBrush);
        p.drawRect(sw.adjusted(1, 1, -1, -1));
        break;
      default:
        break;
    }
    const QString& label = compact && !e.shortLabel.isEmpty() ? e.shortLabel : e.label;
    p.setPen(text);
    p.drawText(QRect(r.x() + 24, r.y(), fm.horizontalAdvance(label) + 2, r.height()),
               Qt::AlignVCenter | Qt::AlignLeft, label);
  }
  p.setPen(th.separator);
  p.drawLine(area.left(), area.bottom(), area.right(), area.bottom());
  p.restore();
}

}  // namespace ps::ui
