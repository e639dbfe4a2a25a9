// libFuzzer target: a session file opened, listed and exported as `session export` does.
// An input starting with SQLite's header is the file itself; any other input is SQL run on a
// copy of a small valid session (so the fuzzer reaches hostile values in well-formed tables).
// Built twice: fuzz_session opens the file read-only; fuzz_session_write (PS_FUZZ_SESSION_WRITE)
// opens it read-write, as `simulate --session` and `session note` do: migrations, then a
// schedule, an annotation and a run written into whatever the file held.
#include <sqlite3.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "pipestudio/core/io/chrome_trace.h"
#include "pipestudio/sessions/run_export.h"
#include "pipestudio/sessions/session_store.h"

namespace {

namespace fs = std::filesystem;
using namespace ps::sessions;

#ifdef PS_FUZZ_SESSION_WRITE
constexpr bool kWrite = true;
#else
constexpr bool kWrite = false;
#endif

std::string readFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void writeFile(const fs::path& p, std::string_view bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

const fs::path& dir() {
  static const fs::path d = [] {
    fs::path p = fs::temp_directory_path() /
                 ((kWrite ? "ps_fuzz_session_write_" : "ps_fuzz_session_") + std::to_string(::getpid()));
    fs::create_directories(p);
    return p;
  }();
  return d;
}

// A small session with one schedule, one profile and one run with ops, memory and transfers.
const std::string& templateBytes() {
  static const std::string bytes = [] {
    fs::path p = dir() / "template.session";
    fs::remove(p);
    {
      auto store = SessionStore::open(p.string());
      if (!store.ok()) return std::string();
      auto v =
          store->addSchedule("s", "devices 2\nstages 2\nmicrobatches 1\ndevice 0: F0 B0\ndevice 1: F0 B0\n");
      ps::core::Timeline t;
      t.devices = 2;
      t.label = "run";
      for (int d = 0; d < 2; ++d) {
        ps::core::TimelineOp op;
        op.device = d;
        op.step = 0;
        op.op = ps::core::Op{ps::core::OpKind::F, d, 0};
        op.start = d;
        op.end = d + 1;
        t.ops.push_back(op);
      }
      t.memory = {{{0, 10}, {1, 20}}, {{1, 30}}};
      t.transfers.push_back(ps::core::Transfer{0, 1, t.ops[0].op, t.ops[1].op, 64, 1, 1.5});
      RunInfo info;
      if (v.ok()) info.scheduleId = *v;
      (void)store->recordTimeline(info, t);
    }
    return readFile(p);
  }();
  return bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  const fs::path path = dir() / "fuzz.session";
  fs::remove(path);
  fs::remove(fs::path(path.string() + "-wal"));
  fs::remove(fs::path(path.string() + "-shm"));
  fs::remove(fs::path(path.string() + "-journal"));
  if (input.substr(0, 16) == std::string_view("SQLite format 3\0", 16)) {
    writeFile(path, input);
  } else {
    writeFile(path, templateBytes());
    sqlite3* db = nullptr;
    if (sqlite3_open(path.string().c_str(), &db) == SQLITE_OK) {
      std::string sql(input);
      // Keep the fuzzer on values, not on the engine's own limits.
      sqlite3_limit(db, SQLITE_LIMIT_LENGTH, 1 << 20);
      sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr);
    }
    sqlite3_close(db);
  }
  OpenOptions o;
  o.mode = kWrite ? OpenMode::ReadWrite : OpenMode::ReadOnly;
  o.busyTimeoutMs = 0;
  auto store = SessionStore::open(path.string(), o);
  if (!store.ok()) return 0;
  if (kWrite) {
    auto v = store->addSchedule("fuzz", "devices 1\nstages 1\nmicrobatches 1\ndevice 0: F0 B0\n");
    Annotation a;
    a.text = "note";
    if (v.ok()) a.scheduleId = *v;
    (void)store->addAnnotation(a);
    ps::core::Timeline t;
    t.devices = 1;
    ps::core::TimelineOp op;
    op.op = ps::core::Op{ps::core::OpKind::F, 0, 0};
    op.end = 1;
    t.ops.push_back(op);
    RunInfo info;
    if (v.ok()) info.scheduleId = *v;
    (void)store->recordTimeline(info, t);
  }
  (void)store->listSchedules();
  (void)store->listProfiles();
  auto runs = store->listRuns();
  if (!runs.ok()) return 0;
  size_t n = 0;
  for (const auto& r : *runs) {
    if (++n > 4) break;
    auto rec = store->run(r.id);
    auto t = store->loadTimeline(r.id);
    if (rec.ok() && t.ok()) {
      (void)runToJson(*rec, *t);
      (void)ps::core::exportChromeTrace(*t);
    }
  }
  return 0;
}
