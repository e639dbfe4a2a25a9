#pragma once
// Colours of op kinds (held by the Theme, theme.h), following PyTorch's pipelining visualiser (F blue, I
// teal, W green, B orange, overlapped pairs purple) with distinct colours for the other kinds. Blocks of a
// device's later chunks are drawn lighter so interleaved stages stay apart.
#include <QColor>
#include <QString>

#include "pipestudio/core/model/schedule.h"

namespace ps::ui {

QColor kindColor(ps::core::OpKind k);
QColor overlapColor();
// The kind colour shaded for chunk c (0 = full colour).
QColor blockColor(ps::core::OpKind k, int chunk, bool overlapped);
// Black or white, whichever reads better on `background`.
QColor textColorOn(const QColor& background);
// Short label drawn on a block: the micro-batch number, or the kind for stage-level ops.
QString blockLabel(const ps::core::Schedule& s, const ps::core::Op& op);

}  // namespace ps::ui
