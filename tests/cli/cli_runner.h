#pragma once
// Runs pipestudio-cli (PIPESTUDIO_CLI, set by tests/CMakeLists.txt) the way a user's shell
// would, for the command-line tests of every library.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace ps::test {

// Built under AddressSanitizer (make asan-test): processes start several times slower and
// reserve terabytes of address space for shadow memory.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

// CI=true (.ci/run exports it): everything the tests need is installed there, so a test that
// would skip for something missing must fail instead (a skip would pass without testing).
inline bool inCi() {
  const char* v = std::getenv("CI");
  return v && std::string(v) == "true";
}

// Where the command's stderr goes: into `out` with stdout, nowhere, or into `err`.
enum class Stderr { Merge, Drop, Separate };

struct CliResult {
  int exitCode = -1;  // -1 when it did not exit normally (or could not start)
  std::string out;
  std::string err;  // with Stderr::Separate
  double seconds = 0;
};

// A whole shell command line.
inline CliResult runCommand(std::string command, Stderr stderrTo = Stderr::Merge) {
  static std::atomic<int> counter{0};
  std::string errFile;
  if (stderrTo == Stderr::Merge) command += " 2>&1";
  if (stderrTo == Stderr::Drop) command += " 2>/dev/null";
  if (stderrTo == Stderr::Separate) {
    // ctest runs test cases as parallel processes: the pid keeps their files apart.
    errFile = (std::filesystem::temp_directory_path() /
               ("ps_cli_err_" + std::to_string(::getpid()) + "_" + std::to_string(++counter) + ".txt"))
                  .string();
    command += " 2>'" + errFile + "'";
  }
  CliResult r;
  const auto t0 = std::chrono::steady_clock::now();
  FILE* p = popen(command.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!errFile.empty()) {
    std::ifstream e(errFile);
    r.err.assign(std::istreambuf_iterator<char>(e), {});
    std::error_code ec;
    std::filesystem::remove(errFile, ec);
  }
  return r;
}

// pipestudio-cli with these arguments.
inline CliResult runCli(const std::string& args, Stderr stderrTo = Stderr::Merge) {
  return runCommand(std::string("'") + PIPESTUDIO_CLI + "' " + args, stderrTo);
}

// ... with stderr merged into stdout, or dropped.
inline CliResult runCli(const std::string& args, bool withStderr) {
  return runCli(args, withStderr ? Stderr::Merge : Stderr::Drop);
}

}  // namespace ps::test
