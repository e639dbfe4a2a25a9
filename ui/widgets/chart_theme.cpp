#include "widgets/chart_theme.h"

#include <QAbstractAxis>
#include <QChart>
#include <QPalette>

namespace ps::ui {

void applyChartPalette(QChart* chart, const QPalette& pal) {
  chart->setBackgroundBrush(pal.color(QPalette::Base));
  QColor grid = pal.color(QPalette::Text);
  grid.setAlphaF(0.12f);  // a grid that reads without competing with the curves
  for (QAbstractAxis* ax : chart->axes()) {
    ax->setLabelsColor(pal.color(QPalette::Text));
    ax->setTitleBrush(pal.color(QPalette::Text));
    ax->setGridLineColor(grid);
    ax->setLinePenColor(grid);
  }
}

}  // namespace ps::ui
