// Duration expressions: one recursive-descent parser into a post-order node list, evaluated
// without recursion (a long sum is a deep tree).
#include "pipestudio/core/model/duration_expression.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>

namespace ps::core {

namespace {

constexpr int kMaxNesting = 200;  // parentheses, min/max and signs; bounds the parser's recursion

bool isIdentStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool isIdentChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

}  // namespace

class DurationParser {
 public:
  using Op = DurationExpression::Op;
  using Node = DurationExpression::Node;

  explicit DurationParser(std::string_view t) : t_(t) {}

  Result<DurationExpression> run(DurationExpression::Extent extent) {
    skip();
    if (pos_ >= t_.size() && extent == DurationExpression::Extent::Whole) {
      out_.nodes_.push_back(Node{});  // no expression: takes no time
      return std::move(out_);
    }
    const std::int32_t root = sum(0);
    if (root < 0) return error_;
    skip();
    if (extent == DurationExpression::Extent::Whole && pos_ < t_.size())
      return fail(pos_, "unexpected '" + std::string(1, t_[pos_]) + "' after the expression");
    out_.length_ = end_;
    return std::move(out_);
  }

 private:
  Diagnostic fail(std::size_t at, std::string message, std::string code = "duration.syntax") {
    SourceLocation loc;
    loc.column = static_cast<int>(at) + 1;
    error_ = makeError(std::move(code), std::move(message), loc);
    return error_;
  }
  void skip() {
    for (;;) {
      while (pos_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[pos_]))) ++pos_;
      if (pos_ < t_.size() && t_[pos_] == '#') {
        while (pos_ < t_.size() && t_[pos_] != '\n') ++pos_;
        continue;
      }
      return;
    }
  }
  bool atChar(char c) {
    skip();
    return pos_ < t_.size() && t_[pos_] == c;
  }
  std::int32_t push(Node n) {
    out_.nodes_.push_back(n);
    return static_cast<std::int32_t>(out_.nodes_.size() - 1);
  }
  std::int32_t binary(Op op, std::int32_t a, std::int32_t b, std::size_t at) {
    if (a < 0 || b < 0) return -1;
    return push(Node{op, 0, a, b, static_cast<std::uint32_t>(at)});
  }
  std::string found() {
    skip();
    if (pos_ >= t_.size()) return "end of input";
    std::size_t e = pos_ + 1;
    while (isIdentChar(t_[pos_]) && e < t_.size() && isIdentChar(t_[e])) ++e;
    return "'" + std::string(t_.substr(pos_, std::min<std::size_t>(e - pos_, 40))) + "'";
  }
  bool expect(char c) {
    if (atChar(c)) {
      ++pos_;
      end_ = pos_;
      return true;
    }
    fail(pos_, "expected '" + std::string(1, c) + "', found " + found());
    return false;
  }

  // `operand (op operand)*`, left-associative; ops[k] is the operator character of nodes[k].
  template <typename Operand>
  std::int32_t leftAssoc(std::string_view ops, const Op (&nodes)[2], Operand operand) {
    std::int32_t v = operand();
    while (v >= 0) {
      skip();
      const std::size_t k = pos_ < t_.size() ? ops.find(t_[pos_]) : std::string_view::npos;
      if (k == std::string_view::npos) break;
      const std::size_t at = pos_++;
      v = binary(nodes[k], v, operand(), at);
    }
    return v;
  }
  std::int32_t sum(int depth) {
    return leftAssoc("+-", {Op::Add, Op::Sub}, [&] { return product(depth); });
  }
  std::int32_t product(int depth) {
    return leftAssoc("*/", {Op::Mul, Op::Div}, [&] { return unary(depth); });
  }
  std::int32_t unary(int depth) {
    if (depth > kMaxNesting) return fail(pos_, "duration expression nested too deeply"), -1;
    if (atChar('-') || atChar('+')) {
      const std::size_t at = pos_;
      const bool neg = t_[pos_++] == '-';
      const std::int32_t v = unary(depth + 1);
      if (v < 0 || !neg) return v;
      return push(Node{Op::Neg, 0, v, -1, static_cast<std::uint32_t>(at)});
    }
    return primary(depth);
  }
  std::int32_t primary(int depth) {
    skip();
    const std::size_t at = pos_;
    if (pos_ >= t_.size() || !(std::isdigit(static_cast<unsigned char>(t_[pos_])) || t_[pos_] == '.' ||
                               t_[pos_] == '(' || isIdentStart(t_[pos_])))
      return fail(at, "expected a number, F, B, I, W, R, O, min, max or '(', found " + found()), -1;
    if (t_[pos_] == '(') {
      ++pos_;
      const std::int32_t v = sum(depth + 1);
      if (v < 0 || !expect(')')) return -1;
      return v;
    }
    if (isIdentStart(t_[pos_])) {
      while (pos_ < t_.size() && isIdentChar(t_[pos_])) ++pos_;
      const std::string_view id = t_.substr(at, pos_ - at);
      static constexpr std::pair<std::string_view, Op> kTimes[] = {{"F", Op::F}, {"B", Op::B}, {"I", Op::I},
                                                                   {"W", Op::W}, {"R", Op::R}, {"O", Op::O}};
      for (const auto& [name, op] : kTimes)
        if (id == name) {
          end_ = pos_;
          return push(Node{op, 0, -1, -1, static_cast<std::uint32_t>(at)});
        }
      if ((id == "min" || id == "max") && atChar('(')) {
        ++pos_;
        const std::int32_t a = sum(depth + 1);
        if (a < 0 || !expect(',')) return -1;
        const std::int32_t b = sum(depth + 1);
        if (b < 0 || !expect(')')) return -1;
        return binary(id == "min" ? Op::Min : Op::Max, a, b, at);
      }
      return fail(at,
                  "unknown name '" + std::string(id.substr(0, 40)) +
                      "' (a duration uses numbers, the stage's times F, B, I, W, R, O, and min/max)",
                  "duration.unknown-name"),
             -1;
    }
    // A number: digits, an optional fraction and an optional exponent.
    auto digits = [&] {
      while (pos_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[pos_]))) ++pos_;
    };
    digits();
    if (pos_ < t_.size() && t_[pos_] == '.') {
      ++pos_;
      digits();
    }
    if (pos_ < t_.size() && (t_[pos_] == 'e' || t_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < t_.size() && (t_[pos_] == '+' || t_[pos_] == '-')) ++pos_;
      digits();
    }
    // A name glued to the number ("2W") is not a product.
    while (pos_ < t_.size() && isIdentChar(t_[pos_])) ++pos_;
    const std::string num(t_.substr(at, pos_ - at));
    char* stop = nullptr;
    const double v = std::strtod(num.c_str(), &stop);
    if (stop != num.c_str() + num.size()) return fail(at, "bad number '" + num.substr(0, 40) + "'"), -1;
    end_ = pos_;
    return push(Node{Op::Num, v, -1, -1, static_cast<std::uint32_t>(at)});
  }

  std::string_view t_;
  std::size_t pos_ = 0;
  std::size_t end_ = 0;  // just past the last character of the expression so far
  DurationExpression out_;
  Diagnostic error_;
};

