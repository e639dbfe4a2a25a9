#pragma once
// A session file (docs/sessions.md): one SQLite database holding a user's schedule versions,
// cost profiles, simulated and executed runs with their full timelines, and notes. The GUI and
// the CLI read and write the same file, possibly at the same time (WAL, busy timeout, retries).
//
// Every public function returns a Result and never throws; every error names the file in its
// location. A SessionStore owns one SQLite connection: movable, not copyable, and meant for
// one thread at a time (open one store per thread or process).
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pipestudio/core/model/result.h"
#include "pipestudio/core/model/run_state.h"
#include "pipestudio/core/model/timeline.h"

namespace ps::sessions {

using Id = std::int64_t;  // row id of a schedule version, profile, run or annotation

// Schema version this build writes (PRAGMA user_version). Older files are migrated forward on
// open (read-write); newer files open read-only.
inline constexpr int kSchemaVersion = 2;
// PRAGMA application_id of a session file ("PiSt"): tells our files from other SQLite files.
inline constexpr std::int32_t kApplicationId = 0x50695374;

enum class OpenMode : std::uint8_t {
  ReadWrite,  // creates the file when missing, migrates an older schema
  ReadOnly,   // the file must exist; no statement writes, no migration, no -wal/-shm left behind
};

struct OpenOptions {
  OpenMode mode = OpenMode::ReadWrite;
  int busyTimeoutMs = 5000;  // how long a write waits for another process's transaction
};

enum class ProfileSource : std::uint8_t { Manual, Analytic, Profiled };
std::string_view profileSourceName(ProfileSource s);  // "manual", "analytic", "profiled"
std::optional<ProfileSource> profileSourceFromName(std::string_view name);

// A run's state is core's one vocabulary (core/model/run_state.h); the store keeps its names.

// --- Listing rows: small structs for docks and tables (no .pipe text, no JSON, no ops) ---

struct ScheduleInfo {
  Id id = 0;
  std::string name;
  std::optional<Id> parentId;  // the version this one was derived from
  std::int64_t createdMs = 0;  // Unix time, milliseconds
};

struct ScheduleVersion {
  ScheduleInfo info;
  std::string pipeText;
};

struct ProfileInfo {
  Id id = 0;
  std::string name;
  ProfileSource source = ProfileSource::Manual;
  std::optional<Id> runId;  // the run it was profiled from (source == Profiled)
  std::int64_t createdMs = 0;
};

struct ProfileVersion {
  ProfileInfo info;
  std::string json;
};

// What a run is: given to beginRun / recordTimeline.
struct RunInfo {
  std::optional<Id> scheduleId;
  std::optional<Id> profileId;
  std::string target = "simulator";  // "simulator", "cpu", "cuda", "gloo", ...
  int devices = 0;                   // 0: taken from the timeline in recordTimeline
  std::string model;                 // model name, free text
  std::string label;                 // shown in lists; defaults to the timeline's label
  std::string configJson = "{}";     // run configuration (flags, options), a JSON object
  core::TimelineSource source = core::TimelineSource::Simulated;
  core::RunState status = core::RunState::Running;  // Queued or Running when it begins
  std::int64_t startedMs =
      0;  // Unix ms; 0: when beginRun is called (a run recorded after it ran gives its start)
};

struct RunSummary {
  Id id = 0;
  std::optional<Id> scheduleId;
  std::optional<Id> profileId;
  std::string target;
  int devices = 0;
  std::string model;
  std::string label;
  core::RunState status = core::RunState::Running;
  std::int64_t startedMs = 0;           // Unix time, milliseconds
  std::optional<std::int64_t> endedMs;  // set by finishRun
  std::string error;                    // failure or cancellation reason
  double makespan = 0;                  // ms of the timeline (not wall time)
  double bubbleRatio = 0;
  std::int64_t opCount = 0;
  // Queued/running, but the process writing it is gone (same host, pid no longer alive): the
  // run was interrupted and will never finish.
  bool interrupted = false;
  bool finished() const { return core::isTerminal(status); }
  std::optional<std::int64_t> durationMs() const {
    if (!endedMs) return std::nullopt;
    return *endedMs - startedMs;
  }
};

struct RunRecord {
  RunSummary summary;
  std::string configJson;
  core::TimelineSource source = core::TimelineSource::Simulated;
};

struct RunFilter {
  std::optional<Id> scheduleId;
  std::optional<core::RunState> status;
  int limit = 0;  // 0 = all; newest first
};

// A note on a schedule version or a run, optionally pinned to a time and device.
struct Annotation {
  Id id = 0;  // set by the store
  std::optional<Id> scheduleId;
  std::optional<Id> runId;
  std::optional<double> time;  // ms on the run's timeline
  std::optional<int> device;
  std::string text;
  std::int64_t createdMs = 0;  // set by the store
};

class SessionStore {
 public:
  static core::Result<SessionStore> open(const std::string& path, const OpenOptions& options = {});

