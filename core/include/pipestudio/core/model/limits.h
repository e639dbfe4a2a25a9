#pragma once
// The bounds every reader checks numbers from a file against before they size memory or enter
// arithmetic (docs/limits.md), and checked arithmetic for bytes and times. A value outside a
// bound is an error naming the place, never a huge allocation, a wrapped sum or an inf result.
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

namespace ps::core::limits {

// Bytes of a message or hint as printed (the rest: "... (N more bytes)"): room for the longest
// explanation PipeStudio writes (a refused TorchScript model, ~600 bytes), not for a whole file.
inline constexpr size_t kMaxMessageBytes = 2000;
// Bytes of a source line shown under a diagnostic, around its column.
inline constexpr size_t kMaxExcerptBytes = 120;
// Diagnostics printed by formatDiagnostics; then one line "and N more".
inline constexpr size_t kMaxPrintedDiagnostics = 50;

// Devices (ranks) of one pipeline: per-device arrays are sized from the largest one.
inline constexpr int kMaxDevices = 65536;
inline constexpr int kMaxRank = kMaxDevices - 1;
// Stages and micro-batches of one schedule: per-(stage, micro-batch) tables are S x M.
inline constexpr int kMaxStages = 1 << 20;
inline constexpr int kMaxMicrobatches = 1 << 24;
// Ops of one expanded schedule or timeline.
inline constexpr long long kMaxOps = 16'000'000;
// The DSL warns before an expansion past this many ops (it still runs up to kMaxOps).
inline constexpr long long kLargeExpansionOps = 1'000'000;
// One byte count read from a file (a layer's activations, a user kind's memory delta, a
// memory sample): 1 PiB. Sums of such values are checked (addBytes / mulBytes).
inline constexpr std::int64_t kMaxBytes = std::int64_t{1} << 50;
// One time read from a file, in milliseconds (about 31 years): any finite sum of up to kMaxOps
// of them stays finite and exact enough to print.
inline constexpr double kMaxTimeMs = 1e12;
// Factors read from a file (optimizer / gradient bytes per weight byte, overlap factor).
inline constexpr double kMaxFactor = 1e6;

// a + b, or nullopt when it leaves int64.
inline std::optional<std::int64_t> checkedAdd(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}
inline std::optional<std::int64_t> checkedMul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}
// acc += v; false (acc unchanged) on overflow: the caller reports the sum as too large.
inline bool addBytes(std::int64_t& acc, std::int64_t v) {
  auto r = checkedAdd(acc, v);
  if (!r) return false;
  acc = *r;
  return true;
}
// acc += v for times; false (acc unchanged) when the sum is not finite.
inline bool addTime(double& acc, double v) {
  double r = acc + v;
  if (!std::isfinite(r)) return false;
  acc = r;
  return true;
}
// bytes x factor rounded, or nullopt when the product is not finite or leaves int64.
inline std::optional<std::int64_t> scaleBytes(std::int64_t bytes, double factor) {
  double r = std::round(static_cast<double>(bytes) * factor);
  if (!std::isfinite(r) || r >= 9.2e18 || r <= -9.2e18) return std::nullopt;
  return static_cast<std::int64_t>(r);
}

// A double from a file as an integer in [lo, hi]: nullopt when not finite, not whole or out
// of range (the cast itself is undefined outside the target type).
inline std::optional<long long> wholeInRange(double v, long long lo, long long hi) {
  if (!std::isfinite(v) || v < static_cast<double>(lo) || v > static_cast<double>(hi)) return std::nullopt;
  if (std::trunc(v) != v) return std::nullopt;
  return static_cast<long long>(v);
}
// A double from a file as int64 (truncated), or nullopt when it does not fit.
inline std::optional<std::int64_t> toInt64(double v) {
  if (!std::isfinite(v) || v >= 9.2e18 || v <= -9.2e18) return std::nullopt;
  return static_cast<std::int64_t>(v);
}

inline bool validTimeMs(double v) {
  return std::isfinite(v) && v >= -kMaxTimeMs && v <= kMaxTimeMs;
}
inline bool validBytes(std::int64_t v) {
  return v >= -kMaxBytes && v <= kMaxBytes;
}

}  // namespace ps::core::limits
