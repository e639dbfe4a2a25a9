#include "remote/run_controller.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QSettings>
#include <QTemporaryDir>
#include <QTimer>

#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/io/units.h"
#include "pipestudio/sessions/measured_run.h"

#ifndef PIPESTUDIO_VERSION
#define PIPESTUDIO_VERSION "0"
#endif

namespace ps::ui {

using namespace ps::core;

namespace {

QString cliLabel(const RunRequest& r) {
  return r.remote && r.cluster.empty()
             ? QStringLiteral("pipestudio-cli (%1) on %2").arg(r.remote->cliPath, r.remote->displayName())
             : QStringLiteral("pipestudio-cli (%1)").arg(r.localCli);
}

// The remote shell sees one string: every word quoted; a leading ~/ stays expandable.
QString remoteWord(const QString& word) {
  if (word.startsWith(QStringLiteral("~/"))) return QStringLiteral("\"$HOME\"/") + shellQuote(word.mid(2));
  return shellQuote(word);
}

// A run or a profile on one host: no keep-alive probes (a run may be silent for long, and the
// dialog's Cancel ends it), otherwise the cluster launcher's ssh call.
QStringList sshPrefix(const RunRequest& r) {
  QStringList a;
  const ps::core::SshCall call{static_cast<double>(r.connectTimeoutSeconds), false};
  for (const std::string& word : ps::core::sshArguments(r.remote->clusterHost(), call))
    a << QString::fromStdString(word);
  return a;
}

ProcessCommand wrap(const RunRequest& r, const QStringList& cliArgs) {
  if (!r.remote || !r.cluster.empty())
    return {r.localCli.isEmpty() ? defaultLocalCli() : r.localCli, cliArgs};
  QStringList words{remoteWord(r.remote->cliPath)};
  for (const QString& a : cliArgs) words << shellQuote(a);
  return {QStringLiteral("ssh"), sshPrefix(r) << words.join(QLatin1Char(' '))};
}

}  // namespace

// --- hosts ---------------------------------------------------------------------------------

QString RemoteHost::displayName() const {
  return name.isEmpty() ? destination() : name;
}
QString RemoteHost::destination() const {
  return user.isEmpty() ? host : user + QLatin1Char('@') + host;
}
ps::core::ClusterHost RemoteHost::clusterHost() const {
  ps::core::ClusterHost h;
  h.host = host.toStdString();
  h.user = user.toStdString();
  h.port = port;
  h.key = identityFile.toStdString();
  h.cli = cliPath.toStdString();
  for (const QString& o : sshOptions) h.sshOptions.push_back(o.toStdString());
  return h;
}

QList<RemoteHost> loadRemoteHosts(QSettings& s) {
  QList<RemoteHost> out;
  const int n = s.beginReadArray(QStringLiteral("runHosts"));
  for (int i = 0; i < n; ++i) {
    s.setArrayIndex(i);
    RemoteHost h;
    h.name = s.value(QStringLiteral("name")).toString();
    h.host = s.value(QStringLiteral("host")).toString();
    h.user = s.value(QStringLiteral("user")).toString();
    h.port = s.value(QStringLiteral("port"), 22).toInt();
    h.identityFile = s.value(QStringLiteral("identityFile")).toString();
    h.cliPath = s.value(QStringLiteral("cliPath"), QStringLiteral("pipestudio-cli")).toString();
    h.sshOptions = s.value(QStringLiteral("sshOptions")).toStringList();
    if (!h.host.isEmpty()) out << h;
  }
  s.endArray();
  return out;
}

QString hostFileErrorText(const Diagnostics& errors) {
  QStringList lines;
  for (const auto& e : errors)
    lines << QObject::tr("line %1, column %2: %3")
                 .arg(e.location.line)
                 .arg(e.location.column)
                 .arg(QString::fromStdString(e.message));
  return lines.join(QLatin1Char('\n'));
}

std::vector<ClusterHost> loadClusterHosts(QSettings& s, UnreadableHosts* unreadable) {
  const QString text = s.value(QStringLiteral("runCluster/hosts")).toString();
  if (text.trimmed().isEmpty()) return {};
  auto hosts = parseHostFile(text.toStdString(), "settings");
  if (hosts) return *hosts;
  if (unreadable) *unreadable = UnreadableHosts{text, hostFileErrorText(hosts.errors())};
  return {};
}

void saveClusterHosts(QSettings& s, const std::vector<ClusterHost>& hosts) {
  s.setValue(QStringLiteral("runCluster/hosts"), QString::fromStdString(formatHostFile(hosts)));
}

void saveRemoteHosts(QSettings& s, const QList<RemoteHost>& hosts) {
  s.remove(QStringLiteral("runHosts"));
  s.beginWriteArray(QStringLiteral("runHosts"), static_cast<int>(hosts.size()));
  for (int i = 0; i < hosts.size(); ++i) {
    s.setArrayIndex(i);
    const RemoteHost& h = hosts[i];
    s.setValue(QStringLiteral("name"), h.name);
    s.setValue(QStringLiteral("host"), h.host);
    s.setValue(QStringLiteral("user"), h.user);
    s.setValue(QStringLiteral("port"), h.port);
    s.setValue(QStringLiteral("identityFile"), h.identityFile);
    s.setValue(QStringLiteral("cliPath"), h.cliPath);
    s.setValue(QStringLiteral("sshOptions"), h.sshOptions);
  }
  s.endArray();
}

// --- command construction -------------------------------------------------------------------

QString RunRequest::modelSpec() const {
  if (model == QStringLiteral("torchscript")) return QStringLiteral("torchscript:path=") + torchscriptFile;
  const QString p = modelParameters.trimmed();
  return p.isEmpty() ? model : model + QLatin1Char(':') + p;
}

QString RunRequest::targetName() const {
  if (!cluster.empty()) return QString::fromStdString(clusterTargetName(cluster));
  return remote ? remote->displayName() : QString::fromUtf8(kThisMachine.data(), kThisMachine.size());
}

QString defaultLocalCli() {
  const QString dir = QCoreApplication::applicationDirPath();
  for (const QString& candidate :
       {dir + QStringLiteral("/pipestudio-cli"), dir + QStringLiteral("/../app/pipestudio-cli")})
    if (QFileInfo(candidate).isExecutable()) return QFileInfo(candidate).absoluteFilePath();
  return QStringLiteral("pipestudio-cli");
}

QStringList cliRunArguments(const RunRequest& r) {
  QStringList a{QStringLiteral("run"), QStringLiteral("-"),        QStringLiteral("--model"),
                r.modelSpec(),         QStringLiteral("--device"), r.device};
  if (!r.cluster.empty())
    a << QStringLiteral("--hosts") << (r.hostsFile.isEmpty() ? QStringLiteral("hosts.txt") : r.hostsFile)
      << QStringLiteral("--connect-timeout") << QString::number(std::max(1, r.connectTimeoutSeconds));
  else if (r.processes > 1)
    a << QStringLiteral("--nproc") << QString::number(r.processes);
  a << QStringLiteral("--iterations") << QString::number(std::max(1, r.iterations));
  if (r.warmup > 0) a << QStringLiteral("--warmup") << QString::number(r.warmup);
  if (r.microbatchSize > 0) a << QStringLiteral("--microbatch-size") << QString::number(r.microbatchSize);
  if (r.checkGradients) a << QStringLiteral("--check-gradients");
  if (!r.optimizer.isEmpty()) {
    a << QStringLiteral("--optimizer") << r.optimizer;
    if (r.learningRate > 0) a << QStringLiteral("--lr") << QString::number(r.learningRate);
  }
  if (!r.inputsFile.isEmpty()) a << QStringLiteral("--inputs") << r.inputsFile;
  if (r.timeoutSeconds > 0) a << QStringLiteral("--timeout") << QString::number(r.timeoutSeconds);
  a << QStringLiteral("--events") << QStringLiteral("jsonl") << QStringLiteral("--cancel-on-eof");
  return a;
}

ProcessCommand buildRunCommand(const RunRequest& r) {
  return wrap(r, cliRunArguments(r));
}
ProcessCommand buildVersionCommand(const RunRequest& r) {
  return wrap(r, {QStringLiteral("--version")});
}
ProcessCommand buildCliCommand(const RunRequest& r, const QStringList& cliArgs) {
  return wrap(r, cliArgs);
}

QString clusterLaunchCommands(const RunRequest& r, LaunchKind kind) {
  // The ranks' arguments as `run --hosts` passes them (run_cluster.cpp): the schedule staged,
  // no events, session or launcher flags.
  const QString staged = QStringLiteral("/tmp/pipestudio-run/schedule.pipe");
  RunRequest plain = r;
  plain.cluster.clear();
  plain.processes = 1;
  if (plain.model == QStringLiteral("torchscript"))
    plain.torchscriptFile = QStringLiteral("/tmp/pipestudio-run/model.pt");
  if (!plain.inputsFile.isEmpty()) plain.inputsFile = QStringLiteral("/tmp/pipestudio-run/inputs.pt");
  std::vector<std::string> args;
  const QStringList a = cliRunArguments(plain);
  for (int i = 1; i < a.size(); ++i) {
    if (a[i] == QStringLiteral("--events")) {
      ++i;
      continue;
    }
    if (a[i] == QStringLiteral("--cancel-on-eof")) continue;
    args.push_back(a[i] == QStringLiteral("-") ? staged.toStdString() : a[i].toStdString());
  }
  args.push_back("--format");
  args.push_back("pipe");
  QString text =
      QString::fromStdString(printLaunchCommands(r.cluster, kind, args, staged.toStdString(), 29500));
  if (r.model == QStringLiteral("torchscript"))
    text += QStringLiteral("# and the TorchScript model %1 at /tmp/pipestudio-run/model.pt on every host\n")
                .arg(r.torchscriptFile);
  if (!r.inputsFile.isEmpty())
    text += QStringLiteral("# and the batch %1 at /tmp/pipestudio-run/inputs.pt on every host\n")
                .arg(r.inputsFile);
  return text;
}

QByteArray scheduleStdin(const QString& pipeText) {
  QByteArray b = pipeText.toUtf8();
  if (!b.isEmpty() && !b.endsWith('\n')) b += '\n';
  b += QByteArray(kScheduleEndMarker.data(), static_cast<qsizetype>(kScheduleEndMarker.size()));
  b += '\n';
  return b;
}

QString describeSshFailure(const RunRequest& r, int exitCode, const QString& stderrText) {
  if (!r.remote) return {};
  return QString::fromStdString(
      ps::core::describeSshFailure(r.remote->clusterHost(), exitCode, stderrText.toStdString()));
}

QString checkCliVersion(const RunRequest& r, int exitCode, const QString& out, const QString& err) {
  if (QString ssh = describeSshFailure(r, exitCode, err); !ssh.isEmpty()) return ssh;
  const QString where = r.remote ? QStringLiteral(" on %1").arg(r.remote->displayName()) : QString();
  const QString path = r.remote ? r.remote->cliPath : r.localCli;
  const QString said = lastLines(err, 3);
  if (exitCode == 127 || err.contains(QLatin1String("not found")) ||
      err.contains(QLatin1String("No such file")))
    return QStringLiteral(
               "pipestudio-cli not found%1 at '%2'%3: install it there or set its path in the host settings")
        .arg(where, path, said.isEmpty() ? QString() : QStringLiteral(" (%1)").arg(said));
  if (exitCode == 126) return QStringLiteral("'%1'%2 is not executable (%3)").arg(path, where, said);
  if (exitCode != 0)
    return QStringLiteral("'%1 --version'%2 failed with exit code %3%4")
        .arg(path, where)
        .arg(exitCode)
        .arg(said.isEmpty() ? QString() : QStringLiteral(": ") + said);
  const std::string text = out.toStdString();
  auto v = parseCliVersion(text);
  if (!v)
    return QStringLiteral("'%1'%2 does not look like pipestudio-cli (--version printed '%3')")
        .arg(path, where, lastLines(out, 1).left(120));
  if (v->protocol != kRunEventProtocolVersion) {
    const QString theirs = v->protocol > 0 ? QStringLiteral("run-event protocol %1").arg(v->protocol)
                                           : QStringLiteral("no run-event protocol");
    return QStringLiteral(
               "version mismatch: pipestudio-cli%1 is %2 (%3), this PipeStudio is %4 (run-event protocol "
               "%5): install the matching pipestudio-cli there")
        .arg(where, QString::fromStdString(v->program), theirs, QStringLiteral(PIPESTUDIO_VERSION))
        .arg(kRunEventProtocolVersion);
  }
  return {};
}

QString RunOutcome::statusName() const {
  return QString::fromUtf8(std::string(ps::core::runEventStatusToken(status)).c_str());
}

// --- the controller ------------------------------------------------------------------------

namespace {
// SIGTERM after the grace, SIGKILL this long after SIGTERM.
constexpr int kTerminateMs = 3000;
}  // namespace

RunController::RunController(QObject* parent) : QObject(parent), reader_(std::make_unique<RunEventReader>()) {
  qRegisterMetaType<ps::ui::RunOutcome>();
  qRegisterMetaType<ps::core::Timeline>();
  redraw_ = new QTimer(this);
  redraw_->setInterval(100);
  connect(redraw_, &QTimer::timeout, this, [this] {
    if (reader_->opEvents() == drawnOps_) return;
    drawnOps_ = reader_->opEvents();
    Q_EMIT timelineUpdated(reader_->timeline());
  });
  runner_ = new ProcessRunner(this);
  connect(runner_, &ProcessRunner::failedToStart, this, [this](const QString& why) {
    failedToStart_ = true;
    const QString what = request_.remote ? QStringLiteral("the ssh client ('ssh'); install openssh-client")
                                         : QStringLiteral("pipestudio-cli at '%1'").arg(runner_->program());
    failBeforeRun(QStringLiteral("cannot start %1: %2").arg(what, why));
  });
  connect(runner_, &ProcessRunner::stderrReceived, this, [this](const QString& text) {
    if (phase_ != Phase::CheckingVersion) Q_EMIT stderrReceived(text);
  });
  connect(runner_, &ProcessRunner::stdoutReceived, this, [this](const QByteArray& bytes) {
    if (phase_ == Phase::CheckingVersion)
      versionOut_ += bytes;
    else
      onStdout(bytes);
  });
  connect(runner_, &ProcessRunner::finished, this, [this](int code, bool crashed) {
    if (phase_ == Phase::CheckingVersion)
      onVersionDone(code, crashed);
    else
      onRunDone(code, crashed);
  });
}

RunController::~RunController() = default;  // the runner closes stdin and kills a child still running

void RunController::setRedrawIntervalMs(int ms) {
  redraw_->setInterval(std::max(10, ms));
}

qint64 RunController::processId() const {
  return runner_->processId();
}

void RunController::setPhase(Phase p, const QString& text) {
  phase_ = p;
  Q_EMIT phaseChanged(text);
}

bool RunController::start(const RunRequest& request, const QString& pipeText, const QString& scheduleName) {
  if (isActive()) return false;
  request_ = request;
  clusterDir_.reset();
  if (!request_.cluster.empty()) {
    // A cluster run is this machine's CLI launching over ssh: it reads the hosts from a file.
    request_.remote.reset();
    clusterDir_ = std::make_unique<QTemporaryDir>();
    request_.hostsFile = clusterDir_->filePath(QStringLiteral("hosts.txt"));
    QFile f(request_.hostsFile);
    if (!clusterDir_->isValid() || !f.open(QIODevice::WriteOnly | QIODevice::Truncate) ||
        f.write(QByteArray::fromStdString(formatHostFile(request_.cluster))) < 0) {
      request_.hostsFile.clear();
    }
  }
  if (!request_.remote && request_.localCli.isEmpty()) request_.localCli = defaultLocalCli();
  pipeText_ = pipeText;
  scheduleName_ = scheduleName;
  cliVersion_.clear();
  versionOut_.clear();
  outcome_.reset();
  cancelRequested_ = false;
  failedToStart_ = false;
  drawnOps_ = 0;
  lastIteration_ = -2;
  reader_ =
      std::make_unique<RunEventReader>(request_.remote ? "ssh " + request_.remote->displayName().toStdString()
                                                       : std::string("pipestudio-cli run"));
  // User-declared kinds come back by name: give the reader the schedule's table.
  if (auto parsed = parseDsl(pipeText.toStdString())) {
    std::vector<std::string> kinds;
    for (const auto& k : parsed->userKinds) kinds.push_back(k.name);
    reader_->setUserKinds(std::move(kinds));
  }
  setPhase(Phase::CheckingVersion, QStringLiteral("Checking %1…").arg(cliLabel(request_)));
  runner_->start(buildVersionCommand(request_));
  return true;
}

void RunController::onStdout(const QByteArray& bytes) {
  reader_->feed(std::string_view(bytes.constData(), static_cast<size_t>(bytes.size())));
  const RunProgress& p = reader_->progress();
  if (p.iteration != lastIteration_) {
    lastIteration_ = p.iteration;
    Q_EMIT progressChanged(p.iteration, p.iterations, p.warmup);
  }
}

void RunController::failBeforeRun(const QString& message, int exitCode) {
  RunOutcome o;
  o.status = cancelRequested_ ? ps::core::RunState::Cancelled : ps::core::RunState::Failed;
  o.message = cancelRequested_ ? QStringLiteral("cancelled before the run started") : message;
  o.stderrText = runner_->stderrTail();
  o.exitCode = exitCode;
  o.timeline = reader_->timeline();
  finish(std::move(o));
}

void RunController::onVersionDone(int exitCode, bool crashed) {
  if (cancelRequested_) return failBeforeRun({}, exitCode);
  if (crashed)
    return failBeforeRun(QStringLiteral("%1 crashed on --version").arg(cliLabel(request_)), exitCode);
  const QString out = QString::fromUtf8(versionOut_);
  if (QString why = checkCliVersion(request_, exitCode, out, runner_->stderrTail()); !why.isEmpty())
    return failBeforeRun(why, exitCode);
  if (auto v = parseCliVersion(out.toStdString())) cliVersion_ = QString::fromStdString(v->program);
  setPhase(Phase::Running,
           QStringLiteral("Running on %1 (pipestudio-cli %2)…").arg(request_.targetName(), cliVersion_));
  runner_->start(buildRunCommand(request_));  // a new stderr tail: the run's own
  if (failedToStart_) return;
  runner_->write(scheduleStdin(pipeText_));  // buffered until the process has started
  // stdin stays open: its end is the CLI's cancel signal (--cancel-on-eof).
  redraw_->start();
}

void RunController::cancel() {
  if (!isActive() || cancelRequested_) return;
  cancelRequested_ = true;
  if (phase_ == Phase::CheckingVersion) {
    runner_->kill();
    return;
  }
  setPhase(Phase::Stopping, QStringLiteral("Cancelling the run on %1…").arg(request_.targetName()));
  runner_->stop(cancelGraceMs_, kTerminateMs);
}

void RunController::onRunDone(int exitCode, bool crashed) {
  reader_->end();
  redraw_->stop();
  const QString stderrText = runner_->stderrTail();
  RunOutcome o;
  o.exitCode = exitCode;
  o.crashed = crashed;
  o.stderrText = stderrText;
  o.started = reader_->started();
  o.finished = reader_->finished();
  o.losses = reader_->losses();
  o.stuck = reader_->stuck();
  o.streamWarnings = reader_->warnings();
  o.timeline = reader_->timeline();
  const QString target = request_.targetName();
  QString errors;
  for (const auto& e : reader_->errors())
    if (e.code != "engine.cancelled")
      errors += (errors.isEmpty() ? QString() : QStringLiteral("; ")) + QString::fromStdString(e.message);
  if (cancelRequested_) {
    o.status = ps::core::RunState::Cancelled;
    o.message = QStringLiteral("cancelled on %1 after %2 ops").arg(target).arg(reader_->opEvents());
  } else if (o.finished) {
    o.status = o.finished->state;
    if (o.status == ps::core::RunState::Succeeded) {
      o.message = QStringLiteral("finished on %1: makespan %2")
                      .arg(target, QString::fromStdString(formatDurationMs(o.timeline.metrics.makespan)));
      if (!o.losses.empty())
        o.message +=
            QStringLiteral(", loss %1").arg(QString::fromStdString(formatSignificant(o.losses.back(), 6)));
      if (o.finished->gradientCheck)
        o.message += o.finished->gradientCheck->passed
                         ? QStringLiteral(", gradient check passed")
                         : QStringLiteral(", gradient check FAILED (max relative error %1)")
                               .arg(QString::fromStdString(
                                   formatSignificant(o.finished->gradientCheck->maxRelativeError, 3)));
    } else {
      o.message = QStringLiteral("run %1 on %2%3")
                      .arg(QString::fromStdString(o.finished->status), target,
                           errors.isEmpty() ? QString() : QStringLiteral(": ") + errors);
    }
  } else {
    o.status = ps::core::RunState::Failed;
    const QString ssh = describeSshFailure(request_, exitCode, stderrText);
    if (!errors.isEmpty())
      o.message = QStringLiteral("run refused on %1: %2").arg(target, errors);
    else if (!ssh.isEmpty())
      o.message = ssh + QStringLiteral(" (the run was interrupted)");
    else if (o.crashed)
      o.message = QStringLiteral("pipestudio-cli on %1 crashed before the run finished").arg(target);
    else
      o.message = QStringLiteral("pipestudio-cli on %1 ended with exit code %2 before the run finished")
                      .arg(target)
                      .arg(exitCode);
    const QString tail = lastLines(stderrText, 1);
    if (errors.isEmpty() && !tail.isEmpty()) o.message += QStringLiteral(": ") + tail;
  }
  if (o.status != ps::core::RunState::Succeeded) {
    o.timeline.complete = false;
    // The outcome's message first: it is what a session lists as the run's error.
    o.timeline.diagnostics.insert(
        o.timeline.diagnostics.begin(),
        makeError(o.status == ps::core::RunState::Cancelled ? "run.cancelled" : "run.failed",
                  o.message.toStdString()));
  }
  o.timeline.label = scheduleName_.toStdString();
  finish(std::move(o));
}

void RunController::finish(RunOutcome o) {
  redraw_->stop();
  o.target = request_.targetName();
  o.command = buildRunCommand(request_).display();
  o.cliVersion = cliVersion_;
  o.request = request_;
  if (o.timeline.label.empty()) o.timeline.label = scheduleName_.toStdString();
  outcome_ = o;
  setPhase(Phase::Idle, o.message);
  Q_EMIT timelineUpdated(o.timeline);
  Q_EMIT runFinished(o);
}

// --- storing -------------------------------------------------------------------------------

Result<StoredRun> storeRunInSession(const QString& sessionPath, const RunOutcome& outcome,
                                    const QString& scheduleName, const QString& pipeText,
                                    const Schedule* schedule, const CostProfile* profile) {
  sessions::MeasuredRun run;
  run.scheduleName = scheduleName.toStdString();
  run.pipeText = pipeText.toStdString();
  run.executed = schedule;
  // The document's profile; one without a name is the built-in default (defaultCostProfile).
  if (profile)
    run.profile = sessions::predictionProfile(
        *profile, "profile",
        profile->name.empty() ? sessions::ProfileSource::Analytic : sessions::ProfileSource::Manual);
  run.started = outcome.started;
  run.finished = outcome.finished;
  run.measured = outcome.timeline;
  run.stuck = outcome.stuck;
  run.status = outcome.status;
  if (outcome.status != ps::core::RunState::Succeeded) run.error = outcome.message.toStdString();
  run.stderrText = outcome.stderrText.toStdString();
  run.place = outcome.target.toStdString();
  const RunRequest& r = outcome.request;
  run.host = !r.cluster.empty() ? QString::fromStdString(formatHostFile(r.cluster)).trimmed().toStdString()
             : r.remote         ? r.remote->destination().toStdString()
                                : std::string("localhost");
  const sessions::MeasuredRunRecording rec = sessions::planMeasuredRun(run).recording;
  auto stored = sessions::recordMeasuredRun(sessionPath.toStdString(), rec);
  PS_TRY(stored);
  StoredRun out;
  out.runId = stored->measuredRunId;
  if (stored->predictedRunId) out.predictedRunId = *stored->predictedRunId;
  return out;
}

}  // namespace ps::ui
