#include "pipestudio/core/io/units.h"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "pipestudio/core/model/limits.h"

namespace ps::core {

namespace {

constexpr std::int64_t kKiB = std::int64_t{1} << 10, kMiB = std::int64_t{1} << 20,
                       kGiB = std::int64_t{1} << 30, kTiB = std::int64_t{1} << 40;

constexpr std::array<std::pair<std::string_view, std::int64_t>, 14> kByteUnits{{
    {"B", 1},
    {"KiB", kKiB},
    {"MiB", kMiB},
    {"GiB", kGiB},
    {"TiB", kTiB},
    {"K", 1'000},
    {"M", 1'000'000},
    {"G", 1'000'000'000},
    {"T", 1'000'000'000'000},
    {"KB", 1'000},
    {"MB", 1'000'000},
    {"GB", 1'000'000'000},
    {"TB", 1'000'000'000'000},
    {"", 1},
}};

constexpr std::array<std::pair<std::string_view, double>, 5> kTimeUnits{
    {{"", 1.0}, {"ms", 1.0}, {"us", 1e-3}, {"ns", 1e-6}, {"s", 1e3}}};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The leading number of `text` and the rest (its unit, spaces trimmed); nullopt: no number.
std::optional<std::pair<double, std::string_view>> splitNumber(std::string_view text) {
  const std::string s(trim(text));
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str()) return std::nullopt;
  const auto used = static_cast<size_t>(end - s.c_str());
  return std::pair{v, trim(trim(text).substr(used))};
}

}  // namespace

std::string formatMsValue(double ms) {
  if (std::isnan(ms)) return "nan";
  if (std::isinf(ms)) return ms > 0 ? "inf" : "-inf";
  const double a = std::fabs(ms);
  if (a != 0 && a < 0.01) return fmt::format("{:.3g}", ms);
  if (a < 1000) return fmt::format("{:.2f}", ms);
  return fmt::format("{:.1f}", ms);
}

std::string formatDurationMs(double ms) {
  return formatMsValue(ms) + " ms";
}

std::string formatByteSize(std::int64_t bytes) {
  const double v = static_cast<double>(bytes);
  const long long a = std::llabs(static_cast<long long>(bytes));
  if (a >= kTiB) return fmt::format("{:.2f} TiB", v / static_cast<double>(kTiB));
  if (a >= kGiB) return fmt::format("{:.2f} GiB", v / static_cast<double>(kGiB));
  if (a < kKiB) return fmt::format("{} B", bytes);
  // MiB and KiB with one decimal, none when it is 0 ("512 MiB", "8.5 MiB").
  const bool mib = a >= kMiB;
  std::string n = fmt::format("{:.1f}", v / static_cast<double>(mib ? kMiB : kKiB));
  if (n.size() > 2 && n.compare(n.size() - 2, 2, ".0") == 0) n.resize(n.size() - 2);
  return n + (mib ? " MiB" : " KiB");
}

std::string formatByteSizeFixed(std::int64_t bytes) {
  const double v = static_cast<double>(bytes);
  const long long a = std::llabs(static_cast<long long>(bytes));
  if (a >= kGiB) return fmt::format("{:.2f} GiB", v / static_cast<double>(kGiB));
  if (a >= kMiB) return fmt::format("{:.2f} MiB", v / static_cast<double>(kMiB));
  if (a >= kKiB) return fmt::format("{:.2f} KiB", v / static_cast<double>(kKiB));
  return fmt::format("{} B", bytes);
}

std::string formatSignificant(double v, int significant) {
  return fmt::format("{:.{}g}", v, significant);
}

std::optional<std::int64_t> byteUnitFactor(std::string_view unit) {
  for (const auto& [name, factor] : kByteUnits)
    if (name == unit) return factor;
  return std::nullopt;
}

const std::vector<std::string_view>& byteUnitNames() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> v;
    for (const auto& [name, factor] : kByteUnits)
      if (!name.empty()) v.push_back(name);
    return v;
  }();
  return names;
}

Result<std::int64_t> parseByteSize(std::string_view text) {
  const auto bad = [&](const std::string& why) {
    return makeError("units.bytes", "'" + std::string(text.substr(0, 40)) + "' is not a byte size (" + why +
                                        "; e.g. 85899345920, 80GiB, 40GB)");
  };
  const auto split = splitNumber(text);
  if (!split) return bad("no number");
  const auto factor = byteUnitFactor(split->second);
  if (!factor) return bad("unknown unit '" + std::string(split->second.substr(0, 12)) + "'");
  const double bytes = split->first * static_cast<double>(*factor);
  if (!(bytes >= 0)) return bad("negative or not a number");
  if (bytes > static_cast<double>(limits::kMaxBytes)) return bad("more than 1 PiB");
  return static_cast<std::int64_t>(std::llround(bytes));
}

Result<double> parseDurationMs(std::string_view text) {
  const auto bad = [&](const std::string& why) {
    return makeError("units.time", "'" + std::string(text.substr(0, 40)) + "' is not a time (" + why +
                                       "; e.g. 2.5, 2.5ms, 300us, 1.5s)");
  };
  const auto split = splitNumber(text);
  if (!split) return bad("no number");
  for (const auto& [name, factor] : kTimeUnits) {
    if (name != split->second) continue;
    const double ms = split->first * factor;
    if (!(ms >= 0) || !std::isfinite(ms)) return bad("negative or not finite");
    if (ms > limits::kMaxTimeMs) return bad("too large");
    return ms;
  }
  return bad("unknown unit '" + std::string(split->second.substr(0, 12)) + "'");
}

}  // namespace ps::core
