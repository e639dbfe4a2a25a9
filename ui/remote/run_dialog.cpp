#include "remote/run_dialog.h"

#include <QApplication>
#include <QCheckBox>
#include <QClipboard>
#include <QCloseEvent>
#include <QComboBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QVBoxLayout>
#include <memory>

#include "docks/session_controller.h"
#include "document/schedule_document.h"
#include "pipestudio/core/io/dsl.h"
#include "remote/dialog_host.h"
#include "widgets/form.h"

namespace ps::ui {

namespace {

// A line edit with a Browse… button that fills it from a file dialog.
QHBoxLayout* fileRow(QWidget* owner, QLineEdit* edit, const QString& title, const QString& filter,
                     QPushButton* browse = nullptr) {
  if (!browse) browse = new QPushButton(QObject::tr("B&rowse…"));
  QObject::connect(browse, &QPushButton::clicked, owner, [owner, edit, title, filter] {
    const QString f = QFileDialog::getOpenFileName(owner, title, edit->text(), filter);
    if (!f.isEmpty()) edit->setText(f);
  });
  auto* row = new QHBoxLayout;
  row->addWidget(edit, 1);
  row->addWidget(browse);
  return row;
}

}  // namespace

RunDialog::RunDialog(QWidget* parent, QSettings* settings)
    : CommandDialog(parent, settings, TargetPicker::Mode::Manage) {
  setWindowTitle(tr("Run Schedule"));
  setObjectName(QStringLiteral("runDialog"));
  controller_ = new RunController(this);
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
    progress_->setFormat(warm ? tr("warm-up %1 / %2").arg(it + 1).arg(total)
                              : tr("iteration %1 / %2").arg(it + 1).arg(total));
  });
  connect(controller_, &RunController::stderrReceived, this, &RunDialog::appendStream);
  connect(controller_, &RunController::runFinished, this, &RunDialog::onFinished);
  connect(controller_, &RunController::timelineUpdated, this, [this](const ps::core::Timeline& t) {
    if (!t.ops.empty())
      Q_EMIT timelineMeasured(t, tr("run on %1").arg(controller_->request().targetName()),
                              controller_->isActive());
  });
}

void RunDialog::buildUi() {
  connect(target_, &TargetPicker::copyLaunchRequested, this,
          [this](ps::core::LaunchKind k) { copyLaunchCommand(k); });
  connect(target_, &TargetPicker::targetChanged, this, [this] {
    // A cluster has its ranks from the host list (one process per device, always).
    if (perDevice_) perDevice_->setEnabled(!target_->clusterSelected());
  });
  QWidget* modelBox = buildModelBox();
  QWidget* execBox = buildExecutionBox();
  scheduleLabel_ = new QLabel(tr("No schedule"));

  auto* top = new QHBoxLayout;
  auto* left = new QVBoxLayout;
  left->addWidget(target_);
  left->addWidget(modelBox);
  top->addLayout(left, 3);
  top->addWidget(execBox, 2);
  auto* v = new QVBoxLayout(this);
  v->addWidget(scheduleLabel_);
  v->addLayout(top);
  addOutput(v, tr("&Run"), tr("&Cancel Run"), nullptr);
  progress_->setTextVisible(true);
  progress_->setFormat(tr("not started"));
  log_->setPlaceholderText(tr("stderr of the run"));
  connect(startButton_, &QPushButton::clicked, this, &RunDialog::startRun);
  connect(cancelButton_, &QPushButton::clicked, this, &RunDialog::cancelRun);
  perDevice_->setEnabled(!target_->clusterSelected());
  resize(860, 560);
}

QWidget* RunDialog::buildModelBox() {
  auto* modelBox = new QGroupBox(tr("Model"));
  auto* mForm = new QFormLayout(modelBox);
  buildModelFields(true, true);
  torchscript_ = new QLineEdit;
  torchscript_->setPlaceholderText(tr("model.pt (a path on the target)"));
  browseModel_ = new QPushButton(tr("&Browse…"));
  inputs_ = new QLineEdit;
  inputs_->setObjectName(QStringLiteral("inputsFile"));
  inputs_->setPlaceholderText(tr("synthetic from the seed"));
  inputs_->setToolTip(
      tr("A batch saved by torch.save, a path on the target (a cluster run copies it from this machine "
         "to every host): a tensor of inputs, (inputs, targets) or "
         "{\"inputs\", \"targets\"} (--inputs; docs/engine.md, Data from a file)"));
  addFormRows(
      mForm, {{tr("Model:"), model_},
              {tr("Parameters:"), params_},
              {tr("TorchScript:"), fileRow(this, torchscript_, tr("TorchScript Model"),
                                           tr("TorchScript (*.pt *.pth *.ts);;All files (*)"), browseModel_)},
              {tr("Micro-batch size:"), microbatch_},
              {tr("Data:"),
               fileRow(this, inputs_, tr("Batch (torch.save)"), tr("PyTorch (*.pt *.pth);;All files (*)"))}});
  connect(model_, &QComboBox::currentIndexChanged, this, &RunDialog::updateModelFields);
  for (QLineEdit* e : {torchscript_, inputs_})
    connect(e, &QLineEdit::textChanged, this, &RunDialog::updatePreview);
  return modelBox;
}

