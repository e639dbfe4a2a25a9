// Explicit form of the .pipe DSL: header, op tokens, pairs, kinds, and the canonical printer.
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "pipestudio/core/io/dsl.h"

using namespace ps::core;

namespace {

Schedule parseOk(std::string_view text) {
  auto r = parseDsl(text);
  EXPECT_TRUE(r.ok()) << formatDiagnostics(r.errors());
  return r.ok() ? r.value() : Schedule{};
}

Op op(OpKind k, int stage, int mb) {
  return Op{k, stage, mb};
}
Step single(OpKind k, int stage, int mb) {
  return Step{op(k, stage, mb), std::nullopt};
}

// A text the parser refuses; its first error says `says`, is at `line`, hints `hint` (each
// checked when given).
struct Refusal {
  const char* text;
  const char* says = nullptr;
  std::optional<int> line;
  const char* hint = nullptr;
};

void expectRefusals(const std::vector<Refusal>& cases) {
  for (const Refusal& c : cases) {
    SCOPED_TRACE(c.text);
    auto r = parseDsl(c.text);
    ASSERT_FALSE(r.ok());
    if (c.line) {
      EXPECT_EQ(r.error().location.line, *c.line);
    }
    if (c.says) {
      EXPECT_NE(r.error().message.find(c.says), std::string::npos);
    }
    if (c.hint) {
      EXPECT_EQ(r.error().hint, c.hint);
    }
  }
}

}  // namespace

TEST(DslExplicit, HeaderAndOneStagePerDevice) {
  Schedule s = parseOk(R"(# a tiny 1F1B
name "tiny"
devices 2
stages 2
microbatches 2
placement linear
device 0: F0 F1 B0 B1
device 1: F0 B0 F1 B1
)");
  EXPECT_EQ(s.name, "tiny");
  EXPECT_EQ(s.pipeline.devices, 2);
  EXPECT_EQ(s.pipeline.stages, 2);
  EXPECT_EQ(s.pipeline.microbatches, 2);
  EXPECT_EQ(s.pipeline.stageToDevice, (std::vector<int>{0, 1}));
  ASSERT_EQ(s.devices.size(), 2u);
  EXPECT_EQ(s.devices[0], (std::vector<Step>{single(OpKind::F, 0, 0), single(OpKind::F, 0, 1),
                                             single(OpKind::B, 0, 0), single(OpKind::B, 0, 1)}));
  // Unqualified ops on device 1 belong to its only stage, 1.
  EXPECT_EQ(s.devices[1][1], single(OpKind::B, 1, 0));
}

TEST(DslExplicit, StageQualifiersOnMultiStageDevices) {
  Schedule s = parseOk(R"(devices 2
stages 4
microbatches 1
placement interleaved
device 0: F0@s0 F0@s2 B0@s2 B0@c0
device 1: F0@s1 F0@c1 B0@s3 B0@s1
)");
  EXPECT_EQ(s.pipeline.stageToDevice, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(s.devices[0][3], single(OpKind::B, 0, 0));  // @c0: first stage of device 0
  EXPECT_EQ(s.devices[1][1], single(OpKind::F, 3, 0));  // @c1: second stage of device 1
}

TEST(DslExplicit, AllBuiltinKindsAndPairs) {
  Schedule s = parseOk(R"(devices 1
stages 1
microbatches 8
device 0: F0 I0 W0 R1 B1 OFFLOAD2 RELOAD2 SEND_F3 RECV_F3 SEND_B4 RECV_B4
  UNSHARD RESHARD REDUCE_GRAD (F7 B3) (F6 I2)
)");
  const auto& d = s.devices[0];
  ASSERT_EQ(d.size(), 16u);
  EXPECT_EQ(d[3], single(OpKind::R, 0, 1));
  EXPECT_EQ(d[5], single(OpKind::Offload, 0, 2));
  EXPECT_EQ(d[10], single(OpKind::RecvB, 0, 4));
  EXPECT_EQ(d[11], single(OpKind::Unshard, 0, -1));
  EXPECT_EQ(d[13], single(OpKind::ReduceGrad, 0, -1));
  EXPECT_TRUE(d[14].overlapped());
  EXPECT_EQ(d[14].first, op(OpKind::F, 0, 7));
  EXPECT_EQ(*d[14].second, op(OpKind::B, 0, 3));
  EXPECT_EQ(s.opCount(), 18u);
}

TEST(DslExplicit, ExplicitPlacementProfilePartition) {
  Schedule s = parseOk(R"(devices 2
microbatches 3
placement explicit 0,1,1,0
profile "profiles/gpt \"small\".json"
partition 3,4,4,5
device 0: F0@s0 F0@s3
device 1: F0@s1 F0@s2
)");
  EXPECT_EQ(s.pipeline.placementKind, PlacementKind::Explicit);
  EXPECT_EQ(s.pipeline.stages, 4);
  EXPECT_EQ(s.pipeline.stageToDevice, (std::vector<int>{0, 1, 1, 0}));
  ASSERT_TRUE(s.profile.has_value());
  EXPECT_EQ(*s.profile, "profiles/gpt \"small\".json");
  EXPECT_EQ(s.partition, (std::vector<int>{3, 4, 4, 5}));
}

TEST(DslExplicit, UserKindDeclarationFillsUserKind) {
  Schedule s = parseOk(R"(devices 1
microbatches 2
kind ALLREDUCE stage_level duration = 0.5 * W + 0.1 memory transient 2MiB delta -1KiB after W before UNSHARD
kind CKPT duration = max(F, 2) after F
device 0: F0 CKPT0 F1 CKPT1 B0 B1 ALLREDUCE
)");
  ASSERT_EQ(s.userKinds.size(), 2u);
  const UserKind& ar = s.userKinds[0];
  EXPECT_EQ(ar.name, "ALLREDUCE");
  EXPECT_TRUE(ar.stageLevel);
  EXPECT_EQ(ar.durationExpr, "0.5 * W + 0.1");
  EXPECT_EQ(ar.memory.transientBytes, 2 * 1024 * 1024);
  EXPECT_EQ(ar.memory.deltaBytes, -1024);
  EXPECT_EQ(ar.after, (std::vector<std::string>{"W"}));
  EXPECT_EQ(ar.before, (std::vector<std::string>{"UNSHARD"}));
  EXPECT_FALSE(s.userKinds[1].stageLevel);
  EXPECT_EQ(s.userKinds[1].durationExpr, "max(F, 2)");
  const auto& d = s.devices[0];
  EXPECT_EQ(d[1].first.kind, static_cast<OpKind>(kFirstUserKind + 1));
  EXPECT_EQ(d[1].first.microbatch, 0);
  EXPECT_EQ(d[6].first.kind, static_cast<OpKind>(kFirstUserKind));
  EXPECT_EQ(d[6].first.microbatch, -1);
  EXPECT_EQ(s.opName(d[6].first), "ALLREDUCE@s0");
}

TEST(DslExplicit, NewlinesInsideOpListsAreFree) {
  Schedule a = parseOk("devices 1\nmicrobatches 3\ndevice 0: F0 F1\n   F2 B0\n\n B1 B2\n");
  Schedule b = parseOk("devices 1 microbatches 3 device 0: F0 F1 F2 B0 B1 B2");
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.devices[0].size(), 6u);
}

