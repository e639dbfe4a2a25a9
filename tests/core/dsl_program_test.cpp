// Programmable form of the .pipe DSL: variables, arithmetic, loops, conditionals, templates,
// cursors, and the errors each of them can produce.
#include <gtest/gtest.h>

#include "pipestudio/core/io/dsl.h"

using namespace ps::core;

namespace {

// A program's header: devices, stages, micro-batches and placement.
std::string header(int devices, int stages, int micro, const char* placement) {
  return "devices " + std::to_string(devices) + "\nstages " + std::to_string(stages) + "\nmicrobatches " +
         std::to_string(micro) + "\nplacement " + placement + "\n";
}

Schedule expandOk(std::string_view text, const DslOptions& o = {}) {
  auto r = parseDsl(text, o);
  std::string src(text);
  EXPECT_TRUE(r.ok()) << formatDiagnostics(r.errors(), &src);
  return r.ok() ? r.value() : Schedule{};
}

// The device's ops as tokens, e.g. "F0 F1@s2 (F3 B1)".
std::string tokens(const Schedule& s, int d) {
  std::string out;
  for (const Step& st : s.devices[static_cast<size_t>(d)]) {
    auto one = [&](const Op& op) {
      std::string t = s.kindName(op.kind);
      if (op.microbatch >= 0) t += std::to_string(op.microbatch);
      if (s.pipeline.stagesOn(d).size() != 1) t += "@s" + std::to_string(op.stage);
      return t;
    };
    if (!out.empty()) out += ' ';
    out += st.second ? "(" + one(st.first) + " " + one(*st.second) + ")" : one(st.first);
  }
  return out;
}

// Evaluates an integer expression through a program: emits F(expr) on one device.
long long value(const std::string& expr) {
  auto r = parseDsl("microbatches 1000000\nlet x = 7\ndevice 0: F(" + expr + ")\n");
  EXPECT_TRUE(r.ok()) << expr << "\n" << formatDiagnostics(r.errors());
  return r.ok() ? r->devices[0][0].first.microbatch : -1;
}

Diagnostic firstError(std::string_view text, const DslOptions& o = {}) {
  auto r = parseDsl(text, o);
  EXPECT_FALSE(r.ok()) << text;
  return r.ok() ? Diagnostic{} : r.error();
}

// The first error of `text`: its code, and a message that says `says`.
Diagnostic expectError(std::string_view text, const std::string& code, const std::string& says) {
  Diagnostic e = firstError(text);
  EXPECT_EQ(e.code, code);
  EXPECT_NE(e.message.find(says), std::string::npos) << e.message;
  return e;
}

}  // namespace

TEST(DslProgram, ArithmeticPrecedenceAndFunctions) {
  EXPECT_EQ(value("1 + 2 * 3"), 7);
  EXPECT_EQ(value("(1 + 2) * 3"), 9);
  EXPECT_EQ(value("x / 2 + x % 2 * 10"), 13);
  EXPECT_EQ(value("20 - 3 - 4"), 13);
  EXPECT_EQ(value("-3 + 10"), 7);
  EXPECT_EQ(value("min(9, x, 8) + max(1, 2)"), 9);
  EXPECT_EQ(value("abs(0 - 5)"), 5);
  EXPECT_EQ(value("(x > 3) + (x == 7) * 10 + (x != 7) * 100 + (x <= 6) * 1000"), 11);
  EXPECT_EQ(value("(1 < 2 and 2 < 1) + (1 < 2 or 2 < 1) * 2 + (not 0) * 4"), 6);
  EXPECT_EQ(value("-7 / 2 + 10"), 7);  // truncates toward zero, as C does
}

