// `generate dualpipe` against DeepSeek's own DualPipe.step() (deepseek-ai/DualPipe): the per-rank
// orders in tests/data/deepseek/dualpipe_orders.txt were recorded by running DeepSeek's step()
// (tests/deepseek/make_dualpipe_orders.py says how); no PipeStudio code made them.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "pipestudio/core/analysis/validator.h"
#include "pipestudio/core/planning/generators.h"

using namespace ps::core;

namespace {

struct GoldenCase {
  int ranks = 0;
  int chunks = 0;
  std::vector<std::vector<std::string>> rankOps;  // DeepSeek's tokens per rank
};

std::vector<GoldenCase> loadGolden() {
  std::ifstream in(std::string(PIPESTUDIO_TEST_DATA_DIR) + "/deepseek/dualpipe_orders.txt");
  std::vector<GoldenCase> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("case ", 0) == 0) {
      GoldenCase c;
      if (std::sscanf(line.c_str(), "case pp=%d chunks=%d", &c.ranks, &c.chunks) != 2) continue;
      out.push_back(c);
    } else if (line.rfind("rank ", 0) == 0 && !out.empty()) {
      std::istringstream ops(line.substr(line.find(':') + 1));
      std::vector<std::string> row;
      for (std::string t; ops >> t;) row.push_back(t);
      out.back().rankOps.push_back(std::move(row));
    }
  }
  return out;
}

// DeepSeek's "<kind><direction>:<chunk>" on a rank, in PipeStudio's numbering: direction 0
// (down, fed at rank 0) is stage `rank` with micro-batch `chunk`; direction 1 (up, fed at the
// last rank) is stage 2·D-1-rank with micro-batch M/2 + chunk.
std::string toPipeStudio(const std::string& token, int rank, int D, int M) {
  const auto plus = token.find('+');
  if (plus != std::string::npos)
    return "(" + toPipeStudio(token.substr(0, plus), rank, D, M) + ";" +
           toPipeStudio(token.substr(plus + 1), rank, D, M) + ")";
  const char kind = token.at(0);
  const int direction = token.at(1) - '0';
  const int chunk = std::stoi(token.substr(token.find(':') + 1));
  const int stage = direction == 0 ? rank : 2 * D - 1 - rank;
  const int mb = direction == 0 ? chunk : M / 2 + chunk;
  return std::string(1, kind) + std::to_string(mb) + "@s" + std::to_string(stage);
}

std::vector<std::string> ordersOf(const Schedule& s, int device) {
  std::vector<std::string> out;
  for (const Step& st : s.devices[static_cast<size_t>(device)])
    out.push_back(st.second ? "(" + s.opName(st.first) + ";" + s.opName(*st.second) + ")"
                            : s.opName(st.first));
  return out;
}

TEST(DeepSeekDualPipe, GeneratedOrderIsDualPipeStepsOrderActionForAction) {
  const auto cases = loadGolden();
  ASSERT_GE(cases.size(), 20u) << "tests/data/deepseek/dualpipe_orders.txt not read";
  for (const GoldenCase& c : cases) {
    auto s = generateSchedule(ScheduleKind::DualPipe, GeneratorOptions{c.ranks, c.chunks});
    ASSERT_TRUE(s.ok()) << "D=" << c.ranks << " M=" << c.chunks << ": " << s.error().message;
    ASSERT_EQ(static_cast<int>(c.rankOps.size()), c.ranks);
    for (int r = 0; r < c.ranks; ++r) {
      std::vector<std::string> expected;
      for (const auto& t : c.rankOps[static_cast<size_t>(r)])
        expected.push_back(toPipeStudio(t, r, c.ranks, c.chunks));
      EXPECT_EQ(ordersOf(*s, r), expected) << "D=" << c.ranks << " M=" << c.chunks << " rank " << r;
    }
    EXPECT_TRUE(validateSchedule(*s).valid()) << "D=" << c.ranks << " M=" << c.chunks;
  }
}

}  // namespace
