// pipestudio-cli fmt: the canonical form of a .pipe, errors with their place, and the usage
// errors of fmt, expand and convert.
#include <gtest/gtest.h>

#include <string>

#include "cli/cli_runner.h"
#include "fixtures/files.h"

using namespace ps::test;

TEST(DslCli, FmtPrintsCanonicalForm) {
  auto t = freshDir("ps_dsl_cli");
  std::string f =
      t.file("a.pipe", "devices 2 microbatches 2   # messy\ndevice 1:F0 B0 F1 B1\ndevice 0 : F0 F1 B0 B1");
  CliResult r = runCli("fmt " + f);
  EXPECT_EQ(r.exitCode, 0) << r.out;
  EXPECT_EQ(r.out,
            "devices 2\nstages 2\nmicrobatches 2\nplacement linear\n\ndevice 0: F0 F1 B0 B1\ndevice 1: F0 B0 "
            "F1 B1\n");
  // Formatting canonical text changes nothing.
  std::string g = t.file("b.pipe", r.out);
  EXPECT_EQ(runCli("fmt " + g).out, r.out);
}

TEST(DslCli, FmtReportsErrorsWithPlaceAndExitOne) {
  auto t = freshDir("ps_dsl_cli");
  std::string f = t.file("bad.pipe", "devices 1\nmicrobatches 1\ndevice 0: F0 X0\n");
  CliResult r = runCli("fmt " + f);
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.out.find(f + ":3:14: error: unknown op kind 'X'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  device 0: F0 X0\n               ^\n"), std::string::npos) << r.out;
}

TEST(DslCli, UsageErrorsExitTwo) {
  EXPECT_EQ(runCli("fmt").exitCode, 2);
  EXPECT_EQ(runCli("fmt /nonexistent/x.pipe").exitCode, 2);
  EXPECT_EQ(runCli("fmt a.pipe b.pipe").exitCode, 2);
  EXPECT_EQ(runCli("expand " + resource("schedules/1f1b.pipe") + " --set devices").exitCode, 2);
  EXPECT_EQ(runCli("expand " + resource("schedules/1f1b.pipe") + " --set devices=x").exitCode, 2);
  EXPECT_EQ(runCli("convert a.txt b.csv").exitCode, 2);
  EXPECT_EQ(runCli("convert " + resource("schedules/1f1b.pipe") + " x.csv --csv-format full").exitCode, 2);
}
