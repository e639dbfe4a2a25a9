// Over 800 lines: one Parser class whose statement and expression rules share its token cursor,
// program under construction and diagnostics; splitting it would put the whole class in a header.
// Recursive-descent parser of the .pipe DSL. Literal op tokens (the explicit form) take a
// short path: one identifier token becomes one OpItem without building expressions.
#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <limits>

#include "io/dsl_internal.h"
#include "pipestudio/core/io/units.h"
#include "pipestudio/core/model/duration_expression.h"

namespace ps::core::dsl {

namespace {

constexpr int kMaxDepth = 200;        // nesting of blocks and expressions
constexpr int kMaxExprHeight = 2000;  // operators in one expression's longest chain

enum class ListContext : std::uint8_t { Block, DeviceLine };

struct IdentParts {
  std::string_view base;    // kind name
  std::string_view digits;  // micro-batch digits, may be empty
  char qual = 0;            // 's' or 'c' when a glued qualifier is present
  std::string_view qualDigits;
};

IdentParts splitIdent(std::string_view s) {
  IdentParts p;
  size_t at = s.find('@');
  std::string_view head = s;
  if (at != std::string_view::npos) {
    head = s.substr(0, at);
    p.qual = s[at + 1];
    p.qualDigits = s.substr(at + 2);
  }
  size_t k = head.size();
  while (k > 0 && head[k - 1] >= '0' && head[k - 1] <= '9') --k;
  p.base = head.substr(0, k);
  p.digits = head.substr(k);
  return p;
}

bool parseInt32(std::string_view digits, std::int32_t& out) {
  auto r = std::from_chars(digits.data(), digits.data() + digits.size(), out);
  return r.ec == std::errc() && r.ptr == digits.data() + digits.size();
}

class Parser {
 public:
  Parser(std::string_view text, DiagSink& sink) : text_(text), sink_(sink), toks_(lex(text, sink)) {}

  Program run() {
    while (cur().type != Tok::End && !sink_.full()) {
      size_t before = pos_;
      if (!parseStatement(prog_.top, true)) recover(true);
      if (pos_ == before) ++pos_;  // always make progress
    }
    checkKindReferences();
    return std::move(prog_);
  }

 private:
  std::string_view text_;
  DiagSink& sink_;
  std::vector<Token> toks_;
  size_t pos_ = 0;
  Program prog_;
  int depth_ = 0;

  const Token& cur() const { return toks_[pos_]; }
  const Token& peek(size_t k = 1) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  std::string_view txt(const Token& t) const { return tokenText(text_, t); }
  bool at(Tok t) const { return cur().type == t; }
  bool atWord(std::string_view w) const { return cur().type == Tok::Ident && txt(cur()) == w; }
  void advance() {
    if (pos_ + 1 < toks_.size()) ++pos_;
  }

  bool fail(const Token& t, std::string message, std::string hint = {}) {
    sink_.error(t.offset, "dsl.syntax", std::move(message), std::move(hint));
    return false;
  }
  std::string found(const Token& t) const {
    if (t.type == Tok::End) return "end of input";
    if (t.type == Tok::Ident || t.type == Tok::Int || t.type == Tok::Float)
      return "'" + std::string(txt(t).substr(0, 40)) + "'";
    return std::string(tokName(t.type));
  }
  bool expect(Tok t, std::string_view what) {
    if (at(t)) {
      advance();
      return true;
    }
    return fail(cur(), "expected " + std::string(what) + ", found " + found(cur()));
  }

  // Skips to the next token that starts a line (or a closing brace of this level).
  void recover(bool topLevel) {
    int depth = 0;
    if (pos_ + 1 < toks_.size()) advance();
    while (!at(Tok::End)) {
      if (at(Tok::LBrace)) ++depth;
      if (at(Tok::RBrace)) {
        if (depth == 0) {
          if (topLevel) advance();  // a stray '}' at top level
          return;
        }
        --depth;
      }
      if (depth == 0 && cur().lineStart) return;
      advance();
    }
  }

  // --------------------------------------------------------------------------------------------
  // Kinds

