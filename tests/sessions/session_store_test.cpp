#include "pipestudio/sessions/session_store.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "fixtures/schedules.h"
#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/core/planning/generators.h"
#include "pipestudio/sessions/recording.h"
#include "pipestudio/sessions/run_export.h"
#include "session_test_util.h"

using namespace ps::sessions;
using namespace ps::sessions::test;
using ps::core::OpKind;
using ps::core::Timeline;

namespace {

SessionStore openOrDie(const std::string& path, OpenOptions o = {}) {
  auto s = SessionStore::open(path, o);
  if (!s) {
    ADD_FAILURE() << ps::core::formatDiagnostics(s.errors());
    std::abort();
  }
  return std::move(s).value();
}

// Two devices, a user kind, a stage-level op, an overlapped pair, transfers, memory curves,
// diagnostics and per-device metrics: every field a Timeline has.
Timeline richTimeline() {
  Timeline t;
  t.source = ps::core::TimelineSource::Measured;
  t.label = "1f1b on 2 devices";
  t.devices = 2;
  t.ops = {op(0, OpKind::F, 0, 0, 0, 1, 0),
           op(0, OpKind::F, 0, 1, 1, 2, 1),
           op(0, OpKind::F, 0, 2, 2.5, 4.25, 2, true),
           op(0, OpKind::B, 0, 0, 2.5, 4.25, 2, true),
           op(0, static_cast<OpKind>(ps::core::kFirstUserKind), 0, -1, 5, 5.5, 3),
           op(1, OpKind::F, 1, 0, 1.125, 2.125, 0),
           op(1, OpKind::I, 1, 0, 2.125, 3, 1),
           op(1, OpKind::W, 1, 0, 3, 3.75, 2),
           op(1, OpKind::ReduceGrad, 1, -1, 4, 4.5, 3)};
  ps::core::Transfer x = ps::test::transfer(0, 1, {OpKind::F, 0, 0}, {OpKind::F, 1, 0}, 1, 1.125);
  x.bytes = 123456789012;
  ps::core::Transfer y = ps::test::transfer(1, 0, {OpKind::I, 1, 0}, {OpKind::B, 0, 0}, 3, 3.5);
  y.bytes = 42;
  t.transfers = {x, y};
  t.memory = {{{0, 100}, {1, 300}, {4.25, 200}}, {{1.125, 50}, {3.75, 10}}};
  t.metrics.makespan = 5.5;
  t.metrics.bubbleRatio = 0.25;
  t.metrics.lowerBound = 4.1;
  t.metrics.efficiency = 4.1 / 5.5;
  t.metrics.ops = 9;
  ps::core::DeviceMetrics d0;
  d0.device = 0;
  d0.start = 0;
  d0.end = 5.5;
  d0.busy = 4.25;
  d0.staticBytes = 1 << 20;
  d0.peakMemoryBytes = 300;
  d0.peakMemoryTime = 1;
  d0.peakMemoryOp = {0, 1};
  d0.peakInflightMicrobatches = 3;
  ps::core::DeviceMetrics d1 = d0;
  d1.device = 1;
  d1.busy = 3.1;
  t.metrics.devices = {d0, d1};
  auto w = ps::core::makeWarning("sim.memory", "device 1 is near its memory limit", {"x.pipe", 3, 7});
  w.hint = "try recompute";
  w.related = {{1, 2}};
  t.diagnostics = {w};
  return t;
}

void expectSameOps(const std::vector<ps::core::TimelineOp>& a, const std::vector<ps::core::TimelineOp>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE("op " + std::to_string(i));
    EXPECT_EQ(a[i].device, b[i].device);
    EXPECT_EQ(a[i].step, b[i].step);
    EXPECT_EQ(a[i].op, b[i].op);
    EXPECT_EQ(a[i].overlapped, b[i].overlapped);
    EXPECT_EQ(a[i].start, b[i].start);
    EXPECT_EQ(a[i].end, b[i].end);
  }
}

}  // namespace

