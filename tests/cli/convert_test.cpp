// pipestudio-cli convert: .pipe to PyTorch CSV and back keeps every action; invalid input
// names its cell; what the CSV cannot carry is said.
#include <gtest/gtest.h>

#include <string>

#include "cli/cli_runner.h"
#include "fixtures/files.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/io/pytorch_csv.h"

using namespace ps::core;
using namespace ps::test;

namespace {

CliResult cli(const std::string& args) {
  return runCli(args);
}

namespace fs = std::filesystem;

}  // namespace

TEST(DslCli, ConvertPipeCsvPipeKeepsEveryAction) {
  auto t = freshDir("ps_dsl_cli");
  std::string csv = t.file("dp.csv"), back = t.file("dp.pipe"), csv2 = t.file("dp2.csv");
  ASSERT_EQ(
      cli("convert " + resource("schedules/dualpipe-v.pipe") + " " + csv + " --csv-format compute_comms")
          .exitCode,
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

TEST(PytorchFidelity, ConvertToCsvSaysWhatTheCsvDoesNotCarry) {
  const auto dir = ps::test::freshDir("ps_fidelity_conv");
  fs::create_directories(dir / "designs");
  fs::create_directories(dir / "profiles");
  std::ofstream(dir / "profiles" / "p.json")
      << R"({"layers":[{"forward_ms":1,"backward_ms":2},{"forward_ms":1,"backward_ms":2},{"forward_ms":1,"backward_ms":2}]})";
  const fs::path pipe = dir / "designs" / "d.pipe";
  std::ofstream(pipe)
      << "devices 2\nstages 2\nmicrobatches 1\nplacement linear\nprofile \"../profiles/p.json\"\n"
         "partition 1, 2\ndevice 0: F0 B0\ndevice 1: F0 B0\n";
  auto r = ps::test::runCli("convert '" + pipe.string() + "' '" + (dir / "d.csv").string() + "'",
                            ps::test::Stderr::Separate);
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.err.find(
                "does not carry the partition (layers per stage 1,2); the cost profile (../profiles/p.json)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("The .pipe keeps them."), std::string::npos) << r.err;
  EXPECT_EQ(readFile(dir / "d.csv"), "0F0,0B0\r\n1F0,1B0\r\n");  // Python csv's line ends
  // .pipe to .pipe in another folder: the profile stays reachable, relative to the new file.
  fs::create_directories(dir / "elsewhere" / "deep");
  r = ps::test::runCli("convert '" + pipe.string() + "' '" +
                       (dir / "elsewhere" / "deep" / "e.pipe").string() + "'");
  EXPECT_EQ(r.exitCode, 0) << r.out;
  EXPECT_NE(readFile(dir / "elsewhere" / "deep" / "e.pipe").find("profile \"../../profiles/p.json\""),
            std::string::npos)
      << readFile(dir / "elsewhere" / "deep" / "e.pipe");
  // No note when nothing is lost.
  r = ps::test::runCli("convert '" + (dir / "d.csv").string() + "' '" + (dir / "d2.csv").string() + "'",
                       ps::test::Stderr::Separate);
  EXPECT_EQ(r.exitCode, 0);
  EXPECT_EQ(r.err, "");
}

TEST(TorchtitanCli, ConvertForTorchtitanWritesComputeOnlyAndPrintsTheSettings) {
  auto t = freshDir("ps_titan_cli");
  const std::string pipe = t.file("zbv.pipe");
  ASSERT_EQ(cli("generate zb-v --devices 4 --microbatches 8 -o " + pipe).exitCode, 0);
  CliResult r = runCli("convert " + pipe + " " + t.file("zbv.csv") + " --for torchtitan", Stderr::Separate);
  ASSERT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_NE(
      r.out.find(
          "[parallelism]\npipeline_parallel_degree = 4\npipeline_parallel_schedule = \"ZBVZeroBubble\"\n"
          "pipeline_parallel_schedule_csv = \"" +
          t.file("zbv.csv") + "\"\nnum_pp_microbatches = 8\n"),
      std::string::npos)
      << r.out;
  // What torchtitan's _load_csv(format="compute_only") takes: compute actions only.
  const std::string csv = readFile(t.file("zbv.csv"));
  EXPECT_EQ(csv.find("SEND"), std::string::npos);
  EXPECT_EQ(csv.find("REDUCE_GRAD"), std::string::npos);
  EXPECT_EQ(csv, readFile(t.file("zbv.csv")));
  CliResult plain = cli("convert " + pipe + " " + t.file("plain.csv"));
  EXPECT_EQ(readFile(t.file("plain.csv")), csv);
}

TEST(TorchtitanCli, RefusalsAndUsage) {
  auto t = freshDir("ps_titan_cli");
  // Two contiguous stages per device: no torchtitan placement.
  const std::string pipe = t.file("blocks.pipe",
                                  "devices 2\nstages 4\nmicrobatches 1\nplacement linear\n"
                                  "device 0: F0@s0 F0@s1 B0@s1 B0@s0\ndevice 1: F0@s2 F0@s3 B0@s3 B0@s2\n");
  CliResult r = cli("convert " + pipe + " " + t.file("b.csv") + " --for torchtitan");
  EXPECT_EQ(r.exitCode, 1) << r.out;
  EXPECT_NE(r.out.find("torchtitan cannot build this placement (linear): stage 1 is on device 0"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(std::filesystem::exists(t.file("b.csv")));
  // An invalid schedule is refused before anything is written.
  const std::string bad = t.file("bad.pipe", "devices 2\nmicrobatches 1\ndevice 0: F0 B0\ndevice 1: B0 F0\n");
  EXPECT_EQ(cli("convert " + bad + " " + t.file("c.csv") + " --for torchtitan").exitCode, 1);
  EXPECT_FALSE(std::filesystem::exists(t.file("c.csv")));
  // Usage: torchtitan loads compute_only from a file.
  const std::string ok = t.file("ok.pipe");
  ASSERT_EQ(cli("generate 1f1b --devices 2 --microbatches 2 -o " + ok).exitCode, 0);
  EXPECT_EQ(
      cli("convert " + ok + " " + t.file("d.csv") + " --for torchtitan --csv-format compute_comms").exitCode,
      2);
  EXPECT_EQ(cli("convert " + ok + " - --to csv --for torchtitan").exitCode, 2);
  EXPECT_EQ(cli("convert " + ok + " " + t.file("d.pipe") + " --for torchtitan").exitCode, 2);
  EXPECT_EQ(cli("convert " + ok + " " + t.file("d.csv") + " --for megatron").exitCode, 2);
}
