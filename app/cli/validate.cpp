// pipestudio-cli validate FILE|- : structural and deadlock checks of a .pipe or PyTorch CSV
// schedule. Exit 0 valid, 1 invalid (diagnostics on stderr), 2 usage.
#include <iostream>

#include "cli.h"
#include "cli_schedule.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/io/pytorch_csv.h"
#include "pipestudio/core/analysis/validator.h"

namespace {

const char* kUsage =
    "usage: pipestudio-cli validate FILE|- [--format pipe|csv] [--set name=value]...\n\n"
    "Checks a schedule: each (stage, micro-batch) has one F and one B or one I and one W, ops\n"
    "sit on their stage's device, ranges, duplicates, declared kinds' rules, then runs the\n"
    "device orders and reports a deadlock as the cycle of waiting ops and devices.\n"
    "FILE is .pipe (the DSL) or .csv (PyTorch pipelining); stdin (-) is read as --format\n"
    "(default pipe). --set overrides a .pipe program's 'let' values.\n"
    "Exit status: 0 valid, 1 invalid (diagnostics on stderr), 2 usage or unreadable file.\n";

int usage(const std::string& message) {
  std::cerr << "pipestudio-cli validate: " << message << "\n" << kUsage;
  return ps::cli::kExitUsage;
}

int runValidate(const std::vector<std::string>& argv) {
  using namespace ps::core;
  ps::cli::Args args(argv, {"--format", "--set"}, {});
  if (!args.ok()) return usage(args.error());
  if (args.positionals().size() != 1) return usage("expected one FILE (or -)");
  const std::string path = args.positionals()[0];
  std::string format = args.value("--format", ps::cli::scheduleFormatOf(path));
  if (format != "pipe" && format != "csv") return usage("--format is pipe or csv, not '" + format + "'");
  std::string text, error;
  if (!ps::cli::readInput(path, text, error)) {
    std::cerr << "pipestudio-cli validate: " << error << "\n";
    return ps::cli::kExitUsage;
  }
  const std::string name = ps::cli::inputName(path);
  CsvStepLocations cells;
  auto parsed = ps::cli::parseScheduleText(text, name, format == "csv", args.values("--set"), error, {}, &cells);
  if (!parsed) return usage(error);
  Result<Schedule>& schedule = *parsed;
  if (!schedule.ok()) {
    std::cerr << formatDiagnostics(schedule.errors(), &text);
    return ps::cli::kExitInvalid;
  }
  ValidationReport report = validateSchedule(*schedule);
  // CSV: point at the cell of the first op the diagnostic is about, or at the rank's row.
  ps::cli::locateScheduleDiagnostics(report.diagnostics, name, format == "csv", cells);
  if (!report.diagnostics.empty()) std::cerr << formatDiagnostics(report.diagnostics, &text);
  if (!report.valid()) return ps::cli::kExitInvalid;
  const Pipeline& p = schedule->pipeline;
  std::cout << name << ": valid (" << p.devices << " devices, " << p.stages << " stages, " << p.microbatches
            << " micro-batches, " << schedule->opCount() << " ops, " << placementKindName(p.placementKind)
            << " placement)\n";
  return ps::cli::kExitOk;
}

const ps::cli::CommandRegistrar kValidate({"validate", "check a .pipe or PyTorch CSV schedule for errors and deadlocks",
                                           kUsage, runValidate});

}  // namespace