TEST(SessionStore, CreatesANewFileWithTheCurrentSchemaInWalMode) {
  auto dir = freshDir();
  auto path = (dir / "new.session").string();
  {
    auto store = openOrDie(path);
    EXPECT_FALSE(store.readOnly());
    EXPECT_EQ(store.schemaVersion(), kSchemaVersion);
    EXPECT_TRUE(store.notes().empty());
    EXPECT_TRUE(store.checkIntegrity().ok());
  }
  RawDb raw(path);
  EXPECT_EQ(raw.integer("PRAGMA user_version"), kSchemaVersion);
  EXPECT_EQ(raw.integer("PRAGMA application_id"), kApplicationId);
  EXPECT_EQ(raw.text("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(schemaMigrations().size(), static_cast<size_t>(kSchemaVersion));
}

TEST(SessionStore, ScheduleVersionsRoundTripWithParents) {
  auto dir = freshDir();
  auto store = openOrDie((dir / "s.session").string());
  const std::string v1 = "devices 2\nstages 2\nmicrobatches 2\ndevice 0: F0 F1 B0 B1\n";
  const std::string v2 = v1 + "# tweaked: unicode ok \xE2\x9C\x93\n";
  auto a = store.addSchedule("1f1b", v1);
  ASSERT_TRUE(a.ok());
  auto b = store.addSchedule("1f1b", v2, *a);
  ASSERT_TRUE(b.ok());
  auto c = store.addSchedule("gpipe", "devices 1\n");
  ASSERT_TRUE(c.ok());

  auto got = store.schedule(*b);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->info.name, "1f1b");
  EXPECT_EQ(got->pipeText, v2);
  EXPECT_EQ(got->info.parentId, *a);
  EXPECT_GT(got->info.createdMs, 1600000000000);

  auto list = store.listSchedules();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0].id, *a);  // by name, then version
  EXPECT_EQ((*list)[1].id, *b);
  EXPECT_EQ((*list)[2].name, "gpipe");
  EXPECT_FALSE((*list)[0].parentId.has_value());

  auto latest = store.latestSchedule("1f1b");
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->info.id, *b);

  auto missing = store.schedule(9999);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, "session.not-found");
  EXPECT_EQ(missing.error().location.file, store.path());
  EXPECT_NE(ps::core::formatDiagnostic(missing.error()).find(store.path()), std::string::npos);

  auto badParent = store.addSchedule("x", "devices 1\n", 777);
  ASSERT_FALSE(badParent.ok());
  EXPECT_EQ(badParent.error().code, "session.missing-reference");
  EXPECT_FALSE(store.addSchedule("", "devices 1\n").ok());
}

TEST(SessionStore, ProfilesRoundTripWithSource) {
  auto dir = freshDir();
  auto store = openOrDie((dir / "p.session").string());
  const std::string json = R"({"name":"gpt","layers":[{"name":"l0","forwardMs":1.5}]})";
  auto p = store.addProfile("gpt", json, ProfileSource::Analytic);
  ASSERT_TRUE(p.ok());
  auto run = store.beginRun(RunInfo{});
  ASSERT_TRUE(run.ok());
  auto q = store.addProfile("gpt-measured", "{}", ProfileSource::Profiled, *run);
  ASSERT_TRUE(q.ok());

  auto got = store.profile(*p);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->json, json);
  EXPECT_EQ(got->info.source, ProfileSource::Analytic);
  EXPECT_FALSE(got->info.runId.has_value());
  auto list = store.listProfiles();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[1].source, ProfileSource::Profiled);
  EXPECT_EQ((*list)[1].runId, *run);

  auto bad = store.addProfile("broken", "{not json", ProfileSource::Manual);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, "session.invalid");
  for (auto s : {ProfileSource::Manual, ProfileSource::Analytic, ProfileSource::Profiled})
    EXPECT_EQ(profileSourceFromName(profileSourceName(s)), s);
  EXPECT_FALSE(profileSourceFromName("guessed").has_value());
}

TEST(SessionStore, TimelineRoundTripKeepsEveryField) {
  auto dir = freshDir();
  auto store = openOrDie((dir / "t.session").string());
  auto sched = store.addSchedule("1f1b", "devices 2\n");
  ASSERT_TRUE(sched.ok());
  RunInfo info;
  info.scheduleId = *sched;
  info.target = "cpu";
  info.model = "gpt2-small";
  info.configJson = R"({"microbatches":4})";
  Timeline t = richTimeline();
  auto id = store.recordTimeline(info, t);
  ASSERT_TRUE(id.ok()) << ps::core::formatDiagnostics(id.errors());

  auto back = store.loadTimeline(*id);
  ASSERT_TRUE(back.ok()) << ps::core::formatDiagnostics(back.errors());
  EXPECT_EQ(back->source, ps::core::TimelineSource::Measured);
  EXPECT_EQ(back->label, t.label);
  EXPECT_EQ(back->devices, 2);
  EXPECT_TRUE(back->complete);
  expectSameOps(back->ops, t.ops);
  ASSERT_EQ(back->transfers.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back->transfers[i].srcDevice, t.transfers[i].srcDevice);
    EXPECT_EQ(back->transfers[i].dstDevice, t.transfers[i].dstDevice);
    EXPECT_EQ(back->transfers[i].producer, t.transfers[i].producer);
    EXPECT_EQ(back->transfers[i].consumer, t.transfers[i].consumer);
    EXPECT_EQ(back->transfers[i].bytes, t.transfers[i].bytes);
    EXPECT_EQ(back->transfers[i].start, t.transfers[i].start);
    EXPECT_EQ(back->transfers[i].end, t.transfers[i].end);
  }
  ASSERT_EQ(back->memory.size(), 2u);
  for (size_t d = 0; d < 2; ++d) {
    ASSERT_EQ(back->memory[d].size(), t.memory[d].size());
    for (size_t i = 0; i < t.memory[d].size(); ++i) {
      EXPECT_EQ(back->memory[d][i].time, t.memory[d][i].time);
      EXPECT_EQ(back->memory[d][i].bytes, t.memory[d][i].bytes);
    }
  }
  EXPECT_EQ(back->metrics.makespan, 5.5);
  EXPECT_EQ(back->metrics.bubbleRatio, 0.25);
  EXPECT_EQ(back->metrics.lowerBound, 4.1);
  EXPECT_EQ(back->metrics.ops, 9u);
  ASSERT_EQ(back->metrics.devices.size(), 2u);
  EXPECT_EQ(back->metrics.devices[1].busy, 3.1);
  EXPECT_EQ(back->metrics.devices[0].staticBytes, 1 << 20);
  EXPECT_EQ(back->metrics.devices[0].peakMemoryOp.step, 1);
  EXPECT_EQ(back->metrics.devices[0].peakInflightMicrobatches, 3);
  ASSERT_EQ(back->diagnostics.size(), 1u);
  EXPECT_EQ(back->diagnostics[0].severity, ps::core::Severity::Warning);
  EXPECT_EQ(back->diagnostics[0].code, "sim.memory");
  EXPECT_EQ(back->diagnostics[0].location.line, 3);
  EXPECT_EQ(back->diagnostics[0].hint, "try recompute");
  ASSERT_EQ(back->diagnostics[0].related.size(), 1u);
  EXPECT_EQ(back->diagnostics[0].related[0].step, 2);

  auto rec = store.run(*id);
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->summary.status, ps::core::RunState::Succeeded);
  EXPECT_EQ(rec->summary.scheduleId, *sched);
  EXPECT_EQ(rec->summary.target, "cpu");
  EXPECT_EQ(rec->summary.model, "gpt2-small");
  EXPECT_EQ(rec->summary.label, t.label);  // defaults to the timeline's label
  EXPECT_EQ(rec->summary.devices, 2);
  EXPECT_EQ(rec->summary.opCount, 9);
  EXPECT_EQ(rec->summary.makespan, 5.5);
  EXPECT_EQ(rec->summary.bubbleRatio, 0.25);
  ASSERT_TRUE(rec->summary.endedMs.has_value());
  EXPECT_GE(*rec->summary.durationMs(), 0);
  EXPECT_FALSE(rec->summary.interrupted);
  EXPECT_EQ(rec->configJson, info.configJson);
  EXPECT_EQ(rec->source, ps::core::TimelineSource::Measured);
}

