// How diagnostics print whatever a file held (docs/limits.md): messages and source excerpts
// bounded and escaped, at most limits::kMaxPrintedDiagnostics of them, then "and N more".
#include <gtest/gtest.h>

#include <string>

#include "pipestudio/core/io/input_limits.h"
#include "pipestudio/core/model/result.h"

using namespace ps::core;

TEST(DiagnosticsFormat, ALongMessageIsCutAndControlBytesAreEscaped) {
  const std::string huge = "bad '" + std::string(100000, 'x') + "'";
  const std::string out = formatDiagnostic(makeError("x", huge, {"f", 1, 1}));
  EXPECT_LT(out.size(), limits::kMaxMessageBytes + 100);
  EXPECT_NE(out.find("more bytes)"), std::string::npos) << out;
  const std::string ctl = formatDiagnostic(makeError("x", std::string("a\0b\x1b[31mc", 9), {"f", 1, 1}));
  EXPECT_NE(ctl.find("a\\x00b\\x1b[31mc"), std::string::npos) << ctl;
  EXPECT_EQ(ctl.find('\x1b'), std::string::npos);
}

TEST(DiagnosticsFormat, TheExcerptOfAHugeLineIsBoundedAroundTheColumn) {
  std::string line(1 << 20, 'a');
  line[500000] = '!';
  const std::string text = line + "\n";
  const std::string out = formatDiagnostic(makeError("x", "here", {"f", 1, 500001}), &text);
  EXPECT_LT(out.size(), 2 * limits::kMaxExcerptBytes + 100) << out;
  const size_t bang = out.find('!');
  ASSERT_NE(bang, std::string::npos) << out;
  // The caret sits under the '!'.
  const size_t lineStart = out.rfind('\n', bang) + 1;
  const size_t caretLine = out.find('\n', bang) + 1;
  EXPECT_EQ(out.find('^', caretLine) - caretLine, bang - lineStart) << out;
  std::string nul(100000, '\0');
  nul += "\n";
  const std::string zeros = formatDiagnostic(makeError("x", "nul", {"f", 1, 3}), &nul);
  EXPECT_LT(zeros.size(), 2 * limits::kMaxExcerptBytes + 100) << zeros;
  EXPECT_EQ(zeros.find('\0'), std::string::npos);
}

TEST(DiagnosticsFormat, AtMostAFixedNumberArePrintedThenACount) {
  Diagnostics ds;
  for (int i = 0; i < 1000; ++i) ds.push_back(makeError("x", "error " + std::to_string(i), {"f", i + 1, 1}));
  ds.push_back(makeWarning("w", "a warning"));
  const std::string out = formatDiagnostics(ds);
  EXPECT_NE(out.find("error 49\n"), std::string::npos);
  EXPECT_EQ(out.find("error 50\n"), std::string::npos);
  EXPECT_NE(out.find("and 951 more (950 errors)\n"), std::string::npos) << out.substr(out.size() - 200);
}
