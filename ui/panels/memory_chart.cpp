#include "panels/memory_chart.h"

#include <QApplication>
#include <QChart>
#include <QEvent>
#include <QLegendMarker>
#include <QPen>
#include <QValueAxis>
#include <algorithm>
#include <cmath>

#include "timeline/theme.h"
#include "widgets/chart_theme.h"

namespace ps::ui {

namespace {
constexpr double kGiB = double(1LL << 30);

}  // namespace

QColor memoryCapacityColor() {
  return Theme::current().error;  // red: no device curve is red
}

QColor memoryDeviceColor(int d) {
  // Distinct hues, none of them red (the capacity) or the playhead's magenta; grey is left out
  // (it reads as "disabled"). Past the list, hues step by the golden angle around the wheel,
  // skipping the reds.
  const auto& colors = Theme::lightVariant().series;
  const int n = static_cast<int>(colors.size());
  if (d >= 0 && d < n) return colors[static_cast<size_t>(d)];
  int hue = static_cast<int>(std::fmod(40.0 + d * 137.508, 280.0)) + 40;  // 40..320: no reds
  return QColor::fromHsv(hue, 200, d % 2 ? 150 : 200);
}

QList<QPointF> memoryCurvePoints(const std::vector<ps::core::MemorySample>& samples, double endMs,
                                 int maxPoints) {
  QList<QPointF> pts;
  if (samples.empty()) return pts;
  const size_t n = samples.size();
  if (static_cast<int>(n) * 2 <= maxPoints) {
    pts.reserve(2 * static_cast<qsizetype>(n) + 1);
    double prev = static_cast<double>(samples.front().bytes) / kGiB;
    pts.append(QPointF(samples.front().time, prev));
    for (size_t i = 1; i < n; ++i) {
      const double v = static_cast<double>(samples[i].bytes) / kGiB;
      pts.append(QPointF(samples[i].time, prev));
      pts.append(QPointF(samples[i].time, v));
      prev = v;
    }
    if (endMs > samples.back().time) pts.append(QPointF(endMs, prev));
    return pts;
  }
  // Bucketed: each bucket contributes its first value, then min and max in time order.
  const int buckets = std::max(1, maxPoints / 3);
  const size_t per = (n + static_cast<size_t>(buckets) - 1) / static_cast<size_t>(buckets);
  for (size_t b = 0; b < n; b += per) {
    const size_t e = std::min(n, b + per);
    size_t lo = b, hi = b;
    for (size_t i = b; i < e; ++i) {
      if (samples[i].bytes < samples[lo].bytes) lo = i;
      if (samples[i].bytes > samples[hi].bytes) hi = i;
    }
    pts.append(QPointF(samples[b].time, static_cast<double>(samples[b].bytes) / kGiB));
    const size_t a = std::min(lo, hi), c = std::max(lo, hi);
    if (a != b) pts.append(QPointF(samples[a].time, static_cast<double>(samples[a].bytes) / kGiB));
    if (c != a) pts.append(QPointF(samples[c].time, static_cast<double>(samples[c].bytes) / kGiB));
  }
  if (endMs > samples.back().time)
    pts.append(QPointF(endMs, static_cast<double>(samples.back().bytes) / kGiB));
  return pts;
}

MemoryChart::MemoryChart(QWidget* parent) : QChartView(parent) {
  auto* chart = new QChart();
  chart->setMargins(QMargins(4, 4, 4, 4));
  chart->legend()->setAlignment(Qt::AlignRight);
  chart->setBackgroundRoundness(0);
  setChart(chart);
  setRenderHint(QPainter::Antialiasing);
  setMinimumHeight(160);
  applyTheme();
}

bool MemoryChart::event(QEvent* e) {
  if (e->type() == QEvent::PaletteChange || e->type() == QEvent::ApplicationPaletteChange) applyTheme();
  return QChartView::event(e);
}

void MemoryChart::applyTheme() {
  QChart* c = chart();
  applyChartPalette(c, palette());
  c->setPlotAreaBackgroundVisible(false);
  c->legend()->setLabelColor(palette().color(QPalette::Text));
}

void MemoryChart::setTimeline(const ps::core::Timeline& t, std::int64_t capacityBytes) {
  QChart* c = chart();
  c->removeAllSeries();
  for (QAbstractAxis* ax : c->axes()) {
    c->removeAxis(ax);
    delete ax;
  }
  devices_.clear();
  capacity_ = nullptr;
  cursor_ = nullptr;
  playhead_ = nullptr;

  const double end = std::max(t.metrics.makespan, 1e-6);
  double peak = 0;
  for (size_t d = 0; d < t.memory.size(); ++d) {
    auto* s = new QLineSeries();
    s->setName(tr("Device %1").arg(d));
    const QList<QPointF> pts = memoryCurvePoints(t.memory[d], end);
    for (const auto& p : pts) peak = std::max(peak, p.y());
    s->replace(pts);
    QPen pen(memoryDeviceColor(static_cast<int>(d)), 1.6);
    s->setPen(pen);
    c->addSeries(s);
    devices_.append(s);
  }
  const double cap = capacityBytes > 0 ? static_cast<double>(capacityBytes) / kGiB : 0;
  yMax_ = std::max({peak * 1.1, cap * 1.05, 0.1});
  xMax_ = end;
  if (cap > 0) {
    capacity_ = new QLineSeries();
    capacity_->setName(tr("Capacity"));
    capacity_->append(0, cap);
    capacity_->append(end, cap);
    capacity_->setPen(QPen(memoryCapacityColor(), 2.0, Qt::DashLine));
    c->addSeries(capacity_);
  }
  // The playhead before the hover cursor, so the cursor stays the last series (drawn on top).
  playhead_ = new QLineSeries();
  playhead_->setPen(QPen(Theme::current().playhead, 2));
  playhead_->setVisible(false);
  c->addSeries(playhead_);
  cursor_ = new QLineSeries();
  cursor_->setPen(QPen(Theme::current().cursor, 1, Qt::DashLine));
  cursor_->setVisible(false);
  c->addSeries(cursor_);

  auto* ax = new QValueAxis();
  ax->setRange(0, end);
  ax->setLabelFormat(QStringLiteral("%g"));
  ax->setTitleText(tr("time (ms)"));
  auto* ay = new QValueAxis();
  ay->setRange(0, yMax_);
  ay->setLabelFormat(QStringLiteral("%g"));
  ay->setTitleText(tr("GiB"));
  {
    // Round tick spacing on an exact 0..makespan range.
    const double raw = end / 6;
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    double step = 10 * mag;
    for (double m : {1.0, 2.0, 5.0})
      if (m * mag >= raw) {
        step = m * mag;
        break;
      }
    ax->setTickType(QValueAxis::TicksDynamic);
    ax->setTickAnchor(0);
    ax->setTickInterval(step);
  }
  ay->applyNiceNumbers();
  yMax_ = ay->max();
  c->addAxis(ax, Qt::AlignBottom);
  c->addAxis(ay, Qt::AlignLeft);
  for (QAbstractSeries* s : c->series()) {
    s->attachAxis(ax);
    s->attachAxis(ay);
  }
  // The cursor is not a curve: keep it out of the legend.
  const auto markers = c->legend()->markers(cursor_);
  for (QLegendMarker* m : markers) m->setVisible(false);
  for (QLegendMarker* m : c->legend()->markers(playhead_)) m->setVisible(false);
  applyTheme();
  setPlayheadTime(playheadTime_);
}

void MemoryChart::setPlayheadTime(std::optional<double> ms) {
  playheadTime_ = ms;
  if (!playhead_) return;
  if (!ms) {
    playhead_->setVisible(false);
    return;
  }
  playhead_->replace(QList<QPointF>{QPointF(*ms, 0), QPointF(*ms, yMax_)});
  playhead_->setVisible(true);
  for (QLegendMarker* m : chart()->legend()->markers(playhead_)) m->setVisible(false);
}

void MemoryChart::setCursorTime(double ms) {
  if (!cursor_) return;
  if (ms < 0) {
    cursor_->setVisible(false);
    return;
  }
  cursor_->replace(QList<QPointF>{QPointF(ms, 0), QPointF(ms, yMax_)});
  cursor_->setVisible(true);
  const auto markers = chart()->legend()->markers(cursor_);
  for (QLegendMarker* m : markers) m->setVisible(false);
}

}  // namespace ps::ui
