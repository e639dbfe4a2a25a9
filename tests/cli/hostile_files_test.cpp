// Files from someone else (issue 29): a .pipe header naming /dev/zero or /etc/passwd as its
// profile, megabytes of NUL bytes, gigabyte (sparse) inputs, a host file written to run
// commands, a trace that barely matches its plan. Each ends in seconds, within the memory
// limit of hostile_cli.h, with exit 1 or 2 and a bounded message (docs/limits.md).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "cli/cli_runner.h"
#include "cli/hostile_cli.h"
#include "sessions/session_test_util.h"

using namespace ps::test;

namespace {

// A message that says what and where, but does not echo the input.
void expectBounded(const CliResult& r, size_t maxBytes = 4096) {
  EXPECT_TRUE(r.exitCode == 1 || r.exitCode == 2) << r.exitCode << r.out.substr(0, 2000);
  EXPECT_LT(r.out.size(), maxBytes) << r.out.substr(0, 2000);
  EXPECT_EQ(r.out.find("internal error"), std::string::npos) << r.out.substr(0, 2000);
  EXPECT_LT(r.seconds, 20.0);
}

// A sparse file of `bytes` (no disk used).
std::string sparse(const ps::test::TempDir& dir, const std::string& name, std::uintmax_t bytes) {
  std::string p = dir.file(name, "x");
  std::filesystem::resize_file(p, bytes);
  return p;
}

// pipestudio-cli under the memory limit; `env`: variables for the CLI ("NAME=VALUE ").
std::string cliLimited(const std::string& args, const std::string& env = {}) {
  return std::string(kMemoryLimit) + env + "'" + PIPESTUDIO_CLI + "' " + args;
}

}  // namespace

TEST_F(HostileCli, PipeHeaderNamingDevZeroAsItsProfileIsRefused) {
  const std::string plan = write("zero.pipe", "profile \"/dev/zero\"\n" + std::string(kHostilePlan));
  auto r = runCommand(cliLimited("simulate '" + plan + "'"));
  expectBounded(r);
  EXPECT_NE(r.out.find("not a regular file"), std::string::npos) << r.out;
}

