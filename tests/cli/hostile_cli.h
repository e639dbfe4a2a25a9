#pragma once
// pipestudio-cli on hostile files (docs/limits.md): exit 1 with the place and a one-line
// reason, within seconds; never "internal error", a signal or a "valid" with overflowed numbers.
// The fixture of the hostile-input cases of the compare and simulate tests.
#include <gtest/gtest.h>

#include <string>

#include "cli/cli_runner.h"
#include "fixtures/files.h"

namespace ps::test {

class HostileCli : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text) { return dir_.file(name, text); }
  // Exit 1, the message names the place, and nothing crashed.
  static void expectRefused(const CliResult& r, const std::string& place, const std::string& why) {
    EXPECT_EQ(r.exitCode, 1) << r.out << r.err;
    EXPECT_NE(r.err.find(place), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
    EXPECT_LT(r.seconds, 30.0);
  }
  TempDir dir_ = freshDir("ps_hostile_cli");
};

// The sanitizer build (make asan-test) reserves terabytes of address space for its shadow
// memory, so the limit only applies to a plain build.
constexpr const char* kMemoryLimit = kSanitized ? "" : "ulimit -v 2097152; ";

inline const char* kHostilePlan = "devices 2\nstages 2\nmicrobatches 1\ndevice 0: F0 B0\ndevice 1: F0 B0\n";

}  // namespace ps::test
