#pragma once
// The GUI's side of core's one time and byte formatter and parser (pipestudio/core/io/units.h):
// QStrings with a non-breaking space before the unit, so a tooltip or a label never wraps
// "1.00" / "ms"; and the GUI's byte-size fields read what the CLI and the DSL read ("80GiB",
// "40GB", "1.5 GiB"), a plain number keeping the unit the field always had.
#include <QString>
#include <cmath>
#include <cstdint>

#include "pipestudio/core/io/units.h"
#include "pipestudio/core/model/result.h"

namespace ps::ui {

inline QString nbsp(const std::string& s) {
  return QString::fromStdString(s).replace(QLatin1Char(' '), QChar(0x00A0));
}
// "3.36 ms"
inline QString msText(double ms) {
  return nbsp(ps::core::formatDurationMs(ms));
}
// "3.36" (the unit is in a column header)
inline QString msValue(double ms) {
  return QString::fromStdString(ps::core::formatMsValue(ms));
}
// "3.36 ms" with a plain space: lines that are copied or compared as text (summaries, logs).
inline QString msPlain(double ms) {
  return QString::fromStdString(ps::core::formatDurationMs(ms));
}
// "12.35 s": a wall-clock duration given in ms, with the ms formatter's precision.
inline QString secondsText(double ms) {
  return nbsp(ps::core::formatMsValue(ms / 1000.0) + " s");
}
// "512.0 MiB", "79.71 GiB"
inline QString bytesText(std::int64_t bytes) {
  return nbsp(ps::core::formatByteSize(bytes));
}
// "79.71 GiB" with a plain space (an editable field: it reads back through parseByteSizeText).
inline QString bytesPlain(std::int64_t bytes) {
  return QString::fromStdString(ps::core::formatByteSize(bytes));
}
// A number in a column whose header has the unit: six significant digits ("1.23457").
inline QString numberText(double v) {
  return QString::fromStdString(ps::core::formatSignificant(v, 6));
}

// A byte size typed into the GUI: what core::parseByteSize reads ("80GiB", "40GB", "512 MiB"),
// or a plain number of `plainUnit` bytes (a GiB field: "80" is 80 GiB, as it always was).
inline ps::core::Result<std::int64_t> parseByteSizeText(const QString& text, std::int64_t plainUnit) {
  const QString t = text.trimmed();
  bool plain = false;
  const double v = t.toDouble(&plain);
  if (!plain) return ps::core::parseByteSize(t.toStdString());
  const double bytes = v * static_cast<double>(plainUnit);
  if (!(bytes >= 0) || !std::isfinite(bytes)) return ps::core::parseByteSize(t.toStdString());  // its error
  return ps::core::parseByteSize(std::to_string(std::llround(bytes)));  // the same limits
}
// A time typed into the GUI: a plain number of ms, or "300us", "1.5s" (core::parseDurationMs).
inline ps::core::Result<double> parseDurationText(const QString& text) {
  return ps::core::parseDurationMs(text.trimmed().toStdString());
}
// "Device memory: '12 XB' is not a byte size (unknown unit 'XB'; ...)": the field named first.
inline QString fieldError(const QString& field, const ps::core::Diagnostics& errors) {
  return field + QStringLiteral(": ") +
         QString::fromStdString(errors.empty() ? std::string("invalid") : errors.front().message);
}

}  // namespace ps::ui
