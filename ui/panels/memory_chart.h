#pragma once
// Memory dock: per-device memory over time (Qt Charts) with the capacity line; a vertical
// cursor follows the timeline hover.
#include <QChartView>
#include <QColor>
#include <QLineSeries>
#include <QList>
#include <QPointF>
#include <optional>
#include <vector>

#include "pipestudio/core/model/timeline.h"

namespace ps::ui {

// A step curve as chart points (ms, GiB): each sample holds its value until the next one.
// Longer curves are reduced to at most ~maxPoints points keeping each bucket's extremes.
QList<QPointF> memoryCurvePoints(const std::vector<ps::core::MemorySample>& samples, double endMs,
                                 int maxPoints = 4000);

// Device d's curve colour (distinct hues, never the capacity's) and the capacity line's.
QColor memoryDeviceColor(int d);
QColor memoryCapacityColor();

class MemoryChart : public QChartView {
  Q_OBJECT
 public:
  explicit MemoryChart(QWidget* parent = nullptr);
  void setTimeline(const ps::core::Timeline& t, std::int64_t capacityBytes);
  void setCursorTime(double ms);  // negative hides the cursor
  // Step-through: a solid line at the playhead (ms on the chart's axis; nullopt hides it).
  void setPlayheadTime(std::optional<double> ms);
  std::optional<double> playheadTime() const { return playheadTime_; }
  QLineSeries* playheadSeries() const { return playhead_; }
  const QList<QLineSeries*>& deviceSeries() const { return devices_; }
  QLineSeries* capacitySeries() const { return capacity_; }

 private:
  void applyTheme();
  bool event(QEvent* e) override;
  QList<QLineSeries*> devices_;
  QLineSeries* capacity_ = nullptr;
  QLineSeries* cursor_ = nullptr;
  QLineSeries* playhead_ = nullptr;
  std::optional<double> playheadTime_;
  double yMax_ = 1;
  double xMax_ = 1;
};

}  // namespace ps::ui
