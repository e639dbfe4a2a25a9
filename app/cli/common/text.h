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

}  // namespace ps::cli
