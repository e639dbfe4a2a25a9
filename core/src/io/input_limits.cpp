#include "pipestudio/core/io/input_limits.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace ps::core {

namespace {

std::string mib(std::uint64_t bytes) {
  return std::to_string(bytes >> 20) + " MiB (" + std::to_string(bytes) + " bytes)";
}

Diagnostic tooLarge(const std::string& name, const std::string& size) {
  return makeError("io.too-large",
                   name + ": the file is " + size + "; inputs are limited to " + mib(maxInputBytes()) +
                       " (set " + kMaxInputBytesVariable + " to raise the limit, e.g. " +
                       kMaxInputBytesVariable + "=1G)",
                   SourceLocation{name, 0, 0});
}

}  // namespace

std::uint64_t maxInputBytes() {
  const char* v = std::getenv(kMaxInputBytesVariable);
  if (!v || !*v) return limits::kDefaultMaxInputBytes;
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v, &end, 10);
  if (errno != 0 || end == v || *v == '-') return limits::kDefaultMaxInputBytes;
  int shift = 0;
  if (*end == 'K' || *end == 'k') shift = 10;
  if (*end == 'M' || *end == 'm') shift = 20;
  if (*end == 'G' || *end == 'g') shift = 30;
  if (shift) ++end;
  if (*end != '\0' || n > (~0ull >> shift)) return limits::kDefaultMaxInputBytes;
  return static_cast<std::uint64_t>(n) << shift;
}

Result<std::string> readUserFile(const std::string& path, const std::string& name) {
  // Opened first and checked through the descriptor: what is read is what was checked. O_NONBLOCK
  // keeps a FIFO from blocking the open; it is refused below anyway.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return makeError("io.read", name + ": cannot open: " + std::strerror(errno), {name, 0, 0});
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const bool dir = S_ISDIR(st.st_mode);
    ::close(fd);
    return makeError(
        "io.not-a-file",
        name + (dir ? ": is a directory, not a file" : ": is not a regular file (a device, FIFO or socket)"),
        {name, 0, 0});
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > maxInputBytes()) {
    ::close(fd);
    return tooLarge(name, mib(size));
  }
  std::string out(static_cast<size_t>(size), '\0');
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      return makeError("io.read", name + ": cannot read: " + std::strerror(e), {name, 0, 0});
    }
    if (n == 0) break;  // shrank meanwhile
    done += static_cast<size_t>(n);
  }
  out.resize(done);
  ::close(fd);
  return out;
}

Result<std::string> readUserStream(std::FILE* in, const std::string& name) {
  const std::uint64_t limit = maxInputBytes();
  std::string out;
  char buf[1 << 16];
  while (size_t got = std::fread(buf, 1, sizeof buf, in)) {
    if (out.size() + got > limit) return tooLarge(name, "more than " + mib(limit));
    out.append(buf, got);
  }
  return out;
}

}  // namespace ps::core
