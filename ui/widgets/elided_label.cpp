#include "widgets/elided_label.h"

#include <QResizeEvent>
#include <algorithm>

namespace ps::ui {

ElidedLabel::ElidedLabel(QWidget* parent) : QLabel(parent) {
  setTextFormat(Qt::PlainText);
  setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
}

void ElidedLabel::setFullText(const QString& text) {
  full_ = text;
  elide();
}

QSize ElidedLabel::minimumSizeHint() const {
  return QSize(0, QLabel::minimumSizeHint().height());
}

QSize ElidedLabel::sizeHint() const {
  return QSize(fontMetrics().horizontalAdvance(full_) + 8, QLabel::sizeHint().height());
}

void ElidedLabel::resizeEvent(QResizeEvent* e) {
  QLabel::resizeEvent(e);
  elide();
}

void ElidedLabel::elide() {
  const QString shown = fontMetrics().elidedText(full_, Qt::ElideRight, std::max(0, width() - 2));
  QLabel::setText(shown);
  setToolTip(shown == full_ ? QString() : full_);
}

}  // namespace ps::ui
