#pragma once
// The commands pipestudio-engine runs (they need libtorch), declared once: pipestudio-cli
// registers a hand-off for each (cli/engine_handoff.cpp) and the engine the command itself
// (engine/<name>.cpp), both under this name and summary.
#include <array>
#include <string>
#include <string_view>

namespace ps::cli {

struct EngineCommand {
  std::string_view name;
  std::string_view summary;  // one line for --help
};

inline constexpr std::array kEngineCommands{
    EngineCommand{"run", "execute a schedule on a real model (libtorch)"},
    EngineCommand{"profile", "measure a built-in model's per-layer costs (libtorch) into a cost profile"}};

// The summary of engine command `name` ("" when there is none).
inline std::string engineCommandSummary(std::string_view name) {
  for (const auto& c : kEngineCommands)
    if (c.name == name) return std::string(c.summary);
  return {};
}

}  // namespace ps::cli
