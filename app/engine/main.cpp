// pipestudio-engine: the part of PipeStudio that loads libtorch. It runs the `run` and
// `profile` subcommands (app/engine/run.cpp, app/engine/profile.cpp); pipestudio-cli execs it with
// its own arguments, so users and the GUI keep typing `pipestudio-cli run ...`.
#include <array>
#include <cstdlib>
#include <iostream>
#include <string>

#include "common/command.h"
#include "common/dispatch.h"
#include "common/engine_stamp.h"
#include "pipestudio/core/io/run_events.h"

namespace {

// In its own section so pipestudio-cli reads the engine's version from the file (engine_stamp.h).
__attribute__((used, section(".pipestudio_engine"))) constexpr std::array<char, ps::cli::kEngineStampSize>
    kStamp = ps::cli::makeEngineStamp(PIPESTUDIO_VERSION, ps::core::kRunEventProtocolVersion);

}  // namespace

int main(int argc, char** argv) {
  ps::cli::Program program;
  program.name = "pipestudio-engine";
  program.description = std::string(kStamp.data()) + " - runs schedules on real models (libtorch)";
  program.footer =
      "Normally started by pipestudio-cli, which hands it these commands with the same\n"
      "arguments (docs/cli.md).";
  program.version = [] {
    std::cout << kStamp.data() << "\n";
    return ps::cli::kExitOk;
  };
  // Started by a pipestudio-cli of another protocol: refuse before touching stdin or stdout.
  program.beforeCommand = []() -> std::optional<int> {
    const char* want = std::getenv(ps::cli::kCliProtocolEnv);
    if (!want || !*want || std::string(want) == std::to_string(ps::core::kRunEventProtocolVersion))
      return std::nullopt;
    std::cerr << "pipestudio-engine: version mismatch: " << kStamp.data()
              << " was started by a pipestudio-cli of run-event protocol " << want
              << "; install matching pipestudio-cli and pipestudio-engine\n";
    return ps::cli::kExitEngine;
  };
  program.unknownCommand = [](const std::string& name) {
    std::string names;
    for (auto& c : ps::cli::registry()) names += (names.empty() ? "" : ", ") + c.name;
    std::cerr << "pipestudio-engine: unknown command '" << name << "' (it runs " << names
              << "; the other commands are pipestudio-cli's)\n";
    return ps::cli::kExitUsage;
  };
  return ps::cli::dispatch(program, argc, argv);
}