  SessionStore(SessionStore&&) noexcept;
  SessionStore& operator=(SessionStore&&) noexcept;
  SessionStore(const SessionStore&) = delete;
  SessionStore& operator=(const SessionStore&) = delete;
  ~SessionStore();

  const std::string& path() const;
  bool readOnly() const;
  int schemaVersion() const;  // of the file, after any migration
  // Why the file was opened the way it was (e.g. a newer file opened read-only), as warnings.
  const core::Diagnostics& notes() const;

  // --- Schedules: each add is a new version; versions are never modified ---
  core::Result<Id> addSchedule(const std::string& name, const std::string& pipeText,
                               std::optional<Id> parentId = std::nullopt);
  core::Result<std::vector<ScheduleInfo>> listSchedules() const;
  core::Result<ScheduleVersion> schedule(Id id) const;
  // The newest version with that name.
  core::Result<ScheduleVersion> latestSchedule(const std::string& name) const;

  // --- Cost profiles (JSON text, checked to be JSON) ---
  core::Result<Id> addProfile(const std::string& name, const std::string& json, ProfileSource source,
                              std::optional<Id> fromRunId = std::nullopt);
  core::Result<std::vector<ProfileInfo>> listProfiles() const;
  core::Result<ProfileVersion> profile(Id id) const;

  // --- Runs: begin (committed as queued/running), append in chunks, finish ---
  core::Result<Id> beginRun(const RunInfo& info);
  core::Status setRunStatus(Id runId, core::RunState status);  // e.g. queued -> running
  // Each append is one transaction; a run stays queued/running until finishRun, so a reader
  // (or a crash) never sees a half-written run as succeeded.
  core::Status appendRunOps(Id runId, std::span<const core::TimelineOp> ops);
  core::Status appendMemory(Id runId, int device, std::span<const core::MemorySample> samples);
  core::Status appendTransfers(Id runId, std::span<const core::Transfer> transfers);
  // Sets the final status, end time and error text, and the listing metrics: from `metrics`
  // when given, else computed from the stored ops. Finishing a finished run is an error.
  core::Status finishRun(Id runId, core::RunState status, const std::string& error = {},
                         const std::optional<core::TimelineMetrics>& metrics = std::nullopt,
                         const core::Diagnostics& diagnostics = {});
  // begin + every op, transfer and memory sample + finish, in one call. Status: succeeded for
  // a complete timeline, failed (with its diagnostics as the error) for an incomplete one.
  core::Result<Id> recordTimeline(const RunInfo& info, const core::Timeline& timeline);

  // Replaces a run's configuration JSON (an object); the one field a finished run may change,
  // so that two runs recorded one after the other can name each other (recordMeasuredRun).
  core::Status setRunConfig(Id runId, const std::string& configJson);

  core::Result<std::vector<RunSummary>> listRuns(const RunFilter& filter = {}) const;
  core::Result<RunRecord> run(Id runId) const;
  core::Result<core::Timeline> loadTimeline(Id runId) const;
  core::Status deleteRun(Id runId);  // with its ops, samples, transfers and annotations

  // --- Annotations ---
  core::Result<Id> addAnnotation(const Annotation& a);
  // Notes of a run, of a schedule version, or all (both empty).
  core::Result<std::vector<Annotation>> annotations(std::optional<Id> scheduleId = std::nullopt,
                                                    std::optional<Id> runId = std::nullopt) const;
  core::Status removeAnnotation(Id id);

  // PRAGMA integrity_check: ok, or the problems it reports.
  core::Status checkIntegrity() const;

  struct Impl;

 private:
  explicit SessionStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Forward migrations, index i takes a file from schema version i to i+1 (SQL text). Exposed so
// tests and tools can build files of an older version.
const std::vector<std::string_view>& schemaMigrations();

}  // namespace ps::sessions
