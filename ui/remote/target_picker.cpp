#include "remote/target_picker.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFont>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QVBoxLayout>
#include <algorithm>

namespace ps::ui {

void fillTargetCombo(QComboBox* combo, const QList<RemoteHost>& hosts, int select) {
  const QSignalBlocker block(combo);
  combo->clear();
  combo->addItem(QObject::tr("This machine"));
  for (const RemoteHost& h : hosts) {
    QString text = h.displayName();
    if (!h.name.isEmpty()) text += QStringLiteral(" (%1:%2)").arg(h.destination()).arg(h.port);
    combo->addItem(text);
  }
  combo->setCurrentIndex(std::clamp(select, 0, static_cast<int>(combo->count()) - 1));
}

bool editRemoteHost(QWidget* parent, RemoteHost& host) {
  QDialog d(parent);
  d.setWindowTitle(host.host.isEmpty() ? QObject::tr("Add Remote Host") : QObject::tr("Edit Remote Host"));
  auto* form = new QFormLayout;
  auto* name = new QLineEdit(host.name);
  name->setPlaceholderText(QObject::tr("e.g. gpu1 (optional)"));
  auto* hostEdit = new QLineEdit(host.host);
  hostEdit->setPlaceholderText(QObject::tr("host name or address"));
  auto* user = new QLineEdit(host.user);
  user->setPlaceholderText(QObject::tr("default: ssh's"));
  auto* port = new QSpinBox;
  port->setRange(1, 65535);
  port->setValue(host.port);
  auto* key = new QLineEdit(host.identityFile);
  key->setPlaceholderText(QObject::tr("default: ssh's keys and agent"));
  auto* browse = new QPushButton(QObject::tr("&Browse…"));
  QObject::connect(browse, &QPushButton::clicked, &d, [&] {
    const QString f = QFileDialog::getOpenFileName(&d, QObject::tr("Identity File"), key->text());
    if (!f.isEmpty()) key->setText(f);
  });
  auto* keyRow = new QHBoxLayout;
  keyRow->addWidget(key);
  keyRow->addWidget(browse);
  auto* cli = new QLineEdit(host.cliPath);
  cli->setToolTip(QObject::tr("pipestudio-cli on the remote host: a name found in PATH or an absolute path"));
  auto* opts = new QLineEdit(host.sshOptions.join(QLatin1Char(' ')));
  opts->setPlaceholderText(QObject::tr("extra -o options, e.g. StrictHostKeyChecking=accept-new"));
  form->addRow(QObject::tr("Name:"), name);
  form->addRow(QObject::tr("Host:"), hostEdit);
  form->addRow(QObject::tr("User:"), user);
  form->addRow(QObject::tr("Port:"), port);
  form->addRow(QObject::tr("Identity file:"), keyRow);
  form->addRow(QObject::tr("pipestudio-cli:"), cli);
  form->addRow(QObject::tr("SSH options:"), opts);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
  QObject::connect(buttons, &QDialogButtonBox::accepted, &d, [&] {
    if (hostEdit->text().trimmed().isEmpty()) {
      QMessageBox::warning(&d, d.windowTitle(), QObject::tr("A host name or address is required."));
      return;
    }
    d.accept();
  });
  QObject::connect(buttons, &QDialogButtonBox::rejected, &d, &QDialog::reject);
  auto* v = new QVBoxLayout(&d);
  v->addLayout(form);
  v->addWidget(buttons);
  if (d.exec() != QDialog::Accepted) return false;
  host.name = name->text().trimmed();
  host.host = hostEdit->text().trimmed();
  host.user = user->text().trimmed();
  host.port = port->value();
  host.identityFile = key->text().trimmed();
  host.cliPath = cli->text().trimmed().isEmpty() ? QStringLiteral("pipestudio-cli") : cli->text().trimmed();
  host.sshOptions = opts->text().split(QLatin1Char(' '), Qt::SkipEmptyParts);
  return true;
}

bool editClusterHosts(QWidget* parent, std::vector<ps::core::ClusterHost>& hosts,
                      const UnreadableHosts* unreadable) {
  QDialog d(parent);
  d.setWindowTitle(QObject::tr("Cluster Hosts"));
  auto* help = new QLabel(QObject::tr(
      "One host a line: <tt>[user@]host[:port] ranks=N [key=PATH] [cli=PATH] [addr=A] [ssh=OPTION]</tt>. "
      "Ranks are numbered host by host; the first host's rank 0 holds the rendezvous (MASTER_ADDR is its "
      "<tt>addr=</tt>, else its name). Every host runs its ranks over ssh in batch mode, so its key must be "
      "accepted without a prompt."));
  help->setWordWrap(true);
  auto* edit = new QPlainTextEdit(unreadable ? unreadable->text
                                             : QString::fromStdString(ps::core::formatHostFile(hosts)));
  edit->setObjectName(QStringLiteral("clusterHosts"));
  edit->setFont(QFont(QStringLiteral("monospace")));
  edit->setPlaceholderText(QStringLiteral(
      "gpu1 ranks=4 key=~/.ssh/id_ed25519\nalice@gpu2:2222 ranks=4 cli=/opt/pipestudio/bin/pipestudio-cli"));
  auto* errors = new QLabel;
  errors->setWordWrap(true);
  errors->setStyleSheet(QStringLiteral("color: #b00020"));
  errors->setObjectName(QStringLiteral("clusterHostErrors"));
  if (unreadable) errors->setText(unreadable->errors);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
  std::vector<ps::core::ClusterHost> parsed;
  QObject::connect(buttons, &QDialogButtonBox::accepted, &d, [&] {
    auto r = ps::core::parseHostFile(edit->toPlainText().toStdString(), "hosts");
    if (!r) {
      errors->setText(hostFileErrorText(r.errors()));
      return;
    }
    parsed = *r;
    d.accept();
  });
  QObject::connect(buttons, &QDialogButtonBox::rejected, &d, &QDialog::reject);
  auto* v = new QVBoxLayout(&d);
  v->addWidget(help);
  v->addWidget(edit, 1);
  v->addWidget(errors);
  v->addWidget(buttons);
  d.resize(720, 320);
  if (d.exec() != QDialog::Accepted) return false;
  hosts = std::move(parsed);
  return true;
}

TargetPicker::TargetPicker(QSettings* settings, Mode mode, QWidget* parent)
    : QGroupBox(tr("Target"), parent), settings_(settings), mode_(mode) {
  hosts_ = loadRemoteHosts(*settings_);
  combo_ = new QComboBox;
  combo_->setObjectName(QStringLiteral("target"));
  auto* row = new QHBoxLayout;
  row->addWidget(combo_, 1);
  if (mode_ == Mode::Choose) {
    combo_->setToolTip(tr("Hosts are added and edited in Run › Run Schedule…"));
    auto* hint = new QLabel(tr("hosts: Run › Run Schedule…"));
    hint->setEnabled(false);  // greyed: a hint, not a control
    row->addWidget(hint);
    auto* box = new QHBoxLayout(this);
    box->addLayout(row);
  } else {
    UnreadableHosts unreadable;
    cluster_ = loadClusterHosts(*settings_, &unreadable);
    if (!unreadable.text.isEmpty()) unreadableCluster_ = unreadable;
    auto* add = new QPushButton(tr("&Add…"));
    editHost_ = new QPushButton(tr("&Edit…"));
    removeHost_ = new QPushButton(tr("Re&move"));
    copyLaunch_ = new QPushButton(tr("Cop&y launch command"));
    copyLaunch_->setObjectName(QStringLiteral("copyLaunch"));
    copyLaunch_->setToolTip(
        tr("The torchrun or Slurm commands for this run, where ssh to every host is not allowed"));
    auto* launchMenu = new QMenu(copyLaunch_);
    launchMenu->addAction(tr("torchrun"), this,
                          [this] { Q_EMIT copyLaunchRequested(ps::core::LaunchKind::Torchrun); });
    launchMenu->addAction(tr("Slurm (sbatch / srun)"), this,
                          [this] { Q_EMIT copyLaunchRequested(ps::core::LaunchKind::Slurm); });
    copyLaunch_->setMenu(launchMenu);
    for (QPushButton* b : {add, editHost_, removeHost_}) row->addWidget(b);
    auto* row2 = new QHBoxLayout;
    row2->addStretch(1);
    row2->addWidget(copyLaunch_);
    auto* box = new QVBoxLayout(this);
    box->addLayout(row);
    box->addLayout(row2);
    connect(add, &QPushButton::clicked, this, [this] {
      RemoteHost h;
      if (editRemoteHost(this, h)) addHost(h);
    });
    connect(editHost_, &QPushButton::clicked, this, &TargetPicker::editCurrent);
    connect(removeHost_, &QPushButton::clicked, this, &TargetPicker::removeCurrent);
  }
  connect(combo_, &QComboBox::currentIndexChanged, this, [this] {
    updateButtons();
    Q_EMIT targetChanged();
  });
  rebuild(0);
}

void TargetPicker::rebuild(int select) {
  fillTargetCombo(combo_, hosts_, select);
  if (mode_ == Mode::Manage) {
    const QSignalBlocker block(combo_);
    if (unreadableCluster_) {
      combo_->addItem(tr("Cluster (saved list unreadable: Edit… to fix)"));
      combo_->setItemData(
          clusterIndex(),
          tr("The saved host list does not parse; it is kept as it is until a list is saved:\n%1")
              .arg(unreadableCluster_->errors),
          Qt::ToolTipRole);
    } else {
      combo_->addItem(cluster_.empty() ? tr("Cluster (no hosts yet: Edit…)")
                                       : tr("Cluster (%1 hosts, %2 ranks)")
                                             .arg(cluster_.size())
                                             .arg(ps::core::clusterWorldSize(cluster_)));
      combo_->setItemData(clusterIndex(),
                          cluster_.empty()
                              ? tr("Several hosts, ranks on each, started over ssh (Edit… to list them)")
                              : QString::fromStdString(ps::core::formatHostFile(cluster_)).trimmed(),
                          Qt::ToolTipRole);
    }
    if (select == clusterIndex()) combo_->setCurrentIndex(select);
  }
  updateButtons();
  Q_EMIT targetChanged();
}

void TargetPicker::updateButtons() {
  if (mode_ != Mode::Manage) return;
  const bool cluster = clusterSelected();
  editHost_->setEnabled(combo_->currentIndex() > 0);
  removeHost_->setEnabled(combo_->currentIndex() > 0 &&
                          (!cluster || !cluster_.empty() || unreadableCluster_));
  copyLaunch_->setEnabled(cluster && !cluster_.empty());
}

void TargetPicker::editCurrent() {
  if (clusterSelected()) {
    std::vector<ps::core::ClusterHost> c = cluster_;
    if (editClusterHosts(this, c, unreadableCluster_ ? &*unreadableCluster_ : nullptr)) setCluster(c);
    return;
  }
  const int i = combo_->currentIndex() - 1;
  if (i < 0 || i >= hosts_.size()) return;
  RemoteHost h = hosts_[i];
  if (!editRemoteHost(this, h)) return;
  hosts_[i] = h;
  saveRemoteHosts(*settings_, hosts_);
  rebuild(i + 1);
}

void TargetPicker::removeCurrent() {
  if (clusterSelected()) {
    if (QMessageBox::question(this, tr("Clear Cluster"), tr("Clear the cluster's host list?")) ==
        QMessageBox::Yes)
      setCluster({});
    return;
  }
  const int i = combo_->currentIndex() - 1;
  if (i < 0 || i >= hosts_.size()) return;
  if (QMessageBox::question(this, tr("Remove Host"),
                            tr("Remove %1 from the list?").arg(hosts_[i].displayName())) != QMessageBox::Yes)
    return;
  hosts_.removeAt(i);
  saveRemoteHosts(*settings_, hosts_);
  rebuild(0);
}

void TargetPicker::setHosts(const QList<RemoteHost>& hosts) {
  hosts_ = hosts;
  saveRemoteHosts(*settings_, hosts_);
  rebuild(0);
}

void TargetPicker::addHost(const RemoteHost& h) {
  hosts_ << h;
  saveRemoteHosts(*settings_, hosts_);
  rebuild(static_cast<int>(hosts_.size()));
}

void TargetPicker::reloadHosts() {
  hosts_ = loadRemoteHosts(*settings_);
  rebuild(combo_->currentIndex());
}

void TargetPicker::setCluster(const std::vector<ps::core::ClusterHost>& hosts) {
  if (mode_ != Mode::Manage) return;
  cluster_ = hosts;
  unreadableCluster_.reset();
  saveClusterHosts(*settings_, cluster_);
  rebuild(clusterIndex());
}

bool TargetPicker::clusterSelected() const {
  return mode_ == Mode::Manage && combo_->currentIndex() == clusterIndex();
}
int TargetPicker::currentIndex() const {
  return combo_->currentIndex();
}
void TargetPicker::setCurrentIndex(int index) {
  combo_->setCurrentIndex(index);
}

void TargetPicker::applyTo(RunRequest& r) const {
  const int t = combo_->currentIndex();
  r.remote.reset();
  r.cluster.clear();
  if (t > 0 && t - 1 < hosts_.size()) r.remote = hosts_[t - 1];
  if (clusterSelected()) r.cluster = cluster_;
}

void TargetPicker::select(const RunRequest& r) {
  int t = 0;
  if (r.remote)
    for (int i = 0; i < hosts_.size(); ++i)
      if (hosts_[i] == *r.remote) t = i + 1;
  if (!r.cluster.empty() && mode_ == Mode::Manage) {
    if (ps::core::formatHostFile(r.cluster) != ps::core::formatHostFile(cluster_)) setCluster(r.cluster);
    t = clusterIndex();
  }
  combo_->setCurrentIndex(t);
}

}  // namespace ps::ui
