// pipestudio-engine: the part of PipeStudio that loads libtorch. It runs the `run` and
// `profile` subcommands (app/cli/run.cpp, app/cli/profile.cpp); pipestudio-cli execs it with
// its own arguments, so users and the GUI keep typing `pipestudio-cli run ...`.
#include <algorithm>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "cli.h"
#include "engine_stamp.h"
#include "pipestudio/core/io/run_events.h"

namespace {

// In its own section so pipestudio-cli reads the engine's version from the file (engine_stamp.h).
__attribute__((used, section(".pipestudio_engine"))) constexpr std::array<char, ps::cli::kEngineStampSize> kStamp =
    ps::cli::makeEngineStamp(PIPESTUDIO_VERSION, ps::core::kRunEventProtocolVersion);

void printHelp() {
  std::cout << kStamp.data()
            << " - runs schedules on real models (libtorch)\n\n"
               "usage: pipestudio-engine COMMAND [ARGS...]\n\ncommands:\n";
  auto cmds = ps::cli::registry();
  std::sort(cmds.begin(), cmds.end(), [](auto& a, auto& b) { return a.name < b.name; });
  for (auto& c : cmds) {
    std::cout << "  " << c.name;
    for (size_t i = c.name.size(); i < 14; ++i) std::cout << ' ';
    std::cout << c.summary << "\n";
  }
  std::cout << "\nNormally started by pipestudio-cli, which hands it these commands with the same\n"
               "arguments (docs/cli.md).\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    printHelp();
    return args.empty() ? ps::cli::kExitUsage : ps::cli::kExitOk;
  }
  if (args[0] == "--version" || args[0] == "version") {
    std::cout << kStamp.data() << "\n";
    return ps::cli::kExitOk;
  }
  // Started by a pipestudio-cli of another protocol: refuse before touching stdin or stdout.
  if (const char* want = std::getenv(ps::cli::kCliProtocolEnv); want && *want) {
    if (std::string(want) != std::to_string(ps::core::kRunEventProtocolVersion)) {
      std::cerr << "pipestudio-engine: version mismatch: " << kStamp.data()
                << " was started by a pipestudio-cli of run-event protocol " << want
                << "; install matching pipestudio-cli and pipestudio-engine\n";
      return ps::cli::kExitEngine;
    }
  }
  for (auto& c : ps::cli::registry()) {
    if (c.name != args[0]) continue;
    std::vector<std::string> rest(args.begin() + 1, args.end());
    if (std::find(rest.begin(), rest.end(), "--help") != rest.end() ||
        std::find(rest.begin(), rest.end(), "-h") != rest.end()) {
      std::cout << c.usage;
      return ps::cli::kExitOk;
    }
    try {
      return c.run(rest);
    } catch (const std::exception& e) {
      std::cerr << "pipestudio-cli " << c.name << ": internal error: " << e.what() << "\n";
      return 3;
    }
  }
  std::string names;
  for (auto& c : ps::cli::registry()) names += (names.empty() ? "" : ", ") + c.name;
  std::cerr << "pipestudio-engine: unknown command '" << args[0] << "' (it runs " << names
            << "; the other commands are pipestudio-cli's)\n";
  return ps::cli::kExitUsage;
}
