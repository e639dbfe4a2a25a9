// pipestudio-cli: core and sessions only, so it starts in milliseconds; `run` and `profile`
// are handed to pipestudio-engine (engine_handoff.cpp).
#include <malloc.h>

#include <iostream>

#include "common/command.h"
#include "common/dispatch.h"
#include "engine_handoff.h"

int main(int argc, char** argv) {
  // A short-lived process: serve large blocks from the heap and keep freed memory for reuse
  // instead of mapping fresh pages for each big vector and returning them (a 131k-op
  // simulate spent a quarter of its CPU time faulting pages in).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  ps::cli::Program program;
  program.name = "pipestudio-cli";
  program.description =
      "pipestudio-cli " PIPESTUDIO_VERSION " - design, check, simulate and run pipeline-parallel schedules";
  program.footer = "'pipestudio-cli COMMAND --help' shows a command's options.";
  // First line in the stable, parseable form (core::parseCliVersion) a GUI checks before a
  // run; then the engine's.
  program.version = [] { return ps::cli::printVersion(); };
  program.unknownCommand = [](const std::string& name) {
    std::cerr << "pipestudio-cli: unknown command '" << name << "' (see pipestudio-cli --help)\n";
    return ps::cli::kExitUsage;
  };
  return ps::cli::dispatch(program, argc, argv);
}
