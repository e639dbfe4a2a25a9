// Schema migrations of a session file. Entry i takes a file from user_version i to i+1 and is
// applied in one transaction together with the version bump. Migrations only add (tables,
// columns, indexes), so a build that knows version N can still read a file of a newer version
// read-only.
#include <string_view>
#include <vector>

#include "pipestudio/sessions/session_store.h"

namespace ps::sessions {

namespace {

// Version 1: schedule versions, cost profiles, runs with their ops, memory samples and
// transfers, annotations.
constexpr std::string_view kV1 = R"sql(
CREATE TABLE schedules(
  id         INTEGER PRIMARY KEY,
  name       TEXT NOT NULL,
  pipe_text  TEXT NOT NULL,
  parent_id  INTEGER REFERENCES schedules(id) ON DELETE SET NULL,
  created_ms INTEGER NOT NULL
);
CREATE INDEX schedules_by_name ON schedules(name, id);
CREATE INDEX schedules_by_parent ON schedules(parent_id);

CREATE TABLE profiles(
  id         INTEGER PRIMARY KEY,
  name       TEXT NOT NULL,
  json       TEXT NOT NULL,
  source     TEXT NOT NULL CHECK (source IN ('manual', 'analytic', 'profiled')),
  run_id     INTEGER REFERENCES runs(id) ON DELETE SET NULL,
  created_ms INTEGER NOT NULL
);
CREATE INDEX profiles_by_run ON profiles(run_id);

CREATE TABLE runs(
  id               INTEGER PRIMARY KEY,
  schedule_id      INTEGER REFERENCES schedules(id) ON DELETE SET NULL,
  profile_id       INTEGER REFERENCES profiles(id) ON DELETE SET NULL,
  target           TEXT NOT NULL,
  devices          INTEGER NOT NULL,
  model            TEXT NOT NULL DEFAULT '',
  label            TEXT NOT NULL DEFAULT '',
  source           TEXT NOT NULL DEFAULT 'simulated'
                   CHECK (source IN ('simulated', 'measured', 'imported')),
  status           TEXT NOT NULL
                   CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
  started_ms       INTEGER NOT NULL,
  ended_ms         INTEGER,
  error            TEXT NOT NULL DEFAULT '',
  config_json      TEXT NOT NULL DEFAULT '{}',
  diagnostics_json TEXT NOT NULL DEFAULT '[]',
  metrics_json     TEXT
);
CREATE INDEX runs_by_schedule ON runs(schedule_id, id);
CREATE INDEX runs_by_profile ON runs(profile_id);

-- Ops of a run in append order; the primary key is the run's range, so loading a run is one
-- range scan and no second index slows bulk inserts.
CREATE TABLE run_ops(
  run_id     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  seq        INTEGER NOT NULL,
  device     INTEGER NOT NULL,
  step       INTEGER NOT NULL,
  kind       INTEGER NOT NULL,
  stage      INTEGER NOT NULL,
  microbatch INTEGER NOT NULL,
  overlapped INTEGER NOT NULL,
  start_ms   REAL NOT NULL,
  end_ms     REAL NOT NULL,
  PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

CREATE TABLE memory_samples(
  run_id  INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  device  INTEGER NOT NULL,
  seq     INTEGER NOT NULL,
  time_ms REAL NOT NULL,
  bytes   INTEGER NOT NULL,
  PRIMARY KEY (run_id, device, seq)
) WITHOUT ROWID;

CREATE TABLE transfers(
  run_id              INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  seq                 INTEGER NOT NULL,
  src_device          INTEGER NOT NULL,
  dst_device          INTEGER NOT NULL,
  producer_kind       INTEGER NOT NULL,
  producer_stage      INTEGER NOT NULL,
  producer_microbatch INTEGER NOT NULL,
  consumer_kind       INTEGER NOT NULL,
  consumer_stage      INTEGER NOT NULL,
  consumer_microbatch INTEGER NOT NULL,
  bytes               INTEGER NOT NULL,
  start_ms            REAL NOT NULL,
  end_ms              REAL NOT NULL,
  PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

CREATE TABLE annotations(
  id          INTEGER PRIMARY KEY,
  schedule_id INTEGER REFERENCES schedules(id) ON DELETE CASCADE,
  run_id      INTEGER REFERENCES runs(id) ON DELETE CASCADE,
  time_ms     REAL,
  device      INTEGER,
  text        TEXT NOT NULL,
  created_ms  INTEGER NOT NULL
);
CREATE INDEX annotations_by_schedule ON annotations(schedule_id);
CREATE INDEX annotations_by_run ON annotations(run_id);
)sql";

// Version 2: listing metrics on runs (the session dock sorts and compares by them without
// reading ops), filled in for existing runs from their ops; the writer's pid and host, so a
// run left 'running' by a process that died shows as interrupted; an index for status filters.
constexpr std::string_view kV2 = R"sql(
ALTER TABLE runs ADD COLUMN makespan_ms REAL NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN bubble_ratio REAL NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN op_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN writer_pid INTEGER;
ALTER TABLE runs ADD COLUMN writer_host TEXT;
UPDATE runs SET
  op_count = (SELECT count(*) FROM run_ops o WHERE o.run_id = runs.id),
  makespan_ms = coalesce((SELECT max(end_ms) - min(start_ms) FROM run_ops o WHERE o.run_id = runs.id), 0);
UPDATE runs SET bubble_ratio = 1.0 - (
    SELECT sum(CASE WHEN overlapped THEN (end_ms - start_ms) / 2.0 ELSE end_ms - start_ms END)
    FROM run_ops o WHERE o.run_id = runs.id) / (devices * makespan_ms)
  WHERE makespan_ms > 0 AND devices > 0;
CREATE INDEX runs_by_status ON runs(status, id);
)sql";

}  // namespace

const std::vector<std::string_view>& schemaMigrations() {
  static const std::vector<std::string_view> migrations = {kV1, kV2};
  return migrations;
}

}  // namespace ps::sessions
