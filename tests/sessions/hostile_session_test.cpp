// Session files written by something else: every number of a run's rows is bounded before it
// sizes memory (docs/limits.md); the error names the table and the row, nothing throws.
#include <gtest/gtest.h>

#include <chrono>

#include "pipestudio/sessions/run_export.h"
#include "pipestudio/sessions/session_store.h"
#include "session_test_util.h"

using namespace ps::sessions;
using namespace ps::sessions::test;

namespace {

// Opens the file, loads the run's timeline and returns the error (which must exist).
ps::core::Diagnostic loadError(const Hostile& h) {
  auto store = SessionStore::open(h.path);
  EXPECT_TRUE(store.ok());
  auto t0 = std::chrono::steady_clock::now();
  auto t = store->loadTimeline(h.run);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  EXPECT_FALSE(t.ok());
  return t.ok() ? ps::core::Diagnostic{} : t.error();
}

}  // namespace

TEST(HostileSession, NegativeOrHugeOpCountIsRefusedNamingTableAndRow) {
  auto dir = freshDir();
  auto h = makeHostileSession(dir);
  for (const char* v : {"-5", "9000000000000000000"}) {
    RawDb(h.path).mustExec(std::string("UPDATE runs SET op_count = ") + v);
    auto e = loadError(h);
    EXPECT_EQ(e.code, "session.invalid-value");
    EXPECT_NE(e.message.find("table runs"), std::string::npos) << e.message;
    EXPECT_NE(e.message.find("id " + std::to_string(h.run)), std::string::npos) << e.message;
    EXPECT_NE(e.message.find("op_count"), std::string::npos) << e.message;
    EXPECT_NE(e.message.find(v), std::string::npos) << e.message;
  }
}

TEST(HostileSession, DevicesOutOfRangeInEveryTableAreRefused) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"UPDATE runs SET devices = -3", "runs"},
      {"UPDATE runs SET devices = 2000000000", "runs"},
      {"UPDATE run_ops SET device = 1500000000 WHERE seq = 3", "run_ops"},
      {"UPDATE run_ops SET device = -1 WHERE seq = 0", "run_ops"},
      {"UPDATE run_ops SET stage = 4294967296 WHERE seq = 1", "run_ops"},
      {"UPDATE run_ops SET kind = 40 WHERE seq = 1", "run_ops"},
      {"UPDATE run_ops SET start_ms = 1e308 * 10 WHERE seq = 1", "run_ops"},
      {"UPDATE memory_samples SET device = 1000000000 WHERE device = 1", "memory_samples"},
      {"UPDATE memory_samples SET bytes = -9000000000000000000", "memory_samples"},
  };
  for (const auto& [sql, table] : cases) {
    auto dir = freshDir();
    auto h = makeHostileSession(dir);
    RawDb(h.path).mustExec(sql);
    auto e = loadError(h);
    EXPECT_EQ(e.code, "session.invalid-value") << sql;
    EXPECT_NE(e.message.find("table " + table), std::string::npos) << sql << ": " << e.message;
    EXPECT_EQ(e.location.file, h.path);
  }
}

TEST(HostileSession, HugeMetricsReadAsFallbackAndExportDoesNotThrow) {
  auto dir = freshDir();
  auto h = makeHostileSession(dir);
  RawDb(h.path).mustExec(
      R"(UPDATE runs SET label = 'bad )"
      "\xff\xfe"
      R"(', metrics_json = '{"makespan":1,"ops":-1,"devices":[{"device":1e300,"peakInflightMicrobatches":1e300,"staticBytes":1e300,"peakMemoryOp":{"device":1e300,"step":-1e300}}]}')");
  auto store = SessionStore::open(h.path);
  ASSERT_TRUE(store.ok());
  auto t = store->loadTimeline(h.run);
  ASSERT_TRUE(t.ok()) << ps::core::formatDiagnostics(t.errors());
  ASSERT_EQ(t->metrics.devices.size(), 1u);
  EXPECT_EQ(t->metrics.devices[0].device, 0);
  EXPECT_EQ(t->metrics.devices[0].peakInflightMicrobatches, 0);
  EXPECT_EQ(t->metrics.devices[0].staticBytes, 0);
  EXPECT_EQ(t->metrics.ops, 0u);
  auto rec = store->run(h.run);
  ASSERT_TRUE(rec.ok());
  std::string json = runToJson(*rec, *t);  // a label that is not UTF-8 must not throw
  EXPECT_NE(json.find("pipestudio-run"), std::string::npos);
}

// PRAGMA user_version = -1 once indexed the migrations with size_t(-1) (std::bad_alloc in every
// writer: `simulate --session`, `session note`). A negative version is a damaged file.
TEST(HostileSession, NegativeSchemaVersionIsACorruptFile) {
  auto dir = freshDir();
  auto h = makeHostileSession(dir);
  for (const char* v : {"-1", "-2147483648"}) {
    RawDb(h.path).mustExec(std::string("PRAGMA user_version = ") + v);
    for (auto mode : {OpenMode::ReadWrite, OpenMode::ReadOnly}) {
      OpenOptions o;
      o.mode = mode;
      auto store = SessionStore::open(h.path, o);
      ASSERT_FALSE(store.ok());
      EXPECT_EQ(store.error().code, "session.corrupt");
      EXPECT_NE(store.error().message.find(std::string("schema version ") + v), std::string::npos)
          << store.error().message;
    }
  }
}

// A version from the future opens read-only; a write is refused naming both versions.
TEST(HostileSession, FutureSchemaVersionIsRefusedForWritingNamingBothVersions) {
  auto dir = freshDir();
  auto h = makeHostileSession(dir);
  RawDb(h.path).mustExec("PRAGMA user_version = 2147483647");
  auto store = SessionStore::open(h.path);
  ASSERT_TRUE(store.ok());
  EXPECT_TRUE(store->readOnly());
  auto added = store->addSchedule("x", "devices 1\n");
  ASSERT_FALSE(added.ok());
  EXPECT_EQ(added.error().code, "session.read-only");
  EXPECT_NE(added.error().message.find("schema version 2147483647"), std::string::npos)
      << added.error().message;
  EXPECT_NE(added.error().message.find("knows up to " + std::to_string(kSchemaVersion)), std::string::npos)
      << added.error().message;
}
