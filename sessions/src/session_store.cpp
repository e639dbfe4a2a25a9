#include "pipestudio/sessions/session_store.h"

#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <thread>
#include <type_traits>
#include <unordered_map>

#include "json_codec.h"
#include "pipestudio/core/model/enum_names.h"
#include "pipestudio/core/model/limits.h"

namespace ps::sessions {

using core::Diagnostic;
using core::makeError;
using core::Result;
using core::Status;

// --- names -------------------------------------------------------------------------------

constexpr core::EnumName<ProfileSource> kProfileSourceNames[] = {{ProfileSource::Manual, "manual"},
                                                                 {ProfileSource::Analytic, "analytic"},
                                                                 {ProfileSource::Profiled, "profiled"}};

PS_ENUM_NAME_FUNCTION(ProfileSource, kProfileSourceNames, profileSourceName);

PS_ENUM_FROM_NAME_FUNCTION(ProfileSource, kProfileSourceNames, profileSourceFromName);

namespace {

std::int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string hostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return {};
  return buf;
}

bool isBusy(int rc) {
  int primary = rc & 0xff;
  return primary == SQLITE_BUSY || primary == SQLITE_LOCKED;
}

// Chunk size of recordTimeline: each chunk is one transaction, short enough that another
// process's write (the GUI saving a schedule) waits only briefly.
constexpr size_t kChunk = 65536;

}  // namespace

// --- connection, statements, transactions -------------------------------------------------

struct SessionStore::Impl {
  sqlite3* db = nullptr;
  std::string path;
  bool readOnly = false;
  std::string readOnlyReason;
  int version = 0;
  int busyTimeoutMs = 5000;
  core::Diagnostics notes;
  std::unordered_map<const char*, sqlite3_stmt*> cache;  // keyed by the SQL literal

  ~Impl() {
    for (auto& entry : cache) sqlite3_finalize(entry.second);
    if (db) sqlite3_close_v2(db);
  }

  core::SourceLocation where() const { return core::SourceLocation{path, 0, 0}; }
  Diagnostic error(std::string code, std::string message) const {
    return makeError(std::move(code), std::move(message), where());
  }
  // An SQLite failure, classified so callers and users can tell lock, corruption and disk
  // problems apart.
  Diagnostic sqlError(const std::string& what, int rc) const {
    std::string detail = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    int primary = rc & 0xff;
    if (isBusy(rc))
      return error("session.busy", what + ": the session file is locked by another process (waited " +
                                       std::to_string(busyTimeoutMs) + " ms): " + detail);
    if (primary == SQLITE_CORRUPT)
      return error("session.corrupt", what + ": the session file is damaged (" + detail + ")");
    if (primary == SQLITE_NOTADB) return error("session.not-sqlite", what + ": not an SQLite database");
    if (primary == SQLITE_FULL) return error("session.disk-full", what + ": the disk is full");
    if (primary == SQLITE_READONLY)
      return error("session.read-only", what + ": the session file cannot be written (" + detail + ")");
    if (rc == SQLITE_CONSTRAINT_FOREIGNKEY)
      return error("session.missing-reference",
                   what + ": it refers to a schedule, profile or run that is not in the session");
    return error("session.sqlite", what + ": " + detail);
  }

  Status checkWritable(const std::string& what) const {
    if (!readOnly) return core::okStatus();
    return error("session.read-only", what + ": the session is open read-only (" + readOnlyReason + ")");
  }

  // Repeats an operation that SQLite reports busy without waiting in its own busy handler
  // (WAL recovery, snapshot conflicts), until the configured timeout.
  template <typename F>
  int retrying(F&& op) const {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(busyTimeoutMs);
    for (int attempt = 0;; ++attempt) {
      int rc = op();
      if (!isBusy(rc) || std::chrono::steady_clock::now() >= deadline) return rc;
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(2 + attempt * 2, 50)));
    }
  }

  int exec(const char* sql) const {
    return retrying([&] { return sqlite3_exec(db, sql, nullptr, nullptr, nullptr); });
  }

  Result<sqlite3_stmt*> prepare(const char* sql, const std::string& what) {
    if (auto it = cache.find(sql); it != cache.end()) return it->second;
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    if (rc != SQLITE_OK) {
      sqlite3_finalize(stmt);
      return sqlError(what, rc);
    }
    cache.emplace(sql, stmt);
    return stmt;
  }
};

namespace {

// A borrowed cached statement: binds, steps, reads columns, and resets when it goes away.
class Stmt {
 public:
  Stmt(const SessionStore::Impl& impl, sqlite3_stmt* s) : impl_(&impl), s_(s) {}
  Stmt(Stmt&& o) noexcept : impl_(o.impl_), s_(o.s_) { o.s_ = nullptr; }
  Stmt& operator=(Stmt&&) = delete;
  ~Stmt() { reset(); }
  void reset() {
    if (!s_) return;
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  void bind(int i, std::int64_t v) { sqlite3_bind_int64(s_, i, v); }
  void bind(int i, int v) { sqlite3_bind_int(s_, i, v); }
  void bind(int i, double v) { sqlite3_bind_double(s_, i, v); }
  void bind(int i, std::string_view v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
  }
  void bind(int i, const std::string& v) { bind(i, std::string_view(v)); }
  // Binds ?first, ?first+1, ... in order.
  template <class... V>
  void bindFrom(int first, const V&... v) {
    (bind(first++, v), ...);
  }
  template <typename T>
  void bind(int i, const std::optional<T>& v) {
    if (v)
      bind(i, *v);
    else
      sqlite3_bind_null(s_, i);
  }
  // SQLITE_ROW, SQLITE_DONE or an error code; a busy first step is retried.
  int step() {
    int rc = sqlite3_step(s_);
    if (isBusy(rc) && !stepped_) rc = impl_->retrying([&] { return sqlite3_step(s_); });
    stepped_ = true;
    return rc;
  }
  // Steps a statement that returns no rows; resets it afterwards.
  int run() {
    int rc = step();
    reset();
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
  }
  // For bulk inserts: step, then reset for the next row (bindings are all rebound).
  int insertRow() {
    int rc = sqlite3_step(s_);
    sqlite3_reset(s_);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
  }
  bool isNull(int c) const { return sqlite3_column_type(s_, c) == SQLITE_NULL; }
  std::int64_t i64(int c) const { return sqlite3_column_int64(s_, c); }
  int i32(int c) const { return sqlite3_column_int(s_, c); }
  double f64(int c) const { return sqlite3_column_double(s_, c); }
  std::string text(int c) const {
    auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_, c));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(s_, c))) : std::string();
  }
  std::optional<std::int64_t> optI64(int c) const {
    return isNull(c) ? std::nullopt : std::optional<std::int64_t>(i64(c));
  }

 private:
  const SessionStore::Impl* impl_;
  sqlite3_stmt* s_;
  bool stepped_ = false;
};

Result<Stmt> statement(SessionStore::Impl& impl, const char* sql, const std::string& what) {
  auto s = impl.prepare(sql, what);
  PS_TRY(s);
  return Stmt(impl, *s);
}