  std::optional<std::uint16_t> lookupKind(std::string_view name) const {
    if (name.size() == 1) {
      switch (name[0]) {
        case 'F':
          return static_cast<std::uint16_t>(OpKind::F);
        case 'B':
          return static_cast<std::uint16_t>(OpKind::B);
        case 'I':
          return static_cast<std::uint16_t>(OpKind::I);
        case 'W':
          return static_cast<std::uint16_t>(OpKind::W);
        case 'R':
          return static_cast<std::uint16_t>(OpKind::R);
        default:
          break;
      }
    }
    if (auto k = builtinKindFromName(name)) return static_cast<std::uint16_t>(*k);
    for (size_t i = 0; i < prog_.userKinds.size(); ++i)
      if (prog_.userKinds[i].name == name) return static_cast<std::uint16_t>(kFirstUserKind + i);
    return std::nullopt;
  }
  bool kindIsStageLevel(std::uint16_t k) const {
    if (k >= kFirstUserKind) return prog_.userKinds[k - kFirstUserKind].stageLevel;
    return isStageLevelKind(static_cast<OpKind>(k));
  }
  std::vector<std::string_view> kindNames() const {
    std::vector<std::string_view> v;
    for (std::uint16_t i = 0; i < static_cast<std::uint16_t>(OpKind::kBuiltinCount); ++i)
      v.push_back(builtinKindName(static_cast<OpKind>(i)));
    for (auto& u : prog_.userKinds) v.push_back(u.name);
    return v;
  }
  std::vector<std::string_view> statementWords() const {
    std::vector<std::string_view> v = kindNames();
    for (auto k : keywords()) v.push_back(k);
    for (auto& t : prog_.templates) v.push_back(t.name);
    for (auto w : {"name", "devices", "stages", "microbatches", "placement", "profile", "partition", "route",
                   "blocks"})
      v.push_back(w);
    return v;
  }
  bool isOpIdent(const Token& t) const {
    if (t.type != Tok::Ident) return false;
    return lookupKind(splitIdent(txt(t)).base).has_value();
  }
  static bool isHeaderWord(std::string_view w) {
    return w == "name" || w == "devices" || w == "stages" || w == "microbatches" || w == "placement" ||
           w == "profile" || w == "partition" || isRouteWord(w);
  }
  // Header words added with routes: a template or variable of that name written before them
  // still reads as it did (`route(...)`, `blocks = ...`).
  static bool isRouteWord(std::string_view w) { return w == "route" || w == "blocks"; }

  void checkKindReferences() {
    auto names = kindNames();
    for (size_t i = 0; i < prog_.userKinds.size(); ++i) {
      auto check = [&](const std::vector<std::string>& list, const char* clause) {
        for (auto& n : list) {
          if (lookupKind(n)) continue;
          sink_.error(prog_.userKindOffsets[i], "dsl.unknown-kind",
                      "kind " + prog_.userKinds[i].name + ": '" + clause + " " + n + "' names no op kind",
                      suggest(n, names));
        }
      };
      check(prog_.userKinds[i].after, "after");
      check(prog_.userKinds[i].before, "before");
    }
  }

  // --------------------------------------------------------------------------------------------
  // Statements

  bool parseStatement(std::vector<Stmt>& out, bool topLevel) {
    const Token& t = cur();
    if (t.type == Tok::Semicolon) {
      advance();
      return true;
    }
    if (t.type == Tok::LParen) return parseOps(out, ListContext::Block);
    if (t.type != Tok::Ident) {
      return fail(t, "expected a statement, found " + found(t));
    }
    std::string_view w = txt(t);
    if (isHeaderWord(w) && peek().type != Tok::Assign && !(isRouteWord(w) && peek().type == Tok::LParen)) {
      if (!topLevel) return fail(t, "'" + std::string(w) + "' belongs in the header, before any block");
      return parseHeader(out);
    }
    if (w == "kind") {
      if (!topLevel) return fail(t, "kinds are declared at top level");
      return parseKind();
    }
    if (w == "def") {
      if (!topLevel) return fail(t, "templates are defined at top level");
      return parseDef();
    }
    if (w == "let") return parseLet(out, topLevel);
    if (w == "device") return parseDevice(out);
    if (w == "for") return parseFor(out);
    if (w == "repeat") return parseRepeat(out);
    if (w == "if") return parseIf(out);
    if (w == "call") {
      advance();
      if (!at(Tok::Ident)) return fail(cur(), "expected a template name after 'call', found " + found(cur()));
      return parseCall(out);
    }
    if (w == "next" || w == "next?") return parseOps(out, ListContext::Block);
    if (w == "assert") return parseAssert(out);
    if (w == "greedy") {
      Stmt g;
      g.kind = StmtKind::Greedy;
      g.offset = t.offset;
      advance();
      prog_.usesCursors = true;
      if (!parseBlock(g.body)) return false;
      out.push_back(std::move(g));
      return true;
    }
    if (w == "else") return fail(t, "'else' without 'if'");
    if (isKeyword(w)) return fail(t, "unexpected '" + std::string(w) + "'");
    if (peek().type == Tok::Assign) return parseAssign(out);
    if (isOpIdent(t)) return parseOps(out, ListContext::Block);
    if (peek().type == Tok::LParen && !peek().lineStart) return parseCall(out);
    auto parts = splitIdent(w);
    std::string hint = suggest(parts.base, statementWords());
    if (hint.empty()) hint = suggest(w, statementWords());
    sink_.error(t.offset, "dsl.unknown-kind",
                "unknown op kind or statement '" + std::string(w.substr(0, 40)) + "'", hint);
    return false;
  }

  bool parseBlock(std::vector<Stmt>& out) {
    if (!at(Tok::LBrace)) return fail(cur(), "expected '{', found " + found(cur()));
    if (depth_ >= kMaxDepth)
      return fail(cur(), "blocks nested too deeply (limit " + std::to_string(kMaxDepth) + ")");
    ++depth_;
    advance();
    while (!at(Tok::RBrace) && !at(Tok::End) && !sink_.full()) {
      size_t before = pos_;
      if (!parseStatement(out, false)) recover(false);
      if (pos_ == before) advance();
    }
    --depth_;
    return expect(Tok::RBrace, "'}'");
  }

