// pipestudio-cli session list|show|export against a session built through the store.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"
#include "pipestudio/core/io/trace_import.h"
#include "pipestudio/sessions/session_store.h"
#include "sessions/session_test_util.h"

using namespace ps::sessions;
using namespace ps::sessions::test;

namespace {

using ps::test::CliResult;
using ps::test::runCli;

struct Fixture {
  std::string path;
  Id v1 = 0, v2 = 0, profile = 0, run = 0, failedRun = 0;
};

Fixture makeSession(const std::filesystem::path& dir) {
  Fixture f;
  f.path = (dir / "cli.session").string();
  auto store = SessionStore::open(f.path);
  EXPECT_TRUE(store.ok());
  f.v1 = *store->addSchedule("1f1b", "devices 2\nstages 2\n");
  f.v2 = *store->addSchedule("1f1b", "devices 2\nstages 2\n# faster\n", f.v1);
  f.profile =
      *store->addProfile("uniform", R"({"layers":[{"name":"l0","forwardMs":1}]})", ProfileSource::Analytic);
  RunInfo info;
  info.scheduleId = f.v2;
  info.profileId = f.profile;
  info.model = "tiny";
  info.configJson = R"({"microbatches":4})";
  auto t = syntheticTimeline(8, 2);
  t.label = "first try";
  f.run = *store->recordTimeline(info, t);
  Annotation note;
  note.runId = f.run;
  note.time = 2.5;
  note.text = "bubble after warm-up";
  EXPECT_TRUE(store->addAnnotation(note).ok());
  auto bad = t;
  bad.complete = false;
  bad.diagnostics = {ps::core::makeError("sim.deadlock", "deadlock between devices 0 and 1")};
  f.failedRun = *store->recordTimeline(RunInfo{}, bad);
  return f;
}

}  // namespace

TEST(SessionCli, ListShowsSchedulesProfilesAndRuns) {
  auto dir = freshDir();
  auto f = makeSession(dir);
  auto r = runCli("session list " + f.path);
  ASSERT_EQ(r.exitCode, 0) << r.out;
  EXPECT_NE(r.out.find("schedule versions: 2"), std::string::npos) << r.out;
  for (const char* part : {"cost profiles: 1", "runs: 2", "succeeded", "failed", "first try"})
    EXPECT_NE(r.out.find(part), std::string::npos) << part;

  auto j = runCli("session list " + f.path + " --json");
  ASSERT_EQ(j.exitCode, 0) << j.out;
  auto doc = nlohmann::json::parse(j.out);
  ASSERT_EQ(doc["schedules"].size(), 2u);
  EXPECT_EQ(doc["schedules"][1]["parentId"], f.v1);
  EXPECT_EQ(doc["profiles"][0]["source"], "analytic");
  ASSERT_EQ(doc["runs"].size(), 2u);
  EXPECT_EQ(doc["runs"][0]["id"], f.failedRun);  // newest first
  EXPECT_EQ(doc["runs"][1]["opCount"], 8);
  // syntheticTimeline(8, 2): device 0 ops at [0,4), device 1 at [1,5): makespan 5.
  EXPECT_DOUBLE_EQ(doc["runs"][1]["makespan"].get<double>(), 5.0);
}

// `session list` reads: it leaves no -wal or -shm file beside the user's session.
TEST(SessionCli, ListLeavesNothingBesideTheFile) {
  auto dir = freshDir();
  auto f = makeSession(dir);
  ASSERT_FALSE(std::filesystem::exists(f.path + "-wal"));
  auto r = runCli("session list " + f.path);
  ASSERT_EQ(r.exitCode, 0) << r.out;
  EXPECT_FALSE(std::filesystem::exists(f.path + "-wal"));
  EXPECT_FALSE(std::filesystem::exists(f.path + "-shm"));
}

