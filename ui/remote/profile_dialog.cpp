#include "remote/profile_dialog.h"

#include <QCloseEvent>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QFile>
#include <QFileDialog>
#include <QFontDatabase>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QRegularExpression>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QStatusBar>
#include <QTimer>
#include <QVBoxLayout>
#include <algorithm>

#include "shell/main_window.h"
#include "pipestudio/sessions/session_store.h"
#include "remote/run_dialog.h"
#include "document/schedule_document.h"
#include "docks/session_dock.h"

namespace ps::ui {

namespace {

constexpr int kMaxStderrChars = 64 * 1024;

QString lastLines(const QString& text, int lines) {
  QStringList all = text.trimmed().split(QLatin1Char('\n'));
  if (all.size() > lines) all = all.mid(all.size() - lines);
  return all.join(QLatin1Char('\n'));
}

}  // namespace

// --- command ---------------------------------------------------------------------------------

QStringList cliProfileArguments(const ProfileRequest& r) {
  QStringList a{QStringLiteral("profile"), QStringLiteral("--model"), r.target.modelSpec(), QStringLiteral("--device"),
                r.target.device};
  if (r.target.microbatchSize > 0) a << QStringLiteral("--microbatch-size") << QString::number(r.target.microbatchSize);
  a << QStringLiteral("--workers") << QString::number(std::max(1, r.workers)) << QStringLiteral("--repetitions")
    << QString::number(std::max(1, r.repetitions)) << QStringLiteral("--warmup")
    << QString::number(std::max(0, r.warmup));
  if (!r.optimizer.isEmpty()) a << QStringLiteral("--optimizer") << r.optimizer;
  a << QStringLiteral("-o") << QStringLiteral("-");
  return a;
}

ProcessCommand buildProfileCommand(const ProfileRequest& r) {
  ProcessCommand c = buildCliCommand(r.target, cliProfileArguments(r));
  if (!r.target.remote || c.arguments.isEmpty()) return c;
  // Over ssh without a tty nothing signals the remote CLI when the client goes away, and the
  // profile writes nothing until it is done. So the remote shell watches its stdin (kept open
  // by the client): at EOF (Cancel closes it, or the connection drops) it kills the CLI.
  const QString script =
      QStringLiteral("exec 3<&0; %1 </dev/null 3<&- & p=$!; { cat <&3 >/dev/null 2>&1; kill $p 2>/dev/null; } & "
                     "w=$!; exec 3<&-; wait $p; s=$?; kill $w 2>/dev/null; exit $s")
          .arg(c.arguments.last());
  c.arguments.last() = QStringLiteral("sh -c ") + shellQuote(script);
  return c;
}

QString describeProfileFailure(const ProfileRequest& r, int exitCode, const QString& stderrText) {
  if (QString ssh = describeSshFailure(r.target, exitCode, stderrText); !ssh.isEmpty()) return ssh;
  const QString where = r.target.remote ? QStringLiteral(" on %1").arg(r.target.remote->displayName()) : QString();
  const QString path = r.target.remote ? r.target.remote->cliPath : r.target.localCli;
  const QString said = lastLines(stderrText, 3);
  const QString tail = said.isEmpty() ? QString() : QStringLiteral(": ") + said;
  if (exitCode == 127)
    return QStringLiteral("pipestudio-cli not found%1 at '%2'%3").arg(where, path, tail);
  if (exitCode == 126) return QStringLiteral("'%1'%2 is not executable%3").arg(path, where, tail);
  if (exitCode == 2)
    return QStringLiteral("pipestudio-cli%1 refused the request (bad model spec or option '%2')%3")
        .arg(where, r.target.modelSpec(), tail);
  if (exitCode == 1) return QStringLiteral("the model '%1' cannot be profiled%2%3").arg(r.target.modelSpec(), where, tail);
  return QStringLiteral("pipestudio-cli profile%1 failed with exit code %2%3").arg(where).arg(exitCode).arg(tail);
}

// --- controller ------------------------------------------------------------------------------

ProfileController::ProfileController(QObject* parent) : QObject(parent) {
  qRegisterMetaType<ps::ui::ProfileOutcome>();
  killTimer_ = new QTimer(this);
  killTimer_->setSingleShot(true);
  connect(killTimer_, &QTimer::timeout, this, [this] {
    if (proc_ && proc_->state() != QProcess::NotRunning) proc_->kill();
  });
}

ProfileController::~ProfileController() {
  if (proc_) {
    proc_->disconnect(this);
    if (proc_->state() != QProcess::NotRunning) {
      proc_->kill();
      proc_->waitForFinished(2000);
    }
  }
}

qint64 ProfileController::processId() const { return proc_ ? proc_->processId() : 0; }

bool ProfileController::start(const ProfileRequest& r) {
  if (isActive()) return false;
  request_ = r;
  if (!request_.target.remote && request_.target.localCli.isEmpty()) request_.target.localCli = defaultLocalCli();
  out_.clear();
  err_.clear();
  cancelled_ = false;
  finishing_ = false;
  outcome_.reset();
  const ProcessCommand c = buildProfileCommand(request_);
  proc_ = new QProcess(this);
  proc_->setProgram(c.program);
  proc_->setArguments(c.arguments);
  QProcess* p = proc_;
  connect(p, &QProcess::readyReadStandardOutput, this, [this, p] {
    if (p == proc_) out_ += p->readAllStandardOutput();
  });
  connect(p, &QProcess::readyReadStandardError, this, [this, p] {
    if (p != proc_) return;
    const QString t = QString::fromUtf8(p->readAllStandardError());
    err_ += t;
    if (err_.size() > kMaxStderrChars) err_ = err_.right(kMaxStderrChars);
    if (!t.isEmpty()) Q_EMIT stderrReceived(t);
  });
  connect(p, &QProcess::errorOccurred, this, [this, p](QProcess::ProcessError e) {
    if (p != proc_ || e != QProcess::FailedToStart) return;
    ProfileOutcome o;
    o.message = request_.target.remote
                    ? QStringLiteral("cannot start the ssh client ('ssh'): %1; install openssh-client").arg(p->errorString())
                    : QStringLiteral("pipestudio-cli not found: cannot start '%1' (%2)").arg(p->program(), p->errorString());
    finish(std::move(o));
  });
  connect(p, &QProcess::finished, this, [this, p](int code, QProcess::ExitStatus st) {
    if (p == proc_) done(code, st);
  });
  proc_->start();
  // Locally the profile reads nothing; over ssh stdin stays open: its end stops the remote CLI.
  if (!request_.target.remote) proc_->closeWriteChannel();
  return true;
}

void ProfileController::cancel() {
  if (!proc_ || cancelled_) return;
  cancelled_ = true;
  proc_->closeWriteChannel();  // the remote shell sees EOF and kills the CLI (buildProfileCommand)
  proc_->terminate();          // the CLI, or the ssh client (whose end is an EOF there too)
  killTimer_->start(graceMs_);
}

void ProfileController::done(int exitCode, QProcess::ExitStatus st) {
  out_ += proc_->readAllStandardOutput();
  err_ += QString::fromUtf8(proc_->readAllStandardError());
  ProfileOutcome o;
  o.exitCode = exitCode;
  o.stderrText = err_;
  if (cancelled_) {
    o.status = ProfileOutcome::Status::Cancelled;
    o.message = QStringLiteral("profiling cancelled");
  } else if (st == QProcess::CrashExit) {
    o.message = QStringLiteral("pipestudio-cli profile crashed%1").arg(err_.isEmpty() ? QString() : QStringLiteral(": ") + lastLines(err_, 3));
  } else if (exitCode != 0) {
    o.message = describeProfileFailure(request_, exitCode, err_);
  } else {
    auto p = ps::core::parseCostProfile(std::string_view(out_.constData(), static_cast<size_t>(out_.size())),
                                        "pipestudio-cli profile output");
    if (!p) {
      o.message = QStringLiteral("the profile output could not be read: %1")
                      .arg(QString::fromStdString(ps::core::formatDiagnostics(p.errors())).trimmed());
    } else {
      o.status = ProfileOutcome::Status::Finished;
      o.json = out_;
      o.profile = std::move(*p);
      o.message = QStringLiteral("profiled %1: %2 layers").arg(request_.target.modelSpec()).arg(o.profile->layers.size());
    }
  }
  finish(std::move(o));
}

void ProfileController::finish(ProfileOutcome o) {
  if (finishing_) return;
  finishing_ = true;
  killTimer_->stop();
  o.request = request_;
  if (proc_) {
    proc_->disconnect(this);
    if (proc_->state() != QProcess::NotRunning) {
      proc_->kill();
      proc_->waitForFinished(1000);
    }
    proc_->deleteLater();
    proc_ = nullptr;
  }
  outcome_ = o;
  Q_EMIT finished(o);
}

// --- dialog ----------------------------------------------------------------------------------

ProfileDialog::ProfileDialog(QWidget* parent, QSettings* settings) : QDialog(parent), settings_(settings) {
  if (!settings_) {
    settings_ = new QSettings(QStringLiteral("PipeStudio"), QStringLiteral("PipeStudio"));
    ownSettings_ = true;
  }
  setWindowTitle(tr("Profile Model"));
  setObjectName(QStringLiteral("profileDialog"));
  controller_ = new ProfileController(this);
  localCli_ = defaultLocalCli();
  hosts_ = loadRemoteHosts(*settings_);
  buildUi();
  updatePreview();
  connect(controller_, &ProfileController::stderrReceived, this, [this](const QString& t) {
    if (!t.trimmed().isEmpty()) log_->appendPlainText(t.trimmed());
  });
  connect(controller_, &ProfileController::finished, this, &ProfileDialog::onFinished);
}

ProfileDialog::~ProfileDialog() {
  if (ownSettings_) delete settings_;
}

void ProfileDialog::buildUi() {
  auto* targetBox = new QGroupBox(tr("Target"));
  target_ = new QComboBox;
  target_->setObjectName(QStringLiteral("target"));
  target_->setToolTip(tr("Hosts are added and edited in Run › Run Schedule…"));
  auto* tRow = new QHBoxLayout(targetBox);
  tRow->addWidget(target_, 1);
  auto* hostsHint = new QLabel(tr("hosts: Run › Run Schedule…"));
  hostsHint->setEnabled(false);  // greyed: a hint, not a control
  tRow->addWidget(hostsHint);
  rebuildTargets();

  auto* modelBox = new QGroupBox(tr("Model and measurement"));
  auto* form = new QFormLayout(modelBox);
  model_ = new QComboBox;
  model_->setObjectName(QStringLiteral("model"));
  addModelItems(model_, false);  // the profiler measures built-in models only
  params_ = new QLineEdit(defaultModelParameters(QStringLiteral("gpt")));
  params_->setObjectName(QStringLiteral("modelParameters"));
  params_->setToolTip(tr("key=value list (docs/engine.md, Models); keys not given keep their defaults"));
  device_ = new QComboBox;
  device_->addItem(QStringLiteral("cpu"));
  device_->addItem(QStringLiteral("cuda"));
  microbatch_ = new QSpinBox;
  microbatch_->setRange(0, 1 << 16);
  microbatch_->setSpecialValueText(tr("default (2)"));
  workers_ = new QSpinBox;
  workers_->setRange(1, 1024);
  workers_->setToolTip(tr("Ops are timed on this many concurrent workers, as the devices of a run on this host "
                          "share its cores (default: the schedule's device count)"));
  repetitions_ = new QSpinBox;
  repetitions_->setRange(1, 100000);
  repetitions_->setValue(10);
  warmup_ = new QSpinBox;
  warmup_->setRange(0, 100000);
  warmup_->setValue(3);
  form->addRow(tr("Model:"), model_);
  form->addRow(tr("Parameters:"), params_);
  form->addRow(tr("Device:"), device_);
  form->addRow(tr("Micro-batch size:"), microbatch_);
  form->addRow(tr("Workers:"), workers_);
  form->addRow(tr("Repetitions (median):"), repetitions_);
  form->addRow(tr("Warm-up:"), warmup_);
  optimizer_ = new QComboBox;
  optimizer_->setObjectName(QStringLiteral("optimizer"));
  optimizer_->addItem(tr("none"), QString());
  optimizer_->addItem(QStringLiteral("SGD"), QStringLiteral("sgd"));
  optimizer_->addItem(QStringLiteral("AdamW"), QStringLiteral("adamw"));
  optimizer_->setToolTip(tr("Also time each layer's optimizer step (optimizer_step_ms), so that runs training with "
                            "this optimizer are predicted with their steps"));
  form->addRow(tr("Optimizer step:"), optimizer_);

  preview_ = new QLineEdit;
  preview_->setReadOnly(true);
  preview_->setObjectName(QStringLiteral("commandPreview"));
  progress_ = new QProgressBar;
  progress_->setRange(0, 1);
  progress_->setValue(0);
  progress_->setTextVisible(false);
  progress_->setVisible(false);  // shown while profiling
  status_ = new QLabel(tr("Measures every layer of the model; the result becomes the document's cost profile "
                          "(Undo restores the previous one)."));
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  log_ = new QPlainTextEdit;
  log_->setReadOnly(true);
  log_->setMaximumBlockCount(2000);
  log_->setPlaceholderText(tr("pipestudio-cli's messages"));
  log_->setMinimumHeight(90);
  log_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));  // the layer table lines up

  profileButton_ = new QPushButton(tr("Profile"));
  profileButton_->setDefault(true);
  cancelButton_ = new QPushButton(tr("Cancel"));
  cancelButton_->setEnabled(false);
  saveButton_ = new QPushButton(tr("Save As…"));
  saveButton_->setEnabled(false);
  saveButton_->setToolTip(tr("Save the measured cost profile as JSON"));
  closeButton_ = new QPushButton(tr("Close"));
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(saveButton_);
  buttons->addStretch(1);
  buttons->addWidget(profileButton_);
  buttons->addWidget(cancelButton_);
  buttons->addWidget(closeButton_);

  auto* v = new QVBoxLayout(this);
  v->addWidget(targetBox);
  v->addWidget(modelBox);
  v->addWidget(new QLabel(tr("Command:")));
  v->addWidget(preview_);
  v->addWidget(progress_);
  v->addWidget(status_);
  v->addWidget(log_, 1);
  v->addLayout(buttons);
  resize(560, 520);

  connect(model_, &QComboBox::currentIndexChanged, this, [this] {
    params_->setText(defaultModelParameters(model_->currentData().toString()));
    params_->setCursorPosition(0);
    updatePreview();
  });
  for (QComboBox* c : {target_, device_, optimizer_})
    connect(c, &QComboBox::currentIndexChanged, this, &ProfileDialog::updatePreview);
  connect(params_, &QLineEdit::textChanged, this, &ProfileDialog::updatePreview);
  for (QSpinBox* s : {microbatch_, workers_, repetitions_, warmup_})
    connect(s, &QSpinBox::valueChanged, this, &ProfileDialog::updatePreview);
  connect(profileButton_, &QPushButton::clicked, this, &ProfileDialog::startProfile);
  connect(cancelButton_, &QPushButton::clicked, this, &ProfileDialog::cancelProfile);
  connect(saveButton_, &QPushButton::clicked, this, &ProfileDialog::saveJsonAs);
  connect(closeButton_, &QPushButton::clicked, this, &QDialog::close);
}