// A transaction opened by `beginSql` that ends with `abandonSql` unless committed.
class Txn {
 public:
  Txn(SessionStore::Impl& impl, const char* beginSql, const char* abandonSql)
      : impl_(impl), beginSql_(beginSql), abandonSql_(abandonSql) {}
  Txn(const Txn&) = delete;
  Txn& operator=(const Txn&) = delete;
  ~Txn() {
    if (active_) sqlite3_exec(impl_.db, abandonSql_, nullptr, nullptr, nullptr);
  }
  Status begin(const std::string& what) { return exec(beginSql_, what, true); }
  Status commit(const std::string& what) { return exec("COMMIT", what, false); }

 private:
  Status exec(const char* sql, const std::string& what, bool activeAfter) {
    if (int rc = impl_.exec(sql); rc != SQLITE_OK) return impl_.sqlError(what, rc);
    active_ = activeAfter;
    return core::okStatus();
  }
  SessionStore::Impl& impl_;
  const char* beginSql_;
  const char* abandonSql_;
  bool active_ = false;
};

// BEGIN IMMEDIATE ... COMMIT; rolls back unless committed. IMMEDIATE takes the write lock up
// front, so two writers queue on the busy timeout instead of deadlocking on a lock upgrade.
struct WriteTxn : Txn {
  explicit WriteTxn(SessionStore::Impl& impl) : Txn(impl, "BEGIN IMMEDIATE", "ROLLBACK") {}
};

// A read transaction: the statements inside see one snapshot even while another process writes.
struct ReadTxn : Txn {
  explicit ReadTxn(SessionStore::Impl& impl) : Txn(impl, "BEGIN", "COMMIT") {}
};

// One INSERT in a write transaction of its own, `values` bound to ?1, ?2, ... The new row's id.
template <class... V>
Result<Id> insertOne(SessionStore::Impl& impl, const char* sql, const std::string& what, const V&... values) {
  WriteTxn txn(impl);
  PS_TRY(txn.begin(what));
  auto s = statement(impl, sql, what);
  PS_TRY(s);
  s->bindFrom(1, values...);
  if (int rc = s->run(); rc != SQLITE_OK) return impl.sqlError(what, rc);
  const Id id = sqlite3_last_insert_rowid(impl.db);
  PS_TRY(txn.commit(what));
  return id;
}

// Every row of a prepared query, each turned into a T by `read`.
template <class T, class Read>
Result<std::vector<T>> readAll(SessionStore::Impl& impl, Stmt& s, const std::string& what, Read read) {
  std::vector<T> out;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) out.push_back(read(s));
  if (rc != SQLITE_DONE) return impl.sqlError(what, rc);
  return out;
}

// Runs `sql` with ?1 = `id` and hands every result row to `row` (a Status); the first error ends it.
template <class Row>
Status eachRow(SessionStore::Impl& impl, const char* sql, Id id, const std::string& what, Row row) {
  auto s = statement(impl, sql, what);
  PS_TRY(s);
  s->bind(1, id);
  int rc;
  while ((rc = s->step()) == SQLITE_ROW) PS_TRY(row(*s));
  if (rc != SQLITE_DONE) return impl.sqlError(what, rc);
  return core::okStatus();
}

bool processGone(std::int64_t pid, const std::string& host, const std::string& thisHost) {
  if (pid <= 0 || host.empty() || host != thisHost) return false;  // unknown: assume alive
  if (pid == getpid()) return false;
  return kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

}  // namespace

// --- open ---------------------------------------------------------------------------------

SessionStore::SessionStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SessionStore::SessionStore(SessionStore&&) noexcept = default;
SessionStore& SessionStore::operator=(SessionStore&&) noexcept = default;
SessionStore::~SessionStore() = default;

const std::string& SessionStore::path() const {
  return impl_->path;
}
bool SessionStore::readOnly() const {
  return impl_->readOnly;
}
int SessionStore::schemaVersion() const {
  return impl_->version;
}
const core::Diagnostics& SessionStore::notes() const {
  return impl_->notes;
}

namespace {

struct FileIdentity {
  std::int64_t applicationId = 0;
  int userVersion = 0;
  std::int64_t objects = 0;  // rows of sqlite_schema
};

Result<FileIdentity> identify(SessionStore::Impl& impl) {
  FileIdentity id;
  const std::string what = "cannot read the session file";
  auto one = [&](const char* sql, std::int64_t& out) -> Status {
    sqlite3_stmt* s = nullptr;
    int rc = sqlite3_prepare_v2(impl.db, sql, -1, &s, nullptr);
    if (rc == SQLITE_OK) {
      rc = impl.retrying([&] { return sqlite3_step(s); });
      if (rc == SQLITE_ROW) {
        out = sqlite3_column_int64(s, 0);
        rc = SQLITE_OK;
      }
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_OK) return impl.sqlError(what, rc);
    return core::okStatus();
  };
  std::int64_t version = 0;
  PS_TRY(one("SELECT count(*) FROM sqlite_schema", id.objects));
  PS_TRY(one("PRAGMA application_id", id.applicationId));
  PS_TRY(one("PRAGMA user_version", version));
  id.userVersion = static_cast<int>(version);
  return id;
}

Status migrate(SessionStore::Impl& impl, int from) {
  const auto& migrations = schemaMigrations();
  for (int v = from; v < kSchemaVersion; ++v) {
    const std::string what = "cannot upgrade the session file to schema version " + std::to_string(v + 1);
    WriteTxn txn(impl);
    PS_TRY(txn.begin(what));
    // Another process may have migrated while we waited for the lock.
    auto id = identify(impl);
    PS_TRY(id);
    if (id->userVersion != v) {
      if (id->userVersion > v) {
        v = id->userVersion - 1;
        continue;  // the transaction rolls back (nothing written)
      }
      return impl.error("session.schema",
                        what + ": unexpected schema version " + std::to_string(id->userVersion));
    }
    std::string sql(migrations[static_cast<size_t>(v)]);
    if (v == 0) sql += "\nPRAGMA application_id = " + std::to_string(kApplicationId) + ";";
    sql += "\nPRAGMA user_version = " + std::to_string(v + 1) + ";";
    int rc = sqlite3_exec(impl.db, sql.c_str(), nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return impl.sqlError(what, rc);
    PS_TRY(txn.commit(what));
  }
  return core::okStatus();
}

Status openConnection(SessionStore::Impl& impl, bool readOnly) {
  if (impl.db) {
    for (auto& entry : impl.cache) sqlite3_finalize(entry.second);
    impl.cache.clear();
    sqlite3_close_v2(impl.db);
    impl.db = nullptr;
  }
  int flags =
      SQLITE_OPEN_NOMUTEX | (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  std::string name = impl.path;
  if (readOnly && ::access(impl.path.c_str(), W_OK) != 0) {
    // A file we cannot write (installed with the application, a read-only share) cannot change
    // under us through this process, and SQLite would otherwise try to create -shm / -wal files
    // beside a WAL-mode file: open it immutable, which takes no locks and creates nothing.
    name = "file:";
    for (unsigned char ch : impl.path) {
      if (ch == '%' || ch == '?' || ch == '#' || ch < 0x20) {
        static const char* hex = "0123456789ABCDEF";
        name += '%';
        name += hex[ch >> 4];
        name += hex[ch & 15];
      } else {
        name += static_cast<char>(ch);
      }
    }
    name += "?mode=ro&immutable=1";
    flags |= SQLITE_OPEN_URI;
  } else if (readOnly) {
    // A file we may write, opened to read: SQLite's read-only connections create a WAL-mode
    // file's -wal and -shm files but cannot remove them when they close (that takes a write lock
    // and a checkpoint), so `session list` would leave both beside the user's file. Open it as
    // any writer does, so that the last connection to close removes them, and refuse every
    // write statement with query_only; nothing is migrated or switched (open()).
    flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_READWRITE;
  }
  int rc = sqlite3_open_v2(name.c_str(), &impl.db, flags, nullptr);
  if (rc != SQLITE_OK) {
    Diagnostic d = impl.sqlError("cannot open the session file", rc);
    sqlite3_close_v2(impl.db);
    impl.db = nullptr;
    return d;
  }
  sqlite3_extended_result_codes(impl.db, 1);
  sqlite3_busy_timeout(impl.db, impl.busyTimeoutMs);
  if (readOnly) impl.exec("PRAGMA query_only = ON");  // before anything reads the file
  return core::okStatus();
}

}  // namespace

Result<SessionStore> SessionStore::open(const std::string& path, const OpenOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->busyTimeoutMs = std::max(0, options.busyTimeoutMs);
  const bool wantReadOnly = options.mode == OpenMode::ReadOnly;

  struct stat st {};
  bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode))
    return impl->error("session.not-a-file", "is a directory, not a session file");
  if (!exists && wantReadOnly) return impl->error("session.not-found", "no such session file");

