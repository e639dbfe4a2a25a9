// pipestudio-cli expand FILE|- [--set name=value]... : expands a programmable .pipe schedule
// (loops, templates, cursors) into its explicit form.
#include <iostream>

#include "cli.h"
#include "pipestudio/core/dsl.h"

namespace {

int runExpand(const std::vector<std::string>& argv) {
  ps::cli::Args args(argv, {"--set", "-o"}, {});
  if (!args.ok() || args.positionals().size() != 1) {
    std::cerr << "pipestudio-cli expand: " << (args.ok() ? "expected one FILE (or -)" : args.error())
              << "\nusage: pipestudio-cli expand FILE|- [--set name=value]... [-o OUT]\n";
    return ps::cli::kExitUsage;
  }
  const std::string& path = args.positionals()[0];
  std::string text, error;
  if (!ps::cli::readInput(path, text, error)) {
    std::cerr << "pipestudio-cli expand: " << error << "\n";
    return ps::cli::kExitUsage;
  }
  ps::core::DslOptions options;
  options.filename = path == "-" ? "<stdin>" : path;
  for (const auto& a : args.values("--set")) {
    if (!ps::core::parseOverride(a, options, error)) {
      std::cerr << "pipestudio-cli expand: --set " << error << "\n";
      return ps::cli::kExitUsage;
    }
  }
  auto result = ps::core::parseDsl(text, options);
  if (!result.ok()) {
    std::cerr << ps::core::formatDiagnostics(result.errors(), &text);
    return ps::cli::kExitInvalid;
  }
  if (!ps::cli::writeOutput(args.value("-o"), ps::core::printDsl(*result), error)) {
    std::cerr << "pipestudio-cli expand: " << error << "\n";
    return ps::cli::kExitUsage;
  }
  return ps::cli::kExitOk;
}

const ps::cli::CommandRegistrar kExpand({
    "expand",
    "expand a programmable .pipe schedule into its explicit form",
    "usage: pipestudio-cli expand FILE|- [--set name=value]... [-o OUT]\n\n"
    "Runs the program in FILE (or stdin with -) with the given parameters and prints the\n"
    "explicit schedule it produces. --set overrides a top-level 'let' or the devices, stages\n"
    "and microbatches header lines, e.g. --set devices=8 --set microbatches=32.\n"
    "Exit status: 0 ok, 1 the file has errors (printed as file:line:col), 2 usage.\n",
    runExpand,
});

}  // namespace
