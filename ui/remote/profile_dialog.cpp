#include "remote/profile_dialog.h"

#include <QCloseEvent>
#include <QComboBox>
#include <QFile>
#include <QFileDialog>
#include <QFontDatabase>
#include <QFormLayout>
#include <QGroupBox>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QSpinBox>
#include <QVBoxLayout>
#include <algorithm>

#include "docks/session_controller.h"
#include "document/schedule_document.h"
#include "pipestudio/sessions/session_store.h"
#include "remote/dialog_host.h"
#include "widgets/form.h"
#include "widgets/units_text.h"

namespace ps::ui {

// --- command ---------------------------------------------------------------------------------

QStringList cliProfileArguments(const ProfileRequest& r) {
  // Layers are profiled on the CPU only: GPU profiling has not been implemented.
  QStringList a{QStringLiteral("profile"), QStringLiteral("--model"), r.target.modelSpec()};
  if (r.target.microbatchSize > 0)
    a << QStringLiteral("--microbatch-size") << QString::number(r.target.microbatchSize);
  a << QStringLiteral("--workers") << QString::number(std::max(1, r.workers))
    << QStringLiteral("--repetitions") << QString::number(std::max(1, r.repetitions))
    << QStringLiteral("--warmup") << QString::number(std::max(0, r.warmup));
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
      QStringLiteral(
          "exec 3<&0; %1 </dev/null 3<&- & p=$!; { cat <&3 >/dev/null 2>&1; kill $p 2>/dev/null; } & "
          "w=$!; exec 3<&-; wait $p; s=$?; kill $w 2>/dev/null; exit $s")
          .arg(c.arguments.last());
  c.arguments.last() = QStringLiteral("sh -c ") + shellQuote(script);
  return c;
}

QString describeProfileFailure(const ProfileRequest& r, int exitCode, const QString& stderrText) {
  if (QString ssh = describeSshFailure(r.target, exitCode, stderrText); !ssh.isEmpty()) return ssh;
  const QString where =
      r.target.remote ? QStringLiteral(" on %1").arg(r.target.remote->displayName()) : QString();
  const QString path = r.target.remote ? r.target.remote->cliPath : r.target.localCli;
  const QString said = lastLines(stderrText, 3);
  const QString tail = said.isEmpty() ? QString() : QStringLiteral(": ") + said;
  if (exitCode == 127) return QStringLiteral("pipestudio-cli not found%1 at '%2'%3").arg(where, path, tail);
  if (exitCode == 126) return QStringLiteral("'%1'%2 is not executable%3").arg(path, where, tail);
  if (exitCode == 2)
    return QStringLiteral("pipestudio-cli%1 refused the request (bad model spec or option '%2')%3")
        .arg(where, r.target.modelSpec(), tail);
  if (exitCode == 1)
    return QStringLiteral("the model '%1' cannot be profiled%2%3").arg(r.target.modelSpec(), where, tail);
  return QStringLiteral("pipestudio-cli profile%1 failed with exit code %2%3")
      .arg(where)
      .arg(exitCode)
      .arg(tail);
}

// --- controller ------------------------------------------------------------------------------

ProfileController::ProfileController(QObject* parent) : QObject(parent) {
  qRegisterMetaType<ps::ui::ProfileOutcome>();
  runner_ = new ProcessRunner(this);
  runner_->setStderrLimit(64 * 1024);
  connect(runner_, &ProcessRunner::stdoutReceived, this, [this](const QByteArray& b) { out_ += b; });
  connect(runner_, &ProcessRunner::stderrReceived, this, &ProfileController::stderrReceived);
  connect(runner_, &ProcessRunner::failedToStart, this, [this](const QString& why) {
    ProfileOutcome o;
    o.message =
        request_.target.remote
            ? QStringLiteral("cannot start the ssh client ('ssh'): %1; install openssh-client").arg(why)
            : QStringLiteral("pipestudio-cli not found: cannot start '%1' (%2)").arg(runner_->program(), why);
    finish(std::move(o));
  });
  connect(runner_, &ProcessRunner::finished, this, &ProfileController::done);
}

bool ProfileController::start(const ProfileRequest& r) {
  if (isActive()) return false;
  request_ = r;
  if (!request_.target.remote && request_.target.localCli.isEmpty())
    request_.target.localCli = defaultLocalCli();
  out_.clear();
  cancelled_ = false;
  outcome_.reset();
  active_ = true;
  runner_->start(buildProfileCommand(request_));
  // Locally the profile reads nothing; over ssh stdin stays open: its end stops the remote CLI.
  if (active_ && !request_.target.remote) runner_->closeStdin();
  return true;
}

void ProfileController::cancel() {
  if (!isActive() || cancelled_) return;
  cancelled_ = true;
  // stdin closed: the remote shell sees EOF and kills the CLI (buildProfileCommand); at once
  // SIGTERM to the CLI, or to the ssh client (whose end is an EOF there too); SIGKILL later.
  runner_->stop(0, graceMs_);
}

void ProfileController::done(int exitCode, bool crashed) {
  const QString err = runner_->stderrTail();
  ProfileOutcome o;
  o.exitCode = exitCode;
  o.stderrText = err;
  if (cancelled_) {
    o.status = ps::core::RunState::Cancelled;
    o.message = QStringLiteral("profiling cancelled");
  } else if (crashed) {
    o.message = QStringLiteral("pipestudio-cli profile crashed%1")
                    .arg(err.isEmpty() ? QString() : QStringLiteral(": ") + lastLines(err, 3));
  } else if (exitCode != 0) {
    o.message = describeProfileFailure(request_, exitCode, err);
  } else {
    auto p = ps::core::parseCostProfile(std::string_view(out_.constData(), static_cast<size_t>(out_.size())),
                                        "pipestudio-cli profile output");
    if (!p) {
      o.message = QStringLiteral("the profile output could not be read: %1")
                      .arg(QString::fromStdString(ps::core::formatDiagnostics(p.errors())).trimmed());
    } else {
      o.status = ps::core::RunState::Succeeded;
      o.json = out_;
      o.profile = std::move(*p);
      o.message = QStringLiteral("profiled %1: %2 layers")
                      .arg(request_.target.modelSpec())
                      .arg(o.profile->layers.size());
    }
  }
  finish(std::move(o));
}

void ProfileController::finish(ProfileOutcome o) {
  if (!active_) return;
  active_ = false;
  o.request = request_;
  outcome_ = o;
  Q_EMIT finished(o);
}

// --- dialog ----------------------------------------------------------------------------------

ProfileDialog::ProfileDialog(QWidget* parent, QSettings* settings)
    : CommandDialog(parent, settings, TargetPicker::Mode::Choose) {
  setWindowTitle(tr("Profile Model"));
  setObjectName(QStringLiteral("profileDialog"));
  controller_ = new ProfileController(this);
  buildUi();
  ProfileDialog::updatePreview();  // this class's: no virtual dispatch during construction
  connect(controller_, &ProfileController::stderrReceived, this, &ProfileDialog::appendStream);
  connect(controller_, &ProfileController::finished, this, &ProfileDialog::onFinished);
}

void ProfileDialog::buildUi() {
  auto* modelBox = new QGroupBox(tr("Model and measurement"));
  auto* form = new QFormLayout(modelBox);
  buildModelFields(false, false);  // the profiler measures built-in models, on the CPU
  params_->setText(defaultModelParameters(QStringLiteral("gpt")));
  workers_ = makeSpinBox(1, 1024, 1);
  workers_->setToolTip(
      tr("Ops are timed on this many concurrent workers, as the devices of a run on this host "
         "share its cores (default: the schedule's device count)"));
  repetitions_ = makeSpinBox(1, 100000, 10);
  warmup_->setValue(3);
  buildOptimizerCombo(tr("none"),
                      tr("Also time each layer's optimizer step (optimizer_step_ms), so that runs "
                         "training with this optimizer are predicted with their steps"));
  addFormRows(form, {{tr("Model:"), model_},
                     {tr("Parameters:"), params_},
                     {tr("Micro-batch size:"), microbatch_},
                     {tr("Workers:"), workers_},
                     {tr("Repetitions (median):"), repetitions_},
                     {tr("Warm-up:"), warmup_},
                     {tr("Optimizer step:"), optimizer_}});

  saveButton_ = new QPushButton(tr("&Save As…"));
  saveButton_->setEnabled(false);
  saveButton_->setToolTip(tr("Save the measured cost profile as JSON"));
  auto* v = new QVBoxLayout(this);
  v->addWidget(target_);
  v->addWidget(modelBox);
  addOutput(v, tr("&Profile"), tr("&Cancel"), saveButton_);
  progress_->setTextVisible(false);
  progress_->setVisible(false);  // shown while profiling
  status_->setText(
      tr("Measures every layer of the model; the result becomes the document's cost profile "
         "(Undo restores the previous one)."));
  log_->setPlaceholderText(tr("pipestudio-cli's messages"));
  log_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));  // the layer table lines up
  resize(560, 520);

  for (QSpinBox* s : {workers_, repetitions_})
    connect(s, &QSpinBox::valueChanged, this, &ProfileDialog::updatePreview);
  connect(startButton_, &QPushButton::clicked, this, &ProfileDialog::startProfile);
  connect(cancelButton_, &QPushButton::clicked, this, &ProfileDialog::cancelProfile);
  connect(saveButton_, &QPushButton::clicked, this, &ProfileDialog::saveJsonAs);
}