TEST(SessionStore, IncompleteTimelineIsRecordedAsFailedWithItsError) {
  auto dir = freshDir();
  auto store = openOrDie((dir / "f.session").string());
  Timeline t = syntheticTimeline(10, 2);
  t.complete = false;
  t.diagnostics = {ps::core::makeError("sim.deadlock", "deadlock: F3@s1 waits for B3@s2")};
  auto id = store.recordTimeline(RunInfo{}, t);
  ASSERT_TRUE(id.ok());
  auto rec = store.run(*id);
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->summary.status, ps::core::RunState::Failed);
  EXPECT_EQ(rec->summary.error, "deadlock: F3@s1 waits for B3@s2");
  auto back = store.loadTimeline(*id);
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->complete);
  EXPECT_EQ(back->ops.size(), 10u);
}

TEST(SessionStore, ListingMetricsAreComputedFromOpsWhenNotGiven) {
  auto dir = freshDir();
  auto store = openOrDie((dir / "m.session").string());
  RunInfo info;
  info.devices = 2;
  auto id = store.beginRun(info);
  ASSERT_TRUE(id.ok());
  // Device 0: an overlapped pair over [0, 2] counts once (2 ms busy); device 1: [1, 3].
  std::vector<ps::core::TimelineOp> ops = {op(0, OpKind::F, 0, 1, 0, 2, 0, true),
                                           op(0, OpKind::B, 0, 0, 0, 2, 0, true),
                                           op(1, OpKind::F, 1, 0, 1, 3)};
  ASSERT_TRUE(store.appendRunOps(*id, ops).ok());
  ASSERT_TRUE(store.finishRun(*id, ps::core::RunState::Succeeded).ok());
  auto rec = store.run(*id);
  ASSERT_TRUE(rec.ok());
  EXPECT_DOUBLE_EQ(rec->summary.makespan, 3.0);
  EXPECT_DOUBLE_EQ(rec->summary.bubbleRatio, 1.0 - 4.0 / (2 * 3.0));
  EXPECT_EQ(rec->summary.opCount, 3);
}