TEST(DslProgram, LetDefaultsAndOverrides) {
  const char* text =
      "let chunks = 2\ndevices 2\nstages devices * chunks\nmicrobatches chunks + 1\nplacement interleaved\n";
  Schedule a = expandOk(text);
  EXPECT_EQ(a.pipeline.stages, 4);
  EXPECT_EQ(a.pipeline.microbatches, 3);
  DslOptions o;
  o.overrides = {{"chunks", 3}, {"devices", 4}};
  Schedule b = expandOk(text, o);
  EXPECT_EQ(b.pipeline.devices, 4);
  EXPECT_EQ(b.pipeline.stages, 12);
  EXPECT_EQ(b.pipeline.microbatches, 4);
  // Overrides of sizes the file does not name still apply.
  DslOptions m;
  m.overrides = {{"microbatches", 5}};
  EXPECT_EQ(expandOk("devices 1\n").pipeline.microbatches, 1);
  EXPECT_EQ(expandOk("devices 1\n", m).pipeline.microbatches, 5);
}

TEST(DslProgram, LoopsConditionalsAndAssignment) {
  Schedule s = expandOk(R"(microbatches 20
device 0 {
  for i in 0..3 { F(i) }
  for i in 10..4 step -3 { B(i) }
  let n = 0
  repeat 4 { n = n + 1 }
  if n == 4 { W(n) } else { W(99) }
  if n < 0 { R0 } else if n > 3 { R1 } else { R2 }
  for i in 0..0 { I0 }
}
)");
  EXPECT_EQ(tokens(s, 0), "F0 F1 F2 B10 B7 W4 R1");
}

TEST(DslProgram, DeviceStarBindsD) {
  Schedule s = expandOk("devices 3\nmicrobatches 3\ndevice * { F(d) if d > 0 { B(d - 1) } }\n");
  EXPECT_EQ(tokens(s, 0), "F0");
  EXPECT_EQ(tokens(s, 1), "F1 B0");
  EXPECT_EQ(tokens(s, 2), "F2 B1");
}

TEST(DslProgram, TemplatesWithParametersSeeGlobalsNotCallerLocals) {
  Schedule s = expandOk(R"(microbatches 10
let base = 5
def pair(a, b) { (F(a + base) B(b)) }
def twice(m) { pair(m, m) call pair(m + 1, m) }
device 0 { twice(1) }
)");
  EXPECT_EQ(tokens(s, 0), "(F6 B1) (F7 B1)");
  auto e = firstError(R"(microbatches 10
def show() { F(local) }
device 0 { let local = 1 show() }
)");
  EXPECT_EQ(e.code, "dsl.unknown-name");
  EXPECT_EQ(e.location.line, 2);
  EXPECT_EQ(e.location.column, 16);
}

TEST(DslProgram, CursorsPickTheNextMicrobatchPerStage) {
  Schedule s = expandOk(header(2, 4, 3, "interleaved") + R"(device 0 {
  F1@s0 next F@c0 next F@c0 next F@c1 next F@c1
}
device 1 { F0@s1 next F@s1 next F@c1 }
)");
  // next takes the lowest micro-batch not emitted yet, explicit ops included.
  EXPECT_EQ(tokens(s, 0), "F1@s0 F0@s0 F2@s0 F0@s2 F1@s2");
  EXPECT_EQ(tokens(s, 1), "F0@s1 F1@s1 F0@s3");
}

TEST(DslProgram, BackwardAndInputGradientShareACursor) {
  Schedule s = expandOk("microbatches 4\ndevice 0 { next B next I next I next B }\n");
  EXPECT_EQ(tokens(s, 0), "B0 I1 I2 B3");
}

TEST(DslProgram, NextWeightTakesTheOldestWaitingInput) {
  Schedule s =
      expandOk(header(1, 2, 2, "linear") + R"(device 0 { I0@s1 I0@s0 I1@s1 next W next W@c1 next W next? W }
)");
  EXPECT_EQ(tokens(s, 0), "I0@s1 I0@s0 I1@s1 W0@s1 W1@s1 W0@s0");
  auto e = expectError("microbatches 2\ndevice 0 { I0 next W next W }\n", "dsl.cursor", "no I is waiting");
  EXPECT_EQ(e.location.column, 22);  // the second 'next'
}