  bool parseIntList(Stmt& s) {
    for (;;) {
      bool neg = false;
      const Token& start = cur();
      if (at(Tok::Minus)) {
        neg = true;
        advance();
      }
      if (!at(Tok::Int)) return fail(cur(), "expected an integer, found " + found(cur()));
      s.ints.push_back(neg ? -cur().value : cur().value);
      s.intOffsets.push_back(start.offset);
      advance();
      if (!at(Tok::Comma)) return true;
      advance();
    }
  }

  // ITEM { "," ITEM }, ITEM = EXPR [ ".." EXPR ]
  bool parseItems(Stmt& s) {
    for (;;) {
      std::int32_t from = -1, to = -1;
      if (!expr(from)) return false;
      if (at(Tok::DotDot)) {
        advance();
        if (!expr(to)) return false;
      }
      s.items.emplace_back(from, to);
      if (!at(Tok::Comma)) return true;
      advance();
    }
  }

  bool parseHeader(std::vector<Stmt>& out) {
    Stmt s;
    s.kind = StmtKind::Header;
    s.offset = cur().offset;
    std::string_view w = txt(cur());
    advance();
    if (w == "name" || w == "profile") {
      s.header = w == "name" ? HeaderWord::Name : HeaderWord::Profile;
      if (!at(Tok::String))
        return fail(cur(), "expected a quoted string after '" + std::string(w) + "', found " + found(cur()));
      s.text = unquote(txt(cur()));
      advance();
    } else if (w == "devices" || w == "stages" || w == "microbatches") {
      s.header = w == "devices"  ? HeaderWord::Devices
                 : w == "stages" ? HeaderWord::Stages
                                 : HeaderWord::Microbatches;
      s.name = w;
      if (!expr(s.e1)) return false;
    } else if (w == "placement") {
      s.header = HeaderWord::Placement;
      if (!at(Tok::Ident))
        return fail(cur(), "expected linear, interleaved, vshape or explicit, found " + found(cur()));
      std::string_view p = txt(cur());
      if (p == "linear")
        s.placement = PlacementKind::Linear;
      else if (p == "interleaved" || p == "looped")
        s.placement = PlacementKind::Interleaved;
      else if (p == "vshape")
        s.placement = PlacementKind::VShape;
      else if (p == "explicit")
        s.placement = PlacementKind::Explicit;
      else
        return fail(cur(), "unknown placement '" + std::string(p.substr(0, 40)) + "'",
                    suggest(p, {"linear", "interleaved", "vshape", "explicit"}));
      advance();
      if (s.placement == PlacementKind::Explicit && !parseIntList(s)) return false;
    } else if (w == "route") {
      // route FIRST..END: ITEMS   (micro-batches FIRST..END-1 run the listed stages)
      s.header = HeaderWord::Route;
      if (!expr(s.e1)) return false;
      if (!expect(Tok::DotDot, "'..' (route micro-batches are written a..b, b excluded)")) return false;
      if (!expr(s.e2)) return false;
      if (!expect(Tok::Colon, "':' before the route's stages")) return false;
      if (!parseItems(s)) return false;
    } else if (w == "blocks") {
      s.header = HeaderWord::Blocks;
      if (!parseItems(s)) return false;
    } else {  // partition
      s.header = HeaderWord::Partition;
      if (!parseIntList(s)) return false;
    }
    out.push_back(std::move(s));
    return true;
  }

  bool checkNewName(const Token& t, std::string_view what) {
    std::string_view n = txt(t);
    if (isKeyword(n))
      return fail(t, "'" + std::string(n) + "' is a keyword and cannot name a " + std::string(what));
    if (isBuiltinName(n) || isBuiltinFunction(n))
      return fail(t, "'" + std::string(n) + "' is built in and cannot name a " + std::string(what));
    if (lookupKind(splitIdent(n).base) || n.find('@') != std::string_view::npos)
      return fail(t, "'" + std::string(n) + "' reads as an op and cannot name a " + std::string(what));
    return true;
  }

  bool parseLet(std::vector<Stmt>& out, bool topLevel) {
    Stmt s = startStmt(StmtKind::Let);
    if (!at(Tok::Ident)) return fail(cur(), "expected a variable name after 'let', found " + found(cur()));
    if (!checkNewName(cur(), "variable")) return false;
    s.name = txt(cur());
    advance();
    if (!expect(Tok::Assign, "'='")) return false;
    if (!expr(s.e1)) return false;
    if (topLevel) prog_.topLets.push_back(s.name);
    out.push_back(std::move(s));
    return true;
  }

  bool parseAssign(std::vector<Stmt>& out) {
    Stmt s;
    s.kind = StmtKind::Assign;
    s.offset = cur().offset;
    s.name = txt(cur());
    if (isBuiltinName(s.name))
      return fail(cur(), "'" + std::string(s.name) + "' is built in and cannot be assigned");
    advance();
    advance();  // '='
    if (!expr(s.e1)) return false;
    out.push_back(std::move(s));
    return true;
  }

