#include "remote/run_dialog.h"

#include <QApplication>
#include <QCheckBox>
#include <QClipboard>
#include <QCloseEvent>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFont>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QVBoxLayout>

#include "shell/main_window.h"
#include "pipestudio/core/io/dsl.h"
#include "document/schedule_document.h"
#include "docks/session_dock.h"

namespace ps::ui {

namespace {
const char* kDefaultParams[] = {"layers=8,hidden=256,heads=4,seq=128,vocab=1000", "layers=8,hidden=512"};
}

QString defaultModelParameters(const QString& model) {
  if (model == QStringLiteral("gpt")) return QString::fromLatin1(kDefaultParams[0]);
  if (model == QStringLiteral("mlp")) return QString::fromLatin1(kDefaultParams[1]);
  return {};
}

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

void addModelItems(QComboBox* combo, bool torchscript) {
  combo->addItem(QObject::tr("GPT (built-in)"), QStringLiteral("gpt"));
  combo->addItem(QObject::tr("MLP (built-in)"), QStringLiteral("mlp"));
  if (torchscript) combo->addItem(QObject::tr("TorchScript file"), QStringLiteral("torchscript"));
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
  auto* browse = new QPushButton(QObject::tr("Browse…"));
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

bool editClusterHosts(QWidget* parent, std::vector<ps::core::ClusterHost>& hosts) {
  QDialog d(parent);
  d.setWindowTitle(QObject::tr("Cluster Hosts"));
  auto* help = new QLabel(QObject::tr(
      "One host a line: <tt>[user@]host[:port] ranks=N [key=PATH] [cli=PATH] [addr=A] [ssh=OPTION]</tt>. "
      "Ranks are numbered host by host; the first host's rank 0 holds the rendezvous (MASTER_ADDR is its "
      "<tt>addr=</tt>, else its name). Every host runs its ranks over ssh in batch mode, so its key must be "
      "accepted without a prompt."));
  help->setWordWrap(true);
  auto* edit = new QPlainTextEdit(QString::fromStdString(ps::core::formatHostFile(hosts)));
  edit->setObjectName(QStringLiteral("clusterHosts"));
  edit->setFont(QFont(QStringLiteral("monospace")));
  edit->setPlaceholderText(QStringLiteral("gpu1 ranks=4 key=~/.ssh/id_ed25519\nalice@gpu2:2222 ranks=4 cli=/opt/pipestudio/bin/pipestudio-cli"));
  auto* errors = new QLabel;
  errors->setWordWrap(true);
  errors->setStyleSheet(QStringLiteral("color: #b00020"));
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
  std::vector<ps::core::ClusterHost> parsed;
  QObject::connect(buttons, &QDialogButtonBox::accepted, &d, [&] {
    auto r = ps::core::parseHostFile(edit->toPlainText().toStdString(), "hosts");
    if (!r) {
      QStringList lines;
      for (const auto& e : r.errors())
        lines << QObject::tr("line %1, column %2: %3").arg(e.location.line).arg(e.location.column).arg(QString::fromStdString(e.message));
      errors->setText(lines.join(QLatin1Char('\n')));
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

RunDialog::RunDialog(QWidget* parent, QSettings* settings) : QDialog(parent), settings_(settings) {
  if (!settings_) {
    settings_ = new QSettings(QStringLiteral("PipeStudio"), QStringLiteral("PipeStudio"));
    ownSettings_ = true;
  }
  setWindowTitle(tr("Run Schedule"));
  setObjectName(QStringLiteral("runDialog"));
  controller_ = new RunController(this);
  localCli_ = defaultLocalCli();
  hosts_ = loadRemoteHosts(*settings_);
  cluster_ = loadClusterHosts(*settings_);
  buildUi();
  loadChoices();
  updateModelFields();
  updatePreview();

  connect(controller_, &RunController::phaseChanged, this, [this](const QString& t) {
    if (!controller_->isActive()) return;  // the outcome: onFinished shows it with where it went
    status_->setText(t);
    appendLog(t);
  });
  connect(controller_, &RunController::progressChanged, this, [this](int it, int total, bool warm) {
    progress_->setRange(0, std::max(1, total));
    progress_->setValue(std::max(0, it));
    progress_->setFormat(warm ? tr("warm-up %1 / %2").arg(it + 1).arg(total) : tr("iteration %1 / %2").arg(it + 1).arg(total));
  });
  connect(controller_, &RunController::stderrReceived, this, [this](const QString& t) { appendLog(t.trimmed()); });
  connect(controller_, &RunController::runFinished, this, &RunDialog::onFinished);
}

RunDialog::~RunDialog() {
  if (ownSettings_) delete settings_;
}

void RunDialog::buildUi() {
  auto* targetBox = new QGroupBox(tr("Target"));
  target_ = new QComboBox;
  target_->setObjectName(QStringLiteral("target"));
  addHost_ = new QPushButton(tr("Add…"));
  editHost_ = new QPushButton(tr("Edit…"));
  removeHost_ = new QPushButton(tr("Remove"));
  copyLaunch_ = new QPushButton(tr("Copy launch command"));
  copyLaunch_->setObjectName(QStringLiteral("copyLaunch"));
  copyLaunch_->setToolTip(tr("The torchrun or Slurm commands for this run, where ssh to every host is not allowed"));
  auto* launchMenu = new QMenu(copyLaunch_);
  launchMenu->addAction(tr("torchrun"), this, [this] { copyLaunchCommand(ps::core::LaunchKind::Torchrun); });
  launchMenu->addAction(tr("Slurm (sbatch / srun)"), this, [this] { copyLaunchCommand(ps::core::LaunchKind::Slurm); });
  copyLaunch_->setMenu(launchMenu);
  auto* tGrid = new QVBoxLayout(targetBox);
  auto* tRow = new QHBoxLayout;
  tRow->addWidget(target_, 1);
  tRow->addWidget(addHost_);
  tRow->addWidget(editHost_);
  tRow->addWidget(removeHost_);
  auto* tRow2 = new QHBoxLayout;
  tRow2->addStretch(1);
  tRow2->addWidget(copyLaunch_);
  tGrid->addLayout(tRow);
  tGrid->addLayout(tRow2);
  rebuildTargets(0);
  connect(addHost_, &QPushButton::clicked, this, [this] {
    RemoteHost h;
    if (editRemoteHost(this, h)) addHost(h);
  });
  connect(editHost_, &QPushButton::clicked, this, [this] {
    if (target_->currentIndex() == clusterTargetIndex()) {
      std::vector<ps::core::ClusterHost> c = cluster_;
      if (editClusterHosts(this, c)) setCluster(c);
      return;
    }
    const int i = target_->currentIndex() - 1;
    if (i < 0 || i >= hosts_.size()) return;
    RemoteHost h = hosts_[i];
    if (!editRemoteHost(this, h)) return;
    hosts_[i] = h;
    saveRemoteHosts(*settings_, hosts_);
    rebuildTargets(i + 1);
  });
  connect(removeHost_, &QPushButton::clicked, this, [this] {
    if (target_->currentIndex() == clusterTargetIndex()) {
      if (QMessageBox::question(this, tr("Clear Cluster"), tr("Clear the cluster's host list?")) == QMessageBox::Yes)
        setCluster({});
      return;
    }
    const int i = target_->currentIndex() - 1;
    if (i < 0 || i >= hosts_.size()) return;
    if (QMessageBox::question(this, tr("Remove Host"), tr("Remove %1 from the list?").arg(hosts_[i].displayName())) !=
        QMessageBox::Yes)
      return;
    hosts_.removeAt(i);
    saveRemoteHosts(*settings_, hosts_);
    rebuildTargets(0);
  });
  connect(target_, &QComboBox::currentIndexChanged, this, [this] {
    updateTargetButtons();
    updatePreview();
  });

  auto* modelBox = new QGroupBox(tr("Model"));
  auto* mForm = new QFormLayout(modelBox);
  model_ = new QComboBox;
  addModelItems(model_, true);
  params_ = new QLineEdit;
  params_->setObjectName(QStringLiteral("modelParameters"));
  params_->setToolTip(tr("key=value list (docs/engine.md, Models); keys not given keep their defaults"));
  torchscript_ = new QLineEdit;
  torchscript_->setPlaceholderText(tr("model.pt (a path on the target)"));
  browseModel_ = new QPushButton(tr("Browse…"));
  auto* tsRow = new QHBoxLayout;
  tsRow->addWidget(torchscript_, 1);
  tsRow->addWidget(browseModel_);
  microbatch_ = new QSpinBox;
  microbatch_->setRange(0, 1 << 16);
  microbatch_->setSpecialValueText(tr("default (2)"));
  mForm->addRow(tr("Model:"), model_);
  mForm->addRow(tr("Parameters:"), params_);
  mForm->addRow(tr("TorchScript:"), tsRow);
  mForm->addRow(tr("Micro-batch size:"), microbatch_);
  inputs_ = new QLineEdit;
  inputs_->setObjectName(QStringLiteral("inputsFile"));
  inputs_->setPlaceholderText(tr("synthetic from the seed"));
  inputs_->setToolTip(tr("A batch saved by torch.save, a path on the target (a cluster run copies it from this machine "
                         "to every host): a tensor of inputs, (inputs, targets) or "
                         "{\"inputs\", \"targets\"} (--inputs; docs/engine.md, Data from a file)"));
  auto* browseInputs = new QPushButton(tr("Browse…"));
  auto* inRow = new QHBoxLayout;
  inRow->addWidget(inputs_, 1);
  inRow->addWidget(browseInputs);
  mForm->addRow(tr("Data:"), inRow);
  connect(browseInputs, &QPushButton::clicked, this, [this] {
    const QString f = QFileDialog::getOpenFileName(this, tr("Batch (torch.save)"), inputs_->text(),
                                                   tr("PyTorch (*.pt *.pth);;All files (*)"));
    if (!f.isEmpty()) inputs_->setText(f);
  });
  connect(model_, &QComboBox::currentIndexChanged, this, [this] {
    const int i = model_->currentIndex();
    if (i >= 0 && i < 2) {
      params_->setText(QString::fromLatin1(kDefaultParams[i]));
      params_->setCursorPosition(0);
    }
    updateModelFields();
    updatePreview();
  });
  connect(browseModel_, &QPushButton::clicked, this, [this] {
    const QString f = QFileDialog::getOpenFileName(this, tr("TorchScript Model"), torchscript_->text(),
                                                   tr("TorchScript (*.pt *.pth *.ts);;All files (*)"));
    if (!f.isEmpty()) torchscript_->setText(f);
  });

  auto* execBox = new QGroupBox(tr("Execution"));
  auto* eForm = new QFormLayout(execBox);
  device_ = new QComboBox;
  device_->addItem(QStringLiteral("cpu"));
  device_->addItem(QStringLiteral("cuda"));
  perDevice_ = new QCheckBox(tr("One process per device (--nproc, Gloo)"));
  perDevice_->setToolTip(tr("Unchecked: one process, a thread per device"));
  iterations_ = new QSpinBox;
  iterations_->setRange(1, 100000);
  warmup_ = new QSpinBox;
  warmup_->setRange(0, 100000);
  gradients_ = new QCheckBox(tr("Compare gradients with the unpipelined model"));
  timeout_ = new QDoubleSpinBox;
  timeout_->setRange(1, 86400);
  timeout_->setDecimals(0);
  timeout_->setSuffix(tr(" s"));
  timeout_->setToolTip(tr("A transfer that waits longer fails the run (--timeout)"));
  eForm->addRow(tr("Device:"), device_);
  eForm->addRow(tr("Processes:"), perDevice_);
  eForm->addRow(tr("Iterations:"), iterations_);
  eForm->addRow(tr("Warm-up:"), warmup_);
  eForm->addRow(tr("Gradient check:"), gradients_);
  optimizer_ = new QComboBox;
  optimizer_->setObjectName(QStringLiteral("optimizer"));
  optimizer_->addItem(tr("none (forward and backward)"), QString());
  optimizer_->addItem(QStringLiteral("SGD"), QStringLiteral("sgd"));
  optimizer_->addItem(QStringLiteral("AdamW"), QStringLiteral("adamw"));
  optimizer_->setToolTip(tr("Make every iteration a training step: libtorch's optimizer steps each device's stages "
                            "after its last op, timed as an OPTIMIZER op (--optimizer)"));
  learningRate_ = new QDoubleSpinBox;
  learningRate_->setObjectName(QStringLiteral("learningRate"));
  learningRate_->setDecimals(6);
  learningRate_->setRange(0.000001, 10);
  learningRate_->setSingleStep(0.001);
  learningRate_->setPrefix(tr("lr "));
  learningRate_->setValue(0.01);
  auto* trainRow = new QHBoxLayout;
  trainRow->addWidget(optimizer_, 1);
  trainRow->addWidget(learningRate_);
  eForm->addRow(tr("Training step:"), trainRow);
  connect(optimizer_, &QComboBox::currentIndexChanged, this, [this] {
    // Each optimizer's own default learning rate, as the CLI has them.
    const QString o = optimizer_->currentData().toString();
    if (!o.isEmpty()) learningRate_->setValue(o == QStringLiteral("adamw") ? 0.001 : 0.01);
    learningRate_->setEnabled(!o.isEmpty());
    updatePreview();
  });
  learningRate_->setEnabled(false);
  eForm->addRow(tr("Timeout:"), timeout_);

  scheduleLabel_ = new QLabel(tr("No schedule"));
  preview_ = new QLineEdit;
  preview_->setReadOnly(true);
  preview_->setObjectName(QStringLiteral("commandPreview"));
  progress_ = new QProgressBar;
  progress_->setRange(0, 1);
  progress_->setValue(0);
  progress_->setTextVisible(true);
  progress_->setFormat(tr("not started"));
  status_ = new QLabel;
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  log_ = new QPlainTextEdit;
  log_->setReadOnly(true);
  log_->setMaximumBlockCount(2000);
  log_->setPlaceholderText(tr("stderr of the run"));
  log_->setMinimumHeight(90);

  runButton_ = new QPushButton(tr("Run"));
  runButton_->setDefault(true);
  cancelButton_ = new QPushButton(tr("Cancel Run"));
  cancelButton_->setEnabled(false);
  closeButton_ = new QPushButton(tr("Close"));
  connect(runButton_, &QPushButton::clicked, this, &RunDialog::startRun);
  connect(cancelButton_, &QPushButton::clicked, this, &RunDialog::cancelRun);
  connect(closeButton_, &QPushButton::clicked, this, &QDialog::close);
  auto* buttons = new QHBoxLayout;
  buttons->addStretch(1);
  buttons->addWidget(runButton_);
  buttons->addWidget(cancelButton_);
  buttons->addWidget(closeButton_);

  for (QWidget* w : std::initializer_list<QWidget*>{params_, torchscript_, inputs_})
    connect(static_cast<QLineEdit*>(w), &QLineEdit::textChanged, this, &RunDialog::updatePreview);
  connect(device_, &QComboBox::currentIndexChanged, this, &RunDialog::updatePreview);
  connect(perDevice_, &QCheckBox::toggled, this, &RunDialog::updatePreview);
  connect(gradients_, &QCheckBox::toggled, this, &RunDialog::updatePreview);
  for (QSpinBox* s : {microbatch_, iterations_, warmup_}) connect(s, &QSpinBox::valueChanged, this, &RunDialog::updatePreview);
  for (QDoubleSpinBox* s : {timeout_, learningRate_}) connect(s, &QDoubleSpinBox::valueChanged, this, &RunDialog::updatePreview);

  auto* top = new QHBoxLayout;
  auto* left = new QVBoxLayout;
  left->addWidget(targetBox);
  left->addWidget(modelBox);
  top->addLayout(left, 3);
  top->addWidget(execBox, 2);
  auto* v = new QVBoxLayout(this);
  v->addWidget(scheduleLabel_);
  v->addLayout(top);
  v->addWidget(new QLabel(tr("Command:")));
  v->addWidget(preview_);
  v->addWidget(progress_);
  v->addWidget(status_);
  v->addWidget(log_, 1);
  v->addLayout(buttons);
  resize(860, 560);
}

void RunDialog::rebuildTargets(int select) {
  fillTargetCombo(target_, hosts_, select);
  {
    const QSignalBlocker block(target_);
    target_->addItem(cluster_.empty() ? tr("Cluster (no hosts yet: Edit…)")
                                      : tr("Cluster (%1 hosts, %2 ranks)").arg(cluster_.size()).arg(ps::core::clusterWorldSize(cluster_)));
    target_->setItemData(clusterTargetIndex(),
                         cluster_.empty() ? tr("Several hosts, ranks on each, started over ssh (Edit… to list them)")
                                          : QString::fromStdString(ps::core::formatHostFile(cluster_)).trimmed(),
                         Qt::ToolTipRole);
    if (select == clusterTargetIndex()) target_->setCurrentIndex(select);
  }
  updateTargetButtons();
  updatePreview();
}

void RunDialog::updateTargetButtons() {
  const bool cluster = target_->currentIndex() == clusterTargetIndex();
  editHost_->setEnabled(target_->currentIndex() > 0);
  removeHost_->setEnabled(target_->currentIndex() > 0 && (!cluster || !cluster_.empty()));
  copyLaunch_->setEnabled(cluster && !cluster_.empty());
  // A cluster has its ranks from the host list (one process per device, always).
  if (perDevice_) perDevice_->setEnabled(!cluster);
}

void RunDialog::setCluster(const std::vector<ps::core::ClusterHost>& hosts) {
  cluster_ = hosts;
  saveClusterHosts(*settings_, cluster_);
  rebuildTargets(clusterTargetIndex());
}

QString RunDialog::copyLaunchCommand(ps::core::LaunchKind kind) {
  const RunRequest r = request();
  if (r.cluster.empty()) return {};
  const QString text = clusterLaunchCommands(r, kind);
  QApplication::clipboard()->setText(text);
  status_->setText(kind == ps::core::LaunchKind::Slurm ? tr("Slurm commands copied to the clipboard")
                                                       : tr("torchrun commands copied to the clipboard"));
  return text;
}

void RunDialog::setHosts(const QList<RemoteHost>& hosts) {
  hosts_ = hosts;
  saveRemoteHosts(*settings_, hosts_);
  rebuildTargets(0);
}

void RunDialog::addHost(const RemoteHost& h) {
  hosts_ << h;
  saveRemoteHosts(*settings_, hosts_);
  rebuildTargets(static_cast<int>(hosts_.size()));
}

void RunDialog::updateModelFields() {
  const bool ts = model_->currentData().toString() == QStringLiteral("torchscript");
  params_->setEnabled(!ts);
  torchscript_->setEnabled(ts);
  browseModel_->setEnabled(ts);
}

RunRequest RunDialog::request() const {
  RunRequest r;
  const int t = target_->currentIndex();
  if (t > 0 && t - 1 < hosts_.size()) r.remote = hosts_[t - 1];
  if (t == clusterTargetIndex()) r.cluster = cluster_;
  r.localCli = localCli_;
  r.model = model_->currentData().toString();
  r.modelParameters = params_->text().trimmed();
  r.torchscriptFile = torchscript_->text().trimmed();
  r.device = device_->currentText();
  r.processes = perDevice_->isChecked() && r.cluster.empty() ? std::max(1, devices_) : 1;
  r.iterations = iterations_->value();
  r.warmup = warmup_->value();
  r.microbatchSize = microbatch_->value();
  r.checkGradients = gradients_->isChecked();
  r.optimizer = optimizer_->currentData().toString();
  r.learningRate = r.optimizer.isEmpty() ? 0 : learningRate_->value();
  r.inputsFile = inputs_->text().trimmed();
  r.timeoutSeconds = timeout_->value();
  return r;
}

void RunDialog::setRequest(const RunRequest& r) {
  int t = 0;
  if (r.remote)
    for (int i = 0; i < hosts_.size(); ++i)
      if (hosts_[i] == *r.remote) t = i + 1;
  if (!r.cluster.empty()) {
    if (ps::core::formatHostFile(r.cluster) != ps::core::formatHostFile(cluster_)) setCluster(r.cluster);
    t = clusterTargetIndex();
  }
  target_->setCurrentIndex(t);
  if (!r.localCli.isEmpty()) localCli_ = r.localCli;
  const QSignalBlocker block(model_);
  model_->setCurrentIndex(std::max(0, model_->findData(r.model)));
  params_->setText(r.modelParameters);
  params_->setCursorPosition(0);
  torchscript_->setText(r.torchscriptFile);
  device_->setCurrentIndex(std::max(0, device_->findText(r.device)));
  perDevice_->setChecked(r.processes > 1);
  iterations_->setValue(r.iterations);
  warmup_->setValue(r.warmup);
  microbatch_->setValue(r.microbatchSize);
  gradients_->setChecked(r.checkGradients);
  optimizer_->setCurrentIndex(std::max(0, optimizer_->findData(r.optimizer)));
  if (r.learningRate > 0) learningRate_->setValue(r.learningRate);
  inputs_->setText(r.inputsFile);
  timeout_->setValue(r.timeoutSeconds);
  updateModelFields();
  updatePreview();
}

void RunDialog::loadChoices() {
  settings_->beginGroup(QStringLiteral("runDialog"));
  RunRequest r;
  r.model = settings_->value(QStringLiteral("model"), QStringLiteral("gpt")).toString();
  const int mi = r.model == QStringLiteral("mlp") ? 1 : 0;
  r.modelParameters = settings_->value(QStringLiteral("parameters"), QString::fromLatin1(kDefaultParams[mi])).toString();
  r.torchscriptFile = settings_->value(QStringLiteral("torchscript")).toString();
  r.device = settings_->value(QStringLiteral("device"), QStringLiteral("cpu")).toString();
  r.processes = settings_->value(QStringLiteral("perDevice"), false).toBool() ? 2 : 1;
  r.iterations = settings_->value(QStringLiteral("iterations"), 3).toInt();
  r.warmup = settings_->value(QStringLiteral("warmup"), 1).toInt();
  r.microbatchSize = settings_->value(QStringLiteral("microbatchSize"), 0).toInt();
  r.checkGradients = settings_->value(QStringLiteral("checkGradients"), false).toBool();
  r.timeoutSeconds = settings_->value(QStringLiteral("timeout"), 60.0).toDouble();
  r.optimizer = settings_->value(QStringLiteral("optimizer")).toString();
  r.learningRate = settings_->value(QStringLiteral("learningRate"), 0.0).toDouble();
  r.inputsFile = settings_->value(QStringLiteral("inputs")).toString();
  const int target = settings_->value(QStringLiteral("target"), 0).toInt();
  settings_->endGroup();
  setRequest(r);
  if (target > 0 && target <= clusterTargetIndex()) target_->setCurrentIndex(target);
}

void RunDialog::saveChoices() const {
  const RunRequest r = request();
  settings_->beginGroup(QStringLiteral("runDialog"));
  settings_->setValue(QStringLiteral("model"), r.model);
  settings_->setValue(QStringLiteral("parameters"), r.modelParameters);
  settings_->setValue(QStringLiteral("torchscript"), r.torchscriptFile);
  settings_->setValue(QStringLiteral("device"), r.device);
  settings_->setValue(QStringLiteral("perDevice"), perDevice_->isChecked());
  settings_->setValue(QStringLiteral("iterations"), r.iterations);
  settings_->setValue(QStringLiteral("warmup"), r.warmup);
  settings_->setValue(QStringLiteral("microbatchSize"), r.microbatchSize);
  settings_->setValue(QStringLiteral("checkGradients"), r.checkGradients);
  settings_->setValue(QStringLiteral("timeout"), r.timeoutSeconds);
  settings_->setValue(QStringLiteral("optimizer"), r.optimizer);
  settings_->setValue(QStringLiteral("learningRate"), r.learningRate);
  settings_->setValue(QStringLiteral("inputs"), r.inputsFile);
  settings_->setValue(QStringLiteral("target"), target_->currentIndex());
  settings_->endGroup();
}

void RunDialog::updatePreview() {
  if (!preview_ || !target_) return;
  preview_->setText(buildRunCommand(request()).display() + QStringLiteral(" < schedule"));
  preview_->setCursorPosition(0);
}

void RunDialog::setSchedule(const QString& name, const QString& pipeText, int devices) {
  scheduleName_ = name;
  pipeText_ = pipeText;
  devices_ = std::max(1, devices);
  scheduleLabel_->setText(tr("Schedule: <b>%1</b> · %2 devices").arg(name.toHtmlEscaped()).arg(devices_));
  perDevice_->setText(tr("One process per device (--nproc %1, Gloo)").arg(devices_));
  updatePreview();
}

void RunDialog::attach(MainWindow* window) {
  if (window_ == window) return;
  window_ = window;
  // Live measured ops over the plan; the controller throttles these to 10 per second.
  connect(controller_, &RunController::timelineUpdated, window, [this](const ps::core::Timeline& t) {
    if (window_ && !t.ops.empty())
      window_->setMeasuredOverlay(t, tr("run on %1").arg(controller_->request().targetName()),
                                  controller_->isActive());  // the last update comes after the end
  });
}

RunDialog* RunDialog::showFor(MainWindow* window) {
  auto* d = window->findChild<RunDialog*>(QStringLiteral("runDialog"), Qt::FindDirectChildrenOnly);
  if (!d) d = new RunDialog(window);
  d->attach(window);
  if (!d->controller()->isActive()) {
    const auto& s = window->document()->schedule();
    QString name = QString::fromStdString(s.name);
    if (name.isEmpty()) name = QFileInfo(window->document()->filePath()).completeBaseName();
    if (name.isEmpty()) name = tr("schedule");
    d->setSchedule(name, QString::fromStdString(ps::core::printDsl(s)), s.pipeline.devices);
  }
  d->show();
  d->raise();
  d->activateWindow();
  return d;
}

QString RunDialog::commandPreview() const { return preview_->text(); }
QString RunDialog::statusText() const { return status_->text(); }
QString RunDialog::logText() const { return log_->toPlainText(); }

void RunDialog::appendLog(const QString& text) {
  if (!text.isEmpty()) log_->appendPlainText(text);
}

void RunDialog::startRun() {
  if (controller_->isActive()) return;
  if (pipeText_.isEmpty()) {
    status_->setText(tr("No schedule to run."));
    return;
  }
  const RunRequest r = request();
  if (r.model == QStringLiteral("torchscript") && r.torchscriptFile.isEmpty()) {
    status_->setText(tr("Choose a TorchScript file."));
    return;
  }
  saveChoices();
  log_->clear();
  progress_->setRange(0, 0);  // busy until the first progress event
  progress_->setFormat(tr("starting"));
  runButton_->setEnabled(false);
  cancelButton_->setEnabled(true);
  appendLog(tr("$ %1").arg(commandPreview()));
  controller_->start(r, pipeText_, scheduleName_);
}

void RunDialog::cancelRun() { controller_->cancel(); }

void RunDialog::onFinished(const RunOutcome& o) {
  runButton_->setEnabled(true);
  cancelButton_->setEnabled(false);
  if (o.status == RunOutcome::Status::Finished) {
    progress_->setRange(0, 1);
    progress_->setValue(1);
  } else {
    progress_->setRange(0, std::max(1, progress_->maximum()));
  }
  progress_->setFormat(o.statusName());
  QString text = o.message;
  if (o.status != RunOutcome::Status::Finished && !o.timeline.ops.empty())
    text += tr(" · partial timeline kept (%1 ops)").arg(o.timeline.ops.size());
  for (const auto& w : o.streamWarnings) appendLog(QString::fromStdString(ps::core::formatDiagnostic(w)).trimmed());

  // Store it (nothing is lost: failed and cancelled runs too, unless nothing ran at all).
  const bool ranAtAll = o.started || !o.timeline.ops.empty() || o.finished;
  QString session;
  if (ranAtAll) {
    SessionDock* dock = window_ ? window_->sessionDock() : nullptr;
    if (dock && dock->hasSession() && !dock->isReadOnly())
      session = dock->sessionPath();
    else
      session = askSessionPath();
  }
  if (!session.isEmpty()) {
    const ps::core::Schedule* sched = window_ ? &window_->document()->schedule() : nullptr;
    const ps::core::CostProfile* prof = window_ ? &window_->document()->profile() : nullptr;
    auto stored = storeRunInSession(session, o, scheduleName_, pipeText_, sched, prof);
    if (stored) {
      lastSession_ = session;
      lastRun_ = stored->runId;
      text += tr(" · stored as run %1 in %2").arg(stored->runId).arg(QFileInfo(session).fileName());
      if (window_) {
        SessionDock* dock = window_->sessionDock();
        if (dock->hasSession() && dock->sessionPath() == session)
          dock->refresh();
        else
          window_->openSession(session);
      }
      Q_EMIT runStored(session, stored->runId);
    } else {
      text += tr(" · NOT stored: %1").arg(QString::fromStdString(stored.error().message));
    }
  }
  status_->setText(text);
  appendLog(text);
}

QString RunDialog::askSessionPath() {
  if (chooser_) return chooser_();
  QMessageBox box(QMessageBox::Question, tr("Store the Run"),
                  tr("No session is open. Store this run (its timeline, status and output) in a session?"),
                  QMessageBox::NoButton, this);
  QPushButton* create = box.addButton(tr("Create Session…"), QMessageBox::AcceptRole);
  QPushButton* open = box.addButton(tr("Open Session…"), QMessageBox::AcceptRole);
  box.addButton(tr("Don't Store"), QMessageBox::RejectRole);
  box.exec();
  if (box.clickedButton() == create)
    return QFileDialog::getSaveFileName(this, tr("Create Session"), QStringLiteral("runs.session"),
                                        tr("PipeStudio sessions (*.session);;All files (*)"));
  if (box.clickedButton() == open)
    return QFileDialog::getOpenFileName(this, tr("Open Session"), QString(),
                                        tr("PipeStudio sessions (*.session);;All files (*)"));
  return {};
}

void RunDialog::closeEvent(QCloseEvent* e) {
  if (controller_->isActive()) {
    if (QMessageBox::question(this, tr("Run in Progress"), tr("A run is in progress. Cancel it?")) != QMessageBox::Yes) {
      e->ignore();
      return;
    }
    controller_->cancel();
  }
  saveChoices();
  QDialog::closeEvent(e);
}

}  // namespace ps::ui
