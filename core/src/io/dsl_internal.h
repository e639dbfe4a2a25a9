#pragma once
// Internals of the .pipe DSL shared by the lexer, parser, expander and printer.
// Tokens and AST nodes refer to the source text by byte offset; line and column are computed
// only when a diagnostic is made, so the hot path (long explicit op lists) stays cheap.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/model/result.h"
#include "pipestudio/core/model/schedule.h"

namespace ps::core::dsl {

// ---------------------------------------------------------------------------------------------
// Diagnostics sink: offsets become file:line:col lazily.

class SourceMap {
 public:
  explicit SourceMap(std::string_view text) : text_(text) {}
  // 1-based line and column of a byte offset.
  void locate(std::uint32_t offset, int& line, int& column) const;

 private:
  std::string_view text_;
  mutable std::vector<std::uint32_t> lineStarts_;
};

class DiagSink {
 public:
  DiagSink(std::string_view text, const DslOptions& options) : map_(text), options_(options) {}
  // Adds an error at a byte offset; returns false once maxErrors is reached (callers stop).
  // Repeats of the same message at the same place (an error inside a loop) are dropped.
  bool error(std::uint32_t offset, std::string code, std::string message, std::string hint = {});
  // An error with no place in the text (e.g. a bad override).
  bool errorNoLocation(std::string code, std::string message, std::string hint = {});
  bool full() const { return static_cast<int>(diags_.size()) >= std::max(1, options_.maxErrors); }
  bool any() const { return !diags_.empty(); }
  SourceLocation location(std::uint32_t offset) const {
    SourceLocation loc;
    loc.file = options_.filename;
    map_.locate(offset, loc.line, loc.column);
    return loc;
  }
  Diagnostics take() { return std::move(diags_); }
  const Diagnostics& diags() const { return diags_; }

