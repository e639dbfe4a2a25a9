// pipestudio-cli fmt FILE|- : prints a .pipe schedule in canonical explicit form.
#include <iostream>

#include "cli.h"
#include "dsl_print_command.h"
#include "pipestudio/core/io/dsl.h"

namespace ps::cli {

int printExplicitSchedule(const std::string& command, const std::vector<std::string>& argv) {
  const std::string prefix = "pipestudio-cli " + command + ": ";
  ps::cli::Args args(argv, {"--set", "-o"}, {});
  if (!args.ok() || args.positionals().size() != 1) {
    std::cerr << prefix << (args.ok() ? "expected one FILE (or -)" : args.error())
              << "\nusage: pipestudio-cli " << command << " FILE|- [--set name=value]... [-o OUT]\n";
    return ps::cli::kExitUsage;
  }
  const std::string& path = args.positionals()[0];
  std::string text, error;
  if (!ps::cli::readInput(path, text, error)) {
    std::cerr << prefix << error << "\n";
    return ps::cli::kExitUsage;
  }
  ps::core::DslOptions options;
  options.filename = path == "-" ? "<stdin>" : path;
  for (const auto& a : args.values("--set")) {
    if (!ps::core::parseOverride(a, options, error)) {
      std::cerr << prefix << "--set " << error << "\n";
      return ps::cli::kExitUsage;
    }
  }
  auto result = ps::core::parseDsl(text, options);
  if (!result.ok()) {
    std::cerr << ps::core::formatDiagnostics(result.errors(), &text);
    return ps::cli::kExitInvalid;
  }
  if (!ps::cli::writeOutput(args.value("-o"), ps::core::printDsl(*result), error)) {
    std::cerr << prefix << error << "\n";
    return ps::cli::kExitUsage;
  }
  return ps::cli::kExitOk;
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