  PS_TRY(openConnection(*impl, wantReadOnly));

  // Identify the file before anything is written: a file that is not ours is left untouched.
  auto id = identify(*impl);
  if (!id) {
    const Diagnostic& d = id.error();
    if (d.code == "session.not-sqlite" || d.code == "session.corrupt")
      return impl->error(
          d.code, d.code == "session.not-sqlite"
                      ? "not a PipeStudio session: the file is not an SQLite database (left unchanged)"
                      : "the session file is damaged and cannot be read (left unchanged): " + d.message);
    return id.errors();
  }
  bool fresh = id->objects == 0 && id->applicationId == 0 && id->userVersion == 0;
  if (!fresh && id->applicationId != kApplicationId) {
    std::string why = id->applicationId != 0
                          ? "it is an SQLite database of another application (application_id " +
                                std::to_string(id->applicationId) + ")"
                          : "it is an SQLite database without the PipeStudio schema";
    return impl->error("session.foreign", "not a PipeStudio session: " + why + " (left unchanged)");
  }
  // PRAGMA user_version is any 32-bit number; a negative one no PipeStudio ever wrote.
  if (id->userVersion < 0)
    return impl->error("session.corrupt", "the session file is damaged: schema version " +
                                              std::to_string(id->userVersion) + " (left unchanged)");
  impl->version = id->userVersion;

  if (id->userVersion > kSchemaVersion) {
    impl->readOnly = true;
    impl->readOnlyReason = "written by a newer PipeStudio: schema version " +
                           std::to_string(id->userVersion) + ", this build knows up to " +
                           std::to_string(kSchemaVersion);
    impl->notes.push_back(core::makeWarning(
        "session.newer-version",
        "opened read-only: the session was " + impl->readOnlyReason + "; update PipeStudio to change it",
        impl->where()));
    if (!wantReadOnly) PS_TRY(openConnection(*impl, true));
  } else if (wantReadOnly) {
    impl->readOnly = true;
    impl->readOnlyReason = "opened read-only";
    if (fresh)
      return impl->error("session.not-a-session", "not a PipeStudio session: the file is an empty database");
    if (id->userVersion < kSchemaVersion)
      return impl->error("session.needs-upgrade",
                         "the session has schema version " + std::to_string(id->userVersion) +
                             " and needs upgrading to version " + std::to_string(kSchemaVersion) +
                             "; open it read-write once to upgrade it");
  }

  if (impl->readOnly) {
    impl->exec("PRAGMA query_only = ON");
  } else {
    int rc = impl->exec("PRAGMA journal_mode = WAL");
    if (rc != SQLITE_OK) return impl->sqlError("cannot switch the session file to WAL mode", rc);
    // WAL + NORMAL: a crash of the process never loses or corrupts a committed transaction.
    impl->exec("PRAGMA synchronous = NORMAL");
  }
  impl->exec("PRAGMA foreign_keys = ON");

  if (!impl->readOnly && id->userVersion < kSchemaVersion) {
    PS_TRY(migrate(*impl, id->userVersion));
    impl->version = kSchemaVersion;
    if (!fresh)
      impl->notes.push_back(core::makeWarning("session.upgraded",
                                              "upgraded the session from schema version " +
                                                  std::to_string(id->userVersion) + " to " +
                                                  std::to_string(kSchemaVersion),
                                              impl->where()));
  }
  return SessionStore(std::move(impl));
}

// --- schedules ----------------------------------------------------------------------------

Result<Id> SessionStore::addSchedule(const std::string& name, const std::string& pipeText,
                                     std::optional<Id> parentId) {
  const std::string what = "cannot save schedule '" + name + "'";
  PS_TRY(impl_->checkWritable(what));
  if (name.empty()) return impl_->error("session.invalid", what + ": a schedule version needs a name");
  return insertOne(*impl_,
                   "INSERT INTO schedules(name, pipe_text, parent_id, created_ms) VALUES(?1, ?2, ?3, ?4)",
                   what, name, pipeText, parentId, nowMs());
}

Result<std::vector<ScheduleInfo>> SessionStore::listSchedules() const {
  const std::string what = "cannot list schedules";
  auto s = statement(*impl_, "SELECT id, name, parent_id, created_ms FROM schedules ORDER BY name, id", what);
  PS_TRY(s);
  return readAll<ScheduleInfo>(*impl_, *s, what, [](Stmt& q) {
    return ScheduleInfo{q.i64(0), q.text(1), q.optI64(2), q.i64(3)};
  });
}

namespace {
Result<ScheduleVersion> readSchedule(SessionStore::Impl& impl, Stmt& s, const std::string& what,
                                     const std::string& missing) {
  int rc = s.step();
  if (rc == SQLITE_ROW) {
    return ScheduleVersion{ScheduleInfo{s.i64(0), s.text(1), s.optI64(2), s.i64(3)}, s.text(4)};
  }
  if (rc == SQLITE_DONE) return impl.error("session.not-found", missing);
  return impl.sqlError(what, rc);
}
}  // namespace

