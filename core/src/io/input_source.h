#pragma once
// Bytes of a file read in chunks, plain or gzip (told apart by the gzip magic, not the name:
// `export_chrome_trace("x.json.gz")` and `gzip -c` both write it; a .gz of plain text is read
// too). The trace readers stream multi-GB profiler traces through this without holding them.
// zlib is core's only compression dependency and stays behind this header.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "pipestudio/core/model/result.h"

namespace ps::core::detail {

class InputSource {
 public:
  virtual ~InputSource() = default;
  // Up to `n` bytes of (decompressed) content; 0 at the end or on failure (then error() says
  // why: "trace.open" for a file that cannot be read, "trace.gzip" for data that is not valid
  // gzip or a truncated gzip stream).
  virtual size_t read(char* out, size_t n) = 0;
  const std::optional<Diagnostic>& error() const { return error_; }
  // Bytes of the file consumed so far and the file's size (compressed bytes for gzip): what
  // progress is measured in, as the decompressed size is not known up front.
  std::uint64_t consumed() const { return consumed_; }
  std::uint64_t size() const { return size_; }
  bool compressed() const { return compressed_; }

 protected:
  std::optional<Diagnostic> error_;
  std::uint64_t consumed_ = 0;
  std::uint64_t size_ = 0;
  bool compressed_ = false;
};

// Opens `path` (plain or gzip); `name` is what errors call the file.
Result<std::unique_ptr<InputSource>> openInputFile(const std::string& path, const std::string& name);
// Text already in memory (tests, callers that read the file themselves). Gzip in memory is
// decompressed as well.
std::unique_ptr<InputSource> inputFromText(std::string_view text, const std::string& name);

// The whole content of a file, plain or gzip (for small files: plans, fixtures).
Result<std::string> readInputFile(const std::string& path, const std::string& name);

}  // namespace ps::core::detail