ProfileDialog* ProfileDialog::showFor(DialogHost* host) {
  auto* d = host->hostWidget()->findChild<ProfileDialog*>(QStringLiteral("profileDialog"),
                                                          Qt::FindDirectChildrenOnly);
  if (!d) {
    d = new ProfileDialog(host->hostWidget());
    host->adopt(d);
  }
  d->attach(host);
  d->show();
  d->raise();
  d->activateWindow();
  return d;
}

void ProfileDialog::attach(DialogHost* host) {
  host_ = host;
  setDocument(host->document());
  target_->reloadHosts();  // the Run dialog may have added hosts since this one was built
  updatePreview();
}

void ProfileDialog::setDocument(ScheduleDocument* doc) {
  doc_ = doc;
  if (doc_ && !controller_->isActive()) workers_->setValue(std::max(1, doc_->schedule().pipeline.devices));
}

ProfileRequest ProfileDialog::request() const {
  ProfileRequest r;
  readModelFields(r.target);
  r.workers = workers_->value();
  r.repetitions = repetitions_->value();
  r.warmup = warmup_->value();
  r.optimizer = optimizer_->currentData().toString();
  return r;
}

void ProfileDialog::setRequest(const ProfileRequest& r) {
  writeModelFields(r.target);
  workers_->setValue(r.workers);
  repetitions_->setValue(r.repetitions);
  warmup_->setValue(r.warmup);
  optimizer_->setCurrentIndex(std::max(0, optimizer_->findData(r.optimizer)));
  updatePreview();
}

