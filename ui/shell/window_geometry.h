#pragma once
// Where the main window opens: inside the screen's available area (without panels), with its
// title bar and borders, whatever size was asked for or restored from the last session.
#include <QMargins>
#include <QRect>

namespace ps::ui {

// `geometry` is the window's client area (QWidget::geometry()), `frame` the window manager's
// decorations around it, `available` the screen's available geometry. Returns the client
// area shrunk to fit and moved inside, keeping its position where it already fits.
QRect fitWindowToScreen(const QRect& geometry, const QMargins& frame, const QRect& available);

// Decorations to allow for before the window manager has said (a title bar, thin borders).
inline QMargins assumedWindowFrame() {
  return QMargins(4, 32, 4, 4);
}

}  // namespace ps::ui
