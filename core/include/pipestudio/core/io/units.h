#pragma once
// The one formatter and parser of times and byte sizes, shared by the GUI, the CLI and the DSL,
// so that a value reads the same in every table, tooltip, status line and report ("2.00 ms",
// not "2 ms" here and "3.35554 ms" there) and "80GiB" means the same in a flag, a DSL file and a
// GUI field.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipestudio/core/model/result.h"

namespace ps::core {

// Milliseconds without the unit: two decimals up to 1000 ms, one above; small non-zero values
// keep three significant digits so that 0.004 ms does not print as 0.00.
std::string formatMsValue(double ms);
// "3.36 ms".
std::string formatDurationMs(double ms);
// Binary units: "512 B", "8 KiB", "8.5 MiB", "512 MiB", "79.71 GiB", "1.50 TiB".
std::string formatByteSize(std::int64_t bytes);
// Binary units with two decimals in every unit above bytes ("1.50 KiB", "79.71 GiB"): reports
// whose columns line up.
std::string formatByteSizeFixed(std::int64_t bytes);
// A number with `significant` significant digits ("%.*g").
std::string formatSignificant(double v, int significant);

// The byte-size units every reader accepts: B (or none), KiB MiB GiB TiB (powers of 1024), K M
// G T and KB MB GB TB (powers of 1000). nullopt: not a unit.
std::optional<std::int64_t> byteUnitFactor(std::string_view unit);
// The unit names, for "did you mean" hints and usage texts.
const std::vector<std::string_view>& byteUnitNames();

// "85899345920", "80GiB", "80 GiB", "40GB", "512M", "1.5GiB", "1e9": a non-negative byte count
// up to limits::kMaxBytes. The error names what was read and the accepted units.
Result<std::int64_t> parseByteSize(std::string_view text);
// "2.5" (ms), "2.5ms", "300us", "1.5s": a non-negative finite time in milliseconds.
Result<double> parseDurationMs(std::string_view text);

}  // namespace ps::core