TEST(DslProgram, NextPastTheLastMicrobatch) {
  auto e = expectError("microbatches 2\ndevice 0 { repeat 3 { next F } }\n", "dsl.cursor",
                       "all 2 micro-batches already have their F");
  EXPECT_EQ(e.location.line, 2);
  EXPECT_EQ(e.location.column, 23);
  // next? emits nothing once the micro-batches run out; a pair keeps its other half.
  Schedule s = expandOk("microbatches 2\ndevice 0 { repeat 3 { next? F } B0 (next? F B1) }\n");
  EXPECT_EQ(tokens(s, 0), "F0 F1 B0 B1");
}

TEST(DslProgram, PlacementQueries) {
  Schedule s = expandOk(
      header(2, 4, 9, "vshape") +
      R"(device * { F(stage(1))@c0 F(nstages())@c0 F(device_of(3))@c0 F(chunk_of(3))@c0 F(stage(0, 1))@s(stage(0)) }
)");
  // Device 0 holds stages 0 and 3; device 1 holds 1 and 2.
  EXPECT_EQ(tokens(s, 0), "F3@s0 F2@s0 F0@s0 F1@s0 F1@s0");
  expectError("devices 2\nstages 4\nplacement vshape\ndevice 0 { F0@c2 }\n", "dsl.range", "holds 2 stages");
}

TEST(DslProgram, AssertReportsItsMessageAtItsLine) {
  auto e = firstError("devices 3\nmicrobatches 4\nassert microbatches % devices == 0, \"need a multiple\"\n");
  EXPECT_EQ(e.code, "dsl.assert");
  EXPECT_EQ(e.message, "need a multiple");
  EXPECT_EQ(e.location.line, 3);
  EXPECT_EQ(e.location.column, 1);
}

TEST(DslProgram, ArithmeticErrors) {
  auto div = firstError("let a = 0\nlet b = 4 / a\n");
  EXPECT_EQ(div.code, "dsl.div-zero");
  EXPECT_EQ(div.location.line, 2);
  EXPECT_EQ(div.location.column, 11);
  EXPECT_EQ(firstError("let b = 4 % (2 - 2)\n").code, "dsl.div-zero");
  EXPECT_EQ(firstError("let a = 9223372036854775807 + 1\n").code, "dsl.overflow");
  EXPECT_EQ(firstError("let a = 3037000500 * 3037000500\n").code, "dsl.overflow");
  EXPECT_EQ(firstError("let a = 99999999999999999999\n").code, "dsl.overflow");
  auto big = firstError("device 0 { F(3000000000) }\n");
  EXPECT_EQ(big.code, "dsl.range");
  EXPECT_EQ(firstError("let a = 1.5\n").code, "dsl.syntax");
}

TEST(DslProgram, UnknownNamesGetHints) {
  auto v = firstError("let chunks = 2\nlet x = chunk + 1\n");
  EXPECT_EQ(v.code, "dsl.unknown-name");
  EXPECT_EQ(v.hint, "did you mean chunks?");
  auto t = firstError("def warmup(n) { }\ndevice 0 { warmpu(2) }\n");
  EXPECT_EQ(t.hint, "did you mean warmup?");
  auto k = firstError("device 0 { nxet F }\n");
  EXPECT_EQ(k.hint, "did you mean next?");
  auto f = firstError("let a = mni(1, 2)\n");
  EXPECT_EQ(f.hint, "did you mean min?");
  DslOptions o;
  o.overrides = {{"microbatch", 3}};
  auto ov = firstError("devices 1\n", o);
  EXPECT_EQ(ov.code, "dsl.override");
  EXPECT_EQ(ov.hint, "did you mean microbatches?");
}

