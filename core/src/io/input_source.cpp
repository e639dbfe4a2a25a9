#include "io/input_source.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "pipestudio/core/io/input_limits.h"

namespace ps::core::detail {

namespace {

constexpr size_t kChunk = size_t{1} << 18;

// Where the raw (possibly compressed) bytes come from.
class RawBytes {
 public:
  virtual ~RawBytes() = default;
  // Up to n bytes; 0 at the end. Sets `failure` when the read failed.
  virtual size_t read(char* out, size_t n, std::string& failure) = 0;
};

class FileBytes : public RawBytes {
 public:
  explicit FileBytes(std::FILE* f) : f_(f) {}
  ~FileBytes() override { std::fclose(f_); }
  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;
  size_t read(char* out, size_t n, std::string& failure) override {
    size_t got = std::fread(out, 1, n, f_);
    if (got < n && std::ferror(f_)) failure = std::strerror(errno);
    return got;
  }

 private:
  std::FILE* f_;
};

class MemoryBytes : public RawBytes {
 public:
  explicit MemoryBytes(std::string_view text) : text_(text) {}
  size_t read(char* out, size_t n, std::string&) override {
    size_t got = std::min(n, text_.size() - pos_);
    std::memcpy(out, text_.data() + pos_, got);
    pos_ += got;
    return got;
  }

 private:
  std::string_view text_;
  size_t pos_ = 0;
};

// The file cannot be read at all: "trace.open"; its gzip is broken: "trace.gzip".
Diagnostic readError(const std::string& name, const std::string& why) {
  return makeError("trace.open", name + ": " + why, SourceLocation{name, 0, 0});
}
Diagnostic gzipError(const std::string& name, const std::string& why) {
  return makeError("trace.gzip", name + ": " + why, SourceLocation{name, 0, 0});
}

// Plain content: the raw bytes as they are, after the few already read to look for the magic.
class PlainSource : public InputSource {
 public:
  PlainSource(std::unique_ptr<RawBytes> raw, std::string head, std::string name, std::uint64_t size)
      : raw_(std::move(raw)), head_(std::move(head)), name_(std::move(name)) {
    size_ = size;
  }
  size_t read(char* out, size_t n) override {
    if (error_ || n == 0) return 0;
    size_t got = 0;
    if (headPos_ < head_.size()) {
      got = std::min(n, head_.size() - headPos_);
      std::memcpy(out, head_.data() + headPos_, got);
      headPos_ += got;
      if (got == n) {
        consumed_ += got;
        return got;
      }
    }
    std::string failure;
    size_t more = raw_->read(out + got, n - got, failure);
    if (!failure.empty()) {
      error_ = readError(name_, "cannot read: " + failure);
      return 0;
    }
    got += more;
    consumed_ += got;
    return got;
  }

 private:
  std::unique_ptr<RawBytes> raw_;
  std::string head_;
  size_t headPos_ = 0;
  std::string name_;
};

// gzip: one or more members (`cat a.gz b.gz` is valid gzip), each checked by zlib (CRC, length).
class GzipSource : public InputSource {
 public:
  GzipSource(std::unique_ptr<RawBytes> raw, std::string head, std::string name, std::uint64_t size)
      : raw_(std::move(raw)), in_(kChunk), name_(std::move(name)) {
    size_ = size;
    compressed_ = true;
    std::memcpy(in_.data(), head.data(), head.size());
    zs_.next_in = reinterpret_cast<Bytef*>(in_.data());
    zs_.avail_in = static_cast<uInt>(head.size());
    // 16 + MAX_WBITS: a gzip header and trailer, not zlib's.
    if (inflateInit2(&zs_, 16 + MAX_WBITS) != Z_OK)
      error_ = readError(name_, "cannot start gzip decompression");
    else
      live_ = true;
  }
  ~GzipSource() override {
    if (live_) inflateEnd(&zs_);
  }
  GzipSource(const GzipSource&) = delete;
  GzipSource& operator=(const GzipSource&) = delete;

  size_t read(char* out, size_t n) override {
    if (error_ || done_ || n == 0) return 0;
    zs_.next_out = reinterpret_cast<Bytef*>(out);
    zs_.avail_out = static_cast<uInt>(std::min<size_t>(n, size_t{1} << 30));
    const uInt wanted = zs_.avail_out;
    while (zs_.avail_out > 0) {
      if (zs_.avail_in == 0 && !refill()) {
        if (error_) return 0;
        // The file ended inside a member: a copy or a download cut short.
        if (inMember_) {
          error_ = gzipError(name_, "truncated gzip data: the file ends after " + std::to_string(rawRead_) +
                                        " bytes, inside its compressed stream");
          return 0;
        }
        done_ = true;
        break;
      }
      if (!inMember_) {
        // Another member may follow one that ended (`cat a.gz b.gz` is gzip); anything else
        // after the stream is refused, not ignored.
        if (!first_) {
          if (zs_.avail_in < 2 && !refillKeeping()) return 0;
          if (zs_.avail_in < 2 || zs_.next_in[0] != 0x1f || zs_.next_in[1] != 0x8b) {
            error_ = gzipError(name_, "data after the end of the gzip stream (at byte " +
                                          std::to_string(consumed_) + " of the file)");
            return 0;
          }
        }
        first_ = false;
        inMember_ = true;
      }
      const uInt before = zs_.avail_in;
      const int rc = inflate(&zs_, Z_NO_FLUSH);
      consumed_ += before - zs_.avail_in;
      if (rc == Z_STREAM_END) {
        inMember_ = false;
        inflateReset(&zs_);
        continue;
      }
      if (rc == Z_OK || (rc == Z_BUF_ERROR && zs_.avail_in == 0)) continue;
      error_ = gzipError(name_, std::string("not valid gzip data (") + (zs_.msg ? zs_.msg : "zlib error") +
                                    ", at byte " + std::to_string(consumed_) + " of the file)");
      return 0;
    }
    return wanted - zs_.avail_out;
  }

