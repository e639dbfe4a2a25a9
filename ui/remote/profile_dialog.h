#pragma once
// Run > Profile Model… (docs/gui.md, "Profiling a model"): measures a built-in model layer by
// layer with `pipestudio-cli profile ... -o -` on this machine or on a saved ssh host (the Run
// dialog's host list and command builders), then makes the measured cost profile the
// document's (one undoable edit), files it in the open session as a profiled profile and
// offers to save the JSON.
#include <QByteArray>
#include <QObject>
#include <QString>
#include <QStringList>
#include <optional>

#include "pipestudio/core/model/cost_profile.h"
#include "remote/command_dialog.h"
#include "remote/process_runner.h"
#include "remote/run_controller.h"

class QComboBox;
class QPushButton;
class QSettings;
class QSpinBox;

namespace ps::ui {

class DialogHost;
class ScheduleDocument;

// Everything the dialog asks. `target` carries where (remote / localCli), the model
// (model, modelParameters), device, microbatchSize (0: the CLI's default) and the ssh
// connect timeout; its run-only fields are ignored.
struct ProfileRequest {
  RunRequest target;
  int workers = 1;  // --workers: ops timed with this many concurrent workers
  int repetitions = 10;
  int warmup = 3;
  QString optimizer;  // "sgd" or "adamw": also time each layer's optimizer step; "" none
};

// profile --model SPEC --device D [--microbatch-size B] --workers N --repetitions R --warmup K
//   [--optimizer O] -o -
QStringList cliProfileArguments(const ProfileRequest& r);
// The CLI locally, or `ssh ... -- sh -c '<watch stdin; the CLI>'` (buildCliCommand): the
// remote CLI is killed when the ssh channel's stdin ends (cancel, lost connection).
ProcessCommand buildProfileCommand(const ProfileRequest& r);
// Why a profile command failed, in one line (ssh failure, missing binary, bad model spec, the
// model cannot be profiled), with the CLI's last stderr lines.
QString describeProfileFailure(const ProfileRequest& r, int exitCode, const QString& stderrText);

struct ProfileOutcome {
  ps::core::RunState status = ps::core::RunState::Failed;  // Succeeded, Failed or Cancelled
  QString message;                                         // one line
  QString stderrText;
  int exitCode = -1;
  QByteArray json;  // the CLI's stdout (the profile JSON) when finished
  std::optional<ps::core::CostProfile> profile;
  ProfileRequest request;
};

// Runs one profile command as a child process (ProcessRunner); cancel closes its stdin and
// terminates it (for ssh: the client, whose end closes the remote session), then kills it after
// a short grace period.
class ProfileController : public QObject {
  Q_OBJECT
 public:
  explicit ProfileController(QObject* parent = nullptr);
  bool start(const ProfileRequest& r);  // false when one is already running
  void cancel();
  bool isActive() const { return active_; }
  qint64 processId() const { return runner_->processId(); }
  const std::optional<ProfileOutcome>& lastOutcome() const { return outcome_; }
  void setCancelGraceMs(int ms) { graceMs_ = ms; }  // SIGTERM, then SIGKILL after this (default 2000)

 Q_SIGNALS:
  void stderrReceived(const QString& text);
  void finished(const ps::ui::ProfileOutcome& outcome);

 private:
  void done(int exitCode, bool crashed);
  void finish(ProfileOutcome o);

  ProcessRunner* runner_ = nullptr;
  ProfileRequest request_;
  QByteArray out_;
  bool active_ = false;
  bool cancelled_ = false;
  int graceMs_ = 2000;
  std::optional<ProfileOutcome> outcome_;
};

class ProfileDialog : public CommandDialog {
  Q_OBJECT
 public:
  explicit ProfileDialog(QWidget* parent = nullptr, QSettings* settings = nullptr);

  // The window's dialog (created on first use and adopted by the window), attached to its
  // document and session.
  static ProfileDialog* showFor(DialogHost* host);
  void attach(DialogHost* host);
  // Where results go (tests set these without a window): the document whose profile is
  // replaced, and the session file the profile is stored in ("" : none / read-only).
  void setDocument(ScheduleDocument* doc);
  void setSessionPath(const QString& path) { sessionPath_ = path; }

  ProfileRequest request() const;
  void setRequest(const ProfileRequest& r);  // a remote target must be in the host list
  ProfileController* controller() const { return controller_; }
  QPushButton* profileButton() const { return startButton_; }
  QPushButton* saveButton() const { return saveButton_; }
  QByteArray lastJson() const { return lastJson_; }
  qint64 lastStoredProfile() const { return lastStored_; }  // session profile id, 0 when none
  bool saveJson(const QString& path, QString* error = nullptr) const;

 public Q_SLOTS:
  void startProfile();
  void cancelProfile();
  void saveJsonAs();

 Q_SIGNALS:
  // The document has the measured profile; what to tell the user.
  void profileApplied(const QString& statusMessage);
  // The profile is in the session at `sessionPath` as profile `profileId`.
  void profileStored(const QString& sessionPath, qint64 profileId);

 protected:
  void closeEvent(QCloseEvent* e) override;
  void updatePreview() override;

 private:
  void buildUi();
  void setBusy(bool busy);
  void onFinished(const ProfileOutcome& o);
  QString storeInSession();

  ProfileController* controller_ = nullptr;
  ScheduleDocument* doc_ = nullptr;
  DialogHost* host_ = nullptr;
  QString sessionPath_;
  QByteArray lastJson_;
  QString lastName_;
  qint64 lastStored_ = 0;

  QSpinBox* workers_ = nullptr;
  QSpinBox* repetitions_ = nullptr;
  QPushButton* saveButton_ = nullptr;
};

}  // namespace ps::ui

Q_DECLARE_METATYPE(ps::ui::ProfileOutcome)
