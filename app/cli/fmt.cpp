// pipestudio-cli fmt FILE|- : prints a .pipe schedule in canonical explicit form.
#include "common/command.h"
#include "common/schedule_input.h"
#include "dsl_print_command.h"
#include "pipestudio/core/io/dsl.h"

namespace ps::cli {

FlagCommand explicitScheduleCommand(std::string name, std::string summary, std::string usage) {
  // Errors show the usage line; --help the whole text.
  std::string errorUsage = usage.substr(0, usage.find('\n') + 1);
  auto run = [](const Args& args, const Reporter& rep) {
    core::ScheduleLoadOptions options;
    options.format = core::ScheduleFormat::Pipe;  // the canonical form of a .pipe program
    options.overrides = args.values("--set");
    options.onLargeExpansion = [](const core::Diagnostic&) {};  // the output is the expansion
    ScheduleInput in = readSchedule(rep, args.positionals()[0], options);
    if (!in.schedule) return in.exitCode;
    return rep.write(args.value("-o"), core::printDsl(*in.schedule)) ? kExitOk : kExitUsage;
  };
  return {std::move(name),
          std::move(summary),
          std::move(usage),
          {"--set", "-o"},
          {},
          {1, 1, "expected one FILE (or -)"},
          run,
          std::move(errorUsage)};
}

}  // namespace ps::cli

namespace {

const ps::cli::FlagCommandRegistrar kFmt(ps::cli::explicitScheduleCommand(
    "fmt", "print a .pipe schedule in canonical explicit form",
    "usage: pipestudio-cli fmt FILE|- [--set name=value]... [-o OUT]\n\n"
    "Parses FILE (or stdin with -), expands a programmable schedule, and prints the canonical\n"
    "explicit form. --set overrides a top-level 'let' or devices/stages/microbatches.\n"
    "Exit status: 0 ok, 1 the file has errors (printed as file:line:col), 2 usage.\n"));

}  // namespace
