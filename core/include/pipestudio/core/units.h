#pragma once
// One way to print times and byte sizes, shared by the GUI and the CLI, so that a value reads
// the same in every table, tooltip, status line and report ("2.00 ms", not "2 ms" here and
// "3.35554 ms" there). Header-only: std only.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace ps::core {

// Milliseconds without the unit: two decimals up to 1000 ms, one above; small non-zero values
// keep three significant digits so that 0.004 ms does not print as 0.00.
inline std::string formatMsValue(double ms) {
  char buf[64];
  const double a = std::fabs(ms);
  if (!std::isfinite(ms)) std::snprintf(buf, sizeof buf, "%s", std::isnan(ms) ? "nan" : (ms > 0 ? "inf" : "-inf"));
  else if (a != 0 && a < 0.01) std::snprintf(buf, sizeof buf, "%.3g", ms);
  else if (a < 1000) std::snprintf(buf, sizeof buf, "%.2f", ms);
  else std::snprintf(buf, sizeof buf, "%.1f", ms);
  return buf;
}

// "3.36 ms".
inline std::string formatDurationMs(double ms) { return formatMsValue(ms) + " ms"; }

// Binary units: "512 B", "8 KiB", "8.5 MiB", "512 MiB", "79.71 GiB", "1.50 TiB".
inline std::string formatByteSize(std::int64_t bytes) {
  char buf[64];
  const double v = static_cast<double>(bytes);
  const long long a = std::llabs(static_cast<long long>(bytes));
  constexpr long long kKiB = 1LL << 10, kMiB = 1LL << 20, kGiB = 1LL << 30, kTiB = 1LL << 40;
  if (a >= kTiB) std::snprintf(buf, sizeof buf, "%.2f TiB", v / static_cast<double>(kTiB));
  else if (a >= kGiB) std::snprintf(buf, sizeof buf, "%.2f GiB", v / static_cast<double>(kGiB));
  else if (a < kKiB) std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  else {
    // MiB and KiB with one decimal, none when it is 0 ("512 MiB", "8.5 MiB").
    const bool mib = a >= kMiB;
    std::snprintf(buf, sizeof buf, "%.1f", v / static_cast<double>(mib ? kMiB : kKiB));
    std::string n = buf;
    if (n.size() > 2 && n.compare(n.size() - 2, 2, ".0") == 0) n.resize(n.size() - 2);
    return n + (mib ? " MiB" : " KiB");
  }
  return buf;
}

}  // namespace ps::core
