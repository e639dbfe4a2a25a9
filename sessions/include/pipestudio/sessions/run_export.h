#pragma once
// JSON export of a stored run (docs/sessions.md, "Run JSON"): the run's row and its full
// timeline, for scripts and notebooks.
#include <string>

#include "pipestudio/core/model/timeline.h"
#include "pipestudio/sessions/session_store.h"

namespace ps::sessions {

std::string runToJson(const RunRecord& run, const core::Timeline& timeline);

}  // namespace ps::sessions
