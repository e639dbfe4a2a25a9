// pipestudio-cli fmt / expand / convert: exit codes, output, diagnostics; and the printer's
// round trip over every generated schedule kind.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/planning/generators.h"
#include "pipestudio/core/io/pytorch_csv.h"
#include "../cli_runner.h"

using namespace ps::core;

namespace {

using ps::test::CliResult;

CliResult cli(const std::string& args) { return ps::test::runCli(args); }

class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("ps_dsl_cli_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name, const std::string& text = {}) const {
    std::string p = (path_ / name).string();
    if (!text.empty()) std::ofstream(p, std::ios::binary) << text;
    return p;
  }

 private:
  std::filesystem::path path_;
};

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string resource(const std::string& rel) { return std::string(PIPESTUDIO_RESOURCES_DIR) + "/" + rel; }

}  // namespace

TEST(DslCli, FmtPrintsCanonicalForm) {
  TempDir t;
  std::string f = t.file("a.pipe", "devices 2 microbatches 2   # messy\ndevice 1:F0 B0 F1 B1\ndevice 0 : F0 F1 B0 B1");
  CliResult r = cli("fmt " + f);
  EXPECT_EQ(r.exitCode, 0) << r.out;
  EXPECT_EQ(r.out,
            "devices 2\nstages 2\nmicrobatches 2\nplacement linear\n\ndevice 0: F0 F1 B0 B1\ndevice 1: F0 B0 F1 B1\n");
  // Formatting canonical text changes nothing.
  std::string g = t.file("b.pipe", r.out);
  EXPECT_EQ(cli("fmt " + g).out, r.out);
}

TEST(DslCli, FmtReportsErrorsWithPlaceAndExitOne) {
  TempDir t;
  std::string f = t.file("bad.pipe", "devices 1\nmicrobatches 1\ndevice 0: F0 X0\n");
  CliResult r = cli("fmt " + f);
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.out.find(f + ":3:14: error: unknown op kind 'X'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  device 0: F0 X0\n               ^\n"), std::string::npos) << r.out;
}

TEST(DslCli, UsageErrorsExitTwo) {
  EXPECT_EQ(cli("fmt").exitCode, 2);
  EXPECT_EQ(cli("fmt /nonexistent/x.pipe").exitCode, 2);
  EXPECT_EQ(cli("fmt a.pipe b.pipe").exitCode, 2);
  EXPECT_EQ(cli("expand " + resource("schedules/1f1b.pipe") + " --set devices").exitCode, 2);
  EXPECT_EQ(cli("expand " + resource("schedules/1f1b.pipe") + " --set devices=x").exitCode, 2);
  EXPECT_EQ(cli("convert a.txt b.csv").exitCode, 2);
  EXPECT_EQ(cli("convert " + resource("schedules/1f1b.pipe") + " x.csv --csv-format full").exitCode, 2);
}

TEST(DslCli, ExpandWithOverrides) {
  CliResult r = cli("expand " + resource("schedules/1f1b.pipe") + " --set devices=3 --set microbatches=4");
  ASSERT_EQ(r.exitCode, 0) << r.out;
  EXPECT_NE(r.out.find("devices 3\n"), std::string::npos);
  EXPECT_NE(r.out.find("device 0: F0 F1 F2 B0 F3 B1 B2 B3\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("device 2: F0 B0 F1 B1 F2 B2 F3 B3\n"), std::string::npos) << r.out;
  CliResult bad = cli("expand " + resource("schedules/1f1b.pipe") + " --set microbatch=4");
  EXPECT_EQ(bad.exitCode, 1);
  EXPECT_NE(bad.out.find("did you mean"), std::string::npos) << bad.out;
  CliResult piped = cli("expand - < " + resource("schedules/gpipe.pipe"));
  EXPECT_EQ(piped.exitCode, 0) << piped.out;
}

TEST(DslCli, ConvertPipeCsvPipeKeepsEveryAction) {
  TempDir t;
  std::string csv = t.file("dp.csv"), back = t.file("dp.pipe"), csv2 = t.file("dp2.csv");
  ASSERT_EQ(cli("convert " + resource("schedules/dualpipe-v.pipe") + " " + csv + " --csv-format compute_comms").exitCode,
            0);
  ASSERT_EQ(cli("convert " + csv + " " + back).exitCode, 0);
  ASSERT_EQ(cli("convert " + back + " " + csv2 + " --csv-format compute_comms").exitCode, 0);
  EXPECT_EQ(readFile(csv), readFile(csv2));
  // The compute ops of the program survive the trip through CSV.
  auto original = parseDsl(readFile(resource("schedules/dualpipe-v.pipe")));
  auto csvBack = readPytorchCsv(readFile(csv));
  ASSERT_TRUE(original.ok());
  ASSERT_TRUE(csvBack.ok()) << formatDiagnostics(csvBack.errors());
  auto computeOnly = [](const Schedule& s) {
    std::vector<std::vector<Step>> v;
    for (const auto& dev : s.devices) {
      v.emplace_back();
      for (const Step& st : dev)
        if (st.overlapped() || st.first.kind == OpKind::F || st.first.kind == OpKind::B ||
            st.first.kind == OpKind::I || st.first.kind == OpKind::W)
          v.back().push_back(st);
    }
    return v;
  };
  EXPECT_EQ(computeOnly(*original), computeOnly(*csvBack));
  EXPECT_EQ(csvBack->pipeline, original->pipeline);
  // Invalid input: exit 1 with the CSV cell's place.
  std::string bad = t.file("bad.csv", "0F0,0Q1\n");
  CliResult r = cli("convert " + bad + " " + t.file("o.pipe"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.out.find("bad.csv:1:5"), std::string::npos) << r.out;
}

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
