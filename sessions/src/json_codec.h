#pragma once
// JSON forms of the timeline parts a run row keeps as text (metrics, diagnostics), shared by
// the store and the run export.
#include <nlohmann/json.hpp>

#include "pipestudio/core/model/result.h"
#include "pipestudio/core/model/timeline.h"

namespace ps::sessions::detail {

nlohmann::json metricsToJson(const core::TimelineMetrics& m);
// Lenient: missing fields keep their defaults.
core::TimelineMetrics metricsFromJson(const nlohmann::json& j);

nlohmann::json diagnosticsToJson(const core::Diagnostics& ds);
core::Diagnostics diagnosticsFromJson(const nlohmann::json& j);

}  // namespace ps::sessions::detail
