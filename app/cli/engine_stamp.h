#pragma once
// The version stamp of pipestudio-engine: "pipestudio-engine 0.1.0 (run-event protocol 1)".
// The engine prints it for --version and also carries it in an ELF section of its own, so
// that `pipestudio-cli --version` can report the engine without starting it (starting it
// loads libtorch: about half a second).
#include <array>
#include <optional>
#include <string>
#include <string_view>

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

struct EngineVersion {
  std::string program;  // "0.1.0"
  int protocol = 0;     // 0 when the line names none
};

// Parses "pipestudio-engine 0.1.0 (run-event protocol 1)" (the first line of `text`).
inline std::optional<EngineVersion> parseEngineStamp(std::string_view text) {
  std::string_view line = text.substr(0, text.find('\n'));
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\0')) line.remove_suffix(1);
  const std::string prefix = std::string(kEngineName) + " ";
  if (line.substr(0, prefix.size()) != prefix) return std::nullopt;
  line.remove_prefix(prefix.size());
  EngineVersion v;
  const size_t sp = line.find(' ');
  v.program = std::string(line.substr(0, sp));
  if (v.program.empty()) return std::nullopt;
  if (sp == std::string_view::npos) return v;
  std::string_view rest = line.substr(sp + 1);
  constexpr std::string_view proto = "(run-event protocol ";
  if (rest.substr(0, proto.size()) != proto || rest.back() != ')') return v;
  rest = rest.substr(proto.size(), rest.size() - proto.size() - 1);
  if (rest.empty() || rest.size() > 6) return v;
  int n = 0;
  for (char c : rest) {
    if (c < '0' || c > '9') return v;
    n = n * 10 + (c - '0');
  }
  v.protocol = n;
  return v;
}

}  // namespace ps::cli