TEST(SessionCli, ShowRunScheduleAndProfile) {
  auto dir = freshDir();
  auto f = makeSession(dir);
  auto run = runCli("session show " + f.path + " " + std::to_string(f.run));
  ASSERT_EQ(run.exitCode, 0) << run.out;
  EXPECT_NE(run.out.find("run " + std::to_string(f.run) + ": succeeded"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("(1f1b)"), std::string::npos);
  EXPECT_NE(run.out.find("(uniform)"), std::string::npos);
  EXPECT_NE(run.out.find("model tiny"), std::string::npos);
  EXPECT_NE(run.out.find("bubble after warm-up"), std::string::npos);

  auto failed = runCli("session show " + f.path + " run:" + std::to_string(f.failedRun));
  ASSERT_EQ(failed.exitCode, 0);
  EXPECT_NE(failed.out.find("error: deadlock between devices 0 and 1"), std::string::npos) << failed.out;

  auto sched = runCli("session show " + f.path + " s" + std::to_string(f.v2));
  ASSERT_EQ(sched.exitCode, 0) << sched.out;
  EXPECT_NE(sched.out.find("parent: " + std::to_string(f.v1)), std::string::npos) << sched.out;
  EXPECT_NE(sched.out.find("# faster"), std::string::npos);
  EXPECT_NE(sched.out.find("run " + std::to_string(f.run)), std::string::npos);

  auto prof = runCli("session show " + f.path + " profile:" + std::to_string(f.profile) + " --json");
  ASSERT_EQ(prof.exitCode, 0) << prof.out;
  EXPECT_EQ(nlohmann::json::parse(prof.out)["profile"]["layers"][0]["name"], "l0");

  auto missing = runCli("session show " + f.path + " run:999");
  EXPECT_EQ(missing.exitCode, 1);
  EXPECT_NE(missing.out.find(f.path), std::string::npos) << missing.out;
  EXPECT_NE(missing.out.find("no run 999"), std::string::npos);
  EXPECT_EQ(runCli("session show " + f.path + " bogus").exitCode, 2);
}

TEST(SessionCli, ExportsScheduleTextAndRunJson) {
  auto dir = freshDir();
  auto f = makeSession(dir);
  auto pipe = (dir / "out.pipe").string();
  auto r = runCli("session export " + f.path + " --schedule " + std::to_string(f.v1) + " -o " + pipe);
  ASSERT_EQ(r.exitCode, 0) << r.out;
  EXPECT_EQ(readBytes(pipe), "devices 2\nstages 2\n");

  auto json = (dir / "run.json").string();
  r = runCli("session export " + f.path + " --run " + std::to_string(f.run) + " -o " + json);
  ASSERT_EQ(r.exitCode, 0) << r.out;
  auto doc = nlohmann::json::parse(readBytes(json));
  EXPECT_EQ(doc["run"]["status"], "succeeded");
  EXPECT_EQ(doc["run"]["config"]["microbatches"], 4);
  EXPECT_EQ(doc["timeline"]["ops"].size(), 8u);
  EXPECT_EQ(doc["timeline"]["devices"], 2);

  // A name ending in trace.json picks the Chrome trace, which reads back as the same ops.
  auto trace = (dir / "run.trace.json").string();
  r = runCli("session export " + f.path + " --run " + std::to_string(f.run) + " -o " + trace);
  ASSERT_EQ(r.exitCode, 0) << r.out;
  auto imported = ps::core::importChromeTrace(readBytes(trace), trace);
  ASSERT_TRUE(imported.ok()) << ps::core::formatDiagnostics(imported.errors());
  EXPECT_EQ(imported->format, ps::core::TraceFormat::PipeStudio);
  EXPECT_EQ(imported->timeline.ops.size(), 8u);
  r = runCli("session export " + f.path + " --run " + std::to_string(f.run) + " --format chrome");
  ASSERT_EQ(r.exitCode, 0);
  EXPECT_TRUE(nlohmann::json::parse(r.out).contains("traceEvents")) << r.out.substr(0, 200);
  EXPECT_EQ(runCli("session export " + f.path + " --run 1 --format svg").exitCode, 2);

  auto toStdout = runCli("session export " + f.path + " --profile " + std::to_string(f.profile));
  ASSERT_EQ(toStdout.exitCode, 0);
  EXPECT_EQ(nlohmann::json::parse(toStdout.out)["layers"].size(), 1u);

  EXPECT_EQ(runCli("session export " + f.path).exitCode, 2);
  EXPECT_EQ(runCli("session export " + f.path + " --run 1 --schedule 1").exitCode, 2);
  EXPECT_EQ(runCli("session export " + f.path + " --run 999").exitCode, 1);
}

TEST(SessionCli, UnreadableFilesAreUsageErrorsNamingTheFile) {
  auto dir = freshDir();
  auto junk = dir / "junk.session";
  writeBytes(junk, std::string(5000, 'z'));
  auto r = runCli("session list " + junk.string());
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.out.find(junk.string()), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("not an SQLite database"), std::string::npos) << r.out;
  EXPECT_EQ(readBytes(junk), std::string(5000, 'z'));
  auto missing = runCli("session list " + (dir / "absent.session").string());
  EXPECT_EQ(missing.exitCode, 2);
  EXPECT_NE(missing.out.find("no such session file"), std::string::npos) << missing.out;
  EXPECT_FALSE(std::filesystem::exists(dir / "absent.session"));
  EXPECT_EQ(runCli("session frobnicate x").exitCode, 2);
}

