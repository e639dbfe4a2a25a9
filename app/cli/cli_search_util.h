#pragma once
// Helpers shared by the search and partition subcommands.
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "cli.h"
#include "pipestudio/core/cost_profile.h"

namespace ps::cli::search_util {

inline bool parseInt(const std::string& s, int& out, int min) {
  try {
    size_t used = 0;
    long v = std::stol(s, &used);
    if (used != s.size() || v < min || v > 1'000'000'000) return false;
    out = static_cast<int>(v);
    return true;
  } catch (...) {
    return false;
  }
}

// "85899345920", "80GiB", "40GB", "512MiB": binary suffixes are powers of 1024, decimal of 1000.
inline bool parseBytes(const std::string& s, std::int64_t& out) {
  try {
    size_t used = 0;
    double v = std::stod(s, &used);
    std::string unit = s.substr(used);
    double mul = 1;
    if (unit.empty() || unit == "B") mul = 1;
    else if (unit == "KiB") mul = 1024.0;
    else if (unit == "MiB") mul = 1024.0 * 1024;
    else if (unit == "GiB" || unit == "G") mul = 1024.0 * 1024 * 1024;
    else if (unit == "KB") mul = 1e3;
    else if (unit == "MB") mul = 1e6;
    else if (unit == "GB") mul = 1e9;
    else return false;
    if (!(v >= 0) || v * mul > 9e18) return false;
    out = static_cast<std::int64_t>(v * mul);
    return true;
  } catch (...) {
    return false;
  }
}

// --memory-limit BYTES (suffixes allowed) into `out`; false, with the reason on stderr, when bad.
inline bool memoryLimitFlag(const ps::cli::Args& args, const std::string& command,
                            std::optional<std::int64_t>& out) {
  if (!args.has("--memory-limit")) return true;
  std::int64_t b = 0;
  if (!parseBytes(args.value("--memory-limit"), b)) {
    std::fprintf(stderr, "pipestudio-cli %s: --memory-limit takes bytes (e.g. 85899345920, 80GiB, 40GB)\n",
                 command.c_str());
    return false;
  }
  out = b;
  return true;
}

inline std::string formatBytes(std::int64_t b) {
  char buf[64];
  const double v = static_cast<double>(b);
  if (b >= (1LL << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", v / (1LL << 30));
  else if (b >= (1LL << 20)) std::snprintf(buf, sizeof buf, "%.2f MiB", v / (1LL << 20));
  else std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  return buf;
}

// Reads and parses a cost profile; on failure `error` holds printable diagnostics.
inline std::optional<ps::core::CostProfile> loadProfile(const std::string& path, std::string& error) {
  std::string text;
  if (!readInput(path, text, error)) {
    error += "\n";
    return std::nullopt;
  }
  auto p = ps::core::parseCostProfile(text, path);
  if (!p) {
    error = ps::core::formatDiagnostics(p.errors(), &text);
    return std::nullopt;
  }
  if (p->name.empty()) {  // name it after the file for the report
    std::string stem = path.substr(path.find_last_of('/') + 1);
    p->name = stem.substr(0, stem.rfind(".json"));
  }
  return std::move(p).value();
}

}  // namespace ps::cli::search_util
