#include "timeline/op_style.h"

#include "timeline/theme.h"

namespace ps::ui {

// The kind colours are the same in both theme variants (theme.cpp).
QColor kindColor(ps::core::OpKind k) {
  return Theme::lightVariant().kindColor(k);
}

QColor overlapColor() {
  return Theme::lightVariant().overlapColor();
}

QColor blockColor(ps::core::OpKind k, int chunk, bool overlapped) {
  return Theme::lightVariant().blockColor(k, chunk, overlapped);
}

QColor textColorOn(const QColor& bg) {
  return Theme::lightVariant().textOn(bg);
}

QString blockLabel(const ps::core::Schedule& s, const ps::core::Op& op) {
  if (op.microbatch < 0) return QString::fromStdString(s.kindName(op.kind));
  return QString::number(op.microbatch);
}

}  // namespace ps::ui