Result<ScheduleVersion> SessionStore::schedule(Id id) const {
  const std::string what = "cannot read schedule version " + std::to_string(id);
  auto s = statement(*impl_, "SELECT id, name, parent_id, created_ms, pipe_text FROM schedules WHERE id = ?1",
                     what);
  PS_TRY(s);
  s->bind(1, id);
  return readSchedule(*impl_, *s, what, "no schedule version " + std::to_string(id) + " in the session");
}

Result<ScheduleVersion> SessionStore::latestSchedule(const std::string& name) const {
  const std::string what = "cannot read schedule '" + name + "'";
  auto s = statement(*impl_,
                     "SELECT id, name, parent_id, created_ms, pipe_text FROM schedules WHERE name = ?1 "
                     "ORDER BY id DESC LIMIT 1",
                     what);
  PS_TRY(s);
  s->bind(1, name);
  return readSchedule(*impl_, *s, what, "no schedule named '" + name + "' in the session");
}

// --- profiles -----------------------------------------------------------------------------

Result<Id> SessionStore::addProfile(const std::string& name, const std::string& json, ProfileSource source,
                                    std::optional<Id> fromRunId) {
  const std::string what = "cannot save cost profile '" + name + "'";
  PS_TRY(impl_->checkWritable(what));
  if (name.empty()) return impl_->error("session.invalid", what + ": a cost profile needs a name");
  if (!nlohmann::json::accept(json))
    return impl_->error("session.invalid", what + ": the profile text is not valid JSON");
  return insertOne(*impl_,
                   "INSERT INTO profiles(name, json, source, run_id, created_ms) VALUES(?1, ?2, ?3, ?4, ?5)",
                   what, name, json, profileSourceName(source), fromRunId, nowMs());
}

namespace {
ProfileInfo readProfileInfo(Stmt& s) {
  return ProfileInfo{s.i64(0), s.text(1), profileSourceFromName(s.text(2)).value_or(ProfileSource::Manual),
                     s.optI64(3), s.i64(4)};
}
}  // namespace

Result<std::vector<ProfileInfo>> SessionStore::listProfiles() const {
  const std::string what = "cannot list cost profiles";
  auto s =
      statement(*impl_, "SELECT id, name, source, run_id, created_ms FROM profiles ORDER BY name, id", what);
  PS_TRY(s);
  return readAll<ProfileInfo>(*impl_, *s, what, readProfileInfo);
}

Result<ProfileVersion> SessionStore::profile(Id id) const {
  const std::string what = "cannot read cost profile " + std::to_string(id);
  auto s = statement(*impl_, "SELECT id, name, source, run_id, created_ms, json FROM profiles WHERE id = ?1",
                     what);
  PS_TRY(s);
  s->bind(1, id);
  int rc = s->step();
  if (rc == SQLITE_ROW) return ProfileVersion{readProfileInfo(*s), s->text(5)};
  if (rc == SQLITE_DONE)
    return impl_->error("session.not-found", "no cost profile " + std::to_string(id) + " in the session");
  return impl_->sqlError(what, rc);
}

// --- runs ---------------------------------------------------------------------------------

Result<Id> SessionStore::beginRun(const RunInfo& info) {
  const std::string what = "cannot record a run";
  PS_TRY(impl_->checkWritable(what));
  if (info.status != core::RunState::Queued && info.status != core::RunState::Running)
    return impl_->error("session.invalid", what + ": a run begins queued or running, not " +
                                               std::string(ps::core::runStateName(info.status)));
  if (info.devices < 0) return impl_->error("session.invalid", what + ": negative device count");
  if (!nlohmann::json::accept(info.configJson))
    return impl_->error("session.invalid", what + ": the run configuration is not valid JSON");
  static const std::string host = hostName();
  return insertOne(*impl_,
                   "INSERT INTO runs(schedule_id, profile_id, target, devices, model, label, source, status, "
                   "started_ms, config_json, writer_pid, writer_host) "
                   "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                   what, info.scheduleId, info.profileId, info.target, info.devices, info.model, info.label,
                   core::timelineSourceName(info.source), ps::core::runStateName(info.status),
                   info.startedMs > 0 ? info.startedMs : nowMs(), info.configJson,
                   static_cast<std::int64_t>(getpid()), host);
}

namespace {
// Inside a write transaction: the run exists and is still open for appends.
Status requireOpenRun(SessionStore::Impl& impl, Id runId, const std::string& what) {
  auto s = statement(impl, "SELECT status FROM runs WHERE id = ?1", what);
  PS_TRY(s);
  s->bind(1, runId);
  int rc = s->step();
  if (rc == SQLITE_DONE)
    return impl.error("session.not-found", what + ": no run " + std::to_string(runId) + " in the session");
  if (rc != SQLITE_ROW) return impl.sqlError(what, rc);
  auto status = ps::core::parseRunState(s->text(0));
  if (status != core::RunState::Queued && status != core::RunState::Running)
    return impl.error("session.run-finished", what + ": run " + std::to_string(runId) + " is already " +
                                                  s->text(0) + " and cannot change");
  return core::okStatus();
}

Result<std::int64_t> nextSeq(SessionStore::Impl& impl, const char* sql, Id runId, std::optional<int> device,
                             const std::string& what) {
  auto s = statement(impl, sql, what);
  PS_TRY(s);
  s->bind(1, runId);
  if (device) s->bind(2, *device);
  int rc = s->step();
  if (rc != SQLITE_ROW) return impl.sqlError(what, rc);
  return s->i64(0);
}
}  // namespace

Status SessionStore::setRunStatus(Id runId, core::RunState status) {
  const std::string what = "cannot change the status of run " + std::to_string(runId);
  PS_TRY(impl_->checkWritable(what));
  if (status != core::RunState::Queued && status != core::RunState::Running)
    return impl_->error("session.invalid", what + ": use finishRun for a final status");
  WriteTxn txn(*impl_);
  PS_TRY(txn.begin(what));
  PS_TRY(requireOpenRun(*impl_, runId, what));
  auto s = statement(*impl_, "UPDATE runs SET status = ?2 WHERE id = ?1", what);
  PS_TRY(s);
  s->bind(1, runId);
  s->bind(2, ps::core::runStateName(status));
  if (int rc = s->run(); rc != SQLITE_OK) return impl_->sqlError(what, rc);
  return txn.commit(what);
}