TEST(SessionCli, NoteAddsAnnotations) {
  auto dir = freshDir();
  auto f = makeSession(dir);
  auto r = runCli("session note " + f.path + " --run " + std::to_string(f.run) +
                  " --time 3.5 --device 1 'stall on device 1'");
  ASSERT_EQ(r.exitCode, 0) << r.out;
  r = runCli("session note " + f.path + " --schedule " + std::to_string(f.v1) + " 'baseline'");
  ASSERT_EQ(r.exitCode, 0) << r.out;
  {
    auto store = SessionStore::open(f.path, {OpenMode::ReadOnly});
    ASSERT_TRUE(store.ok());
    auto notes = store->annotations(std::nullopt, f.run);
    ASSERT_EQ(notes->size(), 2u);  // the fixture's and ours, by time
    EXPECT_EQ((*notes)[1].text, "stall on device 1");
    EXPECT_EQ((*notes)[1].time, 3.5);
    EXPECT_EQ((*notes)[1].device, 1);
    EXPECT_EQ(store->annotations(f.v1)->size(), 1u);
  }
  EXPECT_EQ(runCli("session note " + f.path + " --run 999 'x'").exitCode, 1);
  EXPECT_EQ(runCli("session note " + f.path + " 'no target'").exitCode, 2);
  EXPECT_EQ(runCli("session note " + f.path + " --run 1 --time soon 'x'").exitCode, 2);
}

