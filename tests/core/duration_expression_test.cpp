// One grammar for duration expressions: what the DSL accepts the simulator evaluates, and
// what one rejects the other rejects too.
#include "pipestudio/core/model/duration_expression.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/io/dsl.h"

using namespace ps::core;

namespace {

StageCost costs() {
  StageCost c;
  c.F = 2, c.B = 6, c.I = 4, c.W = 2, c.R = 2.5, c.O = 0.5;
  return c;
}

// The DSL's view of an expression: does a kind declaring it parse?
bool dslAccepts(const std::string& expr) {
  return parseDsl("devices 1\nmicrobatches 1\nkind X duration = " + expr + " after F\ndevice 0: F0 X0 B0\n")
      .ok();
}

struct Case {
  const char* text;
  bool valid;
  double value;  // when valid
};

class DurationGrammar : public ::testing::TestWithParam<Case> {};

}  // namespace

TEST_P(DurationGrammar, TheDslAndTheSimulatorAgree) {
  const Case& c = GetParam();
  auto v = evaluateDurationExpression(c.text, costs());
  EXPECT_EQ(v.ok(), c.valid) << c.text << (v.ok() ? "" : ": " + v.error().message);
  EXPECT_EQ(dslAccepts(c.text), c.valid) << c.text;
  if (c.valid && v.ok()) {
    EXPECT_DOUBLE_EQ(*v, c.value) << c.text;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Expressions, DurationGrammar,
    ::testing::Values(Case{"F + 2 * (I - W) / 4", true, 3}, Case{"0.5 * W + 0.1", true, 1.1},
                      Case{"max(F, 2) + min(B, I)", true, 6}, Case{"min(max(R, 1), O * 10)", true, 2.5},
                      Case{"-R + 1e1", true, 7.5}, Case{"+F", true, 2}, Case{"- -F", true, 2},
                      Case{"2.5e-1 * B", true, 1.5}, Case{"(((O)))", true, 0.5}, Case{"F +", false, 0},
                      Case{"(F", false, 0}, Case{"max(F)", false, 0}, Case{"Q * 2", false, 0},
                      Case{"min F", false, 0}, Case{"2W", false, 0}, Case{"1e", false, 0}));

TEST(DurationExpression, PrefixStopsWhereTheExpressionEnds) {
  auto e =
      DurationExpression::parse("0.5 * W + 0.1 memory transient 2MiB", DurationExpression::Extent::Prefix);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->length(), std::string("0.5 * W + 0.1").size());
  EXPECT_FALSE(DurationExpression::parse("", DurationExpression::Extent::Prefix).ok());
  auto empty = DurationExpression::parse("");
  ASSERT_TRUE(empty.ok());
  EXPECT_DOUBLE_EQ(empty->evaluate(costs()).value(), 0);
}

TEST(DurationExpression, ErrorsNameTheColumn) {
  auto e = DurationExpression::parse("F + Wx");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().code, "duration.unknown-name");
  EXPECT_EQ(e.error().location.column, 5);
  auto d = DurationExpression::parse("F / (W - 2)");
  ASSERT_TRUE(d.ok());
  auto v = d->evaluate(costs());
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().location.column, 3);
  // The DSL reports the same place in its own file coordinates, with a suggestion.
  auto s = parseDsl("kind AR duration = F + Wx\n");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().location.line, 1);
  EXPECT_EQ(s.error().location.column, 24);
  EXPECT_EQ(s.error().hint, "did you mean W?");
}

TEST(DurationExpression, ALongSumIsNoDeepRecursion) {
  std::string text = "F";
  for (int i = 0; i < 200000; ++i) text += " + 1";
  auto e = DurationExpression::parse(text);
  ASSERT_TRUE(e.ok());
  EXPECT_DOUBLE_EQ(e->evaluate(costs()).value(), 200002);
  std::string nested(500, '(');
  EXPECT_FALSE(DurationExpression::parse(nested + "F" + std::string(500, ')')).ok());
}

TEST(DurationExpression, MinAndMaxRunInTheSimulator) {
  // The DSL always accepted min/max; the simulator now evaluates them with the same grammar.
  const Schedule s = parseDsl(
                         "devices 1\nmicrobatches 1\nkind CKPT duration = max(F, 2) + min(W, 0.5) after "
                         "F\ndevice 0: F0 CKPT0 B0\n")
                         .value();
  const Timeline t =
      simulate(s, makeSimulationModel(s, uniformCostProfile("F=3,B=2,W=1", 1).value()).value()).value();
  const auto ckpt = std::find_if(t.ops.begin(), t.ops.end(),
                                 [&](const TimelineOp& op) { return s.opName(op.op) == "CKPT0@s0"; });
  ASSERT_NE(ckpt, t.ops.end());
  EXPECT_DOUBLE_EQ(ckpt->duration(), 3.5);
}
