#pragma once
// Core types that travel through Qt signals and QVariant (queued connections, QSignalSpy), declared
// once for every ui/ folder: the session dock hands measured timelines to the shell, the run
// controller streams them to the dialogs.
#include <QMetaType>

#include "pipestudio/core/model/timeline.h"

Q_DECLARE_METATYPE(ps::core::Timeline)