// simulate --session records schedule version, profile and timeline; a second run of the same
// file reuses the version; an edited file becomes a child version.
TEST(SessionCli, SimulateRecordsRunsInASession) {
  auto dir = freshDir();
  auto pipe = (dir / "mine.pipe").string();
  auto session = (dir / "work.session").string();
  ASSERT_EQ(runCli("generate 1f1b --devices 4 --microbatches 8 -o " + pipe).exitCode, 0);
  const std::string original = readBytes(pipe);
  auto first = runCli("simulate " + pipe + " --cost F=1,I=1,W=1 --comm 0.5 --session " + session +
                      " --session-name mine");
  ASSERT_EQ(first.exitCode, 0) << first.out;
  EXPECT_NE(first.out.find("recorded run 1 in " + session), std::string::npos) << first.out;
  // --json keeps stdout a single JSON document (the note goes to stderr).
  auto json = runCli("simulate " + pipe + " --cost F=1,I=1,W=1 --comm 0.5 --json --session " + session +
                         " --session-name mine",
                     false);
  ASSERT_EQ(json.exitCode, 0);
  auto doc = nlohmann::json::parse(json.out);
  writeBytes(pipe, original + "# edited\n");
  ASSERT_EQ(runCli("simulate " + pipe + " --cost F=1,I=1,W=1 --comm 0.5 --session " + session +
                   " --session-name mine")
                .exitCode,
            0);

  auto store = SessionStore::open(session, {OpenMode::ReadOnly});
  ASSERT_TRUE(store.ok()) << ps::core::formatDiagnostics(store.errors());
  auto schedules = store->listSchedules();
  ASSERT_EQ(schedules->size(), 2u);
  EXPECT_EQ((*schedules)[0].name, "mine");
  EXPECT_EQ((*schedules)[1].parentId, (*schedules)[0].id);
  EXPECT_EQ(store->schedule((*schedules)[0].id)->pipeText, original);  // the user's text, as written
  EXPECT_EQ(store->listProfiles()->size(), 1u);
  auto runs = store->listRuns();
  ASSERT_EQ(runs->size(), 3u);
  const RunSummary& r = runs->back();  // the first run
  EXPECT_EQ(r.status, ps::core::RunState::Succeeded);
  EXPECT_EQ(r.target, "simulator");
  EXPECT_EQ(r.devices, 4);
  EXPECT_EQ(r.opCount, 64);
  EXPECT_EQ(r.scheduleId, (*schedules)[0].id);
  EXPECT_EQ((*runs)[1].scheduleId, (*schedules)[0].id);
  EXPECT_EQ((*runs)[0].scheduleId, (*schedules)[1].id);
  // The stored metrics are the simulator's (the --json run printed them).
  EXPECT_DOUBLE_EQ((*runs)[1].makespan, doc["makespan"].get<double>());
  EXPECT_DOUBLE_EQ((*runs)[1].bubbleRatio, doc["bubble_ratio"].get<double>());
  auto t = store->loadTimeline(r.id);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->ops.size(), 64u);
  EXPECT_EQ(t->memory.size(), 4u);
  EXPECT_FALSE(t->transfers.empty());  // cross-device transfers take 0.5 ms each
}

TEST(SessionCli, SimulateRecordsADeadlockAsAFailedRun) {
  auto dir = freshDir();
  auto pipe = dir / "deadlock.pipe";
  writeBytes(pipe,
             "devices 2\nstages 2\nmicrobatches 2\nplacement linear\n\n"
             "device 0: F0 B0 F1 B1\ndevice 1: F1 F0 B0 B1\n");
  auto session = (dir / "work.session").string();
  auto r = runCli("simulate " + pipe.string() + " --cost F=1,I=1,W=1 --session " + session);
  EXPECT_EQ(r.exitCode, 1) << r.out;
  auto store = SessionStore::open(session, {OpenMode::ReadOnly});
  ASSERT_TRUE(store.ok());
  auto runs = store->listRuns();
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ((*runs)[0].status, ps::core::RunState::Failed);
  EXPECT_NE((*runs)[0].error.find("deadlock"), std::string::npos) << (*runs)[0].error;
  EXPECT_EQ(store->listSchedules()->front().name, "deadlock");  // the file name
}

