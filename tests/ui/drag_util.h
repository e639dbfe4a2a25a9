#pragma once
// Test helpers shared by the designer tests: where an op stands in a device's order, and a
// drag of a block done as a user does it (press, small moves, release).
#include <QApplication>
#include <QMouseEvent>
#include <QtTest>
#include <functional>

#include "pipestudio/core/model/schedule.h"
#include "timeline/timeline_view.h"

namespace ps::test {

inline int stepOf(const ps::core::Schedule& s, int device, const ps::core::Op& op) {
  const auto& row = s.devices[size_t(device)];
  for (size_t i = 0; i < row.size(); ++i)
    if (row[i].first == op) return int(i);
  return -1;
}

// Presses on a block, drags to `to` in small steps (as a user would) and releases.
inline void dragBlock(ps::ui::TimelineView* v, QPoint from, QPoint to,
                      const std::function<void()>& beforeRelease = {}) {
  QWidget* vp = v->viewport();
  QTest::mousePress(vp, Qt::LeftButton, Qt::NoModifier, from);
  const int steps = 12;
  for (int i = 1; i <= steps; ++i) {
    const QPoint p = from + (to - from) * i / steps;
    QMouseEvent move(QEvent::MouseMove, p, vp->mapToGlobal(p), Qt::NoButton, Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(vp, &move);
  }
  if (beforeRelease) beforeRelease();
  QTest::mouseRelease(vp, Qt::LeftButton, Qt::NoModifier, to);
}

}  // namespace ps::test