TEST(DslExplicit, DefaultsAndEmptyDevices) {
  Schedule s = parseOk("devices 3\nmicrobatches 2\ndevice 1: F0 F1\n");
  EXPECT_EQ(s.pipeline.stages, 3);
  ASSERT_EQ(s.devices.size(), 3u);
  EXPECT_TRUE(s.devices[0].empty());
  EXPECT_EQ(s.devices[1].size(), 2u);
  EXPECT_TRUE(s.devices[2].empty());
}

// ----------------------------------------------------------------------------------------------
// Printer

TEST(DslPrinter, CanonicalFormQualifiesOnlyMultiStageDevices) {
  auto q = Pipeline::make(2, 4, 1, PlacementKind::Interleaved);
  ASSERT_TRUE(q.ok());
  Schedule s;
  s.pipeline = *q;
  s.devices = {{single(OpKind::F, 0, 0), single(OpKind::F, 2, 0)}, {single(OpKind::F, 1, 0)}};
  std::string text = printDsl(s);
  EXPECT_NE(text.find("device 0: F0@s0 F0@s2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("placement interleaved\n"), std::string::npos) << text;

  auto lin = Pipeline::make(2, 2, 3, PlacementKind::Linear);
  ASSERT_TRUE(lin.ok());
  Schedule t;
  t.pipeline = *lin;
  t.devices = {{single(OpKind::F, 0, 2), Step{op(OpKind::F, 0, 1), op(OpKind::B, 0, 0)}},
               {single(OpKind::F, 0, 0), single(OpKind::Unshard, 1, -1)}};
  std::string tt = printDsl(t);
  EXPECT_NE(tt.find("device 0: F2 (F1 B0)\n"), std::string::npos) << tt;
  // An op whose stage is not the device's own still round-trips through a qualifier.
  EXPECT_NE(tt.find("device 1: F0@s0 UNSHARD\n"), std::string::npos) << tt;
}

TEST(DslPrinter, RoundTripPreservesEverything) {
  const char* text = R"(name "round \\ trip"
devices 3
microbatches 4
placement explicit 0,1,2,2,1,0
profile "p.json"
partition 1,2,3,4,5,6
kind AR stage_level duration = 0.5 * W memory delta -67108864 after W, I before RESHARD
kind CK memory transient 5
device 0: F0@s0 F0@s5 (F1@s0 B0@s5) AR@s0 CK3@s5 UNSHARD@s0
device 1: I0@s1 W0@s4
device 2: SEND_F1@s2 RECV_B2@s3 R0@s2 OFFLOAD1@s3 RELOAD1@s3
)";
  Schedule a = parseOk(text);
  std::string printed = printDsl(a);
  auto b = parseDsl(printed);
  ASSERT_TRUE(b.ok()) << formatDiagnostics(b.errors(), &printed);
  EXPECT_EQ(a, *b);
  EXPECT_EQ(printed, printDsl(*b));  // printing is a fixed point
}

TEST(DslPrinter, LongListsWrapAndStillRoundTrip) {
  Schedule s;
  auto p = Pipeline::make(1, 1, 500, PlacementKind::Linear);
  ASSERT_TRUE(p.ok());
  s.pipeline = *p;
  s.devices.resize(1);
  for (int m = 0; m < 500; ++m) s.devices[0].push_back(single(OpKind::F, 0, m));
  for (int m = 0; m < 500; ++m) s.devices[0].push_back(single(OpKind::B, 0, m));
  std::string text = printDsl(s);
  size_t longest = 0, start = 0;
  for (size_t i = 0; i <= text.size(); ++i)
    if (i == text.size() || text[i] == '\n') longest = std::max(longest, i - start), start = i + 1;
  EXPECT_LE(longest, 110u);
  auto r = parseDsl(text);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, s);
}