  bool parseDevice(std::vector<Stmt>& out) {
    Stmt s = startStmt(StmtKind::Device);
    if (at(Tok::Star)) {
      s.kind = StmtKind::DeviceAll;
      advance();
    } else {
      if (!expr(s.e1)) return false;
    }
    if (at(Tok::Colon)) {
      advance();
      while (!sink_.full()) {
        const Token& t = cur();
        bool opStart = t.type == Tok::LParen ||
                       (t.type == Tok::Ident && (txt(t) == "next" || txt(t) == "next?" || isOpIdent(t)));
        if (!opStart && t.type == Tok::Ident && !isKeyword(txt(t)) && !isHeaderWord(txt(t)) &&
            peek().type != Tok::Assign) {
          // An unknown word in an op list: report it and keep reading the list.
          auto parts = splitIdent(txt(t));
          sink_.error(t.offset, "dsl.unknown-kind",
                      "unknown op kind '" + std::string(parts.base.substr(0, 40)) + "' in '" +
                          std::string(txt(t).substr(0, 40)) + "'",
                      suggest(parts.base, kindNames()));
          advance();
          continue;
        }
        if (!opStart) break;
        if (!parseOpItemInto(s.body, ListContext::DeviceLine)) {
          recoverInList();
        }
      }
      out.push_back(std::move(s));
      return true;
    }
    if (!at(Tok::LBrace)) return fail(cur(), "expected ':' or '{' after the device, found " + found(cur()));
    if (!parseBlock(s.body)) return false;
    out.push_back(std::move(s));
    return true;
  }

  // After a bad item in a `device N:` list: skip to the next token that can start an op.
  void recoverInList() {
    while (!at(Tok::End)) {
      const Token& t = cur();
      if (t.type == Tok::Ident && (isOpIdent(t) || isKeyword(txt(t)) || isHeaderWord(txt(t)))) return;
      if (t.type == Tok::LParen) return;
      advance();
    }
  }

  // Appends op items to the last Ops statement of `out` (or a new one).
  bool parseOpItemInto(std::vector<Stmt>& out, ListContext ctx) {
    (void)ctx;
    if (out.empty() || out.back().kind != StmtKind::Ops) {
      Stmt s;
      s.kind = StmtKind::Ops;
      s.offset = cur().offset;
      out.push_back(std::move(s));
    }
    auto& ops = out.back().ops;
    if (at(Tok::LParen)) {
      const Token& open = cur();
      advance();
      OpItem a, b;
      if (!parseOpItem(a)) return false;
      if (!parseOpItem(b)) return false;
      if (!at(Tok::RParen))
        return fail(cur(), "an overlapped pair holds two ops: expected ')', found " + found(cur()));
      advance();
      a.pairFirst = true;
      a.offset = open.offset;
      ops.push_back(a);
      ops.push_back(b);
      return true;
    }
    OpItem a;
    if (!parseOpItem(a)) return false;
    ops.push_back(a);
    return true;
  }

  bool parseOps(std::vector<Stmt>& out, ListContext ctx) {
    if (!parseOpItemInto(out, ctx)) return false;
    return true;
  }

  // One op: F3, F3@s1, F3@c1, UNSHARD@s0, F(expr), F(expr)@s(expr), next F, next F@c(expr).
  bool parseOpItem(OpItem& item) {
    const Token& t0 = cur();
    item.offset = t0.offset;
    bool isNext = false;
    if (t0.type == Tok::Ident && (txt(t0) == "next" || txt(t0) == "next?")) {
      isNext = true;
      item.optional = txt(t0).size() == 5;
      advance();
    }
    const Token& t = cur();
    if (t.type != Tok::Ident)
      return fail(t, std::string(isNext ? "expected an op kind after 'next'" : "expected an op") +
                         ", found " + found(t));
    std::string_view s = txt(t);
    IdentParts parts = splitIdent(s);
    auto kind = lookupKind(parts.base);
    if (!kind) {
      sink_.error(t.offset, "dsl.unknown-kind",
                  "unknown op kind '" + std::string(parts.base.substr(0, 40)) + "'",
                  suggest(parts.base, kindNames()));
      advance();
      return false;
    }
    item.kind = *kind;
    bool stageLevel = kindIsStageLevel(*kind);
    advance();
    if (isNext) {
      if (!parts.digits.empty())
        return fail(t, "'next " + std::string(s) + "': next picks the micro-batch, write 'next " +
                           std::string(parts.base) + "'");
      if (stageLevel)
        return fail(t,
                    std::string(parts.base) + " is stage-level: it has no micro-batch to pick with 'next'");
      item.mbMode = MbMode::Next;
      prog_.usesCursors = true;
    } else if (!parts.digits.empty()) {
      if (stageLevel)
        return fail(t, std::string(parts.base) + " is stage-level and takes no micro-batch (write " +
                           std::string(parts.base) + "@s<stage>)");
      if (!parseInt32(parts.digits, item.mb))
        return fail(t, "micro-batch " + std::string(parts.digits.substr(0, 20)) + " is out of range");
      item.mbMode = MbMode::Literal;
    } else if (!stageLevel && parts.qual == 0 && at(Tok::LParen) && !cur().lineStart) {
      advance();
      if (!expr(item.mb)) return false;
      if (!expect(Tok::RParen, "')'")) return false;
      item.mbMode = MbMode::Expr;
    } else if (!stageLevel) {
      return fail(t, std::string(parts.base) + " needs a micro-batch: write " + std::string(parts.base) +
                         "0, " + std::string(parts.base) + "(expr) or next " + std::string(parts.base));
    }
    if (parts.qual != 0) {
      if (!parseInt32(parts.qualDigits, item.qual))
        return fail(t, "stage qualifier in '" + std::string(s.substr(0, 40)) + "' is out of range");
      item.qualMode = parts.qual == 's' ? QualMode::StageLiteral : QualMode::ChunkLiteral;
    } else if (at(Tok::At)) {
      advance();
      const Token& q = cur();
      std::string_view qs = q.type == Tok::Ident ? txt(q) : std::string_view();
      if (q.type == Tok::Ident && (qs == "s" || qs == "c") && peek().type == Tok::LParen) {
        advance();
        advance();
        if (!expr(item.qual)) return false;
        if (!expect(Tok::RParen, "')'")) return false;
        item.qualMode = qs == "s" ? QualMode::StageExpr : QualMode::ChunkExpr;
      } else if (q.type == Tok::Ident && qs.size() > 1 && (qs[0] == 's' || qs[0] == 'c') &&
                 parseInt32(qs.substr(1), item.qual)) {
        advance();
        item.qualMode = qs[0] == 's' ? QualMode::StageLiteral : QualMode::ChunkLiteral;
      } else {
        return fail(q,
                    "expected a stage qualifier after '@' (s3, c1, s(expr) or c(expr)), found " + found(q));
      }
    }
    return true;
  }

