#include "cli_schedule.h"

#include <iostream>

#include "pipestudio/core/io/dsl.h"

namespace ps::cli {

bool endsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string scheduleFormatOf(std::string_view path) { return endsWith(path, ".csv") ? "csv" : "pipe"; }

std::string inputName(const std::string& path) { return path == "-" ? "<stdin>" : path; }

std::optional<core::Result<core::Schedule>> parseScheduleText(const std::string& text, const std::string& name, bool csv,
                                                               const std::vector<std::string>& overrides,
                                                               std::string& usageError,
                                                               core::CsvReadOptions csvOptions,
                                                               core::CsvStepLocations* cells) {
  if (csv) {
    if (!overrides.empty()) {
      usageError = "--set applies to .pipe input only";
      return std::nullopt;
    }
    csvOptions.filename = name;
    return core::readPytorchCsv(text, csvOptions, cells);
  }
  core::DslOptions o;
  o.filename = name;
  o.onLargeExpansion = printLargeExpansion;
  for (const auto& a : overrides) {
    std::string error;
    if (!core::parseOverride(a, o, error)) {
      usageError = "--set " + error;
      return std::nullopt;
    }
  }
  return core::parseDsl(text, o);
}

void printLargeExpansion(const core::Diagnostic& d) { std::cerr << core::formatDiagnostic(d) << std::flush; }

void locateScheduleDiagnostics(core::Diagnostics& diagnostics, const std::string& name, bool csv,
                               const core::CsvStepLocations& cells) {
  for (auto& d : diagnostics) {
    if (!d.location.file.empty()) continue;
    d.location.file = name;
    if (!csv || d.related.empty()) continue;
    const core::OpRef& r = d.related.front();
    if (r.device < 0) continue;
    if (r.step < 0) {
      d.location.line = r.device + 1;  // rank r is line r + 1
    } else if (static_cast<size_t>(r.device) < cells.size() &&
               static_cast<size_t>(r.step) < cells[static_cast<size_t>(r.device)].size()) {
      d.location = cells[static_cast<size_t>(r.device)][static_cast<size_t>(r.step)];
    }
  }
}

}  // namespace ps::cli
