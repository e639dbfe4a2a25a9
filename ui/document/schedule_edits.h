#pragma once
// The designer's schedule edits live in core (pipestudio/core/planning/schedule_edits.h);
// the document wraps them in undo commands. These names keep the ui call sites unchanged.
#include "pipestudio/core/planning/schedule_edits.h"

namespace ps::ui {

using ps::core::addOffloadReload;
using ps::core::mergeInputWeight;
using ps::core::moveStep;
using ps::core::opAt;
using ps::core::splitBackward;
using ps::core::stageRecomputes;
using ps::core::toggleRecompute;

}  // namespace ps::ui