TEST_F(HostileCli, PipeHeaderNamingEtcPasswdQuotesAtMostAShortExcerpt) {
  const std::string plan = write("passwd.pipe", "profile \"/etc/passwd\"\n" + std::string(kHostilePlan));
  auto r = runCommand(cliLimited("simulate '" + plan + "'"));
  expectBounded(r, 1500);
  EXPECT_NE(r.out.find("not a cost profile"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("root:"), std::string::npos) << r.out;  // no line of the file is quoted
}

TEST_F(HostileCli, HundredKilobytesOfNulBytesPrintBoundedErrors) {
  const std::string plan = write("nul.pipe", std::string(std::size_t{100} * 1024, '\0'));
  auto r = runCommand(cliLimited("validate '" + plan + "'"));
  expectBounded(r, 20000);
  EXPECT_NE(r.out.find("\\x00"), std::string::npos) << r.out.substr(0, 2000);  // escaped, not raw
  EXPECT_EQ(r.out.find('\0'), std::string::npos);
}

TEST_F(HostileCli, TwentyMegabytesOfNulBytesStayWithinTheMemoryLimit) {
  const std::string plan = write("nul20.pipe", std::string(20u << 20, '\0'));
  auto r = runCommand(cliLimited("validate '" + plan + "'"));
  expectBounded(r, 20000);
}

TEST_F(HostileCli, GigabyteSparseInputsAreRefusedBeforeTheyAreRead) {
  for (const char* name : {"big.pipe", "big.csv"}) {
    auto r = runCommand(cliLimited("validate '" + sparse(dir_, name, std::uintmax_t{1} << 30) + "'"));
    expectBounded(r);
    EXPECT_NE(r.out.find("PIPESTUDIO_MAX_INPUT_BYTES"), std::string::npos) << r.out;
  }
  const std::string profile = sparse(dir_, "big.json", std::uintmax_t{1} << 30);
  const std::string plan = write("p.pipe", "profile \"" + profile + "\"\n" + std::string(kHostilePlan));
  auto r = runCommand(cliLimited("simulate '" + plan + "'"));
  expectBounded(r);
  EXPECT_NE(r.out.find("limited to 64 MiB"), std::string::npos) << r.out;
}

TEST_F(HostileCli, TheInputLimitIsOverriddenByItsVariable) {
  const std::string plan = write("ok.pipe", kHostilePlan);
  EXPECT_EQ(runCli("validate '" + plan + "'").exitCode, 0);
  auto r = runCommand(cliLimited("validate '" + plan + "'", "PIPESTUDIO_MAX_INPUT_BYTES=10 "));
  expectBounded(r);
  EXPECT_NE(r.out.find("limited to 0 MiB (10 bytes)"), std::string::npos) << r.out;
  EXPECT_EQ(runCommand(cliLimited("validate '" + plan + "'", "PIPESTUDIO_MAX_INPUT_BYTES=1K ")).exitCode, 0);
}

// Host files (`run --hosts`, which needs the engine) are tested at the parser and the printed
// commands: tests/core/cluster_hosts_test.cpp.

TEST_F(HostileCli, SymlinkLoopInATraceFolderIsReportedNotAnInternalError) {
  const std::string plan = write("plan.pipe", kHostilePlan);
  const auto folder = dir_ / "traces";
  std::filesystem::create_directories(folder);
  std::filesystem::create_symlink("b.json", folder / "a.json");
  std::filesystem::create_symlink("a.json", folder / "b.json");
  auto r = runCommand(cliLimited("compare '" + plan + "' --cost F=1,B=1 '" + folder.string() + "'"));
  expectBounded(r);
  EXPECT_NE(r.out.find("a.json: skipped"), std::string::npos) << r.out;
}

TEST_F(HostileCli, CompareWithMostOfThePlanUnmatchedExitsNonZeroWithTheCounts) {
  // The plan has 16 micro-batches; the trace is of a 2-micro-batch run.
  std::string plan = "devices 2\nstages 2\nmicrobatches 16\ndevice 0:";
  for (int m = 0; m < 16; ++m) plan += " F" + std::to_string(m);
  for (int m = 0; m < 16; ++m) plan += " B" + std::to_string(m);
  plan += "\ndevice 1:";
  for (int m = 0; m < 16; ++m) plan += " F" + std::to_string(m) + " B" + std::to_string(m);
  plan += "\n";
  const std::string d = std::string(PIPESTUDIO_TEST_DATA_DIR) + "/traces/";
  auto r = runCommand(cliLimited("compare '" + write("plan16.pipe", plan) + "' --cost F=1,B=2 " + d +
                                 "synthetic_1f1b_d2_m2_rank0.pt.trace.json " + d +
                                 "synthetic_1f1b_d2_m2_rank1.pt.trace.json"));
  EXPECT_EQ(r.exitCode, 1) << r.out;
  EXPECT_NE(r.out.find("ops were found in the trace"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("matched:"), std::string::npos) << r.out;  // the report is still printed
}

// PRAGMA user_version = -1 crashed every writer (std::bad_alloc, exit 3); one from the future is
// refused for writing, naming both versions.
TEST_F(HostileCli, SessionWithANegativeSchemaVersionIsADamagedFileForEveryWriter) {
  const std::string plan = write("plan.pipe", kHostilePlan);
  const std::string db = (dir_ / "s.session").string();
  ASSERT_EQ(runCli("simulate '" + plan + "' --cost F=1,B=1 --session '" + db + "'").exitCode, 0);
  ps::sessions::test::RawDb(db).mustExec("PRAGMA user_version = -1");
  const std::string simulate = "simulate '" + plan + "' --cost F=1,B=1 --session '" + db + "'";
  const std::string note = "session note '" + db + "' --schedule 1 hello";
  for (const std::string& args : {simulate, note}) {
    auto r = runCommand(cliLimited(args));
    expectBounded(r);
    EXPECT_NE(r.out.find("schema version -1"), std::string::npos) << args << "\n" << r.out;
  }
  ps::sessions::test::RawDb(db).mustExec("PRAGMA user_version = 99");
  auto r = runCommand(cliLimited("session note '" + db + "' --schedule 1 hello"));
  expectBounded(r);
  EXPECT_NE(r.out.find("schema version 99, this build knows up to"), std::string::npos) << r.out;
}
