// Hand-written lexer of the .pipe DSL: one pass over a string_view, no regex, tokens refer to
// the text by offset (no allocation per token beyond the token vector itself).
#include <array>
#include <limits>

#include "io/dsl_internal.h"

namespace ps::core::dsl {

void SourceMap::locate(std::uint32_t offset, int& line, int& column) const {
  if (lineStarts_.empty()) {
    lineStarts_.push_back(0);
    for (size_t i = 0; i < text_.size(); ++i)
      if (text_[i] == '\n') lineStarts_.push_back(static_cast<std::uint32_t>(i + 1));
  }
  auto it = std::upper_bound(lineStarts_.begin(), lineStarts_.end(), offset);
  size_t idx = static_cast<size_t>(it - lineStarts_.begin()) - 1;
  line = static_cast<int>(idx) + 1;
  column = static_cast<int>(offset - lineStarts_[idx]) + 1;
}

bool DiagSink::error(std::uint32_t offset, std::string code, std::string message, std::string hint) {
  if (full()) return false;
  for (size_t i = 0; i < diags_.size(); ++i)
    if (offsets_[i] == offset && diags_[i].message == message) return true;
  SourceLocation loc;
  loc.file = options_.filename;
  map_.locate(offset, loc.line, loc.column);
  Diagnostic d = makeError(std::move(code), std::move(message), std::move(loc));
  d.hint = std::move(hint);
  diags_.push_back(std::move(d));
  offsets_.push_back(offset);
  return !full();
}

bool DiagSink::errorNoLocation(std::string code, std::string message, std::string hint) {
  if (full()) return false;
  SourceLocation loc;
  loc.file = options_.filename;
  Diagnostic d = makeError(std::move(code), std::move(message), std::move(loc));
  d.hint = std::move(hint);
  diags_.push_back(std::move(d));
  offsets_.push_back(0xffffffffu);
  return !full();
}

// Optimal string alignment distance: insertions, deletions, substitutions and swaps of
// neighbours ("nxet" -> "next") each cost one.
int editDistance(std::string_view a, std::string_view b) {
  if (a.size() > 64 || b.size() > 64) return 1000;
  std::array<std::array<int, 65>, 65> t{};
  for (size_t i = 0; i <= a.size(); ++i) t[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= b.size(); ++j) t[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      t[i][j] = std::min({t[i - 1][j] + 1, t[i][j - 1] + 1, t[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        t[i][j] = std::min(t[i][j], t[i - 2][j - 2] + 1);
    }
  }
  return t[a.size()][b.size()];
}

std::string suggest(std::string_view word, const std::vector<std::string_view>& candidates) {
  std::string_view best;
  int bestDist = 1000;
  for (auto c : candidates) {
    if (c.empty() || c == word) continue;
    int dist = editDistance(word, c);
    // Case-only differences ("f3" for "F3") count as close.
    bool caseOnly = word.size() == c.size();
    for (size_t i = 0; caseOnly && i < c.size(); ++i) caseOnly = (word[i] | 0x20) == (c[i] | 0x20);
    if (caseOnly) dist = 0;
    if (dist < bestDist) {
      bestDist = dist;
      best = c;
    }
  }
  int limit = word.size() <= 2 ? 1 : word.size() <= 5 ? 2 : 3;
  if (best.empty() || bestDist > limit) return {};
  return "did you mean " + std::string(best) + "?";
}

namespace {
inline bool isIdentStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
inline bool isDigit(char c) {
  return c >= '0' && c <= '9';
}
inline bool isIdentChar(char c) {
  return isIdentStart(c) || isDigit(c);
}
}  // namespace

std::vector<Token> lex(std::string_view text, DiagSink& sink) {
  std::vector<Token> toks;
  toks.reserve(text.size() / 5 + 16);
  const char* p = text.data();
  const size_t n = text.size();
  size_t i = 0;
  bool lineStart = true;
  auto push = [&](Tok t, size_t start, size_t len, std::int64_t v = 0) {
    Token tk;
    tk.type = t;
    tk.lineStart = lineStart;
    tk.offset = static_cast<std::uint32_t>(start);
    tk.length = static_cast<std::uint32_t>(len);
    tk.value = v;
    toks.push_back(tk);
    lineStart = false;
  };
  while (i < n) {
    char c = p[i];
    if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
      continue;
    }
    if (c == '\n') {
      lineStart = true;
      ++i;
      continue;
    }
    if (c == '#') {
      while (i < n && p[i] != '\n') ++i;
      continue;
    }
    size_t start = i;
    if (isIdentStart(c)) {
      ++i;
      while (i < n && isIdentChar(p[i])) ++i;
      // `next?` (emit if one is left) is one token.
      if (i < n && p[i] == '?' && i - start == 4 && text.substr(start, 4) == "next") ++i;
      // Op qualifier glued to the name: F3@s1, UNSHARD@s0, F3@c1.
      if (i + 2 < n && p[i] == '@' && (p[i + 1] == 's' || p[i + 1] == 'c') && isDigit(p[i + 2])) {
        i += 2;
        while (i < n && isDigit(p[i])) ++i;
      }
      push(Tok::Ident, start, i - start);
      continue;
    }
    if (isDigit(c)) {
      std::uint64_t v = 0;
      bool overflow = false;
      while (i < n && isDigit(p[i])) {
        if (v > (static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) - 9) / 10)
          overflow = true;
        v = v * 10 + static_cast<std::uint64_t>(p[i] - '0');
        ++i;
      }
      if (i + 1 < n && p[i] == '.' && isDigit(p[i + 1])) {
        ++i;
        while (i < n && isDigit(p[i])) ++i;
        push(Tok::Float, start, i - start);
        continue;
      }
      if (overflow) {
        sink.error(static_cast<std::uint32_t>(start), "dsl.overflow",
                   "integer literal " + std::string(text.substr(start, std::min<size_t>(i - start, 40))) +
                       " is too large");
        v = 0;
      }
      push(Tok::Int, start, i - start, static_cast<std::int64_t>(v));
      continue;
    }
    if (c == '"') {
      ++i;
      bool closed = false;
      while (i < n && p[i] != '\n') {
        if (p[i] == '\\' && i + 1 < n && p[i + 1] != '\n') {
          i += 2;
          continue;
        }
        if (p[i] == '"') {
          ++i;
          closed = true;
          break;
        }
        ++i;
      }
      if (!closed) {
        sink.error(static_cast<std::uint32_t>(start), "dsl.syntax", "unterminated string");
        push(Tok::Bad, start, i - start);
        continue;
      }
      push(Tok::String, start, i - start);
      continue;
    }
    Tok t = Tok::Bad;
    size_t len = 1;
    char d = i + 1 < n ? p[i + 1] : '\0';
    // Single-character tokens by table; the ones that may take a second character below.
    static constexpr std::string_view kSingles = "(){},:;@*+-/%";
    static constexpr Tok kSingleToks[] = {Tok::LParen, Tok::RParen,    Tok::LBrace, Tok::RBrace, Tok::Comma,
                                          Tok::Colon,  Tok::Semicolon, Tok::At,     Tok::Star,   Tok::Plus,
                                          Tok::Minus,  Tok::Slash,     Tok::Percent};
    static_assert(std::size(kSingleToks) == kSingles.size());
    if (const size_t k = kSingles.find(c); k != std::string_view::npos) t = kSingleToks[k];
    // Tokens that take a second character: alone (Bad when they never stand alone) or paired.
    struct Pair {
      char first, second;
      Tok alone, paired;
    };
    static constexpr Pair kPairs[] = {{'=', '=', Tok::Assign, Tok::EqEq},
                                      {'!', '=', Tok::Bad, Tok::NotEq},
                                      {'<', '=', Tok::Lt, Tok::Le},
                                      {'>', '=', Tok::Gt, Tok::Ge},
                                      {'.', '.', Tok::Bad, Tok::DotDot}};
    for (const Pair& pr : kPairs)
      if (c == pr.first) {
        t = d == pr.second ? pr.paired : pr.alone;
        len = d == pr.second ? 2 : 1;
      }
    if (t == Tok::Bad) {
      std::string shown;
      auto uc = static_cast<unsigned char>(c);
      if (uc >= 0x20 && uc < 0x7f)
        shown = std::string("'") + c + "'";
      else {
        static const char* hex = "0123456789abcdef";
        shown = std::string("byte 0x") + hex[uc >> 4] + hex[uc & 15];
      }
      sink.error(static_cast<std::uint32_t>(start), "dsl.syntax", "unexpected character " + shown);
    }
    i += len;
    push(t, start, len);
    // Past maxErrors nothing more is reported: lexing on would only store a token per byte of
    // garbage (20 MB of NUL bytes once took 1.3 GB).
    if (t == Tok::Bad && sink.full()) break;
  }
  Token end;
  end.type = Tok::End;
  end.lineStart = true;
  end.offset = static_cast<std::uint32_t>(n);
  toks.push_back(end);
  return toks;
}

std::string_view tokenText(std::string_view text, const Token& t) {
  return text.substr(t.offset, t.length);
}

std::string_view tokName(Tok t) {
  switch (t) {
    case Tok::End:
      return "end of input";
    case Tok::Ident:
      return "a name";
    case Tok::Int:
      return "an integer";
    case Tok::Float:
      return "a number";
    case Tok::String:
      return "a string";
    case Tok::LParen:
      return "'('";
    case Tok::RParen:
      return "')'";
    case Tok::LBrace:
      return "'{'";
    case Tok::RBrace:
      return "'}'";
    case Tok::Comma:
      return "','";
    case Tok::Colon:
      return "':'";
    case Tok::Semicolon:
      return "';'";
    case Tok::At:
      return "'@'";
    case Tok::Star:
      return "'*'";
    case Tok::Plus:
      return "'+'";
    case Tok::Minus:
      return "'-'";
    case Tok::Slash:
      return "'/'";
    case Tok::Percent:
      return "'%'";
    case Tok::Assign:
      return "'='";
    case Tok::EqEq:
      return "'=='";
    case Tok::NotEq:
      return "'!='";
    case Tok::Lt:
      return "'<'";
    case Tok::Le:
      return "'<='";
    case Tok::Gt:
      return "'>'";
    case Tok::Ge:
      return "'>='";
    case Tok::DotDot:
      return "'..'";
    case Tok::Bad:
      return "an invalid character";
  }
  return "a token";
}

std::string unquote(std::string_view q) {
  std::string out;
  if (q.size() < 2) return out;
  q = q.substr(1, q.size() - 2);
  out.reserve(q.size());
  for (size_t i = 0; i < q.size(); ++i) {
    char c = q[i];
    if (c == '\\' && i + 1 < q.size()) {
      char e = q[++i];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        default:
          out += e;
          break;
      }
    } else {
      out += c;
    }
  }
  return out;
}

namespace {
const std::vector<std::string_view> kKeywords = {"let", "def",    "call",   "device", "next", "for",
                                                 "in",  "repeat", "if",     "else",   "and",  "or",
                                                 "not", "kind",   "assert", "greedy"};
}

const std::vector<std::string_view>& keywords() {
  return kKeywords;
}
bool isKeyword(std::string_view w) {
  for (auto k : kKeywords)
    if (k == w) return true;
  return false;
}
bool isBuiltinName(std::string_view w) {
  return w == "devices" || w == "stages" || w == "microbatches" || w == "d";
}
bool isBuiltinFunction(std::string_view w) {
  return w == "min" || w == "max" || w == "abs" || w == "stage" || w == "device_of" || w == "chunk_of" ||
         w == "nstages" || w == "ready" || w == "count";
}

}  // namespace ps::core::dsl
