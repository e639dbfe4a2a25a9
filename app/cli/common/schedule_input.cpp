#include "common/schedule_input.h"

#include <iostream>

namespace ps::cli {

std::string inputName(const std::string& path) {
  return path == "-" ? "<stdin>" : path;
}

void printLargeExpansion(const core::Diagnostic& d) {
  std::cerr << core::formatDiagnostic(d) << std::flush;
}

std::optional<std::string> overrideError(const core::Diagnostics& errors, core::ScheduleFormat format) {
  if (errors.size() != 1 || errors.front().code != core::kScheduleOverrideCode) return std::nullopt;
  if (format == core::ScheduleFormat::Csv) return std::string("--set applies to .pipe input only");
  return "--set " + errors.front().message;
}

ScheduleInput readSchedule(const Reporter& reporter, const std::string& path,
                           core::ScheduleLoadOptions options, bool withCells) {
  ScheduleInput in;
  in.path = path;
  in.name = inputName(path);
  if (!reporter.read(path, in.text)) {
    in.exitCode = kExitUsage;
    return in;
  }
  options.path = path;
  options.name = in.name;
  options.cells = withCells ? &in.cells : nullptr;
  if (!options.onLargeExpansion) options.onLargeExpansion = printLargeExpansion;
  in.format = core::resolveScheduleFormat(in.text, options);
  options.format = in.format;
  auto loaded = core::loadSchedule(in.text, options);
  if (loaded) {
    in.schedule = std::move(loaded).value();
    return in;
  }
  if (auto usage = overrideError(loaded.errors(), in.format))
    in.exitCode = reporter.usage(*usage);
  else
    in.exitCode = reporter.invalid(loaded.errors(), &in.text);
  return in;
}

void readCells(ScheduleInput& in) {
  if (in.format != core::ScheduleFormat::Csv || !in.cells.empty()) return;
  core::ScheduleLoadOptions options;
  options.format = in.format;
  options.name = in.name;
  options.cells = &in.cells;
  (void)core::loadSchedule(in.text, options);
}

}  // namespace ps::cli