QWidget* RunDialog::buildExecutionBox() {
  auto* execBox = new QGroupBox(tr("Execution"));
  auto* eForm = new QFormLayout(execBox);
  perDevice_ = new QCheckBox(tr("One &process per device (--nproc, Gloo)"));
  perDevice_->setToolTip(tr("Unchecked: one process, a thread per device"));
  iterations_ = makeSpinBox(1, 100000, 1);
  gradients_ = new QCheckBox(tr("Compare &gradients with the unpipelined model"));
  timeout_ = new QDoubleSpinBox;
  timeout_->setRange(1, 86400);
  timeout_->setDecimals(0);
  timeout_->setSuffix(tr(" s"));
  timeout_->setToolTip(tr("A transfer that waits longer fails the run (--timeout)"));
  buildOptimizerCombo(
      tr("none (forward and backward)"),
      tr("Make every iteration a training step: libtorch's optimizer steps each device's stages after "
         "its last op, timed as an OPTIMIZER op (--optimizer)"));
  learningRate_ = new QDoubleSpinBox;
  learningRate_->setObjectName(QStringLiteral("learningRate"));
  learningRate_->setDecimals(6);
  learningRate_->setRange(0.000001, 10);
  learningRate_->setSingleStep(0.001);
  learningRate_->setPrefix(tr("lr "));
  learningRate_->setValue(0.01);
  learningRate_->setEnabled(false);
  auto* trainRow = new QHBoxLayout;
  trainRow->addWidget(optimizer_, 1);
  trainRow->addWidget(learningRate_);
  addFormRows(eForm, {{tr("Device:"), device_},
                      {tr("Processes:"), perDevice_},
                      {tr("Iterations:"), iterations_},
                      {tr("Warm-up:"), warmup_},
                      {tr("Gradient check:"), gradients_},
                      {tr("Training step:"), trainRow},
                      {tr("Timeout:"), timeout_}});
  connect(optimizer_, &QComboBox::currentIndexChanged, this, [this] {
    // Each optimizer's own default learning rate, as the CLI has them.
    const QString o = optimizer_->currentData().toString();
    if (!o.isEmpty()) learningRate_->setValue(o == QStringLiteral("adamw") ? 0.001 : 0.01);
    learningRate_->setEnabled(!o.isEmpty());
  });
  for (QCheckBox* c : {perDevice_, gradients_})
    connect(c, &QCheckBox::toggled, this, &RunDialog::updatePreview);
  connect(iterations_, &QSpinBox::valueChanged, this, &RunDialog::updatePreview);
  for (QDoubleSpinBox* s : {timeout_, learningRate_})
    connect(s, &QDoubleSpinBox::valueChanged, this, &RunDialog::updatePreview);
  return execBox;
}

QString RunDialog::copyLaunchCommand(ps::core::LaunchKind kind) {
  const RunRequest r = request();
  if (r.cluster.empty()) return {};
  QString text = clusterLaunchCommands(r, kind);
  QApplication::clipboard()->setText(text);
  status_->setText(kind == ps::core::LaunchKind::Slurm ? tr("Slurm commands copied to the clipboard")
                                                       : tr("torchrun commands copied to the clipboard"));
  return text;
}

void RunDialog::updateModelFields() {
  const bool ts = model_->currentData().toString() == QStringLiteral("torchscript");
  params_->setEnabled(!ts);
  torchscript_->setEnabled(ts);
  browseModel_->setEnabled(ts);
}