Result<DurationExpression> DurationExpression::parse(std::string_view text, Extent extent) {
  return DurationParser(text).run(extent);
}

Result<double> DurationExpression::evaluate(const StageCost& c) const {
  std::vector<double> v(nodes_.size(), 0.0);
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    const double a = n.a >= 0 ? v[static_cast<std::size_t>(n.a)] : 0;
    const double b = n.b >= 0 ? v[static_cast<std::size_t>(n.b)] : 0;
    switch (n.op) {
      case Op::Num:
        v[i] = n.value;
        break;
      case Op::F:
        v[i] = c.F;
        break;
      case Op::B:
        v[i] = c.B;
        break;
      case Op::I:
        v[i] = c.I;
        break;
      case Op::W:
        v[i] = c.W;
        break;
      case Op::R:
        v[i] = c.R;
        break;
      case Op::O:
        v[i] = c.O;
        break;
      case Op::Neg:
        v[i] = -a;
        break;
      case Op::Add:
        v[i] = a + b;
        break;
      case Op::Sub:
        v[i] = a - b;
        break;
      case Op::Mul:
        v[i] = a * b;
        break;
      case Op::Div:
        if (b == 0) {
          SourceLocation loc;
          loc.column = static_cast<int>(n.offset) + 1;
          return makeError("duration.division", "division by zero", loc);
        }
        v[i] = a / b;
        break;
      case Op::Min:
        v[i] = std::min(a, b);
        break;
      case Op::Max:
        v[i] = std::max(a, b);
        break;
    }
  }
  return v.empty() ? 0.0 : v.back();
}

Result<double> evaluateDurationExpression(std::string_view expr, const StageCost& stage) {
  auto e = DurationExpression::parse(expr);
  auto v = e ? e->evaluate(stage) : Result<double>(e.error());
  if (v) return v;
  return makeError("simulate.duration", "duration expression '" + std::string(expr) +
                                            "': " + v.error().message + " at column " +
                                            std::to_string(v.error().location.column));
}

}  // namespace ps::core
