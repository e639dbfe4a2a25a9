#pragma once
// The legend above the timeline: the kinds present, chunk shading and outlines. It wraps onto
// more lines when the window is narrow instead of cutting entries off.
#include <QWidget>
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

 protected:
  void paintEvent(QPaintEvent* e) override;
  void resizeEvent(QResizeEvent* e) override;

 private:
  struct Entry {
    QString label;
    QColor color;
    int style = 0;  // 0 fill, 1 red outline, 2 dashed orange outline, 3 lighter chunk, 4 critical path
  };
  std::vector<Entry> allEntries() const;
  int lineHeight() const;
  std::vector<Entry> entries_;
  QString info_;
  bool overlay_ = false;
};

}  // namespace ps::ui
