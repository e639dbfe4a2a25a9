#pragma once
// Text laid out for a column of a given width: broken at spaces into lines that fit (a word
// longer than the width gets a line of its own, broken where it must). Lists and trees whose
// rows must not be cut at the dock's edge wrap their text with it and keep the whole text in
// the tooltip.
#include <QFontMetrics>
#include <QString>

namespace ps::ui {

QString wrapToWidth(const QString& text, const QFontMetrics& fm, int width);

}  // namespace ps::ui
