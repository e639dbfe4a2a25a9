#include "pipestudio/core/model/schedule.h"

#include <gtest/gtest.h>

using namespace ps::core;

TEST(Pipeline, LinearPlacementOneStagePerDevice) {
  auto p = Pipeline::make(4, 4, 8, PlacementKind::Linear);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->stageToDevice, (std::vector<int>{0, 1, 2, 3}));
}

TEST(Pipeline, InterleavedIsStageModDevices) {
  auto p = Pipeline::make(2, 6, 4, PlacementKind::Interleaved);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->stageToDevice, (std::vector<int>{0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(p->stagesOn(1), (std::vector<int>{1, 3, 5}));
}

TEST(Pipeline, VShapeGoesDownThenUp) {
  auto p = Pipeline::make(3, 6, 4, PlacementKind::VShape);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->stageToDevice, (std::vector<int>{0, 1, 2, 2, 1, 0}));
}

TEST(Pipeline, RefusesSizesItCannotServe) {
  auto p = Pipeline::make(4, 6, 4, PlacementKind::VShape);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("multiple of 2 x devices"), std::string::npos);
  EXPECT_FALSE(Pipeline::make(0, 1, 1, PlacementKind::Linear).ok());
  EXPECT_FALSE(Pipeline::makeExplicit(2, 4, {0, 2}).ok());
}

TEST(Schedule, KindNamesRoundTrip) {
  for (int k = 0; k < static_cast<int>(OpKind::kBuiltinCount); ++k) {
    auto kind = static_cast<OpKind>(k);
    auto back = builtinKindFromName(builtinKindName(kind));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, kind);
  }
  EXPECT_FALSE(builtinKindFromName("X").has_value());
}

TEST(Schedule, UserKindsResolveByName) {
  Schedule s;
  s.userKinds.push_back(UserKind{"ALLREDUCE", true, "0.5*W", {}, {"W"}, {}});
  auto k = s.kindFromName("ALLREDUCE");
  ASSERT_TRUE(k.has_value());
  EXPECT_TRUE(isUserKind(*k));
  EXPECT_EQ(s.kindName(*k), "ALLREDUCE");
  EXPECT_EQ(s.opName(Op{*k, 2, -1}), "ALLREDUCE@s2");
  EXPECT_EQ(s.opName(Op{OpKind::F, 1, 3}), "F3@s1");
}

TEST(Diagnostic, FormatsLikeACompilerWithCaret) {
  Diagnostic d = makeError("dsl.unknown-kind", "unknown op kind 'X'", {"a.pipe", 2, 3});
  d.hint = "did you mean W?";
  std::string src = "devices 2\n  X3 F1\n";
  std::string out = formatDiagnostic(d, &src);
  EXPECT_EQ(out, "a.pipe:2:3: error: unknown op kind 'X'\n    X3 F1\n    ^\n  hint: did you mean W?\n");
}
