#pragma once
// Diagnostics and Result<T>: no exceptions cross library boundaries. A Result holds either
// a value or one or more error diagnostics (parsers report every error they find).
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace ps::core {

struct SourceLocation {
  std::string file;  // path or "<stdin>"; empty when not from a file
  int line = 0;      // 1-based; 0 = unknown
  int column = 0;    // 1-based; 0 = unknown
  bool valid() const { return line > 0; }
};

enum class Severity : std::uint8_t { Note, Warning, Error };

// A reference to one op in a schedule: device and position in its step list.
struct OpRef {
  int device = -1;
  int step = -1;
};

struct Diagnostic {
  Severity severity = Severity::Error;
  std::string code;     // stable machine-readable id, e.g. "dsl.unknown-kind", "validate.deadlock"
  std::string message;  // one sentence, names the place (op, device, row/cell)
  SourceLocation location;
  std::string hint;            // optional: "did you mean W?"
  std::vector<OpRef> related;  // ops the diagnostic is about (GUI selects / outlines them)
};

using Diagnostics = std::vector<Diagnostic>;

// Line and column (1-based) of a byte offset in a text: for parsers that only know offsets
// (e.g. nlohmann::json's parse errors).
SourceLocation locationOfOffset(std::string_view text, size_t offset, std::string file);

Diagnostic makeError(std::string code, std::string message, SourceLocation loc = {});
Diagnostic makeWarning(std::string code, std::string message, SourceLocation loc = {});

bool hasErrors(const Diagnostics& ds);
// "error", "warning", "note"; an unknown name reads as an error.
std::string_view severityName(Severity s);
Severity severityFromName(std::string_view name);

// "file:line:col: error: message" plus, when sourceText is given, the line with a caret and
// the hint. Compilers' format, so editors can jump to it.
std::string formatDiagnostic(const Diagnostic& d, const std::string* sourceText = nullptr);
std::string formatDiagnostics(const Diagnostics& ds, const std::string* sourceText = nullptr);
// The last line of another program's output that is not blank, without its trailing blanks:
// what a one-line message quotes of a child's stderr or an exception's text ("" when none).
std::string_view lastLine(std::string_view text);

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::move(value)) {}                        // NOLINT implicit
  Result(Diagnostic error) : data_(Diagnostics{std::move(error)}) {}  // NOLINT implicit
  Result(Diagnostics errors) : data_(std::move(errors)) {}            // NOLINT implicit

  bool ok() const { return std::holds_alternative<T>(data_); }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<T>(data_); }
  const T& value() const& { return std::get<T>(data_); }
  T&& value() && { return std::get<T>(std::move(data_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  const Diagnostics& errors() const {
    static const Diagnostics none;
    return ok() ? none : std::get<Diagnostics>(data_);
  }
  const Diagnostic& error() const { return errors().front(); }

 private:
  std::variant<T, Diagnostics> data_;
};

struct Unit {};
using Status = Result<Unit>;
inline Status okStatus() {
  return Unit{};
}

}  // namespace ps::core

// Propagation, as perfetto's RETURN_IF_ERROR / ASSIGN_OR_RETURN: the enclosing function returns
// a Result (of any type) or Status, and an error passes up unchanged.
//   PS_TRY(expr);                      expr is a Result or Status: return its errors if any
//   PS_ASSIGN_OR_RETURN(auto x, expr); x = the value of the Result expr, or return its errors
#define PS_TRY(expr)                                     \
  do {                                                   \
    auto&& ps_try_result_ = (expr);                      \
    if (!ps_try_result_) return ps_try_result_.errors(); \
  } while (0)
#define PS_RESULT_CONCAT_INNER_(a, b) a##b
#define PS_RESULT_CONCAT_(a, b) PS_RESULT_CONCAT_INNER_(a, b)
#define PS_ASSIGN_OR_RETURN(lhs, expr) \
  PS_ASSIGN_OR_RETURN_IMPL_(PS_RESULT_CONCAT_(ps_result_, __LINE__), lhs, expr)
#define PS_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr)                         \
  auto tmp = (expr);             /* NOLINT(bugprone-macro-parentheses) */ \
  if (!tmp) return tmp.errors(); /* NOLINT(bugprone-macro-parentheses) */ \
  lhs = std::move(tmp).value()   // NOLINT(bugprone-macro-parentheses): a name and a declaration
