#pragma once
// How much of a file from someone else PipeStudio reads and echoes (docs/limits.md): inputs
// read whole (.pipe, PyTorch CSV, cost profiles, host files, plans) are checked to be regular
// files no larger than maxInputBytes() before a byte is read; diagnostics quote at most a
// short, escaped excerpt and are printed up to a count, then "and N more".
#include <cstdint>
#include <cstdio>
#include <string>

#include "pipestudio/core/model/limits.h"
#include "pipestudio/core/model/result.h"

namespace ps::core {

namespace limits {
// Default size of one input read whole: 64 MiB (an explicit 1F1B of 16 million ops is ~40 MB).
inline constexpr std::uint64_t kDefaultMaxInputBytes = std::uint64_t{64} << 20;
}  // namespace limits

// The environment variable that overrides limits::kDefaultMaxInputBytes: a byte count, with an
// optional unit (K, M, G: KiB, MiB, GiB), e.g. PIPESTUDIO_MAX_INPUT_BYTES=1G.
inline constexpr const char* kMaxInputBytesVariable = "PIPESTUDIO_MAX_INPUT_BYTES";
// The limit in effect (the variable's value, or the default when unset or unreadable).
std::uint64_t maxInputBytes();

// The whole content of the file at `path` (`name` in errors): refused with "io.not-a-file" for a
// directory, device, FIFO or socket (/dev/zero, a symlink to one), "io.too-large" past
// maxInputBytes() (naming the limit and the variable), "io.read" when it cannot be read.
Result<std::string> readUserFile(const std::string& path, const std::string& name);
// The same from an open stream (stdin, "-"): read up to the limit, refused past it.
Result<std::string> readUserStream(std::FILE* in, const std::string& name);

}  // namespace ps::core
