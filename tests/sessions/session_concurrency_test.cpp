// Two writers on one session file, and a writer killed with SIGKILL in the middle of a run.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <thread>

#include "pipestudio/sessions/session_store.h"
#include "session_test_util.h"

using namespace ps::sessions;
using namespace ps::sessions::test;

namespace {

// Runs `body` in a forked child that exits with its return value. The child opens its own
// connections: nothing SQLite crosses the fork.
pid_t forkChild(const std::function<int()>& body) {
  pid_t pid = fork();
  if (pid == 0) {
    int rc = 1;
    try {
      rc = body();
    } catch (...) {
      rc = 99;
    }
    _exit(rc);
  }
  return pid;
}

int waitExit(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// Polls (with a separate connection) until `pred` holds or the timeout passes.
template <typename Pred>
bool waitFor(Pred pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

}  // namespace

TEST(SessionConcurrency, TwoProcessesWriteTheSameFile) {
  auto dir = freshDir();
  auto path = (dir / "shared.session").string();
  { ASSERT_TRUE(SessionStore::open(path).ok()); }
  constexpr int kEach = 150;
  auto writer = [&](const std::string& who) {
    auto store = SessionStore::open(path);
    if (!store) return 10;
    for (int i = 0; i < kEach; ++i) {
      if (!store->addSchedule(who + std::to_string(i), "devices 1\n").ok()) return 11;
      if (i % 10 == 0 && !store->recordTimeline(RunInfo{}, syntheticTimeline(2000, 2)).ok()) return 12;
    }
    return 0;
  };
  pid_t child = forkChild([&] { return writer("child-"); });
  ASSERT_GT(child, 0);
  EXPECT_EQ(writer("parent-"), 0);
  EXPECT_EQ(waitExit(child), 0);

  auto store = SessionStore::open(path);
  ASSERT_TRUE(store.ok());
  EXPECT_EQ(store->listSchedules()->size(), 2u * kEach);
  auto runs = store->listRuns();
  ASSERT_EQ(runs->size(), 2u * (kEach / 10));
  for (const auto& r : *runs) {
    EXPECT_EQ(r.status, ps::core::RunState::Succeeded);
    EXPECT_EQ(r.opCount, 2000);
  }
  EXPECT_TRUE(store->checkIntegrity().ok());
}

TEST(SessionConcurrency, WriterWaitsForAnotherConnectionsTransaction) {
  auto dir = freshDir();
  auto path = (dir / "locked.session").string();
  auto store = SessionStore::open(path);
  ASSERT_TRUE(store.ok());
  RawDb other(path);
  other.mustExec("BEGIN IMMEDIATE");
  other.mustExec("INSERT INTO schedules(name, pipe_text, created_ms) VALUES('other', 'x', 0)");
  // Readers are not blocked by the writer (WAL).
  EXPECT_EQ(store->listSchedules()->size(), 0u);
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    other.mustExec("COMMIT");
  });
  auto t0 = std::chrono::steady_clock::now();
  auto id = store->addSchedule("mine", "y");  // waits on the busy timeout, then succeeds
  auto waited = std::chrono::steady_clock::now() - t0;
  release.join();
  ASSERT_TRUE(id.ok()) << ps::core::formatDiagnostics(id.errors());
  EXPECT_GE(waited, std::chrono::milliseconds(200));
  EXPECT_EQ(store->listSchedules()->size(), 2u);
}

TEST(SessionConcurrency, LockHeldPastTheTimeoutGivesABusyError) {
  auto dir = freshDir();
  auto path = (dir / "busy.session").string();
  OpenOptions quick;
  quick.busyTimeoutMs = 150;
  auto store = SessionStore::open(path, quick);
  ASSERT_TRUE(store.ok());
  RawDb other(path);
  other.mustExec("BEGIN IMMEDIATE");
  auto id = store->addSchedule("mine", "y");
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.error().code, "session.busy");
  EXPECT_EQ(id.error().location.file, path);
  EXPECT_NE(id.error().message.find("locked by another process"), std::string::npos);
  other.mustExec("ROLLBACK");
  EXPECT_TRUE(store->addSchedule("mine", "y").ok());
}

