#include "common/profile_input.h"

#include <iostream>

#include "common/install_paths.h"
#include "pipestudio/core/io/dsl.h"

namespace ps::cli {

std::string resolveProfilePath(const std::string& name, const std::string& schedulePath) {
  return core::resolveProfileReference(name, schedulePath, dataDirectory());
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
