#include "pipestudio/core/model/result.h"

#include <algorithm>
#include <sstream>

#include "pipestudio/core/model/enum_names.h"

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

std::string formatDiagnostic(const Diagnostic& d, const std::string* sourceText) {
  std::ostringstream os;
  if (!d.location.file.empty()) {
    os << d.location.file << ':';
    if (d.location.line > 0) {
      os << d.location.line << ':';
      if (d.location.column > 0) os << d.location.column << ':';
    }
    os << ' ';
  }
  os << severityName(d.severity) << ": " << d.message << '\n';
  std::string line;
  if (sourceText && d.location.line > 0 && sourceLine(*sourceText, d.location.line, line)) {
    os << "  " << line << '\n' << "  ";
    for (int i = 1; i < d.location.column && i <= static_cast<int>(line.size()); ++i)
      os << (line[static_cast<size_t>(i - 1)] == '\t' ? '\t' : ' ');
    os << "^\n";
  }
  if (!d.hint.empty()) os << "  hint: " << d.hint << '\n';
  return os.str();
}

std::string formatDiagnostics(const Diagnostics& ds, const std::string* sourceText) {
  std::string out;
  for (const auto& d : ds) out += formatDiagnostic(d, sourceText);
  return out;
}

}  // namespace ps::core
