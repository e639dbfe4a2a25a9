#pragma once
// The GUI's side of core's one time and byte formatter (pipestudio/core/io/units.h): QStrings
// with a non-breaking space before the unit, so a tooltip or a label never wraps "1.00" / "ms".
#include <QString>
#include <cstdint>

#include "pipestudio/core/io/units.h"

namespace ps::ui {

inline QString nbsp(const std::string& s) {
  return QString::fromStdString(s).replace(QLatin1Char(' '), QChar(0x00A0));
}
// "3.36 ms"
inline QString msText(double ms) { return nbsp(ps::core::formatDurationMs(ms)); }
// "3.36" (the unit is in a column header)
inline QString msValue(double ms) { return QString::fromStdString(ps::core::formatMsValue(ms)); }
// "512.0 MiB", "79.71 GiB"
inline QString bytesText(std::int64_t bytes) { return nbsp(ps::core::formatByteSize(bytes)); }

}  // namespace ps::ui