  // The argument of ready() / count(): a kind with an optional stage qualifier (F, W@c1, B@s(x)).
  bool parseKindSpec(Expr& e) {
    const Token& t = cur();
    if (t.type != Tok::Ident) return fail(t, "expected an op kind, found " + found(t));
    IdentParts parts = splitIdent(txt(t));
    auto kind = lookupKind(parts.base);
    if (!kind) {
      sink_.error(t.offset, "dsl.unknown-kind",
                  "unknown op kind '" + std::string(parts.base.substr(0, 40)) + "'",
                  suggest(parts.base, kindNames()));
      return false;
    }
    if (!parts.digits.empty())
      return fail(t, std::string(e.name) + "() takes a kind without a micro-batch, e.g. " +
                         std::string(e.name) + "(" + std::string(parts.base) + ")");
    e.kind = *kind;
    advance();
    if (parts.qual != 0) {
      if (!parseInt32(parts.qualDigits, e.qual)) return fail(t, "stage qualifier is out of range");
      e.qualMode = parts.qual == 's' ? QualMode::StageLiteral : QualMode::ChunkLiteral;
    } else if (at(Tok::At)) {
      advance();
      const Token& q = cur();
      std::string_view qs = q.type == Tok::Ident ? txt(q) : std::string_view();
      if ((qs != "s" && qs != "c") || peek().type != Tok::LParen)
        return fail(q,
                    "expected a stage qualifier after '@' (s3, c1, s(expr) or c(expr)), found " + found(q));
      advance();
      advance();
      if (!expr(e.qual)) return false;
      if (!expect(Tok::RParen, "')'")) return false;
      e.qualMode = qs == "s" ? QualMode::StageExpr : QualMode::ChunkExpr;
    }
    return true;
  }

  bool parseFor(std::vector<Stmt>& out) {
    Stmt s = startStmt(StmtKind::For);
    if (!at(Tok::Ident)) return fail(cur(), "expected a loop variable after 'for', found " + found(cur()));
    if (!checkNewName(cur(), "loop variable")) return false;
    s.name = txt(cur());
    advance();
    if (!atWord("in")) return fail(cur(), "expected 'in' after the loop variable, found " + found(cur()));
    advance();
    if (!expr(s.e1)) return false;
    if (!expect(Tok::DotDot, "'..' (ranges are written a..b, b excluded)")) return false;
    if (!expr(s.e2)) return false;
    if (atWord("step")) {
      advance();
      if (!expr(s.e3)) return false;
    }
    if (!parseBlock(s.body)) return false;
    out.push_back(std::move(s));
    return true;
  }

  // assert EXPR, "message"
  bool parseAssert(std::vector<Stmt>& out) {
    Stmt s = startStmt(StmtKind::Assert);
    if (!expr(s.e1)) return false;
    if (!expect(Tok::Comma, "',' and a message after the assert condition")) return false;
    if (!at(Tok::String)) return fail(cur(), "expected a quoted message, found " + found(cur()));
    s.text = unquote(txt(cur()));
    advance();
    out.push_back(std::move(s));
    return true;
  }

  bool parseRepeat(std::vector<Stmt>& out) {
    Stmt s = startStmt(StmtKind::Repeat);
    if (!expr(s.e1)) return false;
    if (!parseBlock(s.body)) return false;
    out.push_back(std::move(s));
    return true;
  }

