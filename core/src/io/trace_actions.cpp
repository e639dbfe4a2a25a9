// Pipeline action names (PyTorch's "2F0", "(0F7;7B3)OVERLAP_F_B") and our own op tokens
// ("F3@s1"), as the trace readers meet them in range names.
#include <cctype>
#include <limits>
#include <string>

#include "io/trace_text.h"
#include "pipestudio/core/io/trace_import.h"
#include "pipestudio/core/model/limits.h"

namespace ps::core {

namespace detail {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool readInt(std::string_view s, size_t& pos, int& out) {
  size_t begin = pos;
  long long v = 0;
  while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) {
    v = v * 10 + (s[pos] - '0');
    if (v > std::numeric_limits<int>::max()) return false;
    ++pos;
  }
  if (pos == begin) return false;
  out = static_cast<int>(v);
  return true;
}

std::optional<Op> parseOpToken(std::string_view text) {
  auto at = text.find("@s");
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view head = text.substr(0, at);
  size_t pos = 0;
  while (pos < head.size() && !std::isdigit(static_cast<unsigned char>(head[pos]))) ++pos;
  auto kind = builtinKindFromName(head.substr(0, pos));
  if (!kind) return std::nullopt;
  Op op;
  op.kind = *kind;
  op.microbatch = -1;
  if (pos < head.size()) {
    int mb = 0;
    if (!readInt(head, pos, mb) || pos != head.size()) return std::nullopt;
    op.microbatch = mb;
  }
  size_t sp = at + 2;
  int stage = 0;
  if (!readInt(text, sp, stage) || sp != text.size()) return std::nullopt;
  if (stage >= limits::kMaxStages || op.microbatch >= limits::kMaxMicrobatches) return std::nullopt;
  op.stage = stage;
  return op;
}

}  // namespace detail

namespace {

using detail::readInt;
using detail::trim;

Result<Op> parseSimpleAction(std::string_view text, std::string_view whole) {
  auto bad = [&](const std::string& why) {
    return makeError("trace.action", "cannot read pipeline action '" + std::string(whole) + "': " + why);
  };
  text = trim(text);
  size_t pos = 0;
  int stage = 0;
  if (!readInt(text, pos, stage)) return bad("expected a stage number first");
  if (stage >= limits::kMaxStages)
    return makeError("trace.limit", "pipeline action '" + std::string(whole) + "': stage " +
                                        std::to_string(stage) + " is out of range (at most " +
                                        std::to_string(limits::kMaxStages - 1) + ")");
  size_t kindBegin = pos;
  while (pos < text.size() && (std::isupper(static_cast<unsigned char>(text[pos])) || text[pos] == '_'))
    ++pos;
  std::string_view kindName = text.substr(kindBegin, pos - kindBegin);
  if (kindName.empty()) return bad("expected an action kind after the stage");
  auto kind = builtinKindFromName(kindName);
  if (!kind) return bad("unknown action kind '" + std::string(kindName) + "'");
  Op op;
  op.kind = *kind;
  op.stage = stage;
  if (isStageLevelKind(*kind)) {
    op.microbatch = -1;
    if (pos != text.size()) return bad("a stage-level action has no micro-batch");
    return op;
  }
  int mb = 0;
  if (!readInt(text, pos, mb)) return bad("expected a micro-batch number after the kind");
  if (mb >= limits::kMaxMicrobatches)
    return makeError("trace.limit", "pipeline action '" + std::string(whole) + "': micro-batch " +
                                        std::to_string(mb) + " is out of range (at most " +
                                        std::to_string(limits::kMaxMicrobatches - 1) + ")");
  if (pos != text.size()) return bad("unexpected '" + std::string(text.substr(pos)) + "'");
  op.microbatch = mb;
  return op;
}

}  // namespace

Result<PipelineAction> parsePipelineAction(std::string_view text) {
  std::string_view t = trim(text);
  if (t.empty()) return makeError("trace.action", "empty pipeline action");
  if (t.front() == '(') {
    auto close = t.find(')');
    if (close == std::string_view::npos)
      return makeError("trace.action", "cannot read pipeline action '" + std::string(t) + "': missing ')'");
    std::string_view inner = t.substr(1, close - 1);
    std::string_view suffix = trim(t.substr(close + 1));
    auto sep = inner.find_first_of(";,");
    if (sep == std::string_view::npos || inner.find_first_of(";,", sep + 1) != std::string_view::npos)
      return makeError("trace.action", "cannot read pipeline action '" + std::string(t) +
                                           "': an overlapped pair has two actions");
    if (!suffix.empty() && suffix != "OVERLAP_F_B")
      return makeError("trace.action", "cannot read pipeline action '" + std::string(t) +
                                           "': unknown composite '" + std::string(suffix) + "'");
    auto a = parseSimpleAction(inner.substr(0, sep), t);
    PS_TRY(a);
    auto b = parseSimpleAction(inner.substr(sep + 1), t);
    PS_TRY(b);
    PipelineAction out;
    out.op = *a;
    out.second = *b;
    return out;
  }
  auto a = parseSimpleAction(t, t);
  PS_TRY(a);
  PipelineAction out;
  out.op = *a;
  return out;
}

}  // namespace ps::core
