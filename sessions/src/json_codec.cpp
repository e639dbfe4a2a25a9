#include "json_codec.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace ps::sessions::detail {

using nlohmann::json;

namespace {
template <typename T>
T get(const json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  // An integer out of T's range (1e300 read as int) is the fallback: the cast would be undefined.
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (!it->is_number()) return fallback;
    if (it->is_number_float()) {
      double v = it->get<double>();
      if (!std::isfinite(v) || v < static_cast<double>(std::numeric_limits<T>::min()) ||
          v >= std::ldexp(1.0, std::numeric_limits<T>::digits))
        return fallback;
      return static_cast<T>(v);
    }
    if (it->is_number_unsigned()) {
      auto u = it->get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) return fallback;
      return static_cast<T>(u);
    }
    auto v = it->get<std::int64_t>();
    if (v < 0 && !std::is_signed_v<T>) return fallback;
    if constexpr (std::is_signed_v<T>) {
      if (v < static_cast<std::int64_t>(std::numeric_limits<T>::min()) ||
          v > static_cast<std::int64_t>(std::numeric_limits<T>::max()))
        return fallback;
    }
    return static_cast<T>(v);
  }
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    return fallback;
  }
}
}  // namespace

json metricsToJson(const core::TimelineMetrics& m) {
  json devices = json::array();
  for (const auto& d : m.devices) {
    devices.push_back({{"device", d.device},
                       {"start", d.start},
                       {"end", d.end},
                       {"busy", d.busy},
                       {"staticBytes", d.staticBytes},
                       {"peakMemoryBytes", d.peakMemoryBytes},
                       {"peakMemoryTime", d.peakMemoryTime},
                       {"peakMemoryOp", {{"device", d.peakMemoryOp.device}, {"step", d.peakMemoryOp.step}}},
                       {"peakInflightMicrobatches", d.peakInflightMicrobatches}});
  }
  return {{"makespan", m.makespan},
          {"bubbleRatio", m.bubbleRatio},
          {"lowerBound", m.lowerBound},
          {"efficiency", m.efficiency},
          {"ops", m.ops},
          {"devices", devices}};
}

core::TimelineMetrics metricsFromJson(const json& j) {
  core::TimelineMetrics m;
  if (!j.is_object()) return m;
  m.makespan = get(j, "makespan", 0.0);
  m.bubbleRatio = get(j, "bubbleRatio", 0.0);
  m.lowerBound = get(j, "lowerBound", 0.0);
  m.efficiency = get(j, "efficiency", 0.0);
  m.ops = get<size_t>(j, "ops", 0);
  if (auto it = j.find("devices"); it != j.end() && it->is_array()) {
    for (const auto& dj : *it) {
      if (!dj.is_object()) continue;
      core::DeviceMetrics d;
      d.device = get(dj, "device", 0);
      d.start = get(dj, "start", 0.0);
      d.end = get(dj, "end", 0.0);
      d.busy = get(dj, "busy", 0.0);
      d.staticBytes = get<std::int64_t>(dj, "staticBytes", 0);
      d.peakMemoryBytes = get<std::int64_t>(dj, "peakMemoryBytes", 0);
      d.peakMemoryTime = get(dj, "peakMemoryTime", 0.0);
      if (auto op = dj.find("peakMemoryOp"); op != dj.end() && op->is_object()) {
        d.peakMemoryOp.device = get(*op, "device", -1);
        d.peakMemoryOp.step = get(*op, "step", -1);
      }
      d.peakInflightMicrobatches = get(dj, "peakInflightMicrobatches", 0);
      m.devices.push_back(d);
    }
  }
  return m;
}

json diagnosticsToJson(const core::Diagnostics& ds) {
  json out = json::array();
  for (const auto& d : ds) {
    json related = json::array();
    for (const auto& r : d.related) related.push_back({{"device", r.device}, {"step", r.step}});
    out.push_back({{"severity", core::severityName(d.severity)},
                   {"code", d.code},
                   {"message", d.message},
                   {"file", d.location.file},
                   {"line", d.location.line},
                   {"column", d.location.column},
                   {"hint", d.hint},
                   {"related", related}});
  }
  return out;
}

core::Diagnostics diagnosticsFromJson(const json& j) {
  core::Diagnostics out;
  if (!j.is_array()) return out;
  for (const auto& dj : j) {
    if (!dj.is_object()) continue;
    core::Diagnostic d;
    d.severity = core::severityFromName(get<std::string>(dj, "severity", "error"));
    d.code = get<std::string>(dj, "code", "");
    d.message = get<std::string>(dj, "message", "");
    d.location.file = get<std::string>(dj, "file", "");
    d.location.line = get(dj, "line", 0);
    d.location.column = get(dj, "column", 0);
    d.hint = get<std::string>(dj, "hint", "");
    if (auto it = dj.find("related"); it != dj.end() && it->is_array()) {
      for (const auto& r : *it)
        if (r.is_object()) d.related.push_back({get(r, "device", -1), get(r, "step", -1)});
    }
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace ps::sessions::detail