void ProfileDialog::updatePreview() {
  if (!preview_) return;  // still building
  setPreview(buildProfileCommand(request()).display());
}

void ProfileDialog::setBusy(bool busy) {
  progress_->setRange(0, busy ? 0 : 1);  // 0..0: a busy indicator
  progress_->setVisible(busy);
  progress_->setValue(0);
  startButton_->setEnabled(!busy);
  cancelButton_->setEnabled(busy);
  for (QWidget* w : std::initializer_list<QWidget*>{target_, model_, params_, microbatch_, workers_,
                                                    repetitions_, warmup_, optimizer_})
    w->setEnabled(!busy);
}

void ProfileDialog::startProfile() {
  const ProfileRequest r = request();
  if (!controller_->start(r)) return;
  log_->clear();
  appendLog(buildProfileCommand(r).display());
  status_->setText(tr("Profiling %1 on %2…").arg(r.target.modelSpec(), r.target.targetName()));
  setBusy(true);
}

void ProfileDialog::cancelProfile() {
  if (!controller_->isActive()) return;
  status_->setText(tr("Cancelling…"));
  controller_->cancel();
}

void ProfileDialog::onFinished(const ProfileOutcome& o) {
  flushStream();
  setBusy(false);
  if (o.status != ps::core::RunState::Succeeded || !o.profile) {
    const bool cancelled = o.status == ps::core::RunState::Cancelled;
    status_->setText(cancelled ? tr("Cancelled; the document is unchanged.")
                               : tr("Profiling failed: %1. The document is unchanged.").arg(o.message));
    if (!o.stderrText.trimmed().isEmpty() && !logText().contains(o.stderrText.trimmed()))
      appendLog(o.stderrText.trimmed());
    return;
  }
  lastJson_ = o.json;
  const QString spec = o.request.target.modelSpec();
  ps::core::CostProfile profile = *o.profile;
  if (profile.name.empty()) profile.name = spec.toStdString();
  lastName_ = QString::fromStdString(profile.name);
  const size_t layers = profile.layers.size();
  if (doc_) doc_->setProfile(profile, tr("Profile %1").arg(spec));

  const QString stored = storeInSession();
  saveButton_->setEnabled(true);
  const QString msg = tr("Profiled %1 on %2: %3 layers, now the document's cost profile")
                          .arg(spec, o.request.target.targetName())
                          .arg(layers);
  // The measured numbers, as the CLI's table prints them.
  appendLog(QStringLiteral("%1 %2 %3 %4")
                .arg(tr("layer"), -14)
                .arg(tr("F ms"), 10)
                .arg(tr("I ms"), 10)
                .arg(tr("W ms"), 10));
  for (const auto& l : profile.layers)
    appendLog(QStringLiteral("%1 %2 %3 %4")
                  .arg(QString::fromStdString(l.name), -14)
                  .arg(msValue(l.forwardMs), 10)
                  .arg(msValue(l.backwardInputMs), 10)
                  .arg(msValue(l.backwardWeightMs), 10));
  status_->setText(msg + stored + QLatin1Char('.'));
  Q_EMIT profileApplied(msg);
}

