#pragma once
// Reading a schedule the way every subcommand does: PyTorch CSV or .pipe by format, with the
// DSL's --set overrides, errors naming the file (or <stdin>).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipestudio/core/io/pytorch_csv.h"
#include "pipestudio/core/model/result.h"
#include "pipestudio/core/model/schedule.h"

namespace ps::cli {

bool endsWith(std::string_view s, std::string_view suffix);

// "csv" for *.csv, "pipe" otherwise (stdin included): the default of --format / --from.
std::string scheduleFormatOf(std::string_view path);

// The name diagnostics use for a path: "<stdin>" for "-".
std::string inputName(const std::string& path);

// Prints the DSL's "this expands to many ops" warning on stderr as it happens.
void printLargeExpansion(const core::Diagnostic& d);

// Parses `text` read from `name`: a PyTorch CSV when `csv` (with `csvOptions`, filename set
// from `name`; `cells`, when given, receives each step's cell), else a .pipe with the `--set`
// assignments applied. A malformed assignment, or assignments given for a CSV, is a usage
// error: nullopt with `usageError` set. Otherwise the parse result (diagnostics on failure).
std::optional<core::Result<core::Schedule>> parseScheduleText(const std::string& text, const std::string& name, bool csv,
                                                               const std::vector<std::string>& overrides,
                                                               std::string& usageError,
                                                               core::CsvReadOptions csvOptions = {},
                                                               core::CsvStepLocations* cells = nullptr);

// Gives validator diagnostics without a location one: the file `name`, and for a CSV the cell
// of the first op they name (`cells` from parseScheduleText), or the rank's row
// (`file.csv:LINE:`) when they name a device's order as a whole (step -1, e.g. a missing op).
void locateScheduleDiagnostics(core::Diagnostics& diagnostics, const std::string& name, bool csv,
                               const core::CsvStepLocations& cells);

}  // namespace ps::cli
