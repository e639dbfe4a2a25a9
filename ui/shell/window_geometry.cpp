#include "shell/window_geometry.h"

#include <algorithm>

namespace ps::ui {

QRect fitWindowToScreen(const QRect& geometry, const QMargins& frame, const QRect& available) {
  if (available.isEmpty()) return geometry;
  const int fw = frame.left() + frame.right(), fh = frame.top() + frame.bottom();
  const int w = std::max(1, std::min(geometry.width(), available.width() - fw));
  const int h = std::max(1, std::min(geometry.height(), available.height() - fh));
  // The frame's top-left, moved so that the whole frame lies inside the available area.
  int x = geometry.x() - frame.left(), y = geometry.y() - frame.top();
  x = std::clamp(x, available.left(), std::max(available.left(), available.right() + 1 - (w + fw)));
  y = std::clamp(y, available.top(), std::max(available.top(), available.bottom() + 1 - (h + fh)));
  return QRect(x + frame.left(), y + frame.top(), w, h);
}

}  // namespace ps::ui