void ProfileDialog::rebuildTargets() {
  fillTargetCombo(target_, hosts_, target_->currentIndex());
}

ProfileDialog* ProfileDialog::showFor(MainWindow* window) {
  auto* d = window->findChild<ProfileDialog*>(QStringLiteral("profileDialog"), Qt::FindDirectChildrenOnly);
  if (!d) d = new ProfileDialog(window);
  d->attach(window);
  d->show();
  d->raise();
  d->activateWindow();
  return d;
}

void ProfileDialog::attach(MainWindow* window) {
  window_ = window;
  setDocument(window->document());
  // The Run dialog may have added hosts since this one was built.
  hosts_ = loadRemoteHosts(*settings_);
  rebuildTargets();
  updatePreview();
}

void ProfileDialog::setDocument(ScheduleDocument* doc) {
  doc_ = doc;
  if (doc_ && !controller_->isActive()) workers_->setValue(std::max(1, doc_->schedule().pipeline.devices));
}

ProfileRequest ProfileDialog::request() const {
  ProfileRequest r;
  const int t = target_->currentIndex();
  if (t > 0 && t - 1 < hosts_.size()) r.target.remote = hosts_[t - 1];
  r.target.localCli = localCli_;
  r.target.model = model_->currentData().toString();
  r.target.modelParameters = params_->text().trimmed();
  r.target.device = device_->currentText();
  r.target.microbatchSize = microbatch_->value();
  r.workers = workers_->value();
  r.repetitions = repetitions_->value();
  r.warmup = warmup_->value();
  r.optimizer = optimizer_->currentData().toString();
  return r;
}

