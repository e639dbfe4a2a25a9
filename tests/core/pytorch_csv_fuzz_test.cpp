// Truncated and mutated CSV inputs: the reader returns a schedule or diagnostics with a
// location, never crashes; whatever it returns can be validated and written back.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "pipestudio/core/analysis/validator.h"
#include "pipestudio/core/io/pytorch_csv.h"
#include "pipestudio/core/planning/generators.h"

using namespace ps::core;

namespace {

struct Lcg {
  std::uint64_t state;
  std::uint32_t next() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<std::uint32_t>(state >> 33);
  }
  size_t below(size_t n) { return n == 0 ? 0 : next() % n; }
};

void check(const std::string& input) {
  auto r = readPytorchCsv(input);
  if (r.ok()) {
    auto rep = validateSchedule(*r);
    for (const auto& d : rep.diagnostics) EXPECT_FALSE(d.message.empty());
    // A compute-only order that deadlocks cannot be lowered: a diagnostic, never a crash.
    auto back = writePytorchCsv(*r, CsvFormat::ComputeComms);
    // A valid schedule's export reads back; an invalid one's may not (no compute action left).
    if (back.ok())
      EXPECT_TRUE(readPytorchCsv(*back).ok() || !rep.valid()) << "rewritten CSV does not read back:\n"
                                                              << *back;
    else
      EXPECT_FALSE(back.error().message.empty());
  } else {
    ASSERT_FALSE(r.errors().empty());
    for (const auto& d : r.errors()) {
      EXPECT_FALSE(d.message.empty());
      EXPECT_GE(d.location.line, 1) << d.message;
    }
  }
}

std::string seedCsv() {
  auto s = generateSchedule(ScheduleKind::DualPipeV, GeneratorOptions{2, 4});
  std::string csv = writePytorchCsv(*s, CsvFormat::ComputeComms).value();
  return "0UNSHARD, ,\"0F0\"," + csv + "0RESHARD,0REDUCE_GRAD\r\n";
}

}  // namespace

TEST(PytorchCsvFuzz, EveryTruncationGivesValueOrDiagnostic) {
  const std::string csv = seedCsv();
  for (size_t n = 0; n <= csv.size(); ++n) check(csv.substr(0, n));
}

TEST(PytorchCsvFuzz, RandomMutationsGiveValueOrDiagnostic) {
  const std::string csv = seedCsv();
  const std::string alphabet = "0123456789FBIWRSENDCVUHAG_();,\" \t\r\n\xff\x00x";
  Lcg rng{12345};
  for (int iter = 0; iter < 1000; ++iter) {
    std::string s = csv;
    int edits = 1 + static_cast<int>(rng.below(4));
    for (int e = 0; e < edits && !s.empty(); ++e) {
      size_t at = rng.below(s.size());
      char c = alphabet[rng.below(alphabet.size())];
      switch (rng.below(4)) {
        case 0:
          s[at] = c;
          break;
        case 1:
          s.erase(at, 1 + rng.below(8));
          break;
        case 2:
          s.insert(at, 1, c);
          break;
        default:
          s.insert(at, std::string(1 + rng.below(12), '9'));
          break;  // huge numbers
      }
    }
    check(s);
  }
}

TEST(PytorchCsvFuzz, PathologicalInputs) {
  check(std::string(10000, ','));
  check(std::string(5000, '\n'));
  check("999999999F0\n");
  check("0F999999999\n");
  check("((((0F0;0B1)OVERLAP_F_B\n");
  check("(0F0;0B1\n");
  check("()OVERLAP_F_B\n");
  check("\"unterminated\n0F0\n");
  check(std::string("\xEF\xBB\xBF") + "0F0,0B0\n");
  check("0F0;0B0\n");
}
