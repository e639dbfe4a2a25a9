#pragma once
// Runs a schedule for real: `pipestudio-cli run - ... --events jsonl --cancel-on-eof` as a
// child process (QProcess), on this machine or on a remote host through the system's OpenSSH
// client, with the schedule sent on stdin. The GUI never links the engine; it reads the same
// run-event stream either way (core::RunEventReader), shows progress and the measured ops as
// they arrive, and ends with a RunOutcome that loses nothing (partial timeline, stderr).
//
// Cancel closes the child's stdin: the CLI (locally, or at the far end of the ssh channel)
// sees EOF and cancels at its next op. If it has not ended after a grace period the local
// process (the CLI, or the ssh client, whose end closes the remote stdin too) is terminated,
// then killed.
#include <QByteArray>
#include <QList>
#include <QMetaType>
#include <QObject>
#include <QString>
#include <QStringList>
#include <memory>
#include <optional>
#include <vector>

#include "pipestudio/core/io/cluster.h"
#include "pipestudio/core/io/run_events.h"
#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/core/model/result.h"
#include "pipestudio/core/model/run_state.h"
#include "pipestudio/core/model/schedule.h"
#include "pipestudio/core/model/timeline.h"
#include "remote/process_runner.h"
#include "widgets/metatypes.h"

class QSettings;
class QTemporaryDir;
class QTimer;

namespace ps::ui {

// A remote target, kept in QSettings ("runHosts").
struct RemoteHost {
  QString name;  // shown in the target list; empty: user@host
  QString host;
  QString user;  // empty: ssh's default (the local user name, ~/.ssh/config)
  int port = 22;
  QString identityFile;                                // empty: ssh's default keys / agent
  QString cliPath = QStringLiteral("pipestudio-cli");  // on the remote host (PATH or absolute)
  QStringList sshOptions;  // extra `-o` values, e.g. "StrictHostKeyChecking=accept-new"
  QString displayName() const;
  QString destination() const;  // user@host or host
  // The same host as core's host model has it (one rank): what ssh is called with and how its
  // failures are named (core::sshArguments, core::describeSshFailure).
  ps::core::ClusterHost clusterHost() const;
  friend bool operator==(const RemoteHost&, const RemoteHost&) = default;
};

QList<RemoteHost> loadRemoteHosts(QSettings& settings);
void saveRemoteHosts(QSettings& settings, const QList<RemoteHost>& hosts);
// The cluster target, kept in QSettings ("runCluster/hosts") as host-file text (docs/cli.md).
// Saved text that does not parse (edited by hand, or by another version) reads as no hosts, and
// `unreadable` (when given) gets the text and the errors, so the list can be shown and fixed
// instead of overwritten.
struct UnreadableHosts {
  QString text;
  QString errors;  // "line L, column C: message", one a line
};
std::vector<ps::core::ClusterHost> loadClusterHosts(QSettings& settings,
                                                    UnreadableHosts* unreadable = nullptr);
// Host-file errors as the cluster dialog shows them: "line L, column C: message", one a line.
QString hostFileErrorText(const ps::core::Diagnostics& errors);
void saveClusterHosts(QSettings& settings, const std::vector<ps::core::ClusterHost>& hosts);

// Everything the Run dialog asks.
struct RunRequest {
  std::optional<RemoteHost> remote;  // none: this machine
  // Non-empty: a cluster target. This machine's CLI starts the ranks on these hosts over ssh
  // (`run --hosts FILE`); `remote` is then unused.
  std::vector<ps::core::ClusterHost> cluster;
  QString hostsFile;  // the host file given to --hosts (the controller writes it at start)
  QString localCli;   // this machine's pipestudio-cli (defaultLocalCli())
  QString model = QStringLiteral("gpt");   // "gpt", "mlp" or "torchscript"
  QString modelParameters;                 // "layers=4,hidden=128" (gpt/mlp)
  QString torchscriptFile;                 // model "torchscript": path on the target
  QString device = QStringLiteral("cpu");  // "cpu" or "cuda"
  int processes = 1;                       // --nproc
  int iterations = 1;
  int warmup = 0;
  int microbatchSize = 0;  // 0: the CLI's default
  bool checkGradients = false;
  QString optimizer;               // --optimizer: "sgd" or "adamw" (a training step per iteration); "" none
  double learningRate = 0;         // --lr; 0: the optimizer's default
  QString inputsFile;              // --inputs: a torch.save batch, a path on the target; "" synthetic data
  double timeoutSeconds = 60;      // --timeout: a transfer waiting longer fails the run
  int connectTimeoutSeconds = 10;  // ssh -o ConnectTimeout
  QString modelSpec() const;       // "gpt:layers=4", "torchscript:path=/m.pt"
  QString targetName() const;      // "this machine", the host's display name, "cluster (2 hosts, 4 ranks)"
};

// pipestudio-cli next to this program's binary, else "pipestudio-cli" (found in PATH).
QString defaultLocalCli();
// The CLI's arguments: run - --model SPEC --device D ... --events jsonl --cancel-on-eof.
QStringList cliRunArguments(const RunRequest& r);
// Local: the CLI itself. Remote: ssh -o BatchMode=yes -o ConnectTimeout=N -p PORT [-i KEY]
// [-o OPT]... DEST -- <the remote command, shell-quoted>.
ProcessCommand buildRunCommand(const RunRequest& r);
ProcessCommand buildVersionCommand(const RunRequest& r);
// Any CLI subcommand on the request's target, wrapped like buildRunCommand (e.g. `profile`).
ProcessCommand buildCliCommand(const RunRequest& r, const QStringList& cliArgs);
// A cluster request's `run --print-launch torchrun|slurm` text: the commands for the same run
// where ssh fan-out is not allowed (the schedule staged under /tmp/pipestudio-run).
QString clusterLaunchCommands(const RunRequest& r, ps::core::LaunchKind kind);
// What is written to the run's stdin: the schedule and the end-of-schedule line.
QByteArray scheduleStdin(const QString& pipeText);

// Why an ssh command failed (exit 255 is ssh's own failure): unreachable, authentication
// refused, host key, with ssh's message. Empty when the exit is not ssh's.
QString describeSshFailure(const RunRequest& r, int exitCode, const QString& stderrText);
// Checks `pipestudio-cli --version` output: empty when the CLI speaks this build's run-event
// protocol, else why not (missing binary, other versions: both named).
QString checkCliVersion(const RunRequest& r, int exitCode, const QString& stdoutText,
                        const QString& stderrText);

struct RunOutcome {
  ps::core::RunState status = ps::core::RunState::Failed;  // Succeeded, Failed or Cancelled
  QString message;                                         // one line: what happened / why it failed
  QString stderrText;                                      // the child's stderr (tail)
  int exitCode = -1;
  bool crashed = false;         // the child died from a signal
  QString target;               // "this machine" / host
  QString command;              // as run (display form)
  QString cliVersion;           // from --version
  ps::core::Timeline timeline;  // measured (partial unless finished)
  std::vector<double> losses;
  std::optional<ps::core::RunStartedInfo> started;
  std::optional<ps::core::RunFinishedInfo> finished;
  std::vector<ps::core::StuckDevice> stuck;  // a hang's post-mortem: where each device stood
  ps::core::Diagnostics streamWarnings;      // garbage / truncated lines
  RunRequest request;
  QString statusName() const;  // the event stream's word: "finished", "failed", "cancelled"
};

class RunController : public QObject {
  Q_OBJECT
 public:
  enum class Phase { Idle, CheckingVersion, Running, Stopping };
  explicit RunController(QObject* parent = nullptr);
  ~RunController() override;  // a run still going is cancelled and its process killed