// A child appends a large run in chunks and is killed with SIGKILL part-way. The file must pass
// integrity_check and the run must show as unfinished (running, interrupted) with exactly the
// ops of the chunks that committed: never as succeeded.
TEST(SessionCrashSafety, KilledWriterLeavesRunIncompleteAndFileIntact) {
  auto dir = freshDir();
  auto path = (dir / "crash.session").string();
  constexpr int kChunk = 20000;
  pid_t child = forkChild([&] {
    auto store = SessionStore::open(path);
    if (!store) return 10;
    RunInfo info;
    info.devices = 4;
    info.label = "doomed";
    auto run = store->beginRun(info);
    if (!run) return 11;
    auto chunk = syntheticTimeline(kChunk, 4);
    for (int i = 0; i < 2000; ++i)  // far more than it gets to write before the kill
      if (!store->appendRunOps(*run, chunk.ops).ok()) return 12;
    return store->finishRun(*run, ps::core::RunState::Succeeded).ok() ? 0 : 13;
  });
  ASSERT_GT(child, 0);
  auto watcher = SessionStore::open(path);
  bool started = waitFor(
      [&] {
        if (!watcher) watcher = SessionStore::open(path);
        if (!watcher) return false;
        auto runs = watcher->listRuns();
        return runs && !runs->empty() && runs->front().opCount >= std::int64_t{3} * kChunk;
      },
      std::chrono::seconds(20));
  ASSERT_EQ(kill(child, SIGKILL), 0);
  EXPECT_EQ(waitExit(child), 128 + SIGKILL);
  ASSERT_TRUE(started) << "the child never got its first chunks in";

  {
    RawDb raw(path);
    EXPECT_EQ(raw.text("PRAGMA integrity_check"), "ok");
    EXPECT_EQ(raw.text("PRAGMA foreign_key_check"), "");
  }
  auto store = SessionStore::open(path);
  ASSERT_TRUE(store.ok()) << ps::core::formatDiagnostics(store.errors());
  EXPECT_TRUE(store->checkIntegrity().ok());
  auto runs = store->listRuns();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 1u);
  const RunSummary& r = runs->front();
  EXPECT_EQ(r.status, ps::core::RunState::Running);
  EXPECT_FALSE(r.finished());
  EXPECT_TRUE(r.interrupted);
  EXPECT_GE(r.opCount, 3 * kChunk);
  EXPECT_EQ(r.opCount % kChunk, 0) << "a chunk was half-committed";
  auto t = store->loadTimeline(r.id);
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->complete);
  EXPECT_EQ(static_cast<std::int64_t>(t->ops.size()), r.opCount);
  // The interrupted run can be closed by whoever finds it.
  EXPECT_TRUE(store->finishRun(r.id, ps::core::RunState::Failed, "writer was killed").ok());
}

// Same with the one-call recordTimeline: whenever the kill lands, the run is absent or
// unfinished, and a succeeded run always has all its ops.
TEST(SessionCrashSafety, KilledRecordTimelineIsNeverHalfVisibleAsSucceeded) {
  auto dir = freshDir();
  auto path = (dir / "crash2.session").string();
  constexpr size_t kOps = 600000;
  size_t seen = 0;  // runs begun so far
  for (int delayMs : {0, 100, 300}) {
    SCOPED_TRACE("kill " + std::to_string(delayMs) + " ms after a run began");
    pid_t child = forkChild([&] {
      auto store = SessionStore::open(path);
      if (!store) return 10;
      auto t = syntheticTimeline(kOps, 8);
      for (int i = 0; i < 50; ++i)
        if (!store->recordTimeline(RunInfo{}, t).ok()) return 11;
      return 0;
    });
    ASSERT_GT(child, 0);
    // Wait (reading through our own connection) until the child has begun a new run.
    bool began = waitFor(
        [&] {
          auto s = SessionStore::open(path);
          if (!s) return false;
          auto runs = s->listRuns();
          return runs && runs->size() > seen;
        },
        std::chrono::seconds(30));
    std::this_thread::sleep_for(std::chrono::milliseconds(delayMs));
    kill(child, SIGKILL);
    waitExit(child);
    ASSERT_TRUE(began);
    RawDb raw(path);
    EXPECT_EQ(raw.text("PRAGMA integrity_check"), "ok");
    seen = static_cast<size_t>(raw.integer("SELECT count(*) FROM runs"));
  }
  auto store = SessionStore::open(path);
  ASSERT_TRUE(store.ok());
  auto runs = store->listRuns();
  ASSERT_TRUE(runs.ok());
  int cutShort = 0;
  for (const auto& r : *runs) {
    cutShort += r.finished() ? 0 : 1;
    SCOPED_TRACE("run " + std::to_string(r.id));
    auto t = store->loadTimeline(r.id);
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(static_cast<std::int64_t>(t->ops.size()), r.opCount);
    if (r.status == ps::core::RunState::Succeeded) {
      EXPECT_EQ(t->ops.size(), kOps);
    } else {
      EXPECT_EQ(r.status, ps::core::RunState::Running);
      EXPECT_TRUE(r.interrupted);
    }
  }
  EXPECT_GE(cutShort, 1) << "no kill landed in the middle of a run";
}
