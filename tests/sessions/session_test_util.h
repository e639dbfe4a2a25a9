#pragma once
// Helpers shared by the session tests: a fresh temporary directory per test, raw SQLite access
// for building files the store would not write, and hand-made timelines.
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "pipestudio/core/model/timeline.h"

namespace ps::sessions::test {

// A directory removed (with everything in it) when the test ends.
class TempDir : public std::filesystem::path {
 public:
  explicit TempDir(const std::filesystem::path& p) : std::filesystem::path(p) {}
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(*this, ec);
  }
};

inline TempDir freshDir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  auto dir = std::filesystem::temp_directory_path() /
             ("ps_sessions_" + std::to_string(getpid()) + "_" + info->test_suite_name() + "_" + info->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return TempDir(dir);
}

inline std::string readBytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void writeBytes(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
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

}  // namespace ps::sessions::test
