// pipestudio-cli's command line (CLI11 under common/command_line.cpp): top-level help, version
// and unknown commands, flag spellings and their usage errors, declared positional counts, and
// the schedule format picked by content when a file's name says nothing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "cli/cli_runner.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/io/pytorch_csv.h"
#include "pipestudio/core/planning/generators.h"

namespace {

using ps::test::runCli;
using ps::test::Stderr;

class CliCommandLine : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("ps_cli_command_line_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    auto s = ps::core::generateSchedule(ps::core::ScheduleKind::OneFOneB, ps::core::GeneratorOptions{2, 4, 0})
                 .value();
    pipe_ = write("s.pipe", ps::core::printDsl(s));
    csvNoExtension_ = write("s.txt", ps::core::writePytorchCsv(s).value());
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string write(const std::string& name, const std::string& text) {
    std::string p = (dir_ / name).string();
    std::ofstream(p) << text;
    return p;
  }
  std::filesystem::path dir_;
  std::string pipe_, csvNoExtension_;
};

TEST_F(CliCommandLine, HelpListsOptionsAndEveryCommand) {
  auto r = runCli("--help", Stderr::Separate);
  EXPECT_EQ(r.exitCode, 0);
  EXPECT_NE(r.out.find("usage: pipestudio-cli COMMAND [ARGS...]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--version"), std::string::npos) << r.out;
  for (const char* c : {"compare", "convert", "expand", "fmt", "generate", "partition", "profile",
                        "profile-model", "run", "search", "session", "simulate", "validate"})
    EXPECT_NE(r.out.find(std::string("\n  ") + c + " "), std::string::npos) << c << "\n" << r.out;
  // No arguments: the same help, as a usage error.
  auto none = runCli("", Stderr::Separate);
  EXPECT_EQ(none.exitCode, 2);
  EXPECT_EQ(none.out, r.out);
  EXPECT_EQ(runCli("help", Stderr::Separate).out, r.out);
}

TEST_F(CliCommandLine, UnknownCommandIsAUsageError) {
  auto r = runCli("frobnicate x", Stderr::Separate);
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("unknown command 'frobnicate'"), std::string::npos) << r.err;
}

TEST_F(CliCommandLine, FlagsTakeTheirValueEitherWayAndRepeat) {
  const auto spaced = runCli("validate '" + pipe_ + "' --format pipe", Stderr::Separate);
  const auto joined = runCli("validate '" + pipe_ + "' --format=pipe", Stderr::Separate);
  EXPECT_EQ(spaced.exitCode, 0) << spaced.err;
  EXPECT_EQ(joined.exitCode, 0) << joined.err;
  EXPECT_EQ(spaced.out, joined.out);
  // --set repeats; the last of a repeated value flag wins.
  auto r =
      runCli("validate - --set devices=2 --set microbatches=4 --format csv --format pipe < '" + pipe_ + "'",
             Stderr::Separate);
  EXPECT_EQ(r.exitCode, 0) << r.err;
}

TEST_F(CliCommandLine, FlagMistakesAreUsageErrorsNamingTheFlag) {
  struct Case {
    std::string args;
    std::string message;
  };
  for (const Case& c :
       {Case{"validate x.pipe --bogus", "unknown flag --bogus"},
        Case{"validate x.pipe --format", "flag --format needs a value"},
        Case{"simulate x.pipe --json=yes", "flag --json takes no value"},
        Case{"validate", "expected one FILE (or -)"}, Case{"convert a.pipe", "expected IN and OUT"},
        Case{"validate x.pipe --format xml", "--format is pipe or csv, not 'xml'"}}) {
    auto r = runCli(c.args, Stderr::Separate);
    EXPECT_EQ(r.exitCode, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find("usage: pipestudio-cli"), std::string::npos) << c.args << "\n" << r.err;
  }
}

// A usage error shows the mistake, the synopsis and where the rest is; not the whole usage
// text (run's is 50 lines), which --help prints.
TEST_F(CliCommandLine, UsageErrorsShowTheSynopsisNotTheWholeText) {
  for (const std::string args : {"simulate x.pipe --bogus", "session", "session frobnicate x.session",
                                 "validate x.pipe --format xml"}) {
    auto r = runCli(args, Stderr::Separate);
    EXPECT_EQ(r.exitCode, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find("usage: pipestudio-cli"), std::string::npos) << args << "\n" << r.err;
    EXPECT_NE(r.err.find("--help' describes every option"), std::string::npos) << args << "\n" << r.err;
    EXPECT_EQ(r.err.find("Exit status"), std::string::npos) << args << "\n" << r.err;
    EXPECT_LT(std::count(r.err.begin(), r.err.end(), '\n'), 8) << args << "\n" << r.err;
    auto help = runCli(args.substr(0, args.find(' ')) + " --help", Stderr::Separate);
    EXPECT_NE(help.out.find("Exit status"), std::string::npos) << help.out;
  }
}

TEST_F(CliCommandLine, CommandHelpIsItsUsage) {
  auto r = runCli("validate --help", Stderr::Separate);
  EXPECT_EQ(r.exitCode, 0);
  EXPECT_EQ(r.out.rfind("usage: pipestudio-cli validate FILE|-", 0), 0u) << r.out;
}

TEST_F(CliCommandLine, ScheduleFormatComesFromContentWhenTheNameSaysNothing) {
  const std::string csv = "'" + csvNoExtension_ + "'";
  struct Case {
    std::string args;  // after "validate"
    int exitCode;
    std::string text;  // expected in stdout and stderr together
  };
  for (const Case& c : {
           // A CSV named .txt, and the same CSV on stdin: read as a CSV by its content.
           Case{csv, 0, ": valid (2 devices"},
           Case{"- < " + csv, 0, "<stdin>: valid (2 devices"},
           // --format still decides: the CSV read as .pipe is an error in the file.
           Case{"--format pipe - < " + csv, 1, "<stdin>:1:"},
           // --set is for .pipe programs: given with a CSV it is refused, not ignored.
           Case{csv + " --set devices=2", 2, "--set applies to .pipe input only"},
       }) {
    auto r = runCli("validate " + c.args, Stderr::Separate);
    EXPECT_EQ(r.exitCode, c.exitCode) << c.args << "\n" << r.out << r.err;
    EXPECT_NE((r.out + r.err).find(c.text), std::string::npos) << c.args << "\n" << r.out << r.err;
  }
}

}  // namespace
