#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "cli.h"
#include "engine_handoff.h"

namespace {
void printHelp() {
  auto cmds = ps::cli::registry();
  std::sort(cmds.begin(), cmds.end(), [](auto& a, auto& b) { return a.name < b.name; });
  std::cout << "pipestudio-cli " PIPESTUDIO_VERSION
               " - design, check, simulate and run pipeline-parallel schedules\n\n"
               "usage: pipestudio-cli COMMAND [ARGS...]\n\ncommands:\n";
  for (auto& c : cmds) {
    std::cout << "  " << c.name;
    for (size_t i = c.name.size(); i < 14; ++i) std::cout << ' ';
    std::cout << c.summary << "\n";
  }
  std::cout << "\n'pipestudio-cli COMMAND --help' shows a command's options.\n";
}
}  // namespace

int main(int argc, char** argv) {
  // A short-lived process: serve large blocks from the heap and keep freed memory for reuse
  // instead of mapping fresh pages for each big vector and returning them (a 131k-op
  // simulate spent a quarter of its CPU time faulting pages in).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    printHelp();
    return args.empty() ? ps::cli::kExitUsage : ps::cli::kExitOk;
  }
  if (args[0] == "--version" || args[0] == "version") {
    // First line in the stable, parseable form (core::parseCliVersion) a GUI checks before a
    // run; then the engine's.
    return ps::cli::printVersion();
  }
  for (auto& c : ps::cli::registry()) {
    if (c.name != args[0]) continue;
    std::vector<std::string> rest(args.begin() + 1, args.end());
    // Commands without usage text here are the engine's: it answers --help itself.
    if (!c.usage.empty() && (std::find(rest.begin(), rest.end(), "--help") != rest.end() ||
                             std::find(rest.begin(), rest.end(), "-h") != rest.end())) {
      std::cout << c.usage;
      return 0;
    }
    try {
      return c.run(rest);
    } catch (const std::exception& e) {
      std::cerr << "pipestudio-cli " << c.name << ": internal error: " << e.what() << "\n";
      return 3;
    }
  }
  std::cerr << "pipestudio-cli: unknown command '" << args[0] << "' (see pipestudio-cli --help)\n";
  return ps::cli::kExitUsage;
}
