#pragma once
// Run > Run schedule… (docs/gui.md, "Running a schedule"): where (this machine, a remote
// host, or the cluster: several hosts with ranks each, all kept in QSettings), which model, device, processes, iterations, warm-up, gradient
// check and timeout. Run starts a RunController; progress, stderr and the outcome show in the
// dialog; live measured ops go onto the main window's overlay; the finished (or failed,
// cancelled) run is stored in the open session, or in one the user opens or creates.
#include <QDialog>
#include <QList>
#include <functional>

#include "remote/run_controller.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSettings;
class QSpinBox;

namespace ps::ui {

class MainWindow;

// Edits one host in a small form; false when cancelled.
bool editRemoteHost(QWidget* parent, RemoteHost& host);
// The parameters the dialogs propose for a built-in model ("gpt", "mlp"); empty otherwise.
QString defaultModelParameters(const QString& model);
// Edits the cluster's host list as host-file text (docs/cli.md); false when cancelled.
bool editClusterHosts(QWidget* parent, std::vector<ps::core::ClusterHost>& hosts);
// Shared by the Run and Profile Model dialogs. The target list: "This machine", then each
// host (index i + 1 is hosts[i]); `select` is clamped. Signals are blocked while it fills.
void fillTargetCombo(QComboBox* combo, const QList<RemoteHost>& hosts, int select);
// The built-in models (item data "gpt", "mlp"), then "torchscript" when asked for.
void addModelItems(QComboBox* combo, bool torchscript);

class RunDialog : public QDialog {
  Q_OBJECT
 public:
  // settings: where the host list and the last choices live (default: PipeStudio's).
  explicit RunDialog(QWidget* parent = nullptr, QSettings* settings = nullptr);
  ~RunDialog() override;

  // The window's dialog (created on first use), attached to its document, overlay and
  // session dock, shown and raised.
  static RunDialog* showFor(MainWindow* window);

  // The schedule to run (name, .pipe text, device count for --nproc).
  void setSchedule(const QString& name, const QString& pipeText, int devices);
  void attach(MainWindow* window);

  RunRequest request() const;            // from the widgets
  void setRequest(const RunRequest& r);  // into the widgets (hosts must be in the list)
  QList<RemoteHost> hosts() const { return hosts_; }
  void setHosts(const QList<RemoteHost>& hosts);  // replaces the list (and saves it)
  void addHost(const RemoteHost& h);
  void setLocalCli(const QString& path) { localCli_ = path; updatePreview(); }
  // The cluster target: the last entry of the target list.
  const std::vector<ps::core::ClusterHost>& cluster() const { return cluster_; }
  void setCluster(const std::vector<ps::core::ClusterHost>& hosts);  // replaces it (and saves it)
  int clusterTargetIndex() const { return static_cast<int>(hosts_.size()) + 1; }
  // "Copy launch command": the torchrun or Slurm commands of the cluster run, also put on the
  // clipboard; empty when the target is not the cluster.
  QString copyLaunchCommand(ps::core::LaunchKind kind);
  QPushButton* copyLaunchButton() const { return copyLaunch_; }

  RunController* controller() const { return controller_; }
  QString commandPreview() const;
  QString statusText() const;
  QString logText() const;
  QProgressBar* progressBar() const { return progress_; }
  QPushButton* runButton() const { return runButton_; }
  QPushButton* cancelButton() const { return cancelButton_; }

  // Where a finished run is stored when no session is open: returns a path, or empty for
  // "don't store". Default: asks (create / open / don't store). Tests replace it.
  void setSessionChooser(std::function<QString()> chooser) { chooser_ = std::move(chooser); }
  // The session the last run went to ("" when none) and its run id.
  QString lastStoredSession() const { return lastSession_; }
  qint64 lastStoredRun() const { return lastRun_; }

 public Q_SLOTS:
  void startRun();
  void cancelRun();

 Q_SIGNALS:
  void runStored(const QString& sessionPath, qint64 runId);

 protected:
  void closeEvent(QCloseEvent* e) override;

 private:
  void buildUi();
  void updatePreview();
  void updateModelFields();
  void loadChoices();
  void saveChoices() const;
  void rebuildTargets(int select);
  void updateTargetButtons();
  void onFinished(const RunOutcome& o);
  void appendLog(const QString& text);
  QString askSessionPath();

  QSettings* settings_ = nullptr;
  bool ownSettings_ = false;
  MainWindow* window_ = nullptr;
  RunController* controller_ = nullptr;
  QList<RemoteHost> hosts_;
  std::vector<ps::core::ClusterHost> cluster_;
  QString localCli_;
  QString scheduleName_;
  QString pipeText_;
  int devices_ = 1;
  std::function<QString()> chooser_;
  QString lastSession_;
  qint64 lastRun_ = 0;

  QComboBox* target_ = nullptr;
  QPushButton* addHost_ = nullptr;
  QPushButton* editHost_ = nullptr;
  QPushButton* removeHost_ = nullptr;
  QPushButton* copyLaunch_ = nullptr;
  QComboBox* model_ = nullptr;
  QLineEdit* params_ = nullptr;
  QLineEdit* torchscript_ = nullptr;
  QPushButton* browseModel_ = nullptr;
  QSpinBox* microbatch_ = nullptr;
  QComboBox* device_ = nullptr;
  QCheckBox* perDevice_ = nullptr;
  QSpinBox* iterations_ = nullptr;
  QSpinBox* warmup_ = nullptr;
  QCheckBox* gradients_ = nullptr;
  QDoubleSpinBox* timeout_ = nullptr;
  QLineEdit* inputs_ = nullptr;
  QComboBox* optimizer_ = nullptr;
  QDoubleSpinBox* learningRate_ = nullptr;
  QLabel* scheduleLabel_ = nullptr;
  QLineEdit* preview_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QLabel* status_ = nullptr;
  QPlainTextEdit* log_ = nullptr;
  QPushButton* runButton_ = nullptr;
  QPushButton* cancelButton_ = nullptr;
  QPushButton* closeButton_ = nullptr;
};

}  // namespace ps::ui