  bool parseIf(std::vector<Stmt>& out) {
    Stmt s = startStmt(StmtKind::If);
    if (!expr(s.e1)) return false;
    if (!parseBlock(s.body)) return false;
    if (atWord("else")) {
      advance();
      if (atWord("if")) {
        if (depth_ >= kMaxDepth) return fail(cur(), "'else if' chain too long");
        ++depth_;
        bool ok = parseIf(s.elseBody);
        --depth_;
        if (!ok) return false;
      } else if (!parseBlock(s.elseBody)) {
        return false;
      }
    }
    out.push_back(std::move(s));
    return true;
  }

  bool parseArgs(std::vector<std::int32_t>& args) {
    if (!expect(Tok::LParen, "'('")) return false;
    if (at(Tok::RParen)) {
      advance();
      return true;
    }
    for (;;) {
      std::int32_t e = parseExpr();
      if (e < 0) return false;
      args.push_back(e);
      if (at(Tok::Comma)) {
        advance();
        continue;
      }
      return expect(Tok::RParen, "',' or ')'");
    }
  }

  bool parseCall(std::vector<Stmt>& out) {
    Stmt s;
    s.kind = StmtKind::Call;
    s.offset = cur().offset;
    s.name = txt(cur());
    advance();
    if (!parseArgs(s.args)) return false;
    out.push_back(std::move(s));
    return true;
  }

  bool parseDef() {
    Template t;
    t.offset = cur().offset;
    advance();
    if (!at(Tok::Ident)) return fail(cur(), "expected a template name after 'def', found " + found(cur()));
    if (!checkNewName(cur(), "template")) return false;
    t.name = txt(cur());
    for (auto& o : prog_.templates)
      if (o.name == t.name) return fail(cur(), "template '" + std::string(t.name) + "' is defined twice");
    advance();
    if (!expect(Tok::LParen, "'('")) return false;
    while (!at(Tok::RParen)) {
      if (!at(Tok::Ident)) return fail(cur(), "expected a parameter name, found " + found(cur()));
      if (!checkNewName(cur(), "parameter")) return false;
      t.params.push_back(txt(cur()));
      advance();
      if (at(Tok::Comma))
        advance();
      else if (!at(Tok::RParen))
        return fail(cur(), "expected ',' or ')', found " + found(cur()));
    }
    advance();
    if (!parseBlock(t.body)) return false;
    prog_.templates.push_back(std::move(t));
    return true;
  }

  // kind NAME [stage_level] [duration = EXPR] [memory (transient|delta) N[unit] ...] [after K, ...] [before
  // K, ...]
  bool parseKind() {
    const Token& kw = cur();
    advance();
    if (!at(Tok::Ident)) return fail(cur(), "expected a kind name after 'kind', found " + found(cur()));
    const Token& nameTok = cur();
    std::string_view name = txt(nameTok);
    if (builtinKindFromName(name)) return fail(nameTok, "'" + std::string(name) + "' is a built-in kind");
    if (lookupKind(name)) return fail(nameTok, "kind '" + std::string(name) + "' is declared twice");
    if (isKeyword(name) || isBuiltinName(name) || isBuiltinFunction(name) || isHeaderWord(name))
      return fail(nameTok, "'" + std::string(name) + "' is reserved and cannot name a kind");
    if (name.back() >= '0' && name.back() <= '9')
      return fail(nameTok, "kind names cannot end in a digit (the digits of '" + std::string(name) +
                               "3' would read as a micro-batch)");
    if (name.find('@') != std::string_view::npos) return fail(nameTok, "a kind name cannot hold '@'");
    if (prog_.userKinds.size() >= 60000) return fail(nameTok, "too many kinds");
    UserKind k;
    k.name = std::string(name);
    advance();
    for (;;) {
      if (atWord("stage_level")) {
        k.stageLevel = true;
        advance();
      } else if (atWord("duration")) {
        advance();
        if (!expect(Tok::Assign, "'=' after 'duration'")) return false;
        std::uint32_t start = cur().offset;
        std::uint32_t end = start;
        if (!parseDuration(start, end)) return false;
        k.durationExpr = std::string(text_.substr(start, end - start));
      } else if (atWord("memory")) {
        advance();
        bool any = false;
        while (atWord("transient") || atWord("delta")) {
          bool transient = atWord("transient");
          advance();
          if (at(Tok::Assign)) advance();
          std::int64_t v = 0;
          if (!parseBytes(v)) return false;
          (transient ? k.memory.transientBytes : k.memory.deltaBytes) = v;
          any = true;
        }
        if (!any) return fail(cur(), "expected 'transient' or 'delta' after 'memory', found " + found(cur()));
      } else if (atWord("after") || atWord("before")) {
        auto& list = atWord("after") ? k.after : k.before;
        advance();
        for (;;) {
          if (!at(Tok::Ident)) return fail(cur(), "expected an op kind name, found " + found(cur()));
          list.emplace_back(txt(cur()));
          advance();
          if (!at(Tok::Comma)) break;
          advance();
        }
      } else {
        break;
      }
    }
    prog_.userKinds.push_back(std::move(k));
    prog_.userKindOffsets.push_back(kw.offset);
    return true;
  }

