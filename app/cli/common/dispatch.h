#pragma once
// The top level of pipestudio-cli and pipestudio-engine: help, version, and handing the
// arguments after a command's name to the command registered under it (common/command.h).
#include <functional>
#include <optional>
#include <string>

namespace ps::cli {

struct Program {
  std::string name;                                       // "pipestudio-cli"
  std::string description;                                // the first line of --help
  std::string footer;                                     // the last lines of --help
  std::function<int()> version;                           // --version, version
  std::function<int(const std::string&)> unknownCommand;  // prints why; the exit code
  std::function<std::optional<int>()> beforeCommand;      // refuses every command when set
};

// Runs the command named by argv[1]: the exit code to return from main. No arguments print
// the help and return kExitUsage; --help, -h and help print it and return kExitOk.
int dispatch(const Program& program, int argc, char** argv);

}  // namespace ps::cli
