// Fuzz-style robustness: truncated and randomly mutated .pipe inputs (deterministic seed)
// must give either a schedule that round-trips through the printer, or diagnostics with a
// place; never a crash or an escaping exception.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "pipestudio/core/io/dsl.h"

using namespace ps::core;

namespace {

std::vector<std::string> corpus() {
  std::vector<std::string> texts;
  for (const char* dir : {"/schedules", "/examples"}) {
    std::filesystem::path p = std::string(PIPESTUDIO_RESOURCES_DIR) + dir;
    std::error_code ec;
    for (auto& e : std::filesystem::directory_iterator(p, ec)) {
      if (e.path().extension() != ".pipe") continue;
      std::ifstream in(e.path(), std::ios::binary);
      std::ostringstream ss;
      ss << in.rdbuf();
      texts.push_back(ss.str());
    }
  }
  texts.push_back(R"(name "x \"y\""
devices 2
microbatches 3
placement explicit 0,1,1,0
profile "p.json"
partition 1,2,3,4
kind AR stage_level duration = 0.5 * W memory transient 1MiB delta -4 after W before RESHARD
device 0: F0@s0 F0@s3 (F1@s0 B0@s3) AR@s0 UNSHARD@c0 I2@s3 W2@s3
device 1: F0@s1 F0@c1 B0@s2 SEND_F1@s1 RECV_B1@s2 OFFLOAD0@s1 RELOAD0@s1 R0@s2
)");
  return texts;
}

const std::vector<std::string> kFragments = {" ",
                                             "\n",
                                             "{",
                                             "}",
                                             "(",
                                             ")",
                                             ",",
                                             ":",
                                             "=",
                                             "==",
                                             "..",
                                             "@",
                                             "@s",
                                             "@c",
                                             "@s1",
                                             "0",
                                             "7",
                                             "-1",
                                             "99999999999",
                                             "#",
                                             "\"",
                                             "F",
                                             "B3",
                                             "I",
                                             "W",
                                             "next ",
                                             "next? ",
                                             "let ",
                                             "def ",
                                             "device ",
                                             "for ",
                                             "in ",
                                             "repeat ",
                                             "if ",
                                             "else ",
                                             "call ",
                                             "kind ",
                                             "assert ",
                                             "devices ",
                                             "stages ",
                                             "microbatches ",
                                             "d",
                                             "min(",
                                             "max(",
                                             "stage(",
                                             " / 0",
                                             " % 0",
                                             "*",
                                             "+",
                                             "-",
                                             "and ",
                                             "or ",
                                             "not ",
                                             "step ",
                                             "placement ",
                                             "vshape",
                                             "\t",
                                             "\xff",
                                             "$"};

std::string mutate(const std::string& src, std::mt19937& rng) {
  std::string s = src;
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    switch (rng() % 6) {
      case 0:  // truncate
        s.resize(pick(s.size() + 1));
        break;
      case 1:  // flip a byte
        if (!s.empty()) s[pick(s.size())] = static_cast<char>(rng() % 256);
        break;
      case 2:  // insert a fragment
        s.insert(pick(s.size() + 1), kFragments[pick(kFragments.size())]);
        break;
      case 3: {  // delete a range
        size_t at = pick(s.size() + 1);
        s.erase(at, pick(12));
        break;
      }
      case 4: {  // duplicate a range
        size_t at = pick(s.size() + 1);
        std::string piece = s.substr(at, pick(40));
        s.insert(pick(s.size() + 1), piece);
        break;
      }
      default: {  // replace a digit run start with a large or odd number
        size_t at = pick(s.size() + 1);
        s.insert(at, std::to_string(static_cast<int>(rng() % 100000) - 50));
        break;
      }
    }
  }
  return s;
}

// Returns true when the input parsed.
bool check(const std::string& text, int caseNo) {
  DslOptions o;
  o.filename = "fuzz.pipe";
  o.maxSteps = 200000;
  o.maxOps = 200000;
  o.maxErrors = 20;
  auto r = parseDsl(text, o);
  if (!r.ok()) {
    EXPECT_FALSE(r.errors().empty()) << "case " << caseNo;
    EXPECT_LE(r.errors().size(), 20u);
    for (const Diagnostic& d : r.errors()) {
      EXPECT_EQ(d.location.file, "fuzz.pipe") << "case " << caseNo;
      EXPECT_FALSE(d.message.empty()) << "case " << caseNo;
      (void)formatDiagnostic(d, &text);  // the caret rendering copes with any location
    }
    return false;
  }
  std::string printed = printDsl(*r);
  auto again = parseDsl(printed);
  EXPECT_TRUE(again.ok()) << "case " << caseNo << ": printed form does not parse\n"
                          << formatDiagnostics(again.errors(), &printed) << "\ninput:\n"
                          << text;
  if (again.ok()) {
    EXPECT_EQ(*again, *r) << "case " << caseNo << ": round trip changed the schedule\ninput:\n" << text;
  }
  return true;
}

}  // namespace

TEST(DslFuzz, TruncatedInputsNeverCrash) {
  int n = 0;
  for (const std::string& src : corpus()) {
    size_t stride = std::max<size_t>(1, src.size() / 150);
    for (size_t cut = 0; cut <= src.size(); cut += stride) check(src.substr(0, cut), n++);
  }
  EXPECT_GT(n, 500);
}

TEST(DslFuzz, MutatedInputsGiveAValueOrDiagnostics) {
  std::mt19937 rng(20261121);
  auto texts = corpus();
  ASSERT_GE(texts.size(), 9u);
  int ok = 0;
  const int cases = 3000;
  for (int i = 0; i < cases; ++i) {
    std::string t = mutate(texts[static_cast<size_t>(i) % texts.size()], rng);
    ok += check(t, i) ? 1 : 0;
    if (HasFailure()) return;
  }
  // Some mutations (comments, whitespace) leave valid programs: both paths are exercised.
  EXPECT_GT(ok, 0);
  EXPECT_LT(ok, cases);
}

TEST(DslFuzz, RandomBytesNeverCrash) {
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    std::string t(static_cast<size_t>(rng() % 200), '\0');
    for (char& c : t) c = static_cast<char>(rng() % 256);
    check(t, i);
    if (HasFailure()) return;
  }
}