namespace {
// The shape every append shares: one write transaction on an open run, rows numbered on from
// the run's (and device's) largest seq, one prepared INSERT bound per row by `bindRow`.
template <class Row, class BindRow>
Status appendRows(SessionStore::Impl& impl, Id runId, std::span<const Row> rows, const std::string& what,
                  const char* nextSeqSql, std::optional<int> device, const char* insertSql, BindRow bindRow) {
  PS_TRY(impl.checkWritable(what));
  if (device && *device < 0) return impl.error("session.invalid", what + ": negative device");
  WriteTxn txn(impl);
  PS_TRY(txn.begin(what));
  PS_TRY(requireOpenRun(impl, runId, what));
  auto seq = nextSeq(impl, nextSeqSql, runId, device, what);
  PS_TRY(seq);
  auto s = statement(impl, insertSql, what);
  PS_TRY(s);
  std::int64_t next = *seq;
  for (const auto& row : rows) {
    s->bind(1, runId);
    bindRow(*s, next++, row);
    if (int rc = s->insertRow(); rc != SQLITE_OK) return impl.sqlError(what, rc);
  }
  if constexpr (std::is_same_v<Row, core::TimelineOp>) {
    auto u = statement(impl, "UPDATE runs SET op_count = op_count + ?2 WHERE id = ?1", what);
    PS_TRY(u);
    u->bind(1, runId);
    u->bind(2, static_cast<std::int64_t>(rows.size()));
    if (int rc = u->run(); rc != SQLITE_OK) return impl.sqlError(what, rc);
  }
  return txn.commit(what);
}
}  // namespace

namespace {
// An op's kind, stage and micro-batch at parameters `first`, `first` + 1, `first` + 2.
void bindOp(Stmt& s, int first, const core::Op& op) {
  s.bindFrom(first, static_cast<int>(op.kind), static_cast<int>(op.stage), static_cast<int>(op.microbatch));
}
}  // namespace

Status SessionStore::appendRunOps(Id runId, std::span<const core::TimelineOp> ops) {
  return appendRows(
      *impl_, runId, ops, "cannot store ops of run " + std::to_string(runId),
      "SELECT coalesce(max(seq) + 1, 0) FROM run_ops WHERE run_id = ?1", std::nullopt,
      "INSERT INTO run_ops(run_id, seq, device, step, kind, stage, microbatch, overlapped, start_ms, "
      "end_ms) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
      [](Stmt& s, std::int64_t seq, const core::TimelineOp& op) {
        s.bindFrom(2, seq, op.device, op.step);
        bindOp(s, 5, op.op);
        s.bindFrom(8, op.overlapped ? 1 : 0, op.start, op.end);
      });
}

Status SessionStore::appendMemory(Id runId, int device, std::span<const core::MemorySample> samples) {
  return appendRows(
      *impl_, runId, samples, "cannot store memory samples of run " + std::to_string(runId),
      "SELECT coalesce(max(seq) + 1, 0) FROM memory_samples WHERE run_id = ?1 AND device = ?2", device,
      "INSERT INTO memory_samples(run_id, device, seq, time_ms, bytes) VALUES(?1, ?2, ?3, ?4, ?5)",
      [device](Stmt& s, std::int64_t seq, const core::MemorySample& m) {
        s.bindFrom(2, device, seq, m.time, m.bytes);
      });
}

Status SessionStore::appendTransfers(Id runId, std::span<const core::Transfer> transfers) {
  return appendRows(
      *impl_, runId, transfers, "cannot store transfers of run " + std::to_string(runId),
      "SELECT coalesce(max(seq) + 1, 0) FROM transfers WHERE run_id = ?1", std::nullopt,
      "INSERT INTO transfers(run_id, seq, src_device, dst_device, producer_kind, producer_stage, "
      "producer_microbatch, consumer_kind, consumer_stage, consumer_microbatch, bytes, start_ms, "
      "end_ms) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
      [](Stmt& s, std::int64_t seq, const core::Transfer& t) {
        s.bindFrom(2, seq, t.srcDevice, t.dstDevice);
        bindOp(s, 5, t.producer);
        bindOp(s, 8, t.consumer);
        s.bindFrom(11, t.bytes, t.start, t.end);
      });
}

Status SessionStore::finishRun(Id runId, core::RunState status, const std::string& error,
                               const std::optional<core::TimelineMetrics>& metrics,
                               const core::Diagnostics& diagnostics) {
  const std::string what = "cannot finish run " + std::to_string(runId);
  PS_TRY(impl_->checkWritable(what));
  if (status == core::RunState::Queued || status == core::RunState::Running)
    return impl_->error("session.invalid",
                        what + ": the final status must be succeeded, failed or cancelled");
  WriteTxn txn(*impl_);
  PS_TRY(txn.begin(what));
  PS_TRY(requireOpenRun(*impl_, runId, what));

  double makespan = 0;
  double bubble = 0;
  std::optional<std::string> metricsJson;
  if (metrics) {
    makespan = metrics->makespan;
    bubble = metrics->bubbleRatio;
    metricsJson = detail::metricsToJson(*metrics).dump();
  } else {
    // Same definition as docs/formats.md, "The simulator" (metrics): busy counts an overlapped pair once, by
    // its span.
    auto s = statement(*impl_,
                       "SELECT coalesce(max(o.end_ms) - min(o.start_ms), 0), "
                       "coalesce(sum(CASE WHEN o.overlapped THEN (o.end_ms - o.start_ms) / 2.0 "
                       "ELSE o.end_ms - o.start_ms END), 0), r.devices "
                       "FROM runs r LEFT JOIN run_ops o ON o.run_id = r.id WHERE r.id = ?1",
                       what);
    PS_TRY(s);
    s->bind(1, runId);
    int rc = s->step();
    if (rc != SQLITE_ROW) return impl_->sqlError(what, rc);
    makespan = s->f64(0);
    double busy = s->f64(1);
    int devices = s->i32(2);
    if (makespan > 0 && devices > 0) bubble = 1.0 - busy / (devices * makespan);
  }
  auto u = statement(
      *impl_,
      "UPDATE runs SET status = ?2, ended_ms = ?3, error = ?4, makespan_ms = ?5, bubble_ratio = ?6, "
      "metrics_json = ?7, diagnostics_json = ?8 WHERE id = ?1",
      what);
  PS_TRY(u);
  std::string diagnosticsJson = detail::diagnosticsToJson(diagnostics).dump();
  u->bind(1, runId);
  u->bind(2, ps::core::runStateName(status));
  u->bind(3, nowMs());
  u->bind(4, error);
  u->bind(5, makespan);
  u->bind(6, bubble);
  u->bind(7, metricsJson);
  u->bind(8, diagnosticsJson);
  if (int rc = u->run(); rc != SQLITE_OK) return impl_->sqlError(what, rc);
  return txn.commit(what);
}

Status SessionStore::setRunConfig(Id runId, const std::string& configJson) {
  const std::string what = "cannot change the configuration of run " + std::to_string(runId);
  PS_TRY(impl_->checkWritable(what));
  auto parsed = nlohmann::json::parse(configJson, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object())
    return impl_->error("session.invalid", what + ": the run configuration is not a JSON object");
  WriteTxn txn(*impl_);
  PS_TRY(txn.begin(what));
  auto s = statement(*impl_, "UPDATE runs SET config_json = ?2 WHERE id = ?1", what);
  PS_TRY(s);
  s->bind(1, runId);
  s->bind(2, configJson);
  if (int rc = s->run(); rc != SQLITE_OK) return impl_->sqlError(what, rc);
  if (sqlite3_changes(impl_->db) == 0)
    return impl_->error("session.not-found", what + ": no run " + std::to_string(runId) + " in the session");
  return txn.commit(what);
}

