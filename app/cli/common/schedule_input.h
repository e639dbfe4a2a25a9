#pragma once
// Reading a schedule the way every subcommand does: the file (or stdin) read, then parsed by
// core::loadSchedule (the one place that picks the parser), failures reported with the exit
// code they mean.
#include <optional>
#include <string>

#include "common/command.h"
#include "pipestudio/core/io/schedule_file.h"

namespace ps::cli {

// The name diagnostics use for a path: "<stdin>" for "-".
std::string inputName(const std::string& path);

// Prints the DSL's "this expands to many ops" warning on stderr as it happens.
void printLargeExpansion(const core::Diagnostic& d);

struct ScheduleInput {
  std::string path;  // as given; "-" for stdin
  std::string name;  // in diagnostics
  std::string text;
  core::ScheduleFormat format = core::ScheduleFormat::Pipe;
  core::CsvStepLocations cells;            // a CSV's cell of each step
  std::optional<core::Schedule> schedule;  // empty on failure
  int exitCode = kExitOk;                  // on failure: kExitUsage (unreadable, bad --set), kExitInvalid
};

// Reads `path` and loads it with `options` (path, name and the large-expansion warning filled
// in here; a CSV's cells too when `withCells`: a location per op costs a string per op). A failure is
// printed: the reason with `reporter`'s usage for a bad --set, the file's diagnostics with their source lines
// for errors in it.
ScheduleInput readSchedule(const Reporter& reporter, const std::string& path,
                           core::ScheduleLoadOptions options = {}, bool withCells = true);

// A CSV's cells when readSchedule was not asked for them (they are read again).
void readCells(ScheduleInput& in);

// The reason a load failed on a bad or misplaced --set, for the usage message; nullopt when the
// errors are the file's.
std::optional<std::string> overrideError(const core::Diagnostics& errors, core::ScheduleFormat format);

}  // namespace ps::cli
