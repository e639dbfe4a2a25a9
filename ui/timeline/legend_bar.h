#pragma once
// The legend above the timeline: the kinds present, chunk shading and outlines. It wraps onto
// more lines when the window is narrow instead of cutting entries off.
#include <QWidget>

class QPainter;
#include <vector>

#include "pipestudio/core/model/schedule.h"

namespace ps::ui {

class LegendBar : public QWidget {
  Q_OBJECT
 public:
  explicit LegendBar(QWidget* parent = nullptr);
  void setSchedule(const ps::core::Schedule& s);
  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;
  bool hasHeightForWidth() const override { return true; }
  int heightForWidth(int width) const override;
  // Where each entry (swatch and label) goes at `width`; every rect lies inside it.
  std::vector<QRect> entryRects(int width) const;
  QStringList labels() const;
  // Adds the measured overlay's deviation colours and the critical-path outline.
  void setOverlayShown(bool on);
  // Paints the legend into `r` as the widget shows it at r's width (exports draw it above the
  // timeline).
  void paintLegend(QPainter& p, const QRect& r) const;
  // Whether the entries use their short labels at `width` (a narrow window: "F", "B", ...; the
  // long ones are in the tooltip).
  bool compactAt(int width) const;

 protected:
  void paintEvent(QPaintEvent* e) override;
  void resizeEvent(QResizeEvent* e) override;

 private:
  struct Entry {
    QString label;
    QColor color;
    int style = 0;       // 0 fill, 1 red outline, 2 dashed orange outline, 3 lighter chunk, 4 critical path
    QString shortLabel;  // for narrow windows; empty: the label
    std::vector<QColor> chunk;  // style 3: the later-chunk colours of the kinds present
  };
  std::vector<Entry> allEntries() const;
  std::vector<QRect> rectsFor(int width, bool compact) const;
  int lineCount(const std::vector<QRect>& rects) const;
  int lineHeight() const;
  std::vector<Entry> entries_;
  QString info_;
  bool overlay_ = false;
};

}  // namespace ps::ui
