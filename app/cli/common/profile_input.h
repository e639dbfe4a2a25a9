#pragma once
// Cost profiles as the subcommands read them: from a file the user names, or the one a .pipe
// header names.
#include <optional>
#include <string>

#include "common/command.h"
#include "pipestudio/core/model/cost_profile.h"

namespace ps::cli {

// The file a .pipe header's profile `name` stands for (core::resolveProfileReference, with the
// bundled data of install_paths.h).
std::string resolveProfilePath(const std::string& name, const std::string& schedulePath);

// Reads and parses a cost profile, named after its file when it has no name and `nameAfterFile`
// (search and partition reports name it). On failure the reason is printed and the exit code
// set: kExitUsage unreadable, kExitInvalid bad values.
std::optional<core::CostProfile> loadProfile(const Reporter& reporter, const std::string& path, int& exitCode,
                                             bool nameAfterFile = true);

}  // namespace ps::cli