Result<Id> SessionStore::recordTimeline(const RunInfo& info, const core::Timeline& timeline) {
  RunInfo begin = info;
  if (begin.devices == 0) begin.devices = timeline.devices;
  if (begin.label.empty()) begin.label = timeline.label;
  begin.source = timeline.source;
  begin.status = core::RunState::Running;
  auto runId = beginRun(begin);
  PS_TRY(runId);

  auto fail = [&](const core::Diagnostics& errors) -> Result<Id> {
    // Best effort: leave the run marked failed rather than running forever.
    (void)finishRun(*runId, core::RunState::Failed, errors.empty() ? std::string() : errors.front().message);
    return errors;
  };
  std::span<const core::TimelineOp> ops(timeline.ops);
  for (size_t i = 0; i < ops.size(); i += kChunk) {
    auto st = appendRunOps(*runId, ops.subspan(i, std::min(kChunk, ops.size() - i)));
    if (!st) return fail(st.errors());
  }
  std::span<const core::Transfer> transfers(timeline.transfers);
  for (size_t i = 0; i < transfers.size(); i += kChunk) {
    auto st = appendTransfers(*runId, transfers.subspan(i, std::min(kChunk, transfers.size() - i)));
    if (!st) return fail(st.errors());
  }
  for (size_t d = 0; d < timeline.memory.size(); ++d) {
    std::span<const core::MemorySample> samples(timeline.memory[d]);
    for (size_t i = 0; i < samples.size(); i += kChunk) {
      auto st =
          appendMemory(*runId, static_cast<int>(d), samples.subspan(i, std::min(kChunk, samples.size() - i)));
      if (!st) return fail(st.errors());
    }
  }
  std::string error;
  if (!timeline.complete) {
    error = "incomplete timeline";
    for (const auto& d : timeline.diagnostics)
      if (d.severity == core::Severity::Error) {
        error = d.message;
        break;
      }
  }
  std::optional<core::TimelineMetrics> metrics;
  if (timeline.metrics.makespan > 0 || timeline.ops.empty()) metrics = timeline.metrics;
  auto st = finishRun(*runId, timeline.complete ? core::RunState::Succeeded : core::RunState::Failed, error,
                      metrics, timeline.diagnostics);
  PS_TRY(st);
  return *runId;
}

namespace {
constexpr const char* kRunColumns =
    "id, schedule_id, profile_id, target, devices, model, label, status, started_ms, ended_ms, error, "
    "makespan_ms, "
    "bubble_ratio, op_count, writer_pid, writer_host";

// A run's row, every count and number checked as it is read (a session file may have been
// written by something else): a device count, op count, makespan or bubble ratio out of range,
// or a status no writer uses, is an error naming the row and the column, never a figure shown.
Result<RunSummary> readRunSummary(const SessionStore::Impl& impl, const Stmt& s, const std::string& thisHost,
                                  const std::string& what) {
  namespace lim = core::limits;
  RunSummary r;
  r.id = s.i64(0);
  const std::string row = "id " + std::to_string(r.id);
  auto bad = [&](const char* column, const std::string& value, const std::string& range) {
    return impl.error("session.invalid-value", what + ": table runs, " + row + ": " + column + " " + value +
                                                   " is out of range (" + range + ")");
  };
  const std::int64_t devices = s.i64(4), ops = s.i64(13);
  if (s.isNull(4) || devices < 0 || devices > lim::kMaxDevices)
    return bad("devices", s.isNull(4) ? "NULL" : std::to_string(devices),
               "0.." + std::to_string(lim::kMaxDevices));
  if (ops < 0 || ops > lim::kMaxOps)
    return bad("op_count", std::to_string(ops), "0.." + std::to_string(lim::kMaxOps));
  const double makespan = s.f64(11), bubble = s.f64(12);
  if (!lim::validTimeMs(makespan) || makespan < 0)
    return bad("makespan_ms", std::to_string(makespan), "a finite time of 0 or more");
  if (!std::isfinite(bubble) || bubble < 0 || bubble > 1)
    return bad("bubble_ratio", std::to_string(bubble), "0..1");
  const auto status = ps::core::parseRunState(s.text(7));
  if (!status) return bad("status", "'" + s.text(7) + "'", "running, succeeded, failed or cancelled");
  r.scheduleId = s.optI64(1);
  r.profileId = s.optI64(2);
  r.target = s.text(3);
  r.devices = static_cast<int>(devices);
  r.model = s.text(5);
  r.label = s.text(6);
  r.status = *status;
  r.startedMs = s.i64(8);
  r.endedMs = s.optI64(9);
  r.error = s.text(10);
  r.makespan = makespan;
  r.bubbleRatio = bubble;
  r.opCount = ops;
  if (!r.finished()) r.interrupted = processGone(s.i64(14), s.text(15), thisHost);
  return r;
}
}  // namespace

Result<std::vector<RunSummary>> SessionStore::listRuns(const RunFilter& filter) const {
  const std::string what = "cannot list runs";
  static const std::string sql =
      std::string("SELECT ") + kRunColumns +
      " FROM runs WHERE (?1 IS NULL OR schedule_id = ?1) AND (?2 IS NULL OR status = ?2) "
      "ORDER BY id DESC LIMIT ?3";
  auto s = statement(*impl_, sql.c_str(), what);
  PS_TRY(s);
  s->bind(1, filter.scheduleId);
  if (filter.status) s->bind(2, ps::core::runStateName(*filter.status));
  s->bind(3, filter.limit > 0 ? filter.limit : -1);
  static const std::string host = hostName();
  std::vector<RunSummary> out;
  int rc;
  while ((rc = s->step()) == SQLITE_ROW) {
    auto r = readRunSummary(*impl_, *s, host, what);
    PS_TRY(r);
    out.push_back(std::move(*r));
  }
  if (rc != SQLITE_DONE) return impl_->sqlError(what, rc);
  return out;
}

Result<RunRecord> SessionStore::run(Id runId) const {
  const std::string what = "cannot read run " + std::to_string(runId);
  static const std::string sql =
      std::string("SELECT ") + kRunColumns + ", config_json, source FROM runs WHERE id = ?1";
  auto s = statement(*impl_, sql.c_str(), what);
  PS_TRY(s);
  s->bind(1, runId);
  int rc = s->step();
  if (rc == SQLITE_DONE)
    return impl_->error("session.not-found", "no run " + std::to_string(runId) + " in the session");
  if (rc != SQLITE_ROW) return impl_->sqlError(what, rc);
  static const std::string host = hostName();
  RunRecord r;
  auto summary = readRunSummary(*impl_, *s, host, what);
  PS_TRY(summary);
  r.summary = std::move(*summary);
  r.configJson = s->text(16);
  r.source = core::timelineSourceFromName(s->text(17));
  return r;
}

