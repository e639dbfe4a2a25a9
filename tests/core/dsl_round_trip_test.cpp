// The printer's round trip over every generated schedule kind, and the bundled example's
// user kind.
#include <gtest/gtest.h>

#include <string>

#include "fixtures/files.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/planning/generators.h"

using namespace ps::core;
using namespace ps::test;

TEST(DslRoundTrip, EveryGeneratedKindPrintsAndParsesBack) {
  int checked = 0;
  for (ScheduleKind k : allScheduleKinds()) {
    for (int D : {1, 2, 3, 5}) {
      for (int M : {1, D, 2 * D + 2}) {
        GeneratorOptions g;
        g.devices = D;
        g.microbatches = M;
        auto s = generateSchedule(k, g);
        if (!s.ok()) continue;
        std::string text = printDsl(*s);
        auto back = parseDsl(text);
        ASSERT_TRUE(back.ok()) << scheduleKindName(k) << "\n" << formatDiagnostics(back.errors(), &text);
        EXPECT_EQ(*back, *s) << scheduleKindName(k) << " D=" << D << " M=" << M;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 60);
}

TEST(DslRoundTrip, ExampleDeclaresAndUsesItsAllReduceKind) {
  auto s = parseDsl(readFile(resource("examples/example.pipe")));
  ASSERT_TRUE(s.ok()) << formatDiagnostics(s.errors());
  ASSERT_EQ(s->userKinds.size(), 1u);
  EXPECT_EQ(s->userKinds[0].name, "ALLREDUCE");
  EXPECT_TRUE(s->userKinds[0].stageLevel);
  EXPECT_EQ(s->userKinds[0].after, (std::vector<std::string>{"W"}));
  EXPECT_EQ(s->pipeline.devices, 4);
  const auto kind = static_cast<OpKind>(kFirstUserKind);
  for (int d = 0; d < 4; ++d) {
    const auto& ops = s->devices[static_cast<size_t>(d)];
    ASSERT_FALSE(ops.empty());
    // The all-reduce is the stage's last op, after every one of its W's.
    EXPECT_EQ(ops.back().first, (Op{kind, d, -1}));
    int w = 0, i = 0;
    for (const Step& st : ops) {
      w += st.first.kind == OpKind::W;
      i += st.first.kind == OpKind::I;
    }
    EXPECT_EQ(w, s->pipeline.microbatches);
    EXPECT_EQ(i, s->pipeline.microbatches);
  }
  auto again = parseDsl(printDsl(*s));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *s);
}