 private:
  SourceMap map_;
  const DslOptions& options_;
  Diagnostics diags_;
  std::vector<std::uint32_t> offsets_;
};

// "did you mean X?" over candidates with a small edit distance; empty when nothing is close.
std::string suggest(std::string_view word, const std::vector<std::string_view>& candidates);
int editDistance(std::string_view a, std::string_view b);

// ---------------------------------------------------------------------------------------------
// Lexer

enum class Tok : std::uint8_t {
  End,
  Ident,   // [A-Za-z_][A-Za-z0-9_]* with an optional op qualifier suffix "@s12" / "@c1"
  Int,     // decimal digits; value in Token::value (overflow reported by the lexer)
  Float,   // digits '.' digits (only meaningful in duration expressions)
  String,  // "..." with \" \\ \n \t escapes; Token::text is the raw quoted slice
  LParen,
  RParen,
  LBrace,
  RBrace,
  Comma,
  Colon,
  Semicolon,
  At,
  Star,
  Plus,
  Minus,
  Slash,
  Percent,
  Assign,
  EqEq,
  NotEq,
  Lt,
  Le,
  Gt,
  Ge,
  DotDot,
  Bad,  // a character the language does not use (already reported)
};

struct Token {
  Tok type = Tok::End;
  bool lineStart = false;  // first token on its line (used for error recovery)
  std::uint32_t offset = 0;
  std::uint32_t length = 0;
  std::int64_t value = 0;
};

// Tokenises the whole text (errors for bad characters / malformed numbers go to the sink).
std::vector<Token> lex(std::string_view text, DiagSink& sink);
std::string_view tokenText(std::string_view text, const Token& t);
std::string_view tokName(Tok t);
// Decodes a String token's escapes.
std::string unquote(std::string_view quoted);

// ---------------------------------------------------------------------------------------------
// AST

enum class ExprOp : std::uint8_t {
  Int,
  Var,
  Neg,
  Not,
  Add,
  Sub,
  Mul,
  Div,
  Mod,
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  And,
  Or,
  Call,
  Ready,
  Count  // ready(K@q), count(K@q): queries about op kinds
};

enum class QualMode : std::uint8_t;

struct Expr {
  ExprOp op = ExprOp::Int;
  std::uint32_t offset = 0;
  std::int64_t value = 0;  // Int
  std::string_view name;   // Var, Call
  std::int32_t a = -1, b = -1;
  std::int32_t depth = 1;          // height of the tree below (bounds the evaluator's recursion)
  std::vector<std::int32_t> args;  // Call
  // Ready / Count: the kind and its optional stage qualifier (value or expression index).
  std::uint16_t kind = 0;
  QualMode qualMode{};
  std::int32_t qual = 0;
};

// How an op item names its micro-batch and its stage.
enum class MbMode : std::uint8_t { None, Literal, Expr, Next };
enum class QualMode : std::uint8_t { None, StageLiteral, ChunkLiteral, StageExpr, ChunkExpr };

// One op in an op list. Literal items (the whole explicit form) carry values; computed ones
// carry expression indices in mb / qual.
struct OpItem {
  std::uint16_t kind = 0;
  MbMode mbMode = MbMode::None;
  QualMode qualMode = QualMode::None;
  bool pairFirst = false;  // this item and the next form an overlapped pair
  bool optional = false;   // `next?`: emit nothing when no micro-batch is left
  std::int32_t mb = 0;
  std::int32_t qual = 0;
  std::uint32_t offset = 0;
};

enum class StmtKind : std::uint8_t {
  Header,
  Let,
  Assign,
  Device,
  DeviceAll,
  Ops,
  For,
  Repeat,
  If,
  Call,
  Assert,
  Greedy
};

enum class HeaderWord : std::uint8_t {
  Name,
  Devices,
  Stages,
  Microbatches,
  Placement,
  Profile,
  Partition,
  Route,
  Blocks
};

struct Stmt {
  StmtKind kind = StmtKind::Ops;
  std::uint32_t offset = 0;
  std::string_view name;                   // Let/Assign/For variable, Call template
  std::int32_t e1 = -1, e2 = -1, e3 = -1;  // expressions (For: from, to, step; If: cond; ...)
  std::vector<Stmt> body;
  std::vector<Stmt> elseBody;
  std::vector<OpItem> ops;         // Ops
  std::vector<std::int32_t> args;  // Call
  // Header
  HeaderWord header = HeaderWord::Name;
  std::string text;  // Name / Profile
  PlacementKind placement = PlacementKind::Linear;
  std::vector<std::int64_t> ints;  // explicit placement list, partition
  std::vector<std::uint32_t> intOffsets;
  // Route (micro-batches e1..e2) and Blocks: the listed items, each an expression (second -1)
  // or a range first..second (second excluded).
  std::vector<std::pair<std::int32_t, std::int32_t>> items;
};

struct Template {
  std::string_view name;
  std::uint32_t offset = 0;
  std::vector<std::string_view> params;
  std::vector<Stmt> body;
};

struct Program {
  std::vector<Expr> exprs;
  std::vector<Stmt> top;
  std::vector<Template> templates;
  std::vector<UserKind> userKinds;
  std::vector<std::uint32_t> userKindOffsets;
  std::vector<std::string_view> topLets;  // names overridable by DslOptions::overrides
  bool usesCursors = false;
};

// Parses text into a program; syntax errors go to the sink (parsing continues after them).
Program parseProgram(std::string_view text, DiagSink& sink);

// Runs a program and returns the explicit schedule; errors go to the sink.
Schedule expandProgram(const Program& program, std::string_view text, const DslOptions& options,
                       DiagSink& sink);

// Reserved words of the language (they cannot name variables, templates or kinds).
bool isKeyword(std::string_view word);
const std::vector<std::string_view>& keywords();
bool isBuiltinName(std::string_view word);  // devices, stages, microbatches, d
bool isBuiltinFunction(std::string_view word);

}  // namespace ps::core::dsl
