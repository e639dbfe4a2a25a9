#pragma once
// A one-line legend above the timeline: the kinds present, chunk shading and outlines.
#include <QWidget>
#include <vector>

#include "pipestudio/core/schedule.h"

namespace ps::ui {

class LegendBar : public QWidget {
  Q_OBJECT
 public:
  explicit LegendBar(QWidget* parent = nullptr);
  void setSchedule(const ps::core::Schedule& s);
  QSize sizeHint() const override;
  // Adds the measured overlay's deviation colours and the critical-path outline.
  void setOverlayShown(bool on);

 protected:
  void paintEvent(QPaintEvent* e) override;

 private:
  struct Entry {
    QString label;
    QColor color;
    int style = 0;  // 0 fill, 1 red outline, 2 dashed orange outline, 3 lighter chunk, 4 critical path
  };
  std::vector<Entry> entries_;
  QString info_;
  bool overlay_ = false;
};

}  // namespace ps::ui
