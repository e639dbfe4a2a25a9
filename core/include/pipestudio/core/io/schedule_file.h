#pragma once
// Loading a schedule file: the one place that picks the parser (the .pipe DSL or PyTorch
// pipelining CSV) for every front end, the CLI's subcommands and the GUI's open path alike.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipestudio/core/io/pytorch_csv.h"
#include "pipestudio/core/model/result.h"
#include "pipestudio/core/model/schedule.h"

namespace ps::core {

enum class ScheduleFormat : std::uint8_t { Pipe, Csv };

// "pipe" or "csv", the spelling of --format / --from / --to.
std::string_view scheduleFormatName(ScheduleFormat format);
std::optional<ScheduleFormat> scheduleFormatFromName(std::string_view name);

// By extension (.pipe, .csv; any letter case); nullopt for others and for stdin ("-").
std::optional<ScheduleFormat> scheduleFormatFromPath(std::string_view path);

// By content: Csv when the first non-blank line is a row of PyTorch pipelining actions
// ("0F0,0SEND_F0,..."), else Pipe (whose first line is a keyword or a comment, never a list
// of such actions).
ScheduleFormat scheduleFormatFromText(std::string_view text);

// Diagnostic code of an override that cannot apply (malformed, or given for a CSV): the
// caller's usage error rather than an error in the file.
inline constexpr std::string_view kScheduleOverrideCode = "schedule.override";

struct ScheduleLoadOptions {
  std::optional<ScheduleFormat> format;  // explicit choice; else from `path`, else the text
  std::string path;                      // where the text came from ("-" for stdin)
  std::string name;                      // name in diagnostics; empty: path, "<stdin>" for "-"
  std::vector<std::string> overrides;    // "name=value" for a .pipe program's lets (--set)
  int csvMicrobatches = 0;               // CSV: 0 = inferred (largest micro-batch + 1)
  std::function<void(const Diagnostic&)> onLargeExpansion;  // DSL: see DslOptions
  CsvStepLocations* cells = nullptr;                        // CSV: receives each step's cell when given
};

// The format `options` resolve to for `text`: explicit, extension, content, in that order.
ScheduleFormat resolveScheduleFormat(std::string_view text, const ScheduleLoadOptions& options);

// The name diagnostics use for `options`: `name`, else `path` ("<stdin>" for "-").
std::string scheduleSourceName(const ScheduleLoadOptions& options);

// Parses `text` in its resolved format. Errors carry file:line:col from the parser; a bad or
// misplaced override is one diagnostic of code kScheduleOverrideCode.
Result<Schedule> loadSchedule(std::string_view text, const ScheduleLoadOptions& options);

// Reads the file at `options.path` (not stdin) and loads it as loadSchedule does; an unreadable
// file is a diagnostic of code "io.read" naming it.
Result<Schedule> loadScheduleFile(const ScheduleLoadOptions& options);

// Gives diagnostics without a location one (validator diagnostics name ops, not places): the
// file `name`, and for a CSV the cell of the first op they name (`cells` as loadSchedule
// filled it), or the rank's row (`file.csv:LINE:`) when they name a device's order as a whole.
void locateScheduleDiagnostics(Diagnostics& diagnostics, const std::string& name, ScheduleFormat format,
                               const CsvStepLocations& cells = {});

}  // namespace ps::core
