#pragma once
// Check boxes and radio buttons that can be seen on a dark palette. Fusion outlines their
// indicator with the window colour darkened, which on a dark window is all but the window
// itself; their own palette gets a light "window" to derive the outline from (the role is used
// for nothing else there: they paint no background).
#include <QColor>

class QWidget;
class QPalette;

namespace ps::ui {

// For every check box and radio button under `root`, by the application palette now.
void makeIndicatorsVisible(QWidget* root);
// The colour Fusion outlines an indicator with under `palette` (tests).
QColor indicatorOutline(const QPalette& palette);

}  // namespace ps::ui
