#include "timeline/legend_bar.h"

#include <QPainter>
#include <QResizeEvent>
#include <set>

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
    all.push_back({tr("Measured ≤1.1×"), th.deviationColor(DeviationBand::Good), 0});
    all.push_back({tr("<1.5×"), th.deviationColor(DeviationBand::Warn), 0});
    all.push_back({tr("≥1.5×"), th.deviationColor(DeviationBand::Bad), 0});
    all.push_back({tr("unplanned"), th.deviationColor(DeviationBand::Unknown), 0});
    all.push_back({tr("critical path"), th.text, 4});
  }
  return all;
}

std::vector<QRect> LegendBar::entryRects(int width) const {
  const QFontMetrics fm = fontMetrics();
  const int lh = lineHeight();
  std::vector<QRect> out;
  int x = 12, line = 0;
  for (const Entry& e : allEntries()) {
    const int w = 24 + fm.horizontalAdvance(e.label) + 2;
    if (x > 12 && x + w > width - 4) {
      x = 12;
      ++line;
    }
    out.emplace_back(x, 3 + line * lh, w, lh);
    x += w + 16;
  }
  return out;
}

int LegendBar::heightForWidth(int width) const {
  const auto rects = entryRects(width);
  const int lines = rects.empty() ? 1 : (rects.back().bottom() - 3) / lineHeight() + 1;
  return lines * lineHeight() + 6;
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
  static const std::pair<OpKind, const char*> names[] = {{OpKind::F, "Forward"},
                                                         {OpKind::B, "Backward"},
                                                         {OpKind::I, "Input grad"},
                                                         {OpKind::W, "Weight grad"},
                                                         {OpKind::R, "Recompute"},
                                                         {OpKind::Offload, "Offload"},
                                                         {OpKind::Reload, "Reload"},
                                                         {OpKind::SendF, "Send/Recv"},
                                                         {OpKind::SendB, "Send/Recv grad"},
                                                         {OpKind::Unshard, "Unshard"},
                                                         {OpKind::ReduceGrad, "Reduce grad"}};
  const Theme th = Theme::forPalette(palette());
  for (const auto& [k, label] : names) {
    bool present = kinds.count(static_cast<std::uint16_t>(k)) > 0;
    if (k == OpKind::SendF) present = present || kinds.count(static_cast<std::uint16_t>(OpKind::RecvF));
    if (k == OpKind::SendB) present = present || kinds.count(static_cast<std::uint16_t>(OpKind::RecvB));
    if (k == OpKind::Unshard) present = present || kinds.count(static_cast<std::uint16_t>(OpKind::Reshard));
    if (present || k == OpKind::F) entries_.push_back({tr(label), th.kindColor(k), 0});
  }
  for (auto k : kinds)
    if (isUserKind(static_cast<OpKind>(k)))
      entries_.push_back({QString::fromStdString(s.kindName(static_cast<OpKind>(k))),
                          th.kindColor(static_cast<OpKind>(k)), 0});
  if (overlapped) entries_.push_back({tr("Overlapped F+B"), th.overlapColor(), 0});
  if (maxChunks > 1) entries_.push_back({tr("Later chunk"), th.blockColor(OpKind::F, 1, false), 3});
  entries_.push_back({tr("Invalid"), th.error, 1});
  entries_.push_back({tr("Deadlock"), th.deadlock, 2});
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
  const Theme th = Theme::forPalette(palette());
  p.fillRect(rect(), th.base);
  const QFontMetrics fm = fontMetrics();
  const int h = 12;
  QColor text = th.text;
  text.setAlphaF(0.8f);
  const std::vector<Entry> all = allEntries();
  const std::vector<QRect> rects = entryRects(width());
  for (size_t i = 0; i < all.size(); ++i) {
    const Entry& e = all[i];
    const QRect& r = rects[i];
    const QRect sw(r.x(), r.y() + (r.height() - h) / 2, 18, h);
    switch (e.style) {
      case 0:
      case 3:
        p.fillRect(sw, e.color);
        break;
      case 1:
        p.setPen(QPen(e.color, 2));
        p.drawRect(sw.adjusted(1, 1, -1, -1));
        break;
      case 2:
        p.setPen(QPen(e.color, 2, Qt::DashLine));
        p.drawRect(sw.adjusted(1, 1, -1, -1));
        break;
      case 4:
        p.fillRect(sw, th.deviationColor(DeviationBand::Good));
        p.setPen(QPen(e.color, 2));
        p.drawRect(sw.adjusted(1, 1, -1, -1));
        break;
      default:
        break;
    }
    p.setPen(text);
    p.drawText(QRect(r.x() + 24, r.y(), fm.horizontalAdvance(e.label) + 2, r.height()),
               Qt::AlignVCenter | Qt::AlignLeft, e.label);
  }
  p.setPen(th.separator);
  p.drawLine(0, height() - 1, width(), height() - 1);
}

}  // namespace ps::ui
