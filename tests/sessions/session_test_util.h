#pragma once
// Helpers shared by the session tests: a fresh temporary directory per test, raw SQLite access
// for building files the store would not write, and hand-made timelines.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "fixtures/files.h"
#include "pipestudio/core/model/timeline.h"
#include "pipestudio/sessions/session_store.h"

namespace ps::sessions::test {

using ps::test::freshDir;
using ps::test::TempDir;
inline std::string readBytes(const std::filesystem::path& p) {
  return ps::test::readFile(p);
}
inline void writeBytes(const std::filesystem::path& p, const std::string& bytes) {
  ps::test::writeFile(p, bytes);
}

// A raw connection for the test's own SQL.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) ADD_FAILURE() << "cannot open " << path;
    sqlite3_busy_timeout(db_, 5000);
  }
  ~RawDb() { sqlite3_close(db_); }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;
  int exec(const std::string& sql) { return sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr); }
  void mustExec(const std::string& sql) {
    char* err = nullptr;
    int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
    EXPECT_EQ(rc, SQLITE_OK) << sql << ": " << (err ? err : "");
    sqlite3_free(err);
  }
  std::string text(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    std::string out;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW) {
      auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
      out = p ? p : "";
    }
    sqlite3_finalize(s);
    return out;
  }
  long long integer(const std::string& sql) { return std::stoll("0" + text(sql)); }
  sqlite3* handle() { return db_; }

 private:
  sqlite3* db_ = nullptr;
};

inline core::TimelineOp op(int device, core::OpKind kind, int stage, int mb, double start, double end,
                           int step = 0, bool overlapped = false) {
  core::TimelineOp o;
  o.device = device;
  o.step = step;
  o.op = core::Op{kind, stage, mb};
  o.overlapped = overlapped;
  o.start = start;
  o.end = end;
  return o;
}

// `n` ops over `devices` devices, sorted by (device, start), times 1 ms each.
inline core::Timeline syntheticTimeline(size_t n, int devices) {
  core::Timeline t;
  t.devices = devices;
  t.label = "synthetic";
  t.ops.reserve(n);
  size_t perDevice = (n + static_cast<size_t>(devices) - 1) / static_cast<size_t>(devices);
  for (size_t i = 0; i < n; ++i) {
    int d = static_cast<int>(i / perDevice);
    auto k = static_cast<int>(i % perDevice);
    t.ops.push_back(op(d, (k % 2) ? core::OpKind::B : core::OpKind::F, d, k / 2, k + d, k + d + 1.0, k));
  }
  return t;
}

// A session with one run (8 ops on 2 devices, a memory sample on each) for the tests that
// then damage its rows.
struct Hostile {
  std::string path;
  Id run = 0;
};

inline Hostile makeHostileSession(const std::filesystem::path& dir) {
  Hostile h;
  h.path = (dir / "hostile.session").string();
  auto store = SessionStore::open(h.path);
  EXPECT_TRUE(store.ok());
  auto t = syntheticTimeline(8, 2);
  t.memory.resize(2);
  t.memory[0].push_back(ps::core::MemorySample{0.5, 1024});
  t.memory[1].push_back(ps::core::MemorySample{0.5, 2048});
  h.run = *store->recordTimeline(RunInfo{}, t);
  return h;
}

}  // namespace ps::sessions::test
