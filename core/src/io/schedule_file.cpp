#include "pipestudio/core/io/schedule_file.h"

#include <cctype>
#include <fstream>
#include <sstream>

#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/io/input_limits.h"

namespace ps::core {

namespace {

bool endsWithNoCase(std::string_view s, std::string_view suffix) {
  if (s.size() < suffix.size()) return false;
  for (size_t i = 0; i < suffix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[s.size() - suffix.size() + i])) != suffix[i]) return false;
  return true;
}

}  // namespace

std::string_view scheduleFormatName(ScheduleFormat format) {
  return format == ScheduleFormat::Csv ? "csv" : "pipe";
}

std::optional<ScheduleFormat> scheduleFormatFromName(std::string_view name) {
  if (name == "pipe") return ScheduleFormat::Pipe;
  if (name == "csv") return ScheduleFormat::Csv;
  return std::nullopt;
}

std::optional<ScheduleFormat> scheduleFormatFromPath(std::string_view path) {
  if (endsWithNoCase(path, ".pipe")) return ScheduleFormat::Pipe;
  if (endsWithNoCase(path, ".csv")) return ScheduleFormat::Csv;
  return std::nullopt;
}

ScheduleFormat scheduleFormatFromText(std::string_view text) {
  // A CSV row starts with an action ("0F0") or a group of them ("(0F0;1B0)"); a .pipe line
  // starts with a keyword, a name or '#'.
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) continue;
    return std::isdigit(static_cast<unsigned char>(c)) || c == '(' ? ScheduleFormat::Csv
                                                                   : ScheduleFormat::Pipe;
  }
  return ScheduleFormat::Pipe;
}

ScheduleFormat resolveScheduleFormat(std::string_view text, const ScheduleLoadOptions& options) {
  if (options.format) return *options.format;
  if (auto byPath = scheduleFormatFromPath(options.path)) return *byPath;
  return scheduleFormatFromText(text);
}

std::string scheduleSourceName(const ScheduleLoadOptions& options) {
  if (!options.name.empty()) return options.name;
  if (options.path.empty() || options.path == "-") return "<stdin>";
  return options.path;
}

Result<Schedule> loadSchedule(std::string_view text, const ScheduleLoadOptions& options) {
  const std::string name = scheduleSourceName(options);
  if (resolveScheduleFormat(text, options) == ScheduleFormat::Csv) {
    if (!options.overrides.empty())
      return makeError(std::string(kScheduleOverrideCode), "overrides apply to .pipe input only",
                       {name, 0, 0});
    CsvReadOptions csv;
    csv.filename = name;
    csv.microbatches = options.csvMicrobatches;
    return readPytorchCsv(text, csv, options.cells);
  }
  DslOptions dsl;
  dsl.filename = name;
  dsl.onLargeExpansion = options.onLargeExpansion;
  for (const auto& assignment : options.overrides) {
    if (auto st = parseOverride(assignment, dsl); !st)
      return makeError(std::string(kScheduleOverrideCode), st.error().message, {name, 0, 0});
  }
  return parseDsl(text, dsl);
}

Result<Schedule> loadScheduleFile(const ScheduleLoadOptions& options) {
  PS_ASSIGN_OR_RETURN(auto text, readUserFile(options.path, options.path));
  return loadSchedule(text, options);
}

void locateScheduleDiagnostics(Diagnostics& diagnostics, const std::string& name, ScheduleFormat format,
                               const CsvStepLocations& cells) {
  for (auto& d : diagnostics) {
    if (!d.location.file.empty()) continue;
    d.location.file = name;
    if (format != ScheduleFormat::Csv || d.related.empty()) continue;
    const OpRef& r = d.related.front();
    if (r.device < 0) continue;
    if (r.step < 0) {
      d.location.line = r.device + 1;  // rank r is line r + 1
    } else if (static_cast<size_t>(r.device) < cells.size() &&
               static_cast<size_t>(r.step) < cells[static_cast<size_t>(r.device)].size()) {
      d.location = cells[static_cast<size_t>(r.device)][static_cast<size_t>(r.step)];
    }
  }
}

}  // namespace ps::core