  bool parseBytes(std::int64_t& out) {
    bool neg = false;
    if (at(Tok::Minus)) {
      neg = true;
      advance();
    }
    if (!at(Tok::Int)) return fail(cur(), "expected a byte count, found " + found(cur()));
    std::int64_t v = cur().value;
    const Token& numTok = cur();
    advance();
    if (at(Tok::Ident) && cur().offset == numTok.offset + numTok.length) {
      std::string_view u = txt(cur());
      const auto factor = byteUnitFactor(u);
      if (!factor || u.empty())
        return fail(cur(), "unknown size unit '" + std::string(u.substr(0, 20)) + "'",
                    suggest(u, byteUnitNames()));
      const std::int64_t mul = *factor;
      if (__builtin_mul_overflow(v, mul, &v)) return fail(numTok, "byte count is too large");
      advance();
    }
    // Memory sums over ops and micro-batches must stay within int64 (docs/dsl.md, Limits).
    if (v > limits::kMaxBytes)
      return fail(numTok, "byte count " + std::to_string(v) + " is too large (at most " +
                              std::to_string(limits::kMaxBytes) + " bytes, 1 PiB)");
    out = neg ? -v : v;
    return true;
  }

  // Duration expressions are kept as text (the simulator evaluates them); here they are checked
  // with the same grammar (duration_expression.h), and the tokens they span are skipped.
  bool parseDuration(std::uint32_t start, std::uint32_t& end) {
    auto e = DurationExpression::parse(text_.substr(start), DurationExpression::Extent::Prefix);
    if (!e) {
      const Diagnostic& d = e.error();
      const std::uint32_t errAt = start + static_cast<std::uint32_t>(std::max(0, d.location.column - 1));
      std::string hint;
      if (d.code == "duration.unknown-name") {
        std::string_view rest = text_.substr(errAt);
        size_t n = 0;
        while (n < rest.size() && (std::isalnum(static_cast<unsigned char>(rest[n])) || rest[n] == '_')) ++n;
        hint = suggest(rest.substr(0, n), {"F", "B", "I", "W", "R", "O", "min", "max"});
      }
      sink_.error(errAt, "dsl.syntax", d.message, std::move(hint));
      return false;
    }
    end = start + static_cast<std::uint32_t>(e->length());
    while (!at(Tok::End) && cur().offset < end) {
      if (cur().offset + cur().length > end)
        return fail(cur(), "'" + std::string(txt(cur()).substr(0, 40)) +
                               "' does not belong in a duration expression");
      advance();
    }
    return true;
  }

  // --------------------------------------------------------------------------------------------
  // Integer expressions (indices into prog_.exprs; -1 after an error)

  std::int32_t add(Expr e) {
    prog_.exprs.push_back(std::move(e));
    return static_cast<std::int32_t>(prog_.exprs.size() - 1);
  }
  // Left-associative chains (1 + 1 + ... + 1) grow trees without parser recursion; their
  // height is bounded here so that evaluation cannot exhaust the stack.
  std::int32_t binary(ExprOp op, std::uint32_t off, std::int32_t a, std::int32_t b) {
    Expr e;
    e.op = op;
    e.offset = off;
    e.a = a;
    e.b = b;
    auto height = [&](std::int32_t i) { return i < 0 ? 0 : prog_.exprs[static_cast<size_t>(i)].depth; };
    e.depth = 1 + std::max(height(a), height(b));
    if (e.depth > kMaxExprHeight) {
      sink_.error(off, "dsl.syntax",
                  "expression too long (more than " + std::to_string(kMaxExprHeight) + " operators deep)");
      return -1;
    }
    return add(std::move(e));
  }

  // The keyword at the cursor opens a statement of kind k: consume it and note where it began.
  Stmt startStmt(StmtKind k) {
    Stmt s;
    s.kind = k;
    s.offset = cur().offset;
    advance();
    return s;
  }

  // Parses an expression into `slot`; false (the error already reported) when it fails.
  bool expr(std::int32_t& slot) {
    slot = parseExpr();
    return slot >= 0;
  }

  std::int32_t parseExpr() {
    if (depth_ >= kMaxDepth) {
      fail(cur(), "expression nested too deeply (limit " + std::to_string(kMaxDepth) + ")");
      return -1;
    }
    ++depth_;
    std::int32_t r = parseOr();
    --depth_;
    return r;
  }
  // Left-associative binary levels: `operand (op operand)*`, where opAt names the operator at
  // the current token (nullopt: none, the level ends).
  template <typename OpAt>
  std::int32_t leftAssoc(std::int32_t (Parser::*operand)(), OpAt opAt) {
    std::int32_t a = (this->*operand)();
    while (a >= 0) {
      const std::optional<ExprOp> op = opAt();
      if (!op) break;
      const std::uint32_t off = cur().offset;
      advance();
      const std::int32_t b = (this->*operand)();
      if (b < 0) return -1;
      a = binary(*op, off, a, b);
    }
    return a;
  }
  // A prefix operator applied to `self` again ("not not x", "- -x"), nesting bounded.
  std::int32_t prefix(ExprOp op, std::int32_t (Parser::*self)()) {
    const std::uint32_t off = cur().offset;
    advance();
    if (depth_ >= kMaxDepth) {
      fail(cur(), "expression nested too deeply");
      return -1;
    }
    ++depth_;
    const std::int32_t a = (this->*self)();
    --depth_;
    if (a < 0) return -1;
    return binary(op, off, a, -1);
  }
  std::optional<ExprOp> wordOp(std::string_view word, ExprOp op) const {
    return atWord(word) ? std::optional<ExprOp>(op) : std::nullopt;
  }

