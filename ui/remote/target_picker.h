#pragma once
// Where the Run and Profile Model dialogs start pipestudio-cli: this machine, one of the saved
// ssh hosts, or (Run only) the cluster, several hosts with ranks each. The host list and the
// cluster live in QSettings (loadRemoteHosts / loadClusterHosts), so every dialog sees the same.
#include <QGroupBox>
#include <QList>
#include <optional>
#include <vector>

#include "pipestudio/core/io/cluster.h"
#include "remote/run_controller.h"

class QComboBox;
class QPushButton;
class QSettings;

namespace ps::ui {

// Edits one host in a small form; false when cancelled.
bool editRemoteHost(QWidget* parent, RemoteHost& host);
// Edits the cluster's host list as host-file text (docs/cli.md); false when cancelled. With
// `unreadable` set, the dialog opens on that saved text and its errors instead of `hosts`.
bool editClusterHosts(QWidget* parent, std::vector<ps::core::ClusterHost>& hosts,
                      const UnreadableHosts* unreadable = nullptr);
// The target list: "This machine", then each host (index i + 1 is hosts[i]); `select` is
// clamped. Signals are blocked while it fills.
void fillTargetCombo(QComboBox* combo, const QList<RemoteHost>& hosts, int select);

class TargetPicker : public QGroupBox {
  Q_OBJECT
 public:
  // Manage: Add / Edit / Remove buttons, the cluster entry and "Copy launch command" (the Run
  // dialog). Choose: the saved hosts only, with a hint where they are managed.
  enum class Mode { Manage, Choose };
  TargetPicker(QSettings* settings, Mode mode, QWidget* parent = nullptr);

  QComboBox* combo() const { return combo_; }
  const QList<RemoteHost>& hosts() const { return hosts_; }
  void setHosts(const QList<RemoteHost>& hosts);  // replaces the list (and saves it)
  void addHost(const RemoteHost& h);              // appends, saves and selects it
  void reloadHosts();                             // from the settings: another dialog may have changed them
  const std::vector<ps::core::ClusterHost>& cluster() const { return cluster_; }
  void setCluster(const std::vector<ps::core::ClusterHost>& hosts);  // replaces it, saves it, selects it
  // The cluster's entry, the last of the list (-1 in Choose mode).
  int clusterIndex() const { return mode_ == Mode::Manage ? static_cast<int>(hosts_.size()) + 1 : -1; }
  bool clusterSelected() const;
  int currentIndex() const;
  void setCurrentIndex(int index);
  // The selection into a request (remote host, cluster) and back (hosts must be in the list;
  // a cluster different from the saved one replaces it).
  void applyTo(RunRequest& r) const;
  void select(const RunRequest& r);
  QPushButton* copyLaunchButton() const { return copyLaunch_; }

 Q_SIGNALS:
  void targetChanged();
  void copyLaunchRequested(ps::core::LaunchKind kind);

 private:
  void rebuild(int select);
  void updateButtons();
  void editCurrent();
  void removeCurrent();

  QSettings* settings_;
  Mode mode_;
  QList<RemoteHost> hosts_;
  std::vector<ps::core::ClusterHost> cluster_;
  // The saved cluster list when it did not parse: shown and offered for editing, never overwritten
  // until the user saves a list.
  std::optional<UnreadableHosts> unreadableCluster_;
  QComboBox* combo_ = nullptr;
  QPushButton* editHost_ = nullptr;
  QPushButton* removeHost_ = nullptr;
  QPushButton* copyLaunch_ = nullptr;
};

}  // namespace ps::ui
