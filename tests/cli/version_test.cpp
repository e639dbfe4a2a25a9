// pipestudio-cli --version: the run-event protocol it speaks is the one core's reader speaks.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "pipestudio/core/io/run_events.h"

using namespace ps::core;

// The real CLI reports the protocol version this reader speaks.
TEST(RunEvents, CliVersionReportsThisProtocol) {
  std::string cmd = std::string("'") + PIPESTUDIO_CLI + "' --version";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[256];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  EXPECT_EQ(pclose(p), 0);
  auto v = parseCliVersion(out);
  ASSERT_TRUE(v) << out;
  EXPECT_EQ(v->protocol, kRunEventProtocolVersion) << out;
}
