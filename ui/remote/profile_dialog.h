#pragma once
// Run > Profile Model… (docs/gui.md, "Profiling a model"): measures a built-in model layer by
// layer with `pipestudio-cli profile ... -o -` on this machine or on a saved ssh host (the Run
// dialog's host list and command builders), then makes the measured cost profile the
// document's (one undoable edit), files it in the open session as a profiled profile and
// offers to save the JSON.
#include <QByteArray>
#include <QDialog>
#include <QObject>
#include <QProcess>
#include <QString>
#include <QStringList>
#include <optional>

#include "pipestudio/core/model/cost_profile.h"
#include "remote/run_controller.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSettings;
class QSpinBox;
class QTimer;

namespace ps::ui {

class MainWindow;
class ScheduleDocument;

// Everything the dialog asks. `target` carries where (remote / localCli), the model
// (model, modelParameters), device, microbatchSize (0: the CLI's default) and the ssh
// connect timeout; its run-only fields are ignored.
struct ProfileRequest {
  RunRequest target;
  int workers = 1;      // --workers: ops timed with this many concurrent workers
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
  enum class Status { Finished, Failed, Cancelled };
  Status status = Status::Failed;
  QString message;     // one line
  QString stderrText;
  int exitCode = -1;
  QByteArray json;     // the CLI's stdout (the profile JSON) when finished
  std::optional<ps::core::CostProfile> profile;
  ProfileRequest request;
};

// Runs one profile command as a child process; cancel terminates it (for ssh: the client,
// whose end closes the remote session), then kills it after a short grace period.
class ProfileController : public QObject {
  Q_OBJECT
 public:
  explicit ProfileController(QObject* parent = nullptr);
  ~ProfileController() override;
  bool start(const ProfileRequest& r);  // false when one is already running
  void cancel();
  bool isActive() const { return proc_ != nullptr; }
  qint64 processId() const;
  const std::optional<ProfileOutcome>& lastOutcome() const { return outcome_; }
  void setCancelGraceMs(int ms) { graceMs_ = ms; }  // SIGTERM, then SIGKILL after this (default 2000)

 Q_SIGNALS:
  void stderrReceived(const QString& text);
  void finished(const ps::ui::ProfileOutcome& outcome);

 private:
  void done(int exitCode, QProcess::ExitStatus st);
  void finish(ProfileOutcome o);

  QProcess* proc_ = nullptr;
  QTimer* killTimer_ = nullptr;
  ProfileRequest request_;
  QByteArray out_;
  QString err_;
  bool cancelled_ = false;
  bool finishing_ = false;
  int graceMs_ = 2000;
  std::optional<ProfileOutcome> outcome_;
};

class ProfileDialog : public QDialog {
  Q_OBJECT
 public:
  explicit ProfileDialog(QWidget* parent = nullptr, QSettings* settings = nullptr);
  ~ProfileDialog() override;

  // The window's dialog (created on first use), attached to its document and session.
  static ProfileDialog* showFor(MainWindow* window);
  void attach(MainWindow* window);
  // Where results go (tests set these without a window): the document whose profile is
  // replaced, and the session file the profile is stored in ("" : none / read-only).
  void setDocument(ScheduleDocument* doc);
  void setSessionPath(const QString& path) { sessionPath_ = path; }

  ProfileRequest request() const;
  void setRequest(const ProfileRequest& r);  // a remote target must be in the host list
  void setLocalCli(const QString& path);
  QString commandPreview() const;
  QString statusText() const;
  QString logText() const;
  ProfileController* controller() const { return controller_; }
  QProgressBar* progressBar() const { return progress_; }
  QPushButton* profileButton() const { return profileButton_; }
  QPushButton* cancelButton() const { return cancelButton_; }
  QPushButton* saveButton() const { return saveButton_; }
  QByteArray lastJson() const { return lastJson_; }
  qint64 lastStoredProfile() const { return lastStored_; }  // session profile id, 0 when none
  bool saveJson(const QString& path, QString* error = nullptr) const;

 public Q_SLOTS:
  void startProfile();
  void cancelProfile();
  void saveJsonAs();

 Q_SIGNALS:
  void profileApplied(const QString& statusMessage);

 protected:
  void closeEvent(QCloseEvent* e) override;

 private:
  void buildUi();
  void rebuildTargets();
  void updatePreview();
  void setBusy(bool busy);
  void onFinished(const ProfileOutcome& o);

  QSettings* settings_ = nullptr;
  bool ownSettings_ = false;
  ProfileController* controller_ = nullptr;
  ScheduleDocument* doc_ = nullptr;
  MainWindow* window_ = nullptr;
  QString sessionPath_;
  QList<RemoteHost> hosts_;
  QString localCli_;
  QByteArray lastJson_;
  QString lastName_;
  qint64 lastStored_ = 0;

  QComboBox* target_ = nullptr;
  QComboBox* model_ = nullptr;
  QLineEdit* params_ = nullptr;
  QComboBox* device_ = nullptr;
  QSpinBox* microbatch_ = nullptr;
  QSpinBox* workers_ = nullptr;
  QSpinBox* repetitions_ = nullptr;
  QSpinBox* warmup_ = nullptr;
  QComboBox* optimizer_ = nullptr;
  QLineEdit* preview_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QLabel* status_ = nullptr;
  QPlainTextEdit* log_ = nullptr;
  QPushButton* profileButton_ = nullptr;
  QPushButton* cancelButton_ = nullptr;
  QPushButton* saveButton_ = nullptr;
  QPushButton* closeButton_ = nullptr;
};

}  // namespace ps::ui

Q_DECLARE_METATYPE(ps::ui::ProfileOutcome)