void ProfileDialog::setRequest(const ProfileRequest& r) {
  int t = 0;
  if (r.target.remote)
    for (int i = 0; i < hosts_.size(); ++i)
      if (hosts_[i] == *r.target.remote) t = i + 1;
  target_->setCurrentIndex(t);
  model_->setCurrentIndex(std::max(0, model_->findData(r.target.model)));
  params_->setText(r.target.modelParameters);
  device_->setCurrentIndex(std::max(0, device_->findText(r.target.device)));
  microbatch_->setValue(r.target.microbatchSize);
  workers_->setValue(r.workers);
  repetitions_->setValue(r.repetitions);
  warmup_->setValue(r.warmup);
  optimizer_->setCurrentIndex(std::max(0, optimizer_->findData(r.optimizer)));
  if (!r.target.localCli.isEmpty()) localCli_ = r.target.localCli;
  updatePreview();
}

void ProfileDialog::setLocalCli(const QString& path) {
  localCli_ = path;
  updatePreview();
}

void ProfileDialog::updatePreview() {
  if (!preview_) return;
  preview_->setText(buildProfileCommand(request()).display());
  preview_->setCursorPosition(0);  // the start says what runs where
  preview_->setToolTip(preview_->text());
}

QString ProfileDialog::commandPreview() const { return preview_->text(); }
QString ProfileDialog::statusText() const { return status_->text(); }
QString ProfileDialog::logText() const { return log_->toPlainText(); }

