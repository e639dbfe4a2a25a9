#pragma once
// Where the CLI's files are: relative to the executable itself, as installed (bin/ beside
// share/pipestudio/) and in the build tree, which mirrors that layout (packaging/layout.cmake).
// No absolute path of the build machine is compiled in.
#include <string>

namespace ps::cli {

// The directory of the running executable (/proc/self/exe, symbolic links resolved); "." when
// it cannot be read.
std::string selfDirectory();

// The bundled data (examples/, schedules/, profiles/): ../share/pipestudio from the CLI's
// directory, e.g. /usr/share/pipestudio for /usr/bin/pipestudio-cli.
std::string dataDirectory();

}  // namespace ps::cli