TEST(DslProgram, RunawayProgramsStopWithAClearError) {
  DslOptions o;
  o.maxSteps = 100000;
  auto loop = firstError("let n = 0\nfor i in 0..1000000000 { n = n + 1 }\n", o);
  EXPECT_EQ(loop.code, "dsl.limit");
  EXPECT_NE(loop.message.find("runaway"), std::string::npos);
  DslOptions p;
  p.maxOps = 1000;
  auto ops = firstError("microbatches 1000000\ndevice 0 { for i in 0..100000 { F(i) } }\n", p);
  EXPECT_EQ(ops.code, "dsl.limit");
  auto rec = firstError("def f(n) { f(n + 1) }\ndevice 0 { f(0) }\n");
  EXPECT_EQ(rec.code, "dsl.recursion");
  EXPECT_EQ(rec.location.line, 1);
}

TEST(DslProgram, ContextErrors) {
  EXPECT_EQ(firstError("F0\n").code, "dsl.context");
  EXPECT_EQ(firstError("let a = d\n").code, "dsl.context");
  EXPECT_EQ(firstError("device 0 { devices 3 }\n").code, "dsl.syntax");
  EXPECT_EQ(firstError("def f(a) { }\ndevice 0 { f(1, 2) }\n").code, "dsl.arity");
  EXPECT_EQ(firstError("let a = 1\nlet a = 2\n").code, "dsl.redefined");
  EXPECT_EQ(firstError("let F = 1\n").code, "dsl.syntax");
  EXPECT_EQ(firstError("let d = 1\n").code, "dsl.syntax");
  EXPECT_EQ(firstError("for i in 0..3 step 0 { }\n").code, "dsl.range");
}

TEST(DslProgram, DeepNestingIsAnErrorNotACrash) {
  std::string deep = "let a = " + std::string(5000, '(') + "1" + std::string(5000, ')') + "\n";
  EXPECT_EQ(firstError(deep).code, "dsl.syntax");
  std::string blocks;
  for (int i = 0; i < 3000; ++i) blocks += "if 1 { ";
  EXPECT_EQ(firstError(blocks).code, "dsl.syntax");
  std::string negs = "let a = " + std::string(100000, '-') + "1\n";
  EXPECT_FALSE(parseDsl(negs).ok());
  std::string chain = "let a = 1";
  for (int i = 0; i < 100000; ++i) chain += " + 1";
  EXPECT_EQ(firstError(chain).code, "dsl.syntax");
  std::string ok = "let a = 1";
  for (int i = 0; i < 1000; ++i) ok += " + 1";
  EXPECT_TRUE(parseDsl(ok + "\nassert a == 1001, \"sum\"\n").ok());
}

TEST(DslProgram, GreedyRunsDevicesInUnitTimeSteps) {
  // Backward first when its gradient has arrived, else a forward when its input has.
  Schedule s = expandOk(R"(devices 2
microbatches 2
greedy { if ready(B) { next B } else if ready(F) { next F } }
)");
  EXPECT_EQ(tokens(s, 0), "F0 F1 B0 B1");
  EXPECT_EQ(tokens(s, 1), "F0 B0 F1 B1");
}

TEST(DslProgram, CountAndReadyQueries) {
  Schedule s = expandOk(header(1, 2, 3, "linear") + R"(device 0 {
  F0@s0 F1@s0 F0@s1 I0@s1
  if count(F) == 3 and count(F@c0) == 2 and count(F@s1) == 1 and count(W) == 0 { R0@s0 }
  if ready(F@c1) { next F@c1 }
  if ready(W) { next W }
  if not ready(W@c0) and ready(I@c0) { next I@c0 }
}
)");
  EXPECT_EQ(tokens(s, 0), "F0@s0 F1@s0 F0@s1 I0@s1 R0@s0 F1@s1 W0@s1 I0@s0");
  auto e =
      firstError("devices 1\nstages 2\nmicrobatches 1\nplacement linear\ndevice 0 { if ready(F) { } }\n");
  EXPECT_EQ(e.code, "dsl.stage");
  EXPECT_EQ(firstError("let a = ready(F)\n").code, "dsl.context");
  EXPECT_EQ(firstError("device 0 { let a = count(Q) }\n").code, "dsl.unknown-kind");
}