Result<core::Timeline> SessionStore::loadTimeline(Id runId) const {
  const std::string what = "cannot load the timeline of run " + std::to_string(runId);
  ReadTxn txn(*impl_);
  PS_TRY(txn.begin(what));
  core::Timeline t;
  core::RunState status = core::RunState::Running;
  // Every number of a row is checked before it sizes memory or indexes a table: a session file
  // is a file like any other, and may have been written by something else.
  namespace lim = core::limits;
  auto bad = [&](const char* table, const std::string& row, const char* column, const std::string& value,
                 const std::string& range) {
    return impl_->error("session.invalid-value", what + ": table " + table + ", " + row + ": " + column +
                                                     " " + value + " is out of range (" + range + ")");
  };
  auto checkInt = [&](const Stmt& s, int col, std::int64_t lo, std::int64_t hi, const char* table,
                      const std::string& row, const char* column,
                      std::int64_t& out) -> std::optional<Diagnostic> {
    std::int64_t v = s.i64(col);
    if (s.isNull(col) || v < lo || v > hi)
      return bad(table, row, column, s.isNull(col) ? std::string("NULL") : std::to_string(v),
                 std::to_string(lo) + ".." + std::to_string(hi));
    out = v;
    return std::nullopt;
  };
  auto checkTime = [&](const Stmt& s, int col, const char* table, const std::string& row, const char* column,
                       double& out) -> std::optional<Diagnostic> {
    double v = s.f64(col);
    if (!lim::validTimeMs(v))
      return bad(table, row, column, std::to_string(v),
                 "a finite time within " + std::to_string(lim::kMaxTimeMs) + " ms");
    out = v;
    return std::nullopt;
  };
  // A table holds at most `max` rows of a run: `n` is the count with this row.
  auto rowLimit = [&](const char* table, const std::string& row, size_t n,
                      size_t max) -> std::optional<Diagnostic> {
    if (n <= max) return std::nullopt;
    return bad(table, row, "row count", std::to_string(n), "at most " + std::to_string(max));
  };
  auto validKind = [](std::int64_t k) {
    return (k >= 0 && k < static_cast<std::int64_t>(core::OpKind::kBuiltinCount)) ||
           (k >= core::kFirstUserKind && k < 65536);
  };
  // An op's kind, stage and micro-batch from columns first..first+2 (named prefix + "kind", ...).
  auto checkOp = [&](const Stmt& s, int first, const char* table, const std::string& row,
                     const std::string& prefix, core::Op& out) -> std::optional<Diagnostic> {
    std::int64_t kind = 0, stage = 0, mb = 0;
    const std::string kindColumn = prefix + "kind";
    if (auto e = checkInt(s, first, 0, 65535, table, row, kindColumn.c_str(), kind)) return e;
    if (!validKind(kind))
      return bad(table, row, kindColumn.c_str(), std::to_string(kind), "a built-in or user op kind");
    if (auto e =
            checkInt(s, first + 1, 0, lim::kMaxStages - 1, table, row, (prefix + "stage").c_str(), stage))
      return e;
    if (auto e = checkInt(s, first + 2, -1, lim::kMaxMicrobatches - 1, table, row,
                          (prefix + "microbatch").c_str(), mb))
      return e;
    out = core::Op{static_cast<core::OpKind>(kind), static_cast<int>(stage), static_cast<int>(mb)};
    return std::nullopt;
  };
  {
    auto s = statement(*impl_,
                       "SELECT devices, label, source, status, metrics_json, diagnostics_json, makespan_ms, "
                       "bubble_ratio, op_count FROM runs WHERE id = ?1",
                       what);
    PS_TRY(s);
    s->bind(1, runId);
    int rc = s->step();
    if (rc == SQLITE_DONE)
      return impl_->error("session.not-found", "no run " + std::to_string(runId) + " in the session");
    if (rc != SQLITE_ROW) return impl_->sqlError(what, rc);
    const std::string row = "id " + std::to_string(runId);
    std::int64_t devices = 0;
    if (auto e = checkInt(*s, 0, 0, lim::kMaxDevices, "runs", row, "devices", devices)) return *e;
    std::int64_t opCount = 0;
    if (!s->isNull(8))
      if (auto e = checkInt(*s, 8, 0, lim::kMaxOps, "runs", row, "op_count", opCount)) return *e;
    t.devices = static_cast<int>(devices);
    t.label = s->text(1);
    t.source = core::timelineSourceFromName(s->text(2));
    status = ps::core::parseRunState(s->text(3)).value_or(core::RunState::Failed);
    if (!s->isNull(4)) {
      auto j = nlohmann::json::parse(s->text(4), nullptr, false);
      t.metrics = detail::metricsFromJson(j);
    } else {
      t.metrics.makespan = s->f64(6);
      t.metrics.bubbleRatio = s->f64(7);
      t.metrics.ops = static_cast<size_t>(opCount);
    }
    t.diagnostics = detail::diagnosticsFromJson(nlohmann::json::parse(s->text(5), nullptr, false));
    t.ops.reserve(static_cast<size_t>(opCount));
  }
  t.complete = status == core::RunState::Succeeded;
  {
    PS_TRY(eachRow(
        *impl_,
        "SELECT device, step, kind, stage, microbatch, overlapped, start_ms, end_ms, seq FROM run_ops "
        "WHERE run_id = ?1 ORDER BY seq",
        runId, what, [&](Stmt& q) -> Status {
          const std::string row = "run_id " + std::to_string(runId) + " seq " + std::to_string(q.i64(8));
          if (auto e = rowLimit("run_ops", row, t.ops.size() + 1, lim::kMaxOps)) return *e;
          std::int64_t device = 0, step = 0;
          core::TimelineOp op;
          if (auto e = checkInt(q, 0, 0, lim::kMaxRank, "run_ops", row, "device", device)) return *e;
          if (auto e = checkInt(q, 1, -1, lim::kMaxOps, "run_ops", row, "step", step)) return *e;
          if (auto e = checkOp(q, 2, "run_ops", row, "", op.op)) return *e;
          if (auto e = checkTime(q, 6, "run_ops", row, "start_ms", op.start)) return *e;
          if (auto e = checkTime(q, 7, "run_ops", row, "end_ms", op.end)) return *e;
          op.device = static_cast<int>(device);
          op.step = static_cast<int>(step);
          op.overlapped = q.i64(5) != 0;
          t.ops.push_back(op);
          return core::okStatus();
        }));
    // Appends may arrive in completion order (a live run); the Timeline contract is (device, start).
    auto byDeviceStart = [](const core::TimelineOp& a, const core::TimelineOp& b) {
      return a.device != b.device ? a.device < b.device : a.start < b.start;
    };
    if (!std::is_sorted(t.ops.begin(), t.ops.end(), byDeviceStart))
      std::stable_sort(t.ops.begin(), t.ops.end(), byDeviceStart);
  }
  {
    size_t samples = 0;
    PS_TRY(eachRow(
        *impl_,
        "SELECT device, time_ms, bytes, seq FROM memory_samples WHERE run_id = ?1 ORDER BY device, seq",
        runId, what, [&](Stmt& q) -> Status {
          const std::string row = "run_id " + std::to_string(runId) + " device " + std::to_string(q.i64(0)) +
                                  " seq " + std::to_string(q.i64(3));
          if (auto e = rowLimit("memory_samples", row, ++samples, lim::kMaxOps * 4)) return *e;
          std::int64_t dev = 0, bytes = 0;
          core::MemorySample m;
          if (auto e = checkInt(q, 0, 0, lim::kMaxRank, "memory_samples", row, "device", dev)) return *e;
          if (auto e = checkTime(q, 1, "memory_samples", row, "time_ms", m.time)) return *e;
          if (auto e = checkInt(q, 2, -lim::kMaxBytes, lim::kMaxBytes, "memory_samples", row, "bytes", bytes))
            return *e;
          m.bytes = bytes;
          auto device = static_cast<size_t>(dev);
          if (t.memory.size() <= device)
            t.memory.resize(std::max(device + 1, static_cast<size_t>(t.devices)));
          t.memory[device].push_back(m);
          return core::okStatus();
        }));
  }
  {
    PS_TRY(eachRow(
        *impl_,
        "SELECT src_device, dst_device, producer_kind, producer_stage, producer_microbatch, "
        "consumer_kind, consumer_stage, consumer_microbatch, bytes, start_ms, end_ms, seq FROM transfers "
        "WHERE run_id = ?1 ORDER BY seq",
        runId, what, [&](Stmt& q) -> Status {
          const std::string row = "run_id " + std::to_string(runId) + " seq " + std::to_string(q.i64(11));
          if (auto e = rowLimit("transfers", row, t.transfers.size() + 1, lim::kMaxOps)) return *e;
          std::int64_t src = 0, dst = 0;
          core::Transfer x;
          if (auto e = checkInt(q, 0, 0, lim::kMaxRank, "transfers", row, "src_device", src)) return *e;
          if (auto e = checkInt(q, 1, 0, lim::kMaxRank, "transfers", row, "dst_device", dst)) return *e;
          if (auto e = checkOp(q, 2, "transfers", row, "producer_", x.producer)) return *e;
          if (auto e = checkOp(q, 5, "transfers", row, "consumer_", x.consumer)) return *e;
          if (auto e = checkInt(q, 8, 0, lim::kMaxBytes, "transfers", row, "bytes", x.bytes)) return *e;
          x.srcDevice = static_cast<int>(src);
          x.dstDevice = static_cast<int>(dst);
          if (auto e = checkTime(q, 9, "transfers", row, "start_ms", x.start)) return *e;
          if (auto e = checkTime(q, 10, "transfers", row, "end_ms", x.end)) return *e;
          t.transfers.push_back(x);
          return core::okStatus();
        }));
  }
  return t;
}

