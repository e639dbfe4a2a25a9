// pipestudio-cli fmt FILE|- : prints a .pipe schedule in canonical explicit form.
#include "common/command.h"
#include "common/schedule_input.h"
#include "dsl_print_command.h"
#include "pipestudio/core/io/dsl.h"

namespace ps::cli {

int printExplicitSchedule(const std::string& command, const std::vector<std::string>& argv) {
  // The short usage: the full text is for --help.
  const Reporter rep(command, "usage: pipestudio-cli " + command + " FILE|- [--set name=value]... [-o OUT]\n");
  Args args(argv, {"--set", "-o"}, {});
  if (!args.ok()) return rep.usage(args.error());
  if (args.positionals().size() != 1) return rep.usage("expected one FILE (or -)");
  core::ScheduleLoadOptions options;
  options.format = core::ScheduleFormat::Pipe;  // the canonical form of a .pipe program
  options.overrides = args.values("--set");
  options.onLargeExpansion = [](const core::Diagnostic&) {};  // the output is the expansion
  ScheduleInput in = readSchedule(rep, args.positionals()[0], options);
  if (!in.schedule) return in.exitCode;
  return rep.write(args.value("-o"), core::printDsl(*in.schedule)) ? kExitOk : kExitUsage;
}

}  // namespace ps::cli

namespace {

const ps::cli::CommandRegistrar kFmt({
    "fmt",
    "print a .pipe schedule in canonical explicit form",
    "usage: pipestudio-cli fmt FILE|- [--set name=value]... [-o OUT]\n\n"
    "Parses FILE (or stdin with -), expands a programmable schedule, and prints the canonical\n"
    "explicit form. --set overrides a top-level 'let' or devices/stages/microbatches.\n"
    "Exit status: 0 ok, 1 the file has errors (printed as file:line:col), 2 usage.\n",
    [](const std::vector<std::string>& argv) { return ps::cli::printExplicitSchedule("fmt", argv); },
});

}  // namespace
