#pragma once
// Text of the subcommands' tables and reports. Times and byte sizes come from core/io/units
// (formatSignificant, formatByteSizeFixed); these are the column and decimal helpers around them.
#include <cstddef>
#include <string>

namespace ps::cli {

// `v` with `decimals` digits after the point ("%.*f").
std::string fixed(double v, int decimals);
// `s` padded with spaces to `width`: on the left (right-aligned) or on the right.
std::string pad(std::string s, std::size_t width, bool rightAlign);

// Beside every figure an analytic profile (the engine's, never measured) gives: its times come
// from nominal FLOP rates and bandwidths, not from this machine, and may be off by orders of
// magnitude (`run --session` and `compare` of such a run say so; `profile` calibrates).
inline constexpr const char* kUncalibratedMark = "[uncalibrated analytic estimate]";
inline constexpr const char* kUncalibratedExplanation =
    "the analytic profile times every layer at nominal rates (50 GFLOP/s, 10 GB/s), not as this "
    "machine runs it: its figures can be off by orders of magnitude";

}  // namespace ps::cli
