// Every built-in schedule also ships as a .pipe program (resources/schedules/<kind>.pipe);
// its expansion must equal the C++ generator's output over a grid of sizes.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/planning/generators.h"

using namespace ps::core;

namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string programPath(ScheduleKind k) {
  return std::string(PIPESTUDIO_RESOURCES_DIR) + "/schedules/" + std::string(scheduleKindName(k)) + ".pipe";
}

// First difference, for a readable failure.
std::string firstDifference(const Schedule& a, const Schedule& b) {
  if (a.pipeline != b.pipeline) return "pipelines differ";
  if (a.name != b.name) return "names differ: " + a.name + " vs " + b.name;
  for (size_t d = 0; d < a.devices.size() && d < b.devices.size(); ++d) {
    const auto& x = a.devices[d];
    const auto& y = b.devices[d];
    for (size_t i = 0; i < x.size() || i < y.size(); ++i) {
      auto show = [&](const std::vector<Step>& v) {
        if (i >= v.size()) return std::string("(end)");
        std::string s = a.opName(v[i].first);
        if (v[i].second) s = "(" + s + " " + a.opName(*v[i].second) + ")";
        return s;
      };
      if (i >= x.size() || i >= y.size() || x[i] != y[i])
        return "device " + std::to_string(d) + " step " + std::to_string(i) + ": program " + show(x) +
               ", generator " + show(y);
    }
  }
  return "device counts differ";
}

}  // namespace

TEST(DslSchedules, EachProgramIsThirtyLinesOrFewer) {
  for (ScheduleKind k : allScheduleKinds()) {
    std::string text = readFile(programPath(k));
    ASSERT_FALSE(text.empty()) << programPath(k);
    size_t lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
    EXPECT_LE(lines, 30u) << programPath(k);
  }
}

TEST(DslSchedules, ProgramsEqualGeneratorsOverGrid) {
  for (ScheduleKind k : allScheduleKinds()) {
    const std::string path = programPath(k);
    const std::string text = readFile(path);
    const bool chunked =
        k == ScheduleKind::Interleaved1F1B || k == ScheduleKind::LoopedBFS || k == ScheduleKind::ZBH1;
    int compared = 0;
    for (int D = 1; D <= 6; ++D) {
      for (int M : {1, 2, 3, D, 2 * D, 2 * D + 1, 3 * D, 4 * D + 2}) {
        for (int V :
             chunked ? std::vector<int>{k == ScheduleKind::ZBH1 ? 1 : 2, 2, 3} : std::vector<int>{0}) {
          GeneratorOptions g;
          g.devices = D;
          g.microbatches = M;
          g.chunks = V;
          auto expected = generateSchedule(k, g);
          DslOptions o;
          o.filename = path;
          o.overrides = {{"devices", D}, {"microbatches", M}};
          if (chunked) o.overrides["chunks"] = V;
          auto got = parseDsl(text, o);
          std::string where = std::string(scheduleKindName(k)) + " D=" + std::to_string(D) +
                              " M=" + std::to_string(M) + (chunked ? " chunks=" + std::to_string(V) : "");
          if (!expected.ok()) {
            // Sizes the generator refuses: the program refuses them too (with an assert).
            if (k == ScheduleKind::Interleaved1F1B || k == ScheduleKind::DualPipeV ||
                k == ScheduleKind::ZBH1 || k == ScheduleKind::DualPipe) {
              EXPECT_FALSE(got.ok()) << where;
            }
            continue;
          }
          ASSERT_TRUE(got.ok()) << where << "\n" << formatDiagnostics(got.errors(), &text);
          ASSERT_EQ(*got, *expected) << where << ": " << firstDifference(*got, *expected);
          ++compared;
        }
      }
    }
    // DualPipe serves only even devices and even micro-batches >= 2 x devices: 9 sizes here.
    EXPECT_GT(compared, k == ScheduleKind::DualPipe ? 8 : 20) << scheduleKindName(k);
  }
}