TEST(SessionStore, ChunkedAppendsAccumulateAndLoadSortedByDeviceAndStart) {
  auto dir = freshDir();
  auto store = openOrDie((dir / "c.session").string());
  RunInfo info;
  info.devices = 2;
  info.status = ps::core::RunState::Queued;
  auto id = store.beginRun(info);
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(store.setRunStatus(*id, ps::core::RunState::Running).ok());
  // A live run reports ops as they finish, interleaving devices.
  std::vector<ps::core::TimelineOp> first = {op(1, OpKind::F, 1, 0, 1, 2), op(0, OpKind::F, 0, 1, 1, 2)};
  std::vector<ps::core::TimelineOp> second = {op(0, OpKind::F, 0, 0, 0, 1), op(1, OpKind::B, 1, 0, 2, 4)};
  ASSERT_TRUE(store.appendRunOps(*id, first).ok());
  auto mid = store.run(*id);
  ASSERT_TRUE(mid.ok());
  EXPECT_EQ(mid->summary.status, ps::core::RunState::Running);
  EXPECT_EQ(mid->summary.opCount, 2);  // progress is visible while it runs
  ASSERT_TRUE(store.appendRunOps(*id, second).ok());
  std::vector<ps::core::MemorySample> m1 = {{0, 1}, {1, 2}};
  std::vector<ps::core::MemorySample> m2 = {{2, 3}};
  ASSERT_TRUE(store.appendMemory(*id, 1, m1).ok());
  ASSERT_TRUE(store.appendMemory(*id, 1, m2).ok());
  ASSERT_TRUE(store.finishRun(*id, ps::core::RunState::Cancelled, "stopped by the user").ok());

  auto t = store.loadTimeline(*id);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->ops.size(), 4u);
  EXPECT_EQ(t->ops[0].op, (ps::core::Op{OpKind::F, 0, 0}));
  EXPECT_EQ(t->ops[1].op, (ps::core::Op{OpKind::F, 0, 1}));
  EXPECT_EQ(t->ops[2].op, (ps::core::Op{OpKind::F, 1, 0}));
  EXPECT_EQ(t->ops[3].op, (ps::core::Op{OpKind::B, 1, 0}));
  ASSERT_EQ(t->memory.size(), 2u);
  EXPECT_TRUE(t->memory[0].empty());
  ASSERT_EQ(t->memory[1].size(), 3u);
  EXPECT_EQ(t->memory[1][2].bytes, 3);
  EXPECT_FALSE(t->complete);
  auto rec = store.run(*id);
  EXPECT_EQ(rec->summary.status, ps::core::RunState::Cancelled);
  EXPECT_EQ(rec->summary.error, "stopped by the user");
}

TEST(SessionStore, FinishedRunsCannotChange) {
  auto dir = freshDir();
  auto store = openOrDie((dir / "x.session").string());
  auto id = store.beginRun(RunInfo{});
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(store.finishRun(*id, ps::core::RunState::Failed, "boom").ok());
  auto again = store.finishRun(*id, ps::core::RunState::Succeeded);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, "session.run-finished");
  std::vector<ps::core::TimelineOp> ops = {op(0, OpKind::F, 0, 0, 0, 1)};
  EXPECT_FALSE(store.appendRunOps(*id, ops).ok());
  EXPECT_FALSE(store.finishRun(*id + 1, ps::core::RunState::Failed).ok());
  EXPECT_FALSE(store.finishRun(*id, ps::core::RunState::Running).ok());
  RunInfo bad;
  bad.configJson = "{oops";
  EXPECT_EQ(store.beginRun(bad).error().code, "session.invalid");
  RunInfo done;
  done.status = ps::core::RunState::Succeeded;
  EXPECT_FALSE(store.beginRun(done).ok());
}

TEST(SessionStore, ListRunsFiltersNewestFirst) {
  auto dir = freshDir();
  auto store = openOrDie((dir / "l.session").string());
  auto a = store.addSchedule("a", "devices 1\n");
  auto b = store.addSchedule("b", "devices 1\n");
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<Id> runs;
  for (int i = 0; i < 5; ++i) {
    RunInfo info;
    info.scheduleId = i % 2 ? *b : *a;
    auto t = syntheticTimeline(4, 1);
    if (i == 4) t.complete = false;
    auto id = store.recordTimeline(info, t);
    ASSERT_TRUE(id.ok());
    runs.push_back(*id);
  }
  auto all = store.listRuns();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 5u);
  EXPECT_EQ(all->front().id, runs.back());
  RunFilter byA;
  byA.scheduleId = *a;
  auto ofA = store.listRuns(byA);
  ASSERT_TRUE(ofA.ok());
  EXPECT_EQ(ofA->size(), 3u);
  for (auto& r : *ofA) EXPECT_EQ(r.scheduleId, *a);
  RunFilter failed;
  failed.status = ps::core::RunState::Failed;
  EXPECT_EQ(store.listRuns(failed)->size(), 1u);
  RunFilter two;
  two.limit = 2;
  EXPECT_EQ(store.listRuns(two)->size(), 2u);
}

TEST(SessionStore, DeleteRunRemovesItsRows) {
  auto dir = freshDir();
  auto path = (dir / "d.session").string();
  auto store = openOrDie(path);
  auto t = richTimeline();
  auto id = store.recordTimeline(RunInfo{}, t);
  ASSERT_TRUE(id.ok());
  Annotation note;
  note.runId = *id;
  note.text = "slow";
  ASSERT_TRUE(store.addAnnotation(note).ok());
  ASSERT_TRUE(store.deleteRun(*id).ok());
  EXPECT_EQ(store.run(*id).error().code, "session.not-found");
  EXPECT_FALSE(store.deleteRun(*id).ok());
  RawDb raw(path);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM run_ops"), 0);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM transfers"), 0);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM memory_samples"), 0);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM annotations"), 0);
}

