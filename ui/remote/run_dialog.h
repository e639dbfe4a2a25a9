#pragma once
// Run > Run schedule… (docs/gui.md, "Running a schedule"): where (this machine, a remote
// host, or the cluster: several hosts with ranks each, all kept in QSettings), which model,
// device, processes, iterations, warm-up, gradient check and timeout. Run starts a
// RunController; progress, stderr and the outcome show in the dialog; live measured ops go onto
// the main window's overlay; the finished (or failed, cancelled) run is stored in the open
// session, or in one the user opens or creates.
#include <QList>
#include <functional>

#include "remote/command_dialog.h"
#include "remote/run_controller.h"

class QCheckBox;
class QDoubleSpinBox;
class QLineEdit;
class QMessageBox;

namespace ps::ui {

class DialogHost;

class RunDialog : public CommandDialog {
  Q_OBJECT
 public:
  // settings: where the host list and the last choices live (default: PipeStudio's).
  explicit RunDialog(QWidget* parent = nullptr, QSettings* settings = nullptr);

  // The window's dialog (created on first use and adopted by the window), attached to its
  // document and session, shown and raised.
  static RunDialog* showFor(DialogHost* host);

  // The schedule to run (name, .pipe text, device count for --nproc).
  void setSchedule(const QString& name, const QString& pipeText, int devices);
  void attach(DialogHost* host);

  RunRequest request() const;            // from the widgets
  void setRequest(const RunRequest& r);  // into the widgets (hosts must be in the list)
  QList<RemoteHost> hosts() const { return target_->hosts(); }
  void setHosts(const QList<RemoteHost>& hosts) {
    target_->setHosts(hosts);
  }  // replaces the list (and saves it)
  void addHost(const RemoteHost& h) { target_->addHost(h); }
  // The cluster target: the last entry of the target list.
  const std::vector<ps::core::ClusterHost>& cluster() const { return target_->cluster(); }
  void setCluster(const std::vector<ps::core::ClusterHost>& hosts) {
    target_->setCluster(hosts);
  }  // replaces it (and saves it)
  int clusterTargetIndex() const { return target_->clusterIndex(); }
  // "Copy launch command": the torchrun or Slurm commands of the cluster run, also put on the
  // clipboard; empty when the target is not the cluster.
  QString copyLaunchCommand(ps::core::LaunchKind kind);
  QPushButton* copyLaunchButton() const { return target_->copyLaunchButton(); }

  RunController* controller() const { return controller_; }
  QPushButton* runButton() const { return startButton_; }

  // Where a finished run is stored when no writable session is open: returns a path, or empty
  // for "don't store". Default: asks (a copy of the read-only session / create / open / don't
  // store). Tests replace it.
  void setSessionChooser(std::function<QString()> chooser) { chooser_ = std::move(chooser); }
  // The question asked then, with its buttons (not shown; tests read it). `readOnlySession`:
  // the path of the session open read-only, empty when none is open.
  QMessageBox* makeStorePrompt(const QString& readOnlySession);
  // Copies a read-only session to `target` for storing a run in it (Save Session As…);
  // false with the reason in `error`.
  static bool copySession(const QString& source, const QString& target, QString* error);
  // The session the last run went to ("" when none) and its run id.
  QString lastStoredSession() const { return lastSession_; }
  qint64 lastStoredRun() const { return lastRun_; }

 public Q_SLOTS:
  void startRun();
  void cancelRun();

 Q_SIGNALS:
  // The run is in the session at `sessionPath` (the window opens or refreshes it).
  void runStored(const QString& sessionPath, qint64 runId);
  // The run's measured ops so far (throttled to 10 per second; `live` while it still runs; the
  // last comes after its end), for the window's measured overlay.
  void timelineMeasured(const ps::core::Timeline& timeline, const QString& what, bool live);

 protected:
  void closeEvent(QCloseEvent* e) override;
  void updatePreview() override;

 private:
  void buildUi();
  QWidget* buildModelBox();
  QWidget* buildExecutionBox();
  void updateModelFields();
  void loadChoices();
  void saveChoices() const;
  void onFinished(const RunOutcome& o);
  QString storeRun(const RunOutcome& o);
  QString askSessionPath();

  DialogHost* host_ = nullptr;
  RunController* controller_ = nullptr;
  QString scheduleName_;
  QString pipeText_;
  int devices_ = 1;
  std::function<QString()> chooser_;
  QString lastSession_;
  qint64 lastRun_ = 0;

  QLineEdit* torchscript_ = nullptr;
  QPushButton* browseModel_ = nullptr;
  QCheckBox* perDevice_ = nullptr;
  QSpinBox* iterations_ = nullptr;
  QCheckBox* gradients_ = nullptr;
  QDoubleSpinBox* timeout_ = nullptr;
  QLineEdit* inputs_ = nullptr;
  QDoubleSpinBox* learningRate_ = nullptr;
  QLabel* scheduleLabel_ = nullptr;
};

}  // namespace ps::ui