// The open session (writable) keeps the profile as a profiled one: what the status line says
// about it ("" when there is no session).
QString ProfileDialog::storeInSession() {
  QString session = sessionPath_;
  if (host_) session = host_->session() ? host_->session()->writablePath() : QString();
  lastStored_ = 0;
  if (session.isEmpty()) return {};
  auto store = ps::sessions::SessionStore::open(session.toStdString());
  ps::core::Result<ps::sessions::Id> id =
      store ? store->addProfile(lastName_.toStdString(), lastJson_.toStdString(),
                                ps::sessions::ProfileSource::Profiled)
            : ps::core::Result<ps::sessions::Id>(store.errors());
  if (!id)
    return tr("; not stored in the session: %1")
        .arg(QString::fromStdString(ps::core::formatDiagnostics(id.errors())).trimmed());
  lastStored_ = *id;
  Q_EMIT profileStored(session, *id);
  return tr("; stored in the session as profile %1").arg(*id);
}

bool ProfileDialog::saveJson(const QString& path, QString* error) const {
  QFile f(path);
  if (lastJson_.isEmpty() || !f.open(QIODevice::WriteOnly | QIODevice::Truncate) ||
      f.write(lastJson_) != lastJson_.size()) {
    if (error) *error = lastJson_.isEmpty() ? tr("no profile yet") : f.errorString();
    return false;
  }
  return true;
}

void ProfileDialog::saveJsonAs() {
  QString name = lastName_;
  name.replace(QRegularExpression(QStringLiteral("[^A-Za-z0-9_.-]+")), QStringLiteral("_"));
  const QString path = QFileDialog::getSaveFileName(
      this, tr("Save Cost Profile"), name + QStringLiteral(".json"), tr("Cost profile (*.json)"));
  if (path.isEmpty()) return;
  QString error;
  status_->setText(saveJson(path, &error) ? tr("Saved %1.").arg(path)
                                          : tr("Cannot save %1: %2").arg(path, error));
}

void ProfileDialog::closeEvent(QCloseEvent* e) {
  if (controller_->isActive()) controller_->cancel();
  QDialog::closeEvent(e);
}

}  // namespace ps::ui
