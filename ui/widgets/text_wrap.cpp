#include "widgets/text_wrap.h"

#include <QStringList>

namespace ps::ui {

QString wrapToWidth(const QString& text, const QFontMetrics& fm, int width) {
  if (width <= 0 || fm.horizontalAdvance(text) <= width) return text;
  QStringList lines;
  QString line;
  auto flush = [&] {
    if (!line.isEmpty()) lines << line;
    line.clear();
  };
  for (const QString& word : text.split(QLatin1Char(' '))) {
    const QString candidate = line.isEmpty() ? word : line + QLatin1Char(' ') + word;
    if (fm.horizontalAdvance(candidate) <= width) {
      line = candidate;
      continue;
    }
    flush();
    // A word wider than the column (a path, a long op list): cut it where it must.
    QString rest = word;
    while (fm.horizontalAdvance(rest) > width && rest.size() > 1) {
      int n = rest.size() - 1;
      while (n > 1 && fm.horizontalAdvance(rest.left(n)) > width) --n;
      lines << rest.left(n);
      rest = rest.mid(n);
    }
    line = rest;
  }
  flush();
  return lines.join(QLatin1Char('\n'));
}

}  // namespace ps::ui