TEST(SessionStore, AnnotationsRoundTripAndFilter) {
  auto dir = freshDir();
  auto store = openOrDie((dir / "a.session").string());
  auto s = store.addSchedule("a", "devices 1\n");
  auto r = store.beginRun(RunInfo{});
  ASSERT_TRUE(s.ok() && r.ok());
  Annotation onRun;
  onRun.runId = *r;
  onRun.time = 12.5;
  onRun.device = 3;
  onRun.text = "bubble here";
  Annotation onSchedule;
  onSchedule.scheduleId = *s;
  onSchedule.text = "try interleaving";
  auto n1 = store.addAnnotation(onRun);
  auto n2 = store.addAnnotation(onSchedule);
  ASSERT_TRUE(n1.ok() && n2.ok());
  auto ofRun = store.annotations(std::nullopt, *r);
  ASSERT_TRUE(ofRun.ok());
  ASSERT_EQ(ofRun->size(), 1u);
  EXPECT_EQ((*ofRun)[0].id, *n1);
  EXPECT_EQ((*ofRun)[0].time, 12.5);
  EXPECT_EQ((*ofRun)[0].device, 3);
  EXPECT_EQ((*ofRun)[0].text, "bubble here");
  EXPECT_GT((*ofRun)[0].createdMs, 0);
  auto ofSchedule = store.annotations(*s);
  ASSERT_EQ(ofSchedule->size(), 1u);
  EXPECT_FALSE((*ofSchedule)[0].time.has_value());
  EXPECT_EQ(store.annotations()->size(), 2u);
  ASSERT_TRUE(store.removeAnnotation(*n1).ok());
  EXPECT_EQ(store.annotations()->size(), 1u);
  EXPECT_FALSE(store.removeAnnotation(*n1).ok());
  Annotation empty;
  EXPECT_FALSE(store.addAnnotation(empty).ok());
  Annotation dangling;
  dangling.runId = 999;
  dangling.text = "x";
  EXPECT_EQ(store.addAnnotation(dangling).error().code, "session.missing-reference");
}

TEST(SessionStore, StoreIsMovable) {
  auto dir = freshDir();
  auto a = openOrDie((dir / "one.session").string());
  auto b = openOrDie((dir / "two.session").string());
  ASSERT_TRUE(a.addSchedule("in-one", "x").ok());
  SessionStore moved(std::move(a));
  EXPECT_EQ(moved.listSchedules()->size(), 1u);
  moved = std::move(b);
  EXPECT_EQ(moved.listSchedules()->size(), 0u);
  EXPECT_NE(moved.path().find("two.session"), std::string::npos);
}

// --- versions, migrations, foreign and damaged files --------------------------------------

TEST(SessionStoreFiles, MigratesAVersion1FileForward) {
  auto dir = freshDir();
  auto path = (dir / "v1.session").string();
  {
    // A file as the version-1 schema wrote it: no listing metrics on runs.
    RawDb raw(path);
    raw.mustExec(std::string(schemaMigrations()[0]));
    raw.mustExec("PRAGMA application_id = " + std::to_string(kApplicationId));
    raw.mustExec("PRAGMA user_version = 1");
    raw.mustExec(
        "INSERT INTO schedules(id, name, pipe_text, created_ms) VALUES(1, 'old', 'devices 2', 1000)");
    raw.mustExec(
        "INSERT INTO runs(id, schedule_id, target, devices, status, started_ms, ended_ms) "
        "VALUES(1, 1, 'simulator', 2, 'succeeded', 1000, 2000)");
    // Device 0 busy [0,1] and [1,2]; device 1 busy [1,2] and [2,3]: makespan 3, busy 4.
    raw.mustExec(
        "INSERT INTO run_ops VALUES(1, 0, 0, 0, 0, 0, 0, 0, 0, 1), (1, 1, 0, 1, 0, 0, 1, 0, 1, 2), "
        "(1, 2, 1, 0, 0, 1, 0, 0, 1, 2), (1, 3, 1, 1, 1, 1, 0, 0, 2, 3)");
  }
  {
    // A read-only open cannot migrate and says so; the file stays at version 1.
    auto ro = SessionStore::open(path, {OpenMode::ReadOnly});
    ASSERT_FALSE(ro.ok());
    EXPECT_EQ(ro.error().code, "session.needs-upgrade");
    RawDb raw(path);
    EXPECT_EQ(raw.integer("PRAGMA user_version"), 1);
  }
  auto store = openOrDie(path);
  EXPECT_EQ(store.schemaVersion(), kSchemaVersion);
  ASSERT_EQ(store.notes().size(), 1u);
  EXPECT_EQ(store.notes()[0].code, "session.upgraded");
  auto runs = store.listRuns();
  ASSERT_TRUE(runs.ok()) << ps::core::formatDiagnostics(runs.errors());
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_DOUBLE_EQ((*runs)[0].makespan, 3.0);
  EXPECT_DOUBLE_EQ((*runs)[0].bubbleRatio, 1.0 - 4.0 / 6.0);
  EXPECT_EQ((*runs)[0].opCount, 4);
  EXPECT_EQ((*runs)[0].status, ps::core::RunState::Succeeded);
  auto t = store.loadTimeline(1);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->ops.size(), 4u);
  EXPECT_EQ(store.schedule(1)->pipeText, "devices 2");
  // The upgraded file takes new data.
  EXPECT_TRUE(store.recordTimeline(RunInfo{}, syntheticTimeline(6, 2)).ok());
  EXPECT_TRUE(store.checkIntegrity().ok());
}