void ProfileDialog::setBusy(bool busy) {
  progress_->setRange(0, busy ? 0 : 1);  // 0..0: a busy indicator
  progress_->setVisible(busy);
  progress_->setValue(0);
  profileButton_->setEnabled(!busy);
  cancelButton_->setEnabled(busy);
  for (QWidget* w : std::initializer_list<QWidget*>{target_, model_, params_, device_, microbatch_, workers_,
                                                    repetitions_, warmup_, optimizer_})
    w->setEnabled(!busy);
}

void ProfileDialog::startProfile() {
  const ProfileRequest r = request();
  if (!controller_->start(r)) return;
  log_->clear();
  log_->appendPlainText(buildProfileCommand(r).display());
  status_->setText(tr("Profiling %1 on %2…").arg(r.target.modelSpec(), r.target.targetName()));
  setBusy(true);
}

void ProfileDialog::cancelProfile() {
  if (!controller_->isActive()) return;
  status_->setText(tr("Cancelling…"));
  controller_->cancel();
}

void ProfileDialog::onFinished(const ProfileOutcome& o) {
  setBusy(false);
  if (o.status != ProfileOutcome::Status::Finished || !o.profile) {
    const bool cancelled = o.status == ProfileOutcome::Status::Cancelled;
    status_->setText(cancelled ? tr("Cancelled; the document is unchanged.")
                               : tr("Profiling failed: %1. The document is unchanged.").arg(o.message));
    if (!o.stderrText.trimmed().isEmpty() && !logText().contains(o.stderrText.trimmed()))
      log_->appendPlainText(o.stderrText.trimmed());
    return;
  }
  lastJson_ = o.json;
  const QString spec = o.request.target.modelSpec();
  ps::core::CostProfile profile = *o.profile;
  if (profile.name.empty()) profile.name = spec.toStdString();
  lastName_ = QString::fromStdString(profile.name);
  const size_t layers = profile.layers.size();
  if (doc_) doc_->setProfile(profile, tr("Profile %1").arg(spec));

  // The open session (writable) keeps it as a profiled profile.
  QString session = sessionPath_;
  if (window_) {
    SessionDock* dock = window_->sessionDock();
    session = dock && dock->hasSession() && !dock->isReadOnly() ? dock->sessionPath() : QString();
  }
  lastStored_ = 0;
  QString stored;
  if (!session.isEmpty()) {
    auto store = ps::sessions::SessionStore::open(session.toStdString());
    ps::core::Result<ps::sessions::Id> id =
        store ? store->addProfile(lastName_.toStdString(), lastJson_.toStdString(), ps::sessions::ProfileSource::Profiled)
              : ps::core::Result<ps::sessions::Id>(store.errors());
    if (id) {
      lastStored_ = *id;
      stored = tr("; stored in the session as profile %1").arg(*id);
      if (window_ && window_->sessionDock()) window_->sessionDock()->refresh();
    } else {
      stored = tr("; not stored in the session: %1")
                   .arg(QString::fromStdString(ps::core::formatDiagnostics(id.errors())).trimmed());
    }
  }
  saveButton_->setEnabled(true);
  const QString msg = tr("Profiled %1 on %2: %3 layers, now the document's cost profile")
                          .arg(spec, o.request.target.targetName())
                          .arg(layers);
  // The measured numbers, as the CLI's table prints them.
  log_->appendPlainText(QStringLiteral("%1 %2 %3 %4").arg(tr("layer"), -14).arg(tr("F ms"), 10).arg(tr("I ms"), 10).arg(tr("W ms"), 10));
  for (const auto& l : profile.layers)
    log_->appendPlainText(QStringLiteral("%1 %2 %3 %4")
                              .arg(QString::fromStdString(l.name), -14)
                              .arg(l.forwardMs, 10, 'f', 3)
                              .arg(l.backwardInputMs, 10, 'f', 3)
                              .arg(l.backwardWeightMs, 10, 'f', 3));
  status_->setText(msg + stored + QLatin1Char('.'));
  if (window_) window_->statusBar()->showMessage(msg, 15000);
  Q_EMIT profileApplied(msg);
}

bool ProfileDialog::saveJson(const QString& path, QString* error) const {
  QFile f(path);
  if (lastJson_.isEmpty() || !f.open(QIODevice::WriteOnly | QIODevice::Truncate) || f.write(lastJson_) != lastJson_.size()) {
    if (error) *error = lastJson_.isEmpty() ? tr("no profile yet") : f.errorString();
    return false;
  }
  return true;
}

void ProfileDialog::saveJsonAs() {
  QString name = lastName_;
  name.replace(QRegularExpression(QStringLiteral("[^A-Za-z0-9_.-]+")), QStringLiteral("_"));
  const QString path = QFileDialog::getSaveFileName(this, tr("Save Cost Profile"), name + QStringLiteral(".json"),
                                                    tr("Cost profile (*.json)"));
  if (path.isEmpty()) return;
  QString error;
  status_->setText(saveJson(path, &error) ? tr("Saved %1.").arg(path) : tr("Cannot save %1: %2").arg(path, error));
}

void ProfileDialog::closeEvent(QCloseEvent* e) {
  if (controller_->isActive()) controller_->cancel();
  QDialog::closeEvent(e);
}

}  // namespace ps::ui
