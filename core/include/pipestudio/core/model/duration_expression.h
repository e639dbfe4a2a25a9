#pragma once
// The one grammar of user kinds' duration expressions (docs/dsl.md, "kind"): the DSL parser
// checks them with it and keeps their text; the simulator evaluates that text with it.
//
//   sum     := product (('+' | '-') product)*
//   product := unary (('*' | '/') unary)*
//   unary   := ('-' | '+') unary | primary
//   primary := number | F | B | I | W | R | O | (min | max) '(' sum ',' sum ')' | '(' sum ')'
//   number  := digits ['.' digits] [('e' | 'E') ['+' | '-'] digits]
//
// F B I W R O are the stage's forward, full backward, input-backward, weight-backward,
// recompute and offload times (ms). Blanks, newlines and '#' comments separate tokens.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/core/model/result.h"

namespace ps::core {

class DurationExpression {
 public:
  // Whole: the text is one expression (empty text = no expression, zero time). Prefix: the
  // expression that starts the text, up to the first character that cannot continue it (the
  // DSL's `duration = EXPR memory ...`); an empty one is an error.
  enum class Extent : std::uint8_t { Whole, Prefix };

  // Errors: code "duration.syntax" (or "duration.unknown-name", the name in the message
  // quoted), location.column = 1-based column of the offending character in `text`.
  static Result<DurationExpression> parse(std::string_view text, Extent extent = Extent::Whole);

  // Characters of the text the expression spans, from the start to its last character.
  std::size_t length() const { return length_; }

  // The value over one stage's costs; errors only for a division by zero (code
  // "duration.division", column of the '/'). Not finite values are the caller's to judge.
  Result<double> evaluate(const StageCost& stage) const;

 private:
  enum class Op : std::uint8_t { Num, F, B, I, W, R, O, Neg, Add, Sub, Mul, Div, Min, Max };
  struct Node {
    Op op = Op::Num;
    double value = 0;
    std::int32_t a = -1, b = -1;  // operands (earlier nodes)
    std::uint32_t offset = 0;     // where the node's operator or operand is in the text
  };
  friend class DurationParser;
  std::vector<Node> nodes_;  // post-order: every operand before the node that uses it
  std::size_t length_ = 0;
};

// Evaluates a user kind's duration expression over one stage's costs (parse + evaluate);
// errors ("simulate.duration") quote the expression and name the column.
Result<double> evaluateDurationExpression(std::string_view expr, const StageCost& stage);

}  // namespace ps::core
