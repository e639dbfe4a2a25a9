#pragma once
// pipestudio-cli hands `run` and `profile` to pipestudio-engine (the only executable that
// loads libtorch) by exec'ing it with the same arguments: same process, so the exit code,
// signals, stdin (--cancel-on-eof) and the stdout event stream are the engine's own.
#include <optional>
#include <string>
#include <vector>

#include "common/engine_stamp.h"

namespace ps::cli {

struct EngineLocation {
  std::string path;                   // empty when no usable engine was found
  std::vector<std::string> lookedAt;  // every path tried, in order
  std::string problem;                // why none was usable
};

// Where the engine is: $PIPESTUDIO_ENGINE when set (and only there), else beside this
// executable (the build tree), else in ../libexec/pipestudio relative to it (installed).
EngineLocation locateEngine();

// The engine's version: read from its stamp section, else by running `ENGINE --version`.
std::optional<EngineVersion> engineVersion(const std::string& path, std::string& error);

// Execs the engine for `command` with `args`; returns an exit code only when it cannot.
int handOffToEngine(const std::string& command, const std::vector<std::string>& args);

// `pipestudio-cli --version`: the CLI's line (the one a GUI parses), then the engine's.
int printVersion();

}  // namespace ps::cli
