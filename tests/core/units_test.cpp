// The one time and byte formatter and parser (core/io/units.h) that the CLI, the GUI and the
// DSL share.
#include "pipestudio/core/io/units.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

using namespace ps::core;

TEST(Units, FormatsTimes) {
  EXPECT_EQ(formatMsValue(3.355541), "3.36");
  EXPECT_EQ(formatMsValue(0.004), "0.004");
  EXPECT_EQ(formatMsValue(0), "0.00");
  EXPECT_EQ(formatMsValue(1234.56), "1234.6");
  EXPECT_EQ(formatDurationMs(2), "2.00 ms");
  EXPECT_EQ(formatMsValue(1.0 / 0.0), "inf");
}

TEST(Units, FormatsBytes) {
  EXPECT_EQ(formatByteSize(100), "100 B");
  EXPECT_EQ(formatByteSize(8 << 10), "8 KiB");
  EXPECT_EQ(formatByteSize((17LL << 20) / 2), "8.5 MiB");
  EXPECT_EQ(formatByteSize(3LL << 39), "1.50 TiB");
  EXPECT_EQ(formatByteSizeFixed(3LL << 29), "1.50 GiB");
  EXPECT_EQ(formatByteSizeFixed(1536), "1.50 KiB");
}

TEST(Units, ParsesByteSizesInEveryUnit) {
  struct Case {
    const char* text;
    std::int64_t bytes;
  };
  for (const Case& c :
       {Case{"85899345920", 85899345920LL}, Case{"80GiB", 80LL << 30}, Case{"80 GiB", 80LL << 30},
        Case{"40GB", 40'000'000'000LL}, Case{"512M", 512'000'000LL}, Case{"1.5GiB", 3LL << 29},
        Case{"1e9", 1'000'000'000LL}, Case{"2TiB", 2LL << 40}, Case{"7B", 7}}) {
    SCOPED_TRACE(c.text);
    auto r = parseByteSize(c.text);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(*r, c.bytes);
  }
}

TEST(Units, RefusesWhatIsNotAByteSize) {
  for (const char* bad : {"", "GiB", "80Gib", "-1GiB", "2PiB", "nanGB", "80 GiB extra"}) {
    SCOPED_TRACE(bad);
    auto r = parseByteSize(bad);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, "units.bytes");
    EXPECT_NE(r.error().message.find("80GiB"), std::string::npos) << "the error shows an accepted form";
  }
}

TEST(Units, ParsesTimes) {
  EXPECT_DOUBLE_EQ(*parseDurationMs("2.5"), 2.5);
  EXPECT_DOUBLE_EQ(*parseDurationMs("2.5ms"), 2.5);
  EXPECT_DOUBLE_EQ(*parseDurationMs("300us"), 0.3);
  EXPECT_DOUBLE_EQ(*parseDurationMs("1.5s"), 1500);
  EXPECT_FALSE(parseDurationMs("1.5 min"));
  EXPECT_FALSE(parseDurationMs("-1ms"));
}

// The DSL reads sizes through the same table: a unit the CLI accepts is accepted in a .pipe
// file too, and an unknown one gets a hint from the same list.
TEST(Units, DslSharesTheByteUnits) {
  for (const char* unit : {"TiB", "GB", "MiB", "K"}) {
    SCOPED_TRACE(unit);
    EXPECT_TRUE(byteUnitFactor(unit).has_value());
  }
  EXPECT_FALSE(byteUnitFactor("Gib").has_value());
  EXPECT_EQ(*byteUnitFactor("GiB"), 1LL << 30);
}
