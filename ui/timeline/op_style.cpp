#include "timeline/op_style.h"

#include <algorithm>
#include <array>

namespace ps::ui {

using ps::core::OpKind;

QColor kindColor(OpKind k) {
  switch (k) {
    case OpKind::F:
      return QColor(0x3b, 0x7d, 0xd8);  // blue
    case OpKind::I:
      return QColor(0x1a, 0xa3, 0x9a);  // teal
    case OpKind::W:
      return QColor(0x4c, 0xaf, 0x50);  // green
    case OpKind::B:
      return QColor(0xf0, 0x8c, 0x2e);  // orange
    case OpKind::R:
      return QColor(0xd9, 0x4f, 0x8a);  // pink
    case OpKind::Offload:
      return QColor(0x8d, 0x6e, 0x63);  // brown
    case OpKind::Reload:
      return QColor(0xb0, 0x8f, 0x5a);  // tan
    case OpKind::SendF:
    case OpKind::RecvF:
      return QColor(0x90, 0xa4, 0xae);  // grey-blue
    case OpKind::SendB:
    case OpKind::RecvB:
      return QColor(0xa1, 0x88, 0x7f);  // grey-brown
    case OpKind::Unshard:
    case OpKind::Reshard:
      return QColor(0x7e, 0x57, 0xc2);  // deep violet
    case OpKind::ReduceGrad:
      return QColor(0xc0, 0xa0, 0x20);  // ochre
    default:
      break;
  }
  static const std::array<QColor, 6> user = {QColor(0xe5, 0x3e, 0x3e), QColor(0x00, 0x97, 0xa7),
                                             QColor(0x9e, 0x9d, 0x24), QColor(0x5c, 0x6b, 0xc0),
                                             QColor(0xef, 0x6c, 0x00), QColor(0x6d, 0x4c, 0x41)};
  const auto i = static_cast<size_t>(k) - ps::core::kFirstUserKind;
  return user[i % user.size()];
}

QColor overlapColor() {
  return QColor(0x8e, 0x44, 0xad);
}

QColor blockColor(OpKind k, int chunk, bool overlapped) {
  QColor c = overlapped ? overlapColor() : kindColor(k);
  if (chunk <= 0) return c;
  // Mix towards white: 0.38 for chunk 1, less for each later chunk so they stay distinct.
  const double t = std::min(0.6, 0.38 + 0.1 * (chunk - 1));
  return QColor::fromRgbF(static_cast<float>(c.redF() + (1 - c.redF()) * t),
                          static_cast<float>(c.greenF() + (1 - c.greenF()) * t),
                          static_cast<float>(c.blueF() + (1 - c.blueF()) * t));
}

QColor textColorOn(const QColor& bg) {
  const double lum = 0.299 * bg.redF() + 0.587 * bg.greenF() + 0.114 * bg.blueF();
  return lum > 0.62 ? QColor(0x1e, 0x1e, 0x1e) : QColor(Qt::white);
}

QString blockLabel(const ps::core::Schedule& s, const ps::core::Op& op) {
  if (op.microbatch < 0) return QString::fromStdString(s.kindName(op.kind));
  return QString::number(op.microbatch);
}

}  // namespace ps::ui
