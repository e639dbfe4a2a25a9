#pragma once
// Qt Charts follow the widget palette, light or dark: one place that says how.
class QChart;
class QPalette;

namespace ps::ui {

// The chart's background, and its axes' labels, titles, grid and lines, from `pal`.
void applyChartPalette(QChart* chart, const QPalette& pal);

}  // namespace ps::ui