TEST(SessionStoreFiles, NewerFileOpensReadOnlyWithAClearNote) {
  auto dir = freshDir();
  auto path = (dir / "newer.session").string();
  {
    auto store = openOrDie(path);
    ASSERT_TRUE(store.addSchedule("kept", "devices 1\n").ok());
  }
  {
    RawDb raw(path);
    raw.mustExec("PRAGMA user_version = " + std::to_string(kSchemaVersion + 1));
    raw.mustExec("CREATE TABLE from_the_future(x)");
  }
  auto store = openOrDie(path);
  EXPECT_TRUE(store.readOnly());
  EXPECT_EQ(store.schemaVersion(), kSchemaVersion + 1);
  ASSERT_EQ(store.notes().size(), 1u);
  EXPECT_EQ(store.notes()[0].code, "session.newer-version");
  EXPECT_NE(store.notes()[0].message.find("newer PipeStudio"), std::string::npos);
  EXPECT_NE(store.notes()[0].message.find("read-only"), std::string::npos);
  EXPECT_EQ(store.notes()[0].location.file, path);
  auto list = store.listSchedules();
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 1u);
  auto write = store.addSchedule("new", "devices 1\n");
  ASSERT_FALSE(write.ok());
  EXPECT_EQ(write.error().code, "session.read-only");
  EXPECT_NE(write.error().message.find("newer PipeStudio"), std::string::npos);
  EXPECT_FALSE(store.beginRun(RunInfo{}).ok());
  RawDb raw(path);
  EXPECT_EQ(raw.integer("PRAGMA user_version"), kSchemaVersion + 1);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM schedules"), 1);
}

TEST(SessionStoreFiles, ReadOnlyModeRefusesWrites) {
  auto dir = freshDir();
  auto path = (dir / "ro.session").string();
  { ASSERT_TRUE(openOrDie(path).addSchedule("a", "x").ok()); }
  auto store = openOrDie(path, {OpenMode::ReadOnly});
  EXPECT_TRUE(store.readOnly());
  EXPECT_EQ(store.listSchedules()->size(), 1u);
  EXPECT_EQ(store.addSchedule("b", "y").error().code, "session.read-only");
  auto missing = SessionStore::open((dir / "nothing.session").string(), {OpenMode::ReadOnly});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, "session.not-found");
  EXPECT_FALSE(std::filesystem::exists(dir / "nothing.session"));
}

// Reading a session (`session list`, the GUI showing one) leaves nothing beside the user's file.
// SQLite's read-only connections create a WAL-mode file's -wal and -shm files but cannot remove
// them; whichever connection closes last, reader or writer, removes them here.
TEST(SessionStoreFiles, ReadingLeavesNoWalOrShmFilesBehind) {
  auto dir = freshDir();
  const std::string path = (dir / "mine.session").string();
  auto leftBeside = [&] {
    std::string left;
    for (const char* suffix : {"-wal", "-shm", "-journal"})
      if (std::filesystem::exists(path + suffix)) left += path + suffix + " ";
    return left;
  };
  { ASSERT_TRUE(openOrDie(path).addSchedule("a", "x").ok()); }
  ASSERT_EQ(leftBeside(), "");
  {
    auto reader = openOrDie(path, {OpenMode::ReadOnly});
    ASSERT_TRUE(reader.readOnly());
    EXPECT_EQ(reader.listSchedules()->size(), 1u);
    EXPECT_EQ(reader.addSchedule("b", "y").error().code, "session.read-only");
  }
  EXPECT_EQ(leftBeside(), "");

  // A reader beside a writer that closes first.
  {
    std::optional<SessionStore> writer = openOrDie(path);
    auto reader = openOrDie(path, {OpenMode::ReadOnly});
    ASSERT_TRUE(writer->addSchedule("b", "y").ok());
    EXPECT_EQ(reader.listSchedules()->size(), 2u);
    writer.reset();
    EXPECT_EQ(reader.listSchedules()->size(), 2u);
  }
  EXPECT_EQ(leftBeside(), "");
  RawDb raw(path);
  EXPECT_EQ(raw.integer("SELECT count(*) FROM schedules"), 2);
}

TEST(SessionStoreFiles, NonSqliteFileIsRefusedAndLeftUntouched) {
  auto dir = freshDir();
  auto path = dir / "notes.session";
  std::string bytes;
  for (int i = 0; i < 300; ++i) bytes += "this is a text file, not a database\n";
  writeBytes(path, bytes);
  for (auto mode : {OpenMode::ReadWrite, OpenMode::ReadOnly}) {
    auto s = SessionStore::open(path.string(), {mode});
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().code, "session.not-sqlite");
    EXPECT_EQ(s.error().location.file, path.string());
    EXPECT_NE(s.error().message.find("not an SQLite database"), std::string::npos);
  }
  EXPECT_EQ(readBytes(path), bytes);
  EXPECT_FALSE(std::filesystem::exists(dir / "notes.session-wal"));
}