TEST(HostileSession, CliExportRefusesWithExitOneAndTheRow) {
  auto dir = freshDir();
  auto h = makeHostileSession(dir);
  RawDb(h.path).mustExec("UPDATE memory_samples SET device = 2147483647 WHERE device = 1");
  for (const char* format : {"json", "chrome"}) {
    auto r = ps::test::runCli(
        "session export " + h.path + " --run " + std::to_string(h.run) + " --format " + format,
        ps::test::Stderr::Separate);
    EXPECT_EQ(r.exitCode, 1) << r.out << r.err;
    EXPECT_NE(r.err.find("table memory_samples"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("2147483647"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
    EXPECT_LT(r.seconds, 10.0);
  }
}

// `session show` and `list` check every count of a run's row where they read it: a crafted
// file never shows "ops: -1" or "-5 device(s)" as if valid.
TEST(HostileSession, CliShowAndListRefuseCountsOutOfRangeNamingTheRow) {
  struct Case {
    std::string sql, column, value;
  };
  for (const Case& c : {Case{"UPDATE runs SET op_count = -1", "op_count", "-1"},
                        Case{"UPDATE runs SET devices = -5", "devices", "-5"},
                        Case{"UPDATE runs SET devices = 4294967301", "devices", "4294967301"},
                        Case{"UPDATE runs SET bubble_ratio = 7", "bubble_ratio", "7"},
                        Case{"UPDATE runs SET makespan_ms = -3", "makespan_ms", "-3"},
                        Case{"UPDATE runs SET status = 'splendid'", "status", "'splendid'"}}) {
    auto dir = freshDir();
    auto h = makeHostileSession(dir);
    // The schema's CHECK constraints stop SQLite from writing such rows; a crafted file has them.
    RawDb(h.path).mustExec("PRAGMA ignore_check_constraints = ON; " + c.sql);
    for (const std::string& args :
         {"session show " + h.path + " run:" + std::to_string(h.run), "session list " + h.path}) {
      auto r = ps::test::runCli(args, ps::test::Stderr::Separate);
      EXPECT_EQ(r.exitCode, 1) << c.sql << "\n" << r.out << r.err;
      EXPECT_NE(r.err.find("table runs, id " + std::to_string(h.run)), std::string::npos) << r.err;
      EXPECT_NE(r.err.find(c.column + " " + c.value), std::string::npos) << r.err;
      EXPECT_EQ(r.out.find("ops: -1"), std::string::npos) << r.out;
      EXPECT_EQ(r.out.find("-5 device(s)"), std::string::npos) << r.out;
    }
  }
}

// A note whose page is damaged fails `session show` (exit 2, the damage named) instead of
// vanishing from the output; a note's device out of range is a value error (exit 1).
TEST(HostileSession, CliShowFailsOnDamagedOrInvalidNotes) {
  auto dir = freshDir();
  auto h = makeHostileSession(dir);
  {
    auto store = SessionStore::open(h.path);
    ASSERT_TRUE(store.ok());
    Annotation note;
    note.runId = h.run;
    note.text = std::string(3000, 'n');  // fills the table's root page
    ASSERT_TRUE(store->addAnnotation(note).ok());
  }
  const std::string show = "session show " + h.path + " run:" + std::to_string(h.run);
  ASSERT_EQ(ps::test::runCli(show).exitCode, 0);
  {
    RawDb db(h.path);
    db.mustExec("UPDATE annotations SET device = -7");
  }
  auto invalid = ps::test::runCli(show, ps::test::Stderr::Separate);
  EXPECT_EQ(invalid.exitCode, 1) << invalid.out << invalid.err;
  EXPECT_NE(invalid.err.find("table annotations"), std::string::npos) << invalid.err;
  EXPECT_NE(invalid.err.find("device -7"), std::string::npos) << invalid.err;

  // Overwrite the b-tree page header of the annotations table's root page.
  long long page = 0, pageSize = 0;
  {
    RawDb db(h.path);
    db.mustExec("UPDATE annotations SET device = NULL");
    page = db.integer("SELECT rootpage FROM sqlite_master WHERE name = 'annotations'");
    pageSize = db.integer("PRAGMA page_size");
  }
  ASSERT_GT(page, 1);
  std::string bytes = readBytes(h.path);
  ASSERT_GE(static_cast<long long>(bytes.size()), page * pageSize);
  for (long long i = 0; i < 8; ++i) bytes[static_cast<size_t>((page - 1) * pageSize + i)] = '\x7f';
  writeBytes(h.path, bytes);
  auto damaged = ps::test::runCli(show, ps::test::Stderr::Separate);
  EXPECT_EQ(damaged.exitCode, 2) << damaged.out << damaged.err;
  EXPECT_NE(damaged.err.find("damaged"), std::string::npos) << damaged.err;
  EXPECT_NE(damaged.err.find("cannot list notes"), std::string::npos) << damaged.err;
}