RunRequest RunDialog::request() const {
  RunRequest r;
  readModelFields(r);
  r.torchscriptFile = torchscript_->text().trimmed();
  r.processes = perDevice_->isChecked() && r.cluster.empty() ? std::max(1, devices_) : 1;
  r.iterations = iterations_->value();
  r.warmup = warmup_->value();
  r.checkGradients = gradients_->isChecked();
  r.optimizer = optimizer_->currentData().toString();
  r.learningRate = r.optimizer.isEmpty() ? 0 : learningRate_->value();
  r.inputsFile = inputs_->text().trimmed();
  r.timeoutSeconds = timeout_->value();
  return r;
}

void RunDialog::setRequest(const RunRequest& r) {
  writeModelFields(r);
  torchscript_->setText(r.torchscriptFile);
  perDevice_->setChecked(r.processes > 1);
  iterations_->setValue(r.iterations);
  warmup_->setValue(r.warmup);
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
  r.modelParameters =
      settings_
          ->value(QStringLiteral("parameters"),
                  defaultModelParameters(r.model == QStringLiteral("mlp") ? r.model : QStringLiteral("gpt")))
          .toString();
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
  if (!preview_) return;  // still building
  setPreview(buildRunCommand(request()).display() + QStringLiteral(" < schedule"));
}

void RunDialog::setSchedule(const QString& name, const QString& pipeText, int devices) {
  scheduleName_ = name;
  pipeText_ = pipeText;
  devices_ = std::max(1, devices);
  scheduleLabel_->setText(tr("Schedule: <b>%1</b> · %2 devices").arg(name.toHtmlEscaped()).arg(devices_));
  perDevice_->setText(tr("One &process per device (--nproc %1, Gloo)").arg(devices_));
  updatePreview();
}

void RunDialog::attach(DialogHost* host) {
  host_ = host;
}

RunDialog* RunDialog::showFor(DialogHost* host) {
  auto* d =
      host->hostWidget()->findChild<RunDialog*>(QStringLiteral("runDialog"), Qt::FindDirectChildrenOnly);
  if (!d) {
    d = new RunDialog(host->hostWidget());
    host->adopt(d);
  }
  d->attach(host);
  if (!d->controller()->isActive()) {
    const auto& s = host->document()->schedule();
    QString name = QString::fromStdString(s.name);
    if (name.isEmpty()) name = QFileInfo(host->document()->filePath()).completeBaseName();
    if (name.isEmpty()) name = tr("schedule");
    d->setSchedule(name, QString::fromStdString(ps::core::printDsl(s)), s.pipeline.devices);
  }
  d->show();
  d->raise();
  d->activateWindow();
  return d;
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
  startButton_->setEnabled(false);
  cancelButton_->setEnabled(true);
  appendLog(tr("$ %1").arg(commandPreview()));
  controller_->start(r, pipeText_, scheduleName_);
}

void RunDialog::cancelRun() {
  controller_->cancel();
}

void RunDialog::onFinished(const RunOutcome& o) {
  flushStream();
  startButton_->setEnabled(true);
  cancelButton_->setEnabled(false);
  if (o.status == ps::core::RunState::Succeeded) {
    progress_->setRange(0, 1);
    progress_->setValue(1);
  } else {
    progress_->setRange(0, std::max(1, progress_->maximum()));
  }
  progress_->setFormat(o.statusName());
  QString text = o.message;
  if (o.status != ps::core::RunState::Succeeded && !o.timeline.ops.empty())
    text += tr(" · partial timeline kept (%1 ops)").arg(o.timeline.ops.size());
  for (const auto& w : o.streamWarnings)
    appendLog(QString::fromStdString(ps::core::formatDiagnostic(w)).trimmed());

  // Store it (nothing is lost: failed and cancelled runs too, unless nothing ran at all).
  if (o.started || !o.timeline.ops.empty() || o.finished) text += storeRun(o);
  status_->setText(text);
  appendLog(text);
}

// Files the run in the open (writable) session, else in one the user chooses; what the status
// line says about it ("" when not stored by choice).
QString RunDialog::storeRun(const RunOutcome& o) {
  const SessionController* open = host_ ? host_->session() : nullptr;
  const QString writable = open ? open->writablePath() : QString();
  const QString session = !writable.isEmpty() ? writable : askSessionPath();
  if (session.isEmpty()) return {};
  const ps::core::Schedule* sched = host_ ? &host_->document()->schedule() : nullptr;
  const ps::core::CostProfile* prof = host_ ? &host_->document()->profile() : nullptr;
  auto stored = storeRunInSession(session, o, scheduleName_, pipeText_, sched, prof);
  if (!stored) return tr(" · NOT stored: %1").arg(QString::fromStdString(stored.error().message));
  lastSession_ = session;
  lastRun_ = stored->runId;
  Q_EMIT runStored(session, stored->runId);
  return tr(" · stored as run %1 in %2").arg(stored->runId).arg(QFileInfo(session).fileName());
}