TEST(SessionStoreFiles, DamagedSessionGivesACorruptionError) {
  auto dir = freshDir();
  auto path = dir / "damaged.session";
  {
    auto store = openOrDie(path.string());
    for (int i = 0; i < 20; ++i)
      ASSERT_TRUE(store.addSchedule("s" + std::to_string(i), std::string(3000, 'x')).ok());
  }
  {
    RawDb raw(path.string());
    raw.mustExec("PRAGMA wal_checkpoint(TRUNCATE)");
  }
  std::string bytes = readBytes(path);
  ASSERT_GT(bytes.size(), 8192u);
  // Keep the 100-byte header, garble the rest of page 1 (the schema table).
  for (size_t i = 100; i < 4096; ++i) bytes[i] = static_cast<char>((i * 7919) & 0xff);
  writeBytes(path, bytes);
  auto s = SessionStore::open(path.string());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, "session.corrupt");
  EXPECT_EQ(s.error().location.file, path.string());
  EXPECT_EQ(readBytes(path), bytes);
}

TEST(SessionStoreFiles, ForeignSqliteDatabaseIsRefused) {
  auto dir = freshDir();
  auto path = (dir / "other.db").string();
  {
    RawDb raw(path);
    raw.mustExec("CREATE TABLE contacts(name TEXT); INSERT INTO contacts VALUES('ada')");
  }
  std::string before = readBytes(path);
  auto s = SessionStore::open(path);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, "session.foreign");
  EXPECT_EQ(readBytes(path), before);
  {
    RawDb raw(path);
    raw.mustExec("PRAGMA application_id = 1234");
  }
  s = SessionStore::open(path);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("another application"), std::string::npos);
}

TEST(SessionStoreFiles, DirectoryIsNotASession) {
  auto dir = freshDir();
  auto s = SessionStore::open(dir.string());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, "session.not-a-file");
}

// --- recording helper and export ----------------------------------------------------------

TEST(SessionRecording, ReusesUnchangedScheduleAndProfileVersions) {
  auto dir = freshDir();
  auto path = (dir / "r.session").string();
  RunRecordingRequest req;
  req.scheduleName = "1f1b";
  req.pipeText = "devices 2\n";
  req.profileName = "uniform";
  req.profileJson = R"({"layers":[]})";
  req.profileSource = ProfileSource::Analytic;
  auto first = recordRun(path, req, syntheticTimeline(8, 2));
  ASSERT_TRUE(first.ok()) << ps::core::formatDiagnostics(first.errors());
  EXPECT_TRUE(first->newScheduleVersion);
  EXPECT_TRUE(first->newProfileVersion);
  auto second = recordRun(path, req, syntheticTimeline(8, 2));
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->newScheduleVersion);
  EXPECT_FALSE(second->newProfileVersion);
  EXPECT_EQ(second->scheduleId, first->scheduleId);
  EXPECT_EQ(second->profileId, first->profileId);
  EXPECT_NE(second->runId, first->runId);
  req.pipeText = "devices 2\n# edited\n";
  auto third = recordRun(path, req, syntheticTimeline(8, 2));
  ASSERT_TRUE(third.ok());
  EXPECT_TRUE(third->newScheduleVersion);
  // Going back to an earlier profile reuses it rather than storing a copy.
  req.profileJson = R"({"layers":[1]})";
  auto fourth = recordRun(path, req, syntheticTimeline(8, 2));
  ASSERT_TRUE(fourth.ok());
  EXPECT_TRUE(fourth->newProfileVersion);
  req.profileJson = R"({"layers":[]})";
  auto fifth = recordRun(path, req, syntheticTimeline(8, 2));
  ASSERT_TRUE(fifth.ok());
  EXPECT_FALSE(fifth->newProfileVersion);
  EXPECT_EQ(fifth->profileId, first->profileId);
  auto store = openOrDie(path);
  EXPECT_EQ(store.listProfiles()->size(), 2u);
  auto v = store.schedule(third->scheduleId);
  EXPECT_EQ(v->info.parentId, first->scheduleId);
  auto run = store.run(third->runId);
  EXPECT_EQ(run->summary.label, "1f1b");
  EXPECT_EQ(run->summary.profileId, first->profileId);
}

TEST(SessionRecording, RunJsonCarriesRunAndTimeline) {
  auto dir = freshDir();
  auto store = openOrDie((dir / "j.session").string());
  RunInfo info;
  info.configJson = R"({"seed":7})";
  auto id = store.recordTimeline(info, richTimeline());
  ASSERT_TRUE(id.ok());
  auto rec = store.run(*id);
  auto t = store.loadTimeline(*id);
  ASSERT_TRUE(rec.ok() && t.ok());
  auto j = nlohmann::json::parse(runToJson(*rec, *t));
  EXPECT_EQ(j["format"], "pipestudio-run");
  EXPECT_EQ(j["run"]["id"], *id);
  EXPECT_EQ(j["run"]["status"], "succeeded");
  EXPECT_EQ(j["run"]["config"]["seed"], 7);
  ASSERT_EQ(j["timeline"]["ops"].size(), 9u);
  EXPECT_EQ(j["timeline"]["ops"][3]["kindName"], "B");
  EXPECT_EQ(j["timeline"]["ops"][3]["overlapped"], true);
  EXPECT_FALSE(j["timeline"]["ops"][4].contains("kindName"));  // a user kind
  EXPECT_EQ(j["timeline"]["transfers"][0]["bytes"], 123456789012);
  EXPECT_EQ(j["timeline"]["memory"][0][1]["bytes"], 300);
  EXPECT_EQ(j["timeline"]["metrics"]["makespan"], 5.5);
}