  // Starts the version check, then the run. False (nothing started) when already active.
  bool start(const RunRequest& request, const QString& pipeText, const QString& scheduleName);
  // Stops the run (see the file comment); runFinished follows with status Cancelled.
  void cancel();
  bool isActive() const { return phase_ != Phase::Idle; }
  Phase phase() const { return phase_; }
  qint64 processId() const;  // the current child's pid (0 when none)
  const ps::core::RunEventReader& reader() const { return *reader_; }
  const std::optional<RunOutcome>& lastOutcome() const { return outcome_; }
  const RunRequest& request() const { return request_; }  // of the current (or last) run
  QString scheduleName() const { return scheduleName_; }
  QString pipeText() const { return pipeText_; }

  void setRedrawIntervalMs(int ms);                       // timelineUpdated at most this often (default 100)
  void setCancelGraceMs(int ms) { cancelGraceMs_ = ms; }  // default 5000, then SIGTERM, SIGKILL

 Q_SIGNALS:
  void phaseChanged(const QString& text);  // "Checking pipestudio-cli on gpu1…", ...
  void progressChanged(int iteration, int iterations, bool warmup);
  void timelineUpdated(const ps::core::Timeline& measuredSoFar);  // throttled
  void stderrReceived(const QString& text);
  void runFinished(const ps::ui::RunOutcome& outcome);

 private:
  void onVersionDone(int exitCode, bool crashed);
  void onRunDone(int exitCode, bool crashed);
  void onStdout(const QByteArray& bytes);
  void finish(RunOutcome o);
  void failBeforeRun(const QString& message, int exitCode = -1);
  void setPhase(Phase p, const QString& text);

  Phase phase_ = Phase::Idle;
  RunRequest request_;
  QString pipeText_;
  QString scheduleName_;
  QString cliVersion_;
  ProcessRunner* runner_ = nullptr;  // the version check, then the run
  QByteArray versionOut_;
  std::unique_ptr<ps::core::RunEventReader> reader_;
  std::optional<RunOutcome> outcome_;
  QTimer* redraw_ = nullptr;
  size_t drawnOps_ = 0;
  int lastIteration_ = -2;
  bool cancelRequested_ = false;
  bool failedToStart_ = false;
  int cancelGraceMs_ = 5000;
  std::unique_ptr<QTemporaryDir> clusterDir_;  // holds a cluster run's host file
};

// Files a finished, failed or cancelled run in a session (created when missing) through
// sessions::recordMeasuredRun: the schedule text as a version, the measured timeline (partial
// ones too) with status, error and stderr, and, given the document's `schedule` and
// `profile`, the prediction (the schedule simulated with that profile) linked to it.
struct StoredRun {
  qint64 runId = 0;
  std::optional<qint64> predictedRunId;
};
ps::core::Result<StoredRun> storeRunInSession(const QString& sessionPath, const RunOutcome& outcome,
                                              const QString& scheduleName, const QString& pipeText,
                                              const ps::core::Schedule* schedule = nullptr,
                                              const ps::core::CostProfile* profile = nullptr);

}  // namespace ps::ui

Q_DECLARE_METATYPE(ps::ui::RunOutcome)