// ----------------------------------------------------------------------------------------------
// Errors

TEST(DslErrors, UnknownKindPointsAtTokenWithHint) {
  DslOptions o;
  o.filename = "x.pipe";
  auto r = parseDsl("devices 1\nmicrobatches 2\ndevice 0: F0 Wx1 B0\n", o);
  ASSERT_FALSE(r.ok());
  ASSERT_EQ(r.errors().size(), 1u);
  const Diagnostic& d = r.error();
  EXPECT_EQ(d.location.file, "x.pipe");
  EXPECT_EQ(d.location.line, 3);
  EXPECT_EQ(d.location.column, 14);
  EXPECT_EQ(d.hint, "did you mean W?");
  std::string src = "devices 1\nmicrobatches 2\ndevice 0: F0 Wx1 B0\n";
  std::string shown = formatDiagnostic(d, &src);
  EXPECT_EQ(shown.rfind("x.pipe:3:14: error: ", 0), 0u) << shown;
  EXPECT_NE(shown.find("\n  device 0: F0 Wx1 B0\n               ^\n"), std::string::npos) << shown;
}

TEST(DslErrors, ReportsEveryErrorUpToTheLimit) {
  std::string text = "devices 1\nmicrobatches 1\ndevice 0:";
  for (int i = 0; i < 30; ++i) text += " Q" + std::to_string(i);
  auto r = parseDsl(text);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.errors().size(), 30u);
  DslOptions o;
  o.maxErrors = 5;
  auto r5 = parseDsl(text, o);
  ASSERT_FALSE(r5.ok());
  EXPECT_EQ(r5.errors().size(), 5u);
}

TEST(DslErrors, MissingStageOnMultiStageDevice) {
  auto r = parseDsl("devices 2\nstages 4\nplacement interleaved\ndevice 1: F0@s1 F0\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().location.line, 4);
  EXPECT_EQ(r.error().location.column, 17);
  EXPECT_NE(r.error().message.find("device 1 holds stages 1, 3"), std::string::npos) << r.error().message;
}

TEST(DslErrors, StageLevelAndMicrobatchRules) {
  expectRefusals({{.text = "device 0: UNSHARD3", .says = "stage-level"},
                  {.text = "device 0: F", .says = "needs a micro-batch"},
                  {.text = "device 0: F99999999999", .says = "out of range"}});
}

TEST(DslErrors, HeaderProblems) {
  expectRefusals(
      {{.text = "devices 4\nstages 6\nplacement vshape\ndevice 0: F0@s0\n", .says = "V-shape", .line = 3},
       {.text = "devices 2\nplacement diagonal\n", .hint = ""},
       {.text = "devices 2\nplacement lineer\n", .hint = "did you mean linear?"},
       {.text = "devices 0\n", .says = "devices must be in 1.."},
       {.text = "devices 2\ndevice 0: F0\nmicrobatches 3\n", .line = 3},
       {.text = "devices 2\ndevice 2: F0\n", .says = "device 2 is out of range 0..1"}});
}

TEST(DslErrors, BadCharactersAndStrings) {
  auto a = parseDsl("devices 1\ndevice 0: F0 $ B0\nname \"open\n");
  ASSERT_FALSE(a.ok());
  ASSERT_GE(a.errors().size(), 2u);
  EXPECT_EQ(a.errors()[0].location.line, 2);
  EXPECT_EQ(a.errors()[0].location.column, 14);
  EXPECT_EQ(a.errors()[1].location.line, 3);
}

TEST(DslErrors, KindDeclarations) {
  expectRefusals({{.text = "kind AR2 duration = W\n", .says = "digit"},
                  {.text = "kind AR duration = Wx\n", .hint = "did you mean W?"},
                  {.text = "kind AR after Q\n", .says = "after Q"},
                  {.text = "kind F\n"},
                  {.text = "kind AR memory delta 3PiB\n"}});
}