// A real simulated timeline (generator + simulator) through recordSimulation and back.
TEST(SessionRecording, SimulatedRunRoundTripsThroughTheSession) {
  auto dir = freshDir();
  auto path = (dir / "sim.session").string();
  auto schedule = ps::core::generateSchedule(ps::core::ScheduleKind::OneFOneB, {4, 8, 0});
  ASSERT_TRUE(schedule.ok());
  auto profile = ps::core::uniformCostProfile("F=1,I=1,W=1", schedule->pipeline.stages);
  ASSERT_TRUE(profile.ok());
  auto model = ps::core::makeSimulationModel(*schedule, *profile);
  ASSERT_TRUE(model.ok());
  auto timeline = ps::core::simulate(*schedule, *model);
  ASSERT_TRUE(timeline.ok());
  ASSERT_TRUE(timeline->complete);

  SimulationRecording rec;
  rec.sessionPath = path;
  rec.schedule = &*schedule;
  rec.scheduleName = "1f1b-4x8";
  rec.profile = &*profile;
  rec.profileSource = ProfileSource::Analytic;
  rec.configJson = R"({"comm":0})";
  auto recorded = recordSimulation(rec, *timeline);
  ASSERT_TRUE(recorded.ok()) << ps::core::formatDiagnostics(recorded.errors());

  auto store = openOrDie(path);
  auto version = store.schedule(recorded->scheduleId);
  ASSERT_TRUE(version.ok());
  auto reparsed = ps::core::parseDsl(version->pipeText);
  ASSERT_TRUE(reparsed.ok()) << ps::core::formatDiagnostics(reparsed.errors());
  EXPECT_EQ(reparsed->devices, schedule->devices);
  ASSERT_TRUE(recorded->profileId.has_value());
  auto storedProfile = store.profile(*recorded->profileId);
  ASSERT_TRUE(storedProfile.ok());
  EXPECT_TRUE(ps::core::parseCostProfile(storedProfile->json).ok());

  auto run = store.run(recorded->runId);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->summary.status, ps::core::RunState::Succeeded);
  EXPECT_EQ(run->summary.target, "simulator");
  EXPECT_EQ(run->summary.devices, 4);
  EXPECT_EQ(run->summary.opCount, static_cast<std::int64_t>(timeline->ops.size()));
  EXPECT_DOUBLE_EQ(run->summary.makespan, timeline->metrics.makespan);
  EXPECT_DOUBLE_EQ(run->summary.bubbleRatio, timeline->metrics.bubbleRatio);

  auto back = store.loadTimeline(recorded->runId);
  ASSERT_TRUE(back.ok());
  expectSameOps(back->ops, timeline->ops);
  EXPECT_EQ(back->transfers.size(), timeline->transfers.size());
  ASSERT_EQ(back->memory.size(), timeline->memory.size());
  for (size_t d = 0; d < timeline->memory.size(); ++d)
    EXPECT_EQ(back->memory[d].size(), timeline->memory[d].size());
  // Metrics recomputed from the loaded ops agree with the stored ones.
  auto recomputed = ps::core::computeMetrics(*back);
  EXPECT_DOUBLE_EQ(recomputed.makespan, back->metrics.makespan);
  EXPECT_DOUBLE_EQ(recomputed.bubbleRatio, back->metrics.bubbleRatio);
}

// The bundled example (resources/examples/make_example_session.sh) opens read-only with its
// versions, runs and notes intact.
TEST(SessionExample, BundledExampleSessionIsReadable) {
  const std::string path = std::string(PIPESTUDIO_RESOURCES_DIR) + "/examples/example.session";
  const std::string before = readBytes(path);
  {
    auto store = SessionStore::open(path, {OpenMode::ReadOnly});
    ASSERT_TRUE(store.ok()) << ps::core::formatDiagnostics(store.errors());
    EXPECT_TRUE(store->checkIntegrity().ok());
    auto schedules = store->listSchedules();
    ASSERT_TRUE(schedules.ok());
    int pipelineVersions = 0;
    for (const auto& s : *schedules) {
      if (s.name != "pipeline") continue;
      if (pipelineVersions++ > 0) {
        EXPECT_TRUE(s.parentId.has_value()) << "version " << s.id;
      }
    }
    EXPECT_GE(pipelineVersions, 3);
    auto runs = store->listRuns();
    ASSERT_TRUE(runs.ok());
    int succeeded = 0, failed = 0;
    for (const auto& r : *runs) {
      succeeded += r.status == ps::core::RunState::Succeeded;
      failed += r.status == ps::core::RunState::Failed;
      auto t = store->loadTimeline(r.id);
      ASSERT_TRUE(t.ok());
      EXPECT_EQ(static_cast<std::int64_t>(t->ops.size()), r.opCount);
      if (r.status == ps::core::RunState::Succeeded) {
        EXPECT_GT(r.makespan, 0);
        EXPECT_FALSE(t->memory.empty());
      }
    }
    EXPECT_GE(succeeded, 4);
    EXPECT_GE(failed, 1);
    EXPECT_FALSE(store->annotations()->empty());
  }
  EXPECT_EQ(readBytes(path), before);  // reading never writes
}
