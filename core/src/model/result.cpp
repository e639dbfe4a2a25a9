#include "pipestudio/core/model/result.h"

#include <algorithm>
#include <sstream>

#include "pipestudio/core/model/enum_names.h"
#include "pipestudio/core/model/limits.h"

namespace ps::core {

SourceLocation locationOfOffset(std::string_view text, size_t offset, std::string file) {
  SourceLocation loc{std::move(file), 1, 1};
  const size_t end = std::min(offset, text.size());
  for (size_t i = 0; i < end; ++i) {
    if (text[i] == '\n') {
      ++loc.line;
      loc.column = 1;
    } else {
      ++loc.column;
    }
  }
  return loc;
}

Diagnostic makeError(std::string code, std::string message, SourceLocation loc) {
  Diagnostic d;
  d.severity = Severity::Error;
  d.code = std::move(code);
  d.message = std::move(message);
  d.location = std::move(loc);
  return d;
}

Diagnostic makeWarning(std::string code, std::string message, SourceLocation loc) {
  Diagnostic d = makeError(std::move(code), std::move(message), std::move(loc));
  d.severity = Severity::Warning;
  return d;
}

bool hasErrors(const Diagnostics& ds) {
  return std::any_of(ds.begin(), ds.end(), [](const Diagnostic& d) { return d.severity == Severity::Error; });
}

constexpr EnumName<Severity> kSeverityNames[] = {
    {Severity::Error, "error"}, {Severity::Warning, "warning"}, {Severity::Note, "note"}};

PS_ENUM_NAME_FUNCTION(Severity, kSeverityNames, severityName);
Severity severityFromName(std::string_view name) {
  return enumFromName(name, kSeverityNames).value_or(Severity::Error);
}

namespace {

// Returns line `n` (1-based) of text without its newline, or nothing.
bool sourceLine(const std::string& text, int n, std::string& out) {
  size_t pos = 0;
  for (int i = 1; i < n; ++i) {
    pos = text.find('\n', pos);
    if (pos == std::string::npos) return false;
    ++pos;
  }
  if (pos > text.size()) return false;
  size_t end = text.find('\n', pos);
  out = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
  if (!out.empty() && out.back() == '\r') out.pop_back();
  return true;
}
}  // namespace

namespace {

// Text from a file as a message shows it: control bytes (but newlines and tabs) and DEL as
// \xNN, at most `limit` bytes, then how many more there were.
std::string bounded(std::string_view s, size_t limit) {
  std::string out;
  const size_t n = std::min(s.size(), limit);
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > limit) out += "... (" + std::to_string(s.size() - limit) + " more bytes)";
  return out;
}

}  // namespace

std::string formatDiagnostic(const Diagnostic& d, const std::string* sourceText) {
  std::ostringstream os;
  if (!d.location.file.empty()) {
    os << bounded(d.location.file, limits::kMaxMessageBytes) << ':';
    if (d.location.line > 0) {
      os << d.location.line << ':';
      if (d.location.column > 0) os << d.location.column << ':';
    }
    os << ' ';
  }
  os << severityName(d.severity) << ": " << bounded(d.message, limits::kMaxMessageBytes) << '\n';
  std::string line;
  if (sourceText && d.location.line > 0 && sourceLine(*sourceText, d.location.line, line)) {
    // At most kMaxExcerptBytes printed (escapes count), from a few bytes before the column
    // (at most 4 printed bytes each, so the column is always shown); "..." where it is cut.
    const size_t col = static_cast<size_t>(std::max(1, d.location.column)) - 1;
    constexpr size_t kBefore = limits::kMaxExcerptBytes / 5;
    size_t from = 0;
    if (line.size() > limits::kMaxExcerptBytes && col > kBefore) from = col - kBefore;
    std::string shown;
    std::string pad;
    size_t to = std::min(line.size(), from + limits::kMaxExcerptBytes);
    for (size_t i = from; i < to; ++i) {
      if (shown.size() >= limits::kMaxExcerptBytes) {  // escapes count: at most this much is printed
        to = i;
        break;
      }
      const auto c = static_cast<unsigned char>(line[i]);
      const std::string piece = c == '\t' ? std::string("\t") : bounded(std::string_view(&line[i], 1), 1);
      shown += piece;
      if (i < col) pad += c == '\t' ? std::string("\t") : std::string(piece.size(), ' ');
    }
    os << "  " << (from > 0 ? "..." : "") << shown << (to < line.size() ? "..." : "") << '\n'
       << "  " << (from > 0 ? "   " : "") << pad << "^\n";
  }
  if (!d.hint.empty()) os << "  hint: " << bounded(d.hint, limits::kMaxMessageBytes) << '\n';
  return os.str();
}

std::string_view lastLine(std::string_view text) {
  const size_t end = text.find_last_not_of(" \t\r\n");
  if (end == std::string_view::npos) return {};
  text = text.substr(0, end + 1);
  const size_t nl = text.rfind('\n');
  return nl == std::string_view::npos ? text : text.substr(nl + 1);
}

std::string formatDiagnostics(const Diagnostics& ds, const std::string* sourceText) {
  std::string out;
  const size_t shown = std::min(ds.size(), limits::kMaxPrintedDiagnostics);
  for (size_t i = 0; i < shown; ++i) out += formatDiagnostic(ds[i], sourceText);
  if (ds.size() > shown) {
    size_t errors = 0;
    for (size_t i = shown; i < ds.size(); ++i) errors += ds[i].severity == Severity::Error ? 1 : 0;
    out += "and " + std::to_string(ds.size() - shown) + " more (" + std::to_string(errors) + " errors)\n";
  }
  return out;
}

}  // namespace ps::core