QMessageBox* RunDialog::makeStorePrompt(const QString& readOnlySession) {
  const QString text =
      readOnlySession.isEmpty()
          ? tr("No session is open. Store this run (its timeline, status and output) in a session?")
          : tr("The open session, %1, is read-only (a bundled example or a file you cannot write). Store "
               "this run (its timeline, status and output) in a copy of it, in another session, or not at "
               "all?")
                .arg(QFileInfo(readOnlySession).fileName());
  auto* box = new QMessageBox(QMessageBox::Question, tr("Store the Run"), text, QMessageBox::NoButton, this);
  if (!readOnlySession.isEmpty()) {
    QPushButton* saveAs = box->addButton(tr("Save Session &As…"), QMessageBox::AcceptRole);
    saveAs->setObjectName(QStringLiteral("saveSessionAs"));
    saveAs->setToolTip(
        tr("Copy %1 to a new file and store the run there").arg(QFileInfo(readOnlySession).fileName()));
    box->setDefaultButton(saveAs);
  }
  box->addButton(tr("&Create Session…"), QMessageBox::AcceptRole)
      ->setObjectName(QStringLiteral("createSession"));
  box->addButton(tr("&Open Session…"), QMessageBox::AcceptRole)->setObjectName(QStringLiteral("openSession"));
  box->addButton(tr("&Don't Store"), QMessageBox::RejectRole)->setObjectName(QStringLiteral("dontStore"));
  return box;
}

bool RunDialog::copySession(const QString& source, const QString& target, QString* error) {
  if (QFileInfo(source).canonicalFilePath() == QFileInfo(target).canonicalFilePath()) {
    if (error) *error = tr("%1 is the read-only session itself").arg(target);
    return false;
  }
  // The file dialog asked before overwriting.
  if (QFileInfo::exists(target) && !QFile::remove(target)) {
    if (error) *error = tr("cannot replace %1").arg(target);
    return false;
  }
  QFile in(source);
  if (!in.copy(target)) {
    if (error) *error = tr("cannot copy %1 to %2: %3").arg(source, target, in.errorString());
    return false;
  }
  // A bundled or read-only original leaves a read-only copy: the copy is the user's to write.
  QFile::setPermissions(target,
                        QFile::permissions(target) | QFileDevice::WriteOwner | QFileDevice::ReadOwner);
  return true;
}

QString RunDialog::askSessionPath() {
  if (chooser_) return chooser_();
  const SessionController* open = host_ ? host_->session() : nullptr;
  const QString readOnly = open && open->isReadOnly() ? open->path() : QString();
  std::unique_ptr<QMessageBox> box(makeStorePrompt(readOnly));
  box->exec();
  const QString clicked = box->clickedButton() ? box->clickedButton()->objectName() : QString();
  if (clicked == QStringLiteral("saveSessionAs")) {
    QString target = QFileDialog::getSaveFileName(
        this, tr("Save Session As"),
        QDir::home().filePath(QFileInfo(readOnly).completeBaseName() + QStringLiteral(".session")),
        tr("PipeStudio sessions (*.session);;All files (*)"));
    if (target.isEmpty()) return {};
    QString error;
    if (!copySession(readOnly, target, &error)) {
      QMessageBox::warning(this, tr("Save Session As"), error);
      return {};
    }
    return target;
  }
  if (clicked == QStringLiteral("createSession"))
    return QFileDialog::getSaveFileName(this, tr("Create Session"), QStringLiteral("runs.session"),
                                        tr("PipeStudio sessions (*.session);;All files (*)"));
  if (clicked == QStringLiteral("openSession"))
    return QFileDialog::getOpenFileName(this, tr("Open Session"), QString(),
                                        tr("PipeStudio sessions (*.session);;All files (*)"));
  return {};
}

void RunDialog::closeEvent(QCloseEvent* e) {
  if (controller_->isActive()) {
    if (QMessageBox::question(this, tr("Run in Progress"), tr("A run is in progress. Cancel it?")) !=
        QMessageBox::Yes) {
      e->ignore();
      return;
    }
    controller_->cancel();
  }
  saveChoices();
  QDialog::closeEvent(e);
}

}  // namespace ps::ui
