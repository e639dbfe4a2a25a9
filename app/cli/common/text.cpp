#include "common/text.h"

#include <fmt/format.h>

namespace ps::cli {

std::string fixed(double v, int decimals) {
  return fmt::format("{:.{}f}", v, decimals);
}

std::string pad(std::string s, std::size_t width, bool rightAlign) {
  if (s.size() >= width) return s;
  return rightAlign ? std::string(width - s.size(), ' ') + s : s + std::string(width - s.size(), ' ');
}

}  // namespace ps::cli
