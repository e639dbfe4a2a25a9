#pragma once
// Helpers shared by the search, partition and simulate subcommands.
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>

#include "cli.h"
#include "pipestudio/core/model/cost_profile.h"

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

// "85899345920", "80GiB", "40GB", "512M", "1e9": KiB MiB GiB TiB are powers of 1024; K M G T and
// KB MB GB TB powers of 1000; B or nothing is bytes.
inline bool parseBytes(const std::string& s, std::int64_t& out) {
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1.0},   {"B", 1.0},   {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
      {"K", 1e3},  {"M", 1e6},   {"G", 1e9},      {"T", 1e12},        {"KB", 1e3},           {"MB", 1e6},
      {"GB", 1e9}, {"TB", 1e12}};
  try {
    size_t used = 0;
    double v = std::stod(s, &used);
    const std::string unit = s.substr(used);
    for (auto [name, mul] : kUnits) {
      if (unit != name) continue;
      if (!(v >= 0) || v * mul > 9e18) return false;
      out = static_cast<std::int64_t>(v * mul);
      return true;
    }
    return false;
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