 private:
  // Fills the empty input buffer; false at the end of the file or on a read error.
  bool refill() {
    std::string failure;
    size_t got = raw_->read(in_.data(), in_.size(), failure);
    if (!failure.empty()) {
      error_ = readError(name_, "cannot read: " + failure);
      return false;
    }
    rawRead_ += got;
    zs_.next_in = reinterpret_cast<Bytef*>(in_.data());
    zs_.avail_in = static_cast<uInt>(got);
    return got > 0;
  }
  // Tops up a buffer holding fewer than two bytes, to look for the next member's magic.
  bool refillKeeping() {
    const size_t keep = zs_.avail_in;
    std::memmove(in_.data(), zs_.next_in, keep);
    std::string failure;
    size_t got = raw_->read(in_.data() + keep, in_.size() - keep, failure);
    if (!failure.empty()) {
      error_ = readError(name_, "cannot read: " + failure);
      return false;
    }
    rawRead_ += got;
    zs_.next_in = reinterpret_cast<Bytef*>(in_.data());
    zs_.avail_in = static_cast<uInt>(keep + got);
    return true;
  }

  std::unique_ptr<RawBytes> raw_;
  std::vector<char> in_;
  std::string name_;
  z_stream zs_{};
  bool live_ = false;
  bool done_ = false;
  bool first_ = true;
  bool inMember_ = false;
  std::uint64_t rawRead_ = 0;
};

std::unique_ptr<InputSource> makeSource(std::unique_ptr<RawBytes> raw, const std::string& name,
                                        std::uint64_t size, std::optional<Diagnostic>& failure) {
  // Two bytes tell gzip (1f 8b) from text.
  std::string head(2, '\0');
  std::string why;
  size_t got = raw->read(head.data(), 2, why);
  if (got == 1) got += raw->read(head.data() + 1, 1, why);
  if (!why.empty()) {
    failure = readError(name, "cannot read: " + why);
    return nullptr;
  }
  head.resize(got);
  if (got == 2 && static_cast<unsigned char>(head[0]) == 0x1f &&
      static_cast<unsigned char>(head[1]) == 0x8b) {
    return std::make_unique<GzipSource>(std::move(raw), head, name, size);
  }
  return std::make_unique<PlainSource>(std::move(raw), head, name, size);
}

}  // namespace

Result<std::unique_ptr<InputSource>> openInputFile(const std::string& path, const std::string& name) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return readError(name, std::string("cannot open: ") + std::strerror(errno));
  std::uint64_t size = 0;
  if (std::fseek(f, 0, SEEK_END) == 0) {
    long end = std::ftell(f);
    if (end > 0) size = static_cast<std::uint64_t>(end);
  }
  if (std::fseek(f, 0, SEEK_SET) != 0) {
    std::fclose(f);
    return readError(name, "cannot read: not a regular file");
  }
  std::optional<Diagnostic> failure;
  auto src = makeSource(std::make_unique<FileBytes>(f), name, size, failure);
  if (!src) return *failure;
  if (src->error()) return *src->error();
  return src;
}

std::unique_ptr<InputSource> inputFromText(std::string_view text, const std::string& name) {
  std::optional<Diagnostic> failure;
  return makeSource(std::make_unique<MemoryBytes>(text), name, text.size(), failure);
}

Result<std::string> readInputFile(const std::string& path, const std::string& name) {
  PS_ASSIGN_OR_RETURN(auto src, openInputFile(path, name));
  std::string out;
  std::vector<char> buf(kChunk);
  const std::uint64_t limit = maxInputBytes();  // decompressed bytes: a gzip bomb stops here
  while (size_t got = src->read(buf.data(), buf.size())) {
    if (out.size() + got > limit)
      return makeError("io.too-large",
                       name + ": more than " + std::to_string(limit) + " bytes (set " +
                           kMaxInputBytesVariable + " to raise the limit)",
                       SourceLocation{name, 0, 0});
    out.append(buf.data(), got);
  }
  if (src->error()) return *src->error();
  return out;
}

}  // namespace ps::core::detail