  std::int32_t parseOr() {
    return leftAssoc(&Parser::parseAnd, [&] { return wordOp("or", ExprOp::Or); });
  }
  std::int32_t parseAnd() {
    return leftAssoc(&Parser::parseNot, [&] { return wordOp("and", ExprOp::And); });
  }
  std::int32_t parseNot() { return atWord("not") ? prefix(ExprOp::Not, &Parser::parseNot) : parseCompare(); }
  std::int32_t parseCompare() {
    std::int32_t a = parseSum();
    if (a < 0) return -1;
    ExprOp op;
    switch (cur().type) {
      case Tok::EqEq:
        op = ExprOp::Eq;
        break;
      case Tok::NotEq:
        op = ExprOp::Ne;
        break;
      case Tok::Lt:
        op = ExprOp::Lt;
        break;
      case Tok::Le:
        op = ExprOp::Le;
        break;
      case Tok::Gt:
        op = ExprOp::Gt;
        break;
      case Tok::Ge:
        op = ExprOp::Ge;
        break;
      case Tok::Assign:
        fail(cur(), "'=' assigns; compare with '=='");
        return -1;
      default:
        return a;
    }
    std::uint32_t off = cur().offset;
    advance();
    std::int32_t b = parseSum();
    if (b < 0) return -1;
    return binary(op, off, a, b);
  }
  std::int32_t parseSum() {
    return leftAssoc(&Parser::parseProduct, [&]() -> std::optional<ExprOp> {
      if (at(Tok::Plus)) return ExprOp::Add;
      if (at(Tok::Minus)) return ExprOp::Sub;
      return std::nullopt;
    });
  }
  std::int32_t parseProduct() {
    return leftAssoc(&Parser::parseUnary, [&]() -> std::optional<ExprOp> {
      if (at(Tok::Star)) return ExprOp::Mul;
      if (at(Tok::Slash)) return ExprOp::Div;
      if (at(Tok::Percent)) return ExprOp::Mod;
      return std::nullopt;
    });
  }
  std::int32_t parseUnary() {
    return at(Tok::Minus) ? prefix(ExprOp::Neg, &Parser::parseUnary) : parsePrimary();
  }
  std::int32_t parsePrimary() {
    const Token& t = cur();
    if (t.type == Tok::Int) {
      Expr e;
      e.op = ExprOp::Int;
      e.offset = t.offset;
      e.value = t.value;
      advance();
      return add(std::move(e));
    }
    if (t.type == Tok::Float) {
      fail(t, "only integers are allowed here (fractions belong in kind durations)");
      return -1;
    }
    if (t.type == Tok::LParen) {
      advance();
      std::int32_t e = parseExpr();
      if (e < 0) return -1;
      if (!expect(Tok::RParen, "')'")) return -1;
      return e;
    }
    if (t.type == Tok::Ident) {
      std::string_view n = txt(t);
      if (isKeyword(n)) {
        fail(t, "expected an expression, found keyword '" + std::string(n) + "'");
        return -1;
      }
      Expr e;
      e.offset = t.offset;
      e.name = n;
      advance();
      if ((n == "ready" || n == "count") && at(Tok::LParen)) {
        e.op = n == "ready" ? ExprOp::Ready : ExprOp::Count;
        advance();
        if (!parseKindSpec(e)) return -1;
        if (!expect(Tok::RParen, "')'")) return -1;
        prog_.usesCursors = true;
        return add(std::move(e));
      }
      if (at(Tok::LParen) && !cur().lineStart) {
        e.op = ExprOp::Call;
        if (!isBuiltinFunction(n)) {
          fail(t, "unknown function '" + std::string(n.substr(0, 40)) + "'",
               suggest(n, {"min", "max", "abs", "stage", "device_of", "chunk_of", "nstages"}));
          return -1;
        }
        if (!parseArgs(e.args)) return -1;
        for (auto a : e.args) e.depth = std::max(e.depth, 1 + prog_.exprs[static_cast<size_t>(a)].depth);
        if (e.depth > kMaxExprHeight) {
          fail(t, "expression too long (more than " + std::to_string(kMaxExprHeight) + " operators deep)");
          return -1;
        }
        return add(std::move(e));
      }
      e.op = ExprOp::Var;
      return add(std::move(e));
    }
    fail(t, "expected an expression, found " + found(t));
    return -1;
  }
};

}  // namespace

Program parseProgram(std::string_view text, DiagSink& sink) {
  Parser p(text, sink);
  return p.run();
}

}  // namespace ps::core::dsl
