#pragma once
// The version stamp of pipestudio-engine: "pipestudio-engine 0.1.0 (run-event protocol 1)".
// The engine prints it for --version and also carries it in an ELF section of its own, so
// that `pipestudio-cli --version` can report the engine without starting it (starting it
// loads libtorch: about half a second).
#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "pipestudio/core/io/run_events.h"

namespace ps::cli {

inline constexpr const char* kEngineStampSection = ".pipestudio_engine";
inline constexpr const char* kEngineName = "pipestudio-engine";
// Set by pipestudio-cli when it execs the engine: the run-event protocol the CLI speaks. An
// engine speaking another one refuses to start (an install mixing two versions).
inline constexpr const char* kCliProtocolEnv = "PIPESTUDIO_CLI_PROTOCOL";

inline constexpr size_t kEngineStampSize = 96;

// Built at compile time so the bytes in the section are exactly what --version prints.
constexpr std::array<char, kEngineStampSize> makeEngineStamp(std::string_view version, int protocol) {
  std::array<char, kEngineStampSize> out{};
  size_t n = 0;
  auto put = [&](std::string_view s) {
    for (char c : s)
      if (n + 1 < out.size()) out[n++] = c;
  };
  put(kEngineName);
  put(" ");
  put(version);
  put(" (run-event protocol ");
  char digits[12] = {};
  int d = 0;
  do {
    digits[d++] = static_cast<char>('0' + protocol % 10);
    protocol /= 10;
  } while (protocol > 0 && d < 11);
  while (d > 0) {
    const char c[1] = {digits[--d]};
    put(std::string_view(c, 1));
  }
  put(")");
  return out;
}

// The engine's version and protocol, read by the same parser as the CLI's own line.
using EngineVersion = ps::core::CliVersion;

// Parses "pipestudio-engine 0.1.0 (run-event protocol 1)" (the first line of `text`).
inline std::optional<EngineVersion> parseEngineStamp(std::string_view text) {
  return ps::core::parseVersionLine(text, kEngineName);
}

}  // namespace ps::cli
