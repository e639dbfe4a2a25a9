#pragma once
// Helpers of the Run dialog / controller tests: schedules, fake CLIs, waiting for a run.
#include <signal.h>
#include <unistd.h>

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QSignalSpy>
#include <QString>
#include <QtTest>
#include <cerrno>
#include <functional>
#include <memory>
#include <optional>

#include "pipestudio/core/io/run_events.h"
#include "pipestudio/sessions/session_store.h"
#include "remote/run_controller.h"

namespace runtest {

inline const char* kTinyPipe =
    "name \"tiny\"\n"
    "devices 2\n"
    "stages 2\n"
    "microbatches 3\n"
    "placement linear\n"
    "device 0: F0 F1 B0 F2 B1 B2\n"
    "device 1: F0 B0 F1 B1 F2 B2\n";

#ifdef PIPESTUDIO_VERSION  // the tests that start the CLI
inline QString ourVersionLine() {
  return QString::fromStdString(ps::core::cliVersionLine(PIPESTUDIO_VERSION));
}
#endif

// How a test request runs (defaults: RunRequest's).
struct Exec {
  QString device = QStringLiteral("cpu");
  int processes = 1;
  int iterations = 1;
  int warmup = 0;
  bool checkGradients = false;
  double timeoutSeconds = 60;
};

// A request for a built-in model ("mlp", "gpt") with these parameters, run as `e` says; the
// target (this machine, a host, a cluster) is the caller's.
inline ps::ui::RunRequest modelRequest(const QString& model, const QString& parameters, const Exec& e = {}) {
  ps::ui::RunRequest r;
  r.model = model;
  r.modelParameters = parameters;
  r.device = e.device;
  r.processes = e.processes;
  r.iterations = e.iterations;
  r.warmup = e.warmup;
  r.checkGradients = e.checkGradients;
  r.timeoutSeconds = e.timeoutSeconds;
  return r;
}

// A run of kTinyPipe filed in `session` as the Run dialog files it, read back.
struct StoredTinyRun {
  std::string error;  // why it is not there
  qint64 runId = 0;
  std::unique_ptr<ps::sessions::SessionStore> store;
  std::optional<ps::sessions::RunRecord> run;
};
inline StoredTinyRun storeTinyRun(const QString& session, const ps::ui::RunOutcome& o) {
  StoredTinyRun out;
  auto stored = ps::ui::storeRunInSession(session, o, QStringLiteral("tiny"), QString::fromLatin1(kTinyPipe));
  if (!stored) {
    out.error = stored.error().message;
    return out;
  }
  out.runId = stored->runId;
  auto store = ps::sessions::SessionStore::open(session.toStdString());
  if (!store) {
    out.error = store.error().message;
    return out;
  }
  out.store = std::make_unique<ps::sessions::SessionStore>(std::move(*store));
  auto run = out.store->run(out.runId);
  if (run)
    out.run = std::move(*run);
  else
    out.error = run.error().message;
  return out;
}

// Writes an executable sh script `dir/name` with `body` and returns its path.
inline QString writeScript(const QString& dir, const QString& name, const QString& body) {
  const QString path = QDir(dir).filePath(name);
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate)) qFatal("cannot write %s", qPrintable(path));
  f.write(("#!/bin/sh\n" + body).toUtf8());
  f.close();
  f.setPermissions(QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ExeOwner);
  return path;
}

// Waits for the controller's runFinished and returns the outcome.
inline ps::ui::RunOutcome waitForOutcome(ps::ui::RunController& c, QSignalSpy& spy, int timeoutMs) {
  if (spy.isEmpty() && !spy.wait(timeoutMs)) qWarning("run did not finish within %d ms", timeoutMs);
  if (spy.isEmpty()) return {};
  return *c.lastOutcome();
}

inline bool processGone(qint64 pid) {
  if (pid <= 0) return true;
  if (::kill(static_cast<pid_t>(pid), 0) == 0) {
    // A zombie is gone for our purpose only once reaped; read its state.
    QFile stat(QStringLiteral("/proc/%1/stat").arg(pid));
    if (stat.open(QIODevice::ReadOnly)) {
      const QByteArray s = stat.readAll();
      const int close = s.lastIndexOf(')');
      return close > 0 && s.size() > close + 2 && s.at(close + 2) == 'Z';
    }
    return false;
  }
  return errno == ESRCH;
}

// Live processes whose command line contains every one of `needles`.
inline QList<qint64> processesWith(const QStringList& needles) {
  QList<qint64> out;
  const QStringList entries = QDir(QStringLiteral("/proc")).entryList(QDir::Dirs | QDir::NoDotAndDotDot);
  for (const QString& e : entries) {
    bool ok = false;
    const qint64 pid = e.toLongLong(&ok);
    if (!ok || pid == ::getpid()) continue;
    QFile f(QStringLiteral("/proc/%1/cmdline").arg(e));
    if (!f.open(QIODevice::ReadOnly)) continue;
    QByteArray cmd = f.readAll();
    cmd.replace('\0', ' ');
    bool all = !cmd.isEmpty();
    for (const QString& n : needles) all = all && cmd.contains(n.toUtf8());
    if (all && !processGone(pid)) out << pid;
  }
  return out;
}

inline bool waitUntil(const std::function<bool()>& cond, int timeoutMs) {
  QElapsedTimer t;
  t.start();
  while (!cond()) {
    if (t.elapsed() > timeoutMs) return false;
    QTest::qWait(50);
  }
  return true;
}

}  // namespace runtest
