#include "common/profile_input.h"

#include <filesystem>
#include <iostream>

#include "common/install_paths.h"

namespace ps::cli {

std::string resolveProfilePath(const std::string& name, const std::string& schedulePath) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path beside(name);
  if (beside.is_relative() && schedulePath != "-") beside = fs::path(schedulePath).parent_path() / name;
  std::vector<fs::path> candidates{beside, name};
  const fs::path data = dataDirectory();
  candidates.push_back(data / name);
  candidates.push_back(data / "profiles" / name);
  for (const auto& c : candidates)
    if (fs::exists(c, ec)) return c.string();
  return beside.string();
}

std::optional<core::CostProfile> loadProfile(const Reporter& reporter, const std::string& path, int& exitCode,
                                             bool nameAfterFile) {
  std::string text;
  if (!reporter.read(path, text)) {
    exitCode = kExitUsage;
    return std::nullopt;
  }
  auto p = core::parseCostProfile(text, path);
  if (!p) {
    // A readable profile with bad values is invalid input (1), as everywhere (docs/cli.md).
    exitCode = reporter.fail(core::formatDiagnostics(p.errors(), &text), kExitInvalid);
    return std::nullopt;
  }
  if (nameAfterFile && p->name.empty()) {
    std::string stem = path.substr(path.find_last_of('/') + 1);
    p->name = stem.substr(0, stem.rfind(".json"));
  }
  return std::move(p).value();
}

}  // namespace ps::cli