namespace {
// One row by id in a write transaction; `noun` names it in the not-found error.
Status deleteById(SessionStore::Impl& impl, const char* sql, Id id, const std::string& noun) {
  const std::string what = "cannot delete " + noun + " " + std::to_string(id);
  PS_TRY(impl.checkWritable(what));
  WriteTxn txn(impl);
  PS_TRY(txn.begin(what));
  auto s = statement(impl, sql, what);
  PS_TRY(s);
  s->bind(1, id);
  if (int rc = s->run(); rc != SQLITE_OK) return impl.sqlError(what, rc);
  if (sqlite3_changes(impl.db) == 0)
    return impl.error("session.not-found", "no " + noun + " " + std::to_string(id) + " in the session");
  return txn.commit(what);
}
}  // namespace

Status SessionStore::deleteRun(Id runId) {
  return deleteById(*impl_, "DELETE FROM runs WHERE id = ?1", runId, "run");
}

// --- annotations --------------------------------------------------------------------------

Result<Id> SessionStore::addAnnotation(const Annotation& a) {
  const std::string what = "cannot save the note";
  PS_TRY(impl_->checkWritable(what));
  if (a.text.empty()) return impl_->error("session.invalid", what + ": the note is empty");
  return insertOne(*impl_,
                   "INSERT INTO annotations(schedule_id, run_id, time_ms, device, text, created_ms) "
                   "VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
                   what, a.scheduleId, a.runId, a.time, a.device, a.text, nowMs());
}

Result<std::vector<Annotation>> SessionStore::annotations(std::optional<Id> scheduleId,
                                                          std::optional<Id> runId) const {
  const std::string what = "cannot list notes";
  auto s = statement(*impl_,
                     "SELECT id, schedule_id, run_id, time_ms, device, text, created_ms FROM annotations "
                     "WHERE (?1 IS NULL OR schedule_id = ?1) AND (?2 IS NULL OR run_id = ?2) "
                     "ORDER BY coalesce(time_ms, 0), id",
                     what);
  PS_TRY(s);
  s->bind(1, scheduleId);
  s->bind(2, runId);
  std::vector<Annotation> out;
  int rc;
  while ((rc = s->step()) == SQLITE_ROW) {
    Annotation a;
    a.id = s->i64(0);
    a.scheduleId = s->optI64(1);
    a.runId = s->optI64(2);
    const std::string row = "table annotations, id " + std::to_string(a.id) + ": ";
    if (!s->isNull(3)) {
      a.time = s->f64(3);
      if (!core::limits::validTimeMs(*a.time))
        return impl_->error("session.invalid-value", std::string(what)
                                                         .append(": ")
                                                         .append(row)
                                                         .append("time_ms ")
                                                         .append(std::to_string(*a.time))
                                                         .append(" is out of range (a finite time)"));
    }
    if (!s->isNull(4)) {
      const std::int64_t device = s->i64(4);
      if (device < 0 || device >= core::limits::kMaxDevices)
        return impl_->error("session.invalid-value",
                            std::string(what)
                                .append(": ")
                                .append(row)
                                .append("device ")
                                .append(std::to_string(device))
                                .append(" is out of range (0..")
                                .append(std::to_string(core::limits::kMaxDevices - 1))
                                .append(")"));
      a.device = static_cast<int>(device);
    }
    a.text = s->text(5);
    a.createdMs = s->i64(6);
    out.push_back(std::move(a));
  }
  if (rc != SQLITE_DONE) return impl_->sqlError(what, rc);
  return out;
}

Status SessionStore::removeAnnotation(Id id) {
  return deleteById(*impl_, "DELETE FROM annotations WHERE id = ?1", id, "note");
}

Status SessionStore::checkIntegrity() const {
  const std::string what = "cannot check the session file";
  sqlite3_stmt* s = nullptr;
  int rc = sqlite3_prepare_v2(impl_->db, "PRAGMA integrity_check", -1, &s, nullptr);
  std::vector<std::string> problems;
  while (rc == SQLITE_OK || rc == SQLITE_ROW) {
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
      auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
      std::string line = p ? p : "";
      if (line != "ok") problems.push_back(line);
    }
  }
  sqlite3_finalize(s);
  if (rc != SQLITE_DONE) return impl_->sqlError(what, rc);
  if (problems.empty()) return core::okStatus();
  std::string msg = "the session file is damaged:";
  for (auto& p : problems) msg += "\n  " + p;
  return impl_->error("session.corrupt", msg);
}

}  // namespace ps::sessions

#undef PS_TRY
