// pipestudio-cli expand: a program with overrides, from a file or stdin.
#include <gtest/gtest.h>

#include <string>

#include "cli/cli_runner.h"
#include "fixtures/files.h"

using namespace ps::test;

TEST(DslCli, ExpandWithOverrides) {
  CliResult r = runCli("expand " + resource("schedules/1f1b.pipe") + " --set devices=3 --set microbatches=4");
  ASSERT_EQ(r.exitCode, 0) << r.out;
  EXPECT_NE(r.out.find("devices 3\n"), std::string::npos);
  EXPECT_NE(r.out.find("device 0: F0 F1 F2 B0 F3 B1 B2 B3\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("device 2: F0 B0 F1 B1 F2 B2 F3 B3\n"), std::string::npos) << r.out;
  CliResult bad = runCli("expand " + resource("schedules/1f1b.pipe") + " --set microbatch=4");
  EXPECT_EQ(bad.exitCode, 1);
  EXPECT_NE(bad.out.find("did you mean"), std::string::npos) << bad.out;
  CliResult piped = runCli("expand - < " + resource("schedules/gpipe.pipe"));
  EXPECT_EQ(piped.exitCode, 0) << piped.out;
}
