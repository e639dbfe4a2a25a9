// pipestudio-cli without the engine: it links no libtorch, names every path it looked at when
// the engine is missing, refuses an engine of another protocol, and hands `run` over by exec
// (same process, same arguments, the engine's exit code). Uses stand-in engines (shell
// scripts), so these tests need no libtorch build.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli/cli_runner.h"
#include "pipestudio/core/io/run_events.h"

namespace fs = std::filesystem;
using ps::test::runCommand;
using ps::test::Stderr;

namespace {

fs::path freshDir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("ps_engine_handoff_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void writeScript(const fs::path& p, const std::string& body) {
  std::ofstream(p) << "#!/bin/sh\n" << body;
  ::chmod(p.c_str(), 0755);
}

std::string q(const fs::path& p) {
  return "'" + p.string() + "'";
}

// A copy of the CLI in DIR/bin, away from the build tree's engine; PIPESTUDIO_ENGINE unset.
fs::path isolatedCli(const fs::path& dir) {
  fs::create_directories(dir / "bin");
  fs::copy_file(PIPESTUDIO_CLI, dir / "bin" / "pipestudio-cli", fs::copy_options::overwrite_existing);
  return dir / "bin" / "pipestudio-cli";
}

}  // namespace

TEST(CliEngineHandoff, CliLinksNoTorch) {
  // ldd lists the whole closure of shared libraries the loader maps at start.
  auto r = runCommand("ldd '" PIPESTUDIO_CLI "'", Stderr::Merge);
  ASSERT_EQ(r.exitCode, 0) << r.out;
  EXPECT_NE(r.out.find("libc.so"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("torch"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("libc10"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("Qt6"), std::string::npos) << r.out;
}

TEST(CliEngineHandoff, MissingEngineNamesEveryPathLookedAt) {
  const fs::path dir = freshDir("missing");
  const fs::path cli = isolatedCli(dir);
  auto r = runCommand("env -u PIPESTUDIO_ENGINE " + q(cli) + " run x.pipe --model mlp:layers=2,hidden=8",
                      Stderr::Separate);
  EXPECT_EQ(r.exitCode, 4) << r.err;
  EXPECT_NE(r.err.find("cannot find pipestudio-engine"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find((dir / "bin" / "pipestudio-engine").string()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find((dir / "libexec" / "pipestudio" / "pipestudio-engine").string()), std::string::npos)
      << r.err;
  // The engine is a package of its own (it brings libtorch): the message says which.
  if (r.err.find("this build has no engine") == std::string::npos) {
    EXPECT_NE(r.err.find("install the pipestudio-engine package"), std::string::npos) << r.err;
  }
  EXPECT_TRUE(r.out.empty()) << r.out;

  // With --events jsonl the refusal is in the stream too, as the engine's refusals are.
  r = runCommand("env -u PIPESTUDIO_ENGINE " + q(cli) + " profile --model mlp --events jsonl", Stderr::Drop);
  EXPECT_EQ(r.exitCode, 4);
  ps::core::RunEventReader reader;
  reader.feed(r.out);
  reader.end();
  ASSERT_EQ(reader.errors().size(), 1u) << r.out;
  EXPECT_EQ(reader.errors()[0].code, "cli.engine_not_found");
  EXPECT_EQ(reader.errors()[0].stage, "refused");

  // Everything else still works without the engine.
  r = runCommand("env -u PIPESTUDIO_ENGINE " + q(cli) + " generate 1f1b --devices 2 --microbatches 2",
                 Stderr::Merge);
  EXPECT_EQ(r.exitCode, 0) << r.out;

  // --version: the CLI's own line first; an engine that is not installed is a state (a CLI or
  // GUI install without the engine package), not an error.
  r = runCommand("env -u PIPESTUDIO_ENGINE " + q(cli) + " --version", Stderr::Separate);
  auto v = ps::core::parseCliVersion(r.out);
  ASSERT_TRUE(v) << r.out;
  EXPECT_EQ(v->protocol, ps::core::kRunEventProtocolVersion);
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_TRUE(
      r.out.find("pipestudio-engine: not installed (run and profile need the pipestudio-engine package)") !=
          std::string::npos ||
      r.out.find("pipestudio-engine: not part of this build") != std::string::npos)
      << r.out;
  fs::remove_all(dir);
}

TEST(CliEngineHandoff, EnvironmentOverrideIsTheOnlyPathTried) {
  const fs::path dir = freshDir("override");
  auto r =
      runCommand("PIPESTUDIO_ENGINE=" + q(dir / "nowhere" / "engine") + " '" PIPESTUDIO_CLI "' run x.pipe",
                 Stderr::Separate);
  EXPECT_EQ(r.exitCode, 4) << r.err;
  EXPECT_NE(r.err.find((dir / "nowhere" / "engine").string() + " (PIPESTUDIO_ENGINE)"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("libexec"), std::string::npos) << r.err;

  writeScript(dir / "not-executable", "exit 0\n");
  ::chmod((dir / "not-executable").c_str(), 0644);
  r = runCommand("PIPESTUDIO_ENGINE=" + q(dir / "not-executable") + " '" PIPESTUDIO_CLI "' run x.pipe",
                 Stderr::Separate);
  EXPECT_EQ(r.exitCode, 4);
  EXPECT_NE(r.err.find("not executable"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

TEST(CliEngineHandoff, RunIsExecedWithTheSameArgumentsAndExitCode) {
  const fs::path dir = freshDir("exec");
  // Stand-in engine: reports its pid, arguments, the protocol the CLI announced and stdin.
  writeScript(dir / "engine",
              "echo \"pid=$$\"\n"
              "echo \"args=$*\"\n"
              "echo \"protocol=$PIPESTUDIO_CLI_PROTOCOL\"\n"
              "echo \"stdin=$(cat)\"\n"
              "echo 'to stderr' >&2\n"
              "exit 7\n");
  // The shell execs the CLI, so the CLI has the shell's pid; an exec (not a fork) keeps it.
  const std::string cmd = "printf 'schedule text' | PIPESTUDIO_ENGINE=" + q(dir / "engine") +
                          " sh -c 'echo outer=$$; exec \"$0\" \"$@\"' '" PIPESTUDIO_CLI
                          "' run - --model 'mlp:layers=2,hidden=8' --events jsonl --cancel-on-eof";
  auto r = runCommand(cmd, Stderr::Separate);
  EXPECT_EQ(r.exitCode, 7) << r.out << r.err;
  EXPECT_NE(r.out.find("args=run - --model mlp:layers=2,hidden=8 --events jsonl --cancel-on-eof"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("protocol=" + std::to_string(ps::core::kRunEventProtocolVersion)), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("stdin=schedule text"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "to stderr\n");
  const auto outer = r.out.substr(r.out.find("outer=") + 6, r.out.find('\n') - 6);
  EXPECT_NE(r.out.find("pid=" + outer + "\n"), std::string::npos) << r.out;

  // --help of an engine command is the engine's to answer.
  r = runCommand("PIPESTUDIO_ENGINE=" + q(dir / "engine") + " '" PIPESTUDIO_CLI "' profile --help </dev/null",
                 Stderr::Drop);
  EXPECT_EQ(r.exitCode, 7);
  EXPECT_NE(r.out.find("args=profile --help"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

TEST(CliEngineHandoff, VersionAsksTheEngineAndRefusesAnotherProtocol) {
  const fs::path dir = freshDir("version");
  writeScript(dir / "engine",
              "[ \"$1\" = --version ] && echo 'pipestudio-engine 0.1.0 (run-event protocol 1)'\n");
  writeScript(dir / "engine99",
              "[ \"$1\" = --version ] && echo 'pipestudio-engine 9.9.9 (run-event protocol 99)'\nexit 0\n");
  writeScript(dir / "notengine", "echo 'Python 3.11'\n");

  auto r = runCommand("PIPESTUDIO_ENGINE=" + q(dir / "engine") + " '" PIPESTUDIO_CLI "' --version",
                      Stderr::Separate);
  if (ps::core::kRunEventProtocolVersion == 1) {
    EXPECT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(r.out, ps::core::cliVersionLine(ps::core::parseCliVersion(r.out)->program) +
                         "\npipestudio-engine 0.1.0 (run-event protocol 1) at " + (dir / "engine").string() +
                         "\n");
  }

  r = runCommand("PIPESTUDIO_ENGINE=" + q(dir / "engine99") + " '" PIPESTUDIO_CLI "' --version",
                 Stderr::Separate);
  EXPECT_EQ(r.exitCode, 4);
  EXPECT_NE(r.out.find("pipestudio-engine 9.9.9 (run-event protocol 99)"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("version mismatch"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find((dir / "engine99").string()), std::string::npos) << r.err;

  r = runCommand("PIPESTUDIO_ENGINE=" + q(dir / "notengine") + " '" PIPESTUDIO_CLI "' --version",
                 Stderr::Separate);
  EXPECT_EQ(r.exitCode, 4);
  EXPECT_NE(r.err.find("did not print a pipestudio-engine version"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Python 3.11"), std::string::npos) << r.err;
  fs::remove_all(dir);
}
