#include "remote/process_runner.h"

#include <QRegularExpression>
#include <QTimer>
#include <algorithm>

namespace ps::ui {

QString ProcessCommand::display() const {
  QStringList words{shellQuote(program)};
  for (const QString& a : arguments) words << shellQuote(a);
  return words.join(QLatin1Char(' '));
}

QString shellQuote(const QString& word) {
  static const QRegularExpression safe(QStringLiteral("^[A-Za-z0-9_@%+=:,./-]+$"));
  if (safe.match(word).hasMatch()) return word;
  QString q = word;
  q.replace(QLatin1Char('\''), QStringLiteral("'\\''"));
  return QLatin1Char('\'') + q + QLatin1Char('\'');
}

QString lastLines(const QString& text, int lines) {
  QStringList all = text.trimmed().split(QLatin1Char('\n'));
  if (all.size() > lines) all = all.mid(all.size() - lines);
  return all.join(QLatin1Char('\n'));
}

ProcessRunner::ProcessRunner(QObject* parent) : QObject(parent) {
  stopTimer_ = new QTimer(this);
  stopTimer_->setSingleShot(true);
  connect(stopTimer_, &QTimer::timeout, this, [this] {
    if (!proc_ || proc_->state() == QProcess::NotRunning) return;
    if (!terminated_) {
      terminated_ = true;
      proc_->terminate();
      stopTimer_->start(terminateMs_);
    } else {
      proc_->kill();
    }
  });
}

ProcessRunner::~ProcessRunner() {
  if (!proc_) return;
  proc_->disconnect(this);
  if (proc_->state() != QProcess::NotRunning) {
    proc_->closeWriteChannel();  // lets a remote run end through EOF
    proc_->kill();
    proc_->waitForFinished(2000);
  }
}

qint64 ProcessRunner::processId() const {
  return proc_ ? proc_->processId() : 0;
}

bool ProcessRunner::start(const ProcessCommand& c) {
  if (proc_) return false;
  command_ = c;
  stderr_.clear();
  terminated_ = false;
  stopTimer_->stop();
  proc_ = new QProcess(this);
  proc_->setProgram(c.program);
  proc_->setArguments(c.arguments);
  QProcess* p = proc_;
  // Every handler checks that its process is still the current one: a stopped child's late
  // signals must not reach the next one.
  connect(p, &QProcess::readyReadStandardOutput, this, [this, p] {
    if (p == proc_) readStdout();
  });
  connect(p, &QProcess::readyReadStandardError, this, [this, p] {
    if (p == proc_) readStderr();
  });
  connect(p, &QProcess::errorOccurred, this, [this, p](QProcess::ProcessError e) {
    if (p != proc_ || e != QProcess::FailedToStart) return;
    const QString why = p->errorString();
    release();
    Q_EMIT failedToStart(why);
  });
  connect(p, &QProcess::finished, this, [this, p](int code, QProcess::ExitStatus st) {
    if (p != proc_) return;
    readStdout();
    readStderr();
    release();
    Q_EMIT finished(code, st == QProcess::CrashExit);
  });
  p->start();
  return true;
}

void ProcessRunner::readStdout() {
  const QByteArray bytes = proc_->readAllStandardOutput();
  if (!bytes.isEmpty()) Q_EMIT stdoutReceived(bytes);
}

void ProcessRunner::readStderr() {
  const QString text = QString::fromUtf8(proc_->readAllStandardError());
  if (text.isEmpty()) return;
  stderr_ += text;
  if (stderr_.size() > stderrLimit_) stderr_ = stderr_.right(stderrLimit_);
  Q_EMIT stderrReceived(text);
}

void ProcessRunner::release() {
  stopTimer_->stop();
  if (!proc_) return;
  proc_->disconnect(this);
  if (proc_->state() != QProcess::NotRunning) {
    proc_->kill();
    proc_->waitForFinished(1000);
  }
  proc_->deleteLater();
  proc_ = nullptr;
}

void ProcessRunner::write(const QByteArray& bytes) {
  if (proc_) proc_->write(bytes);
}

void ProcessRunner::closeStdin() {
  if (proc_) proc_->closeWriteChannel();
}

void ProcessRunner::stop(int graceMs, int terminateMs) {
  if (!proc_) return;
  proc_->closeWriteChannel();
  terminateMs_ = std::max(0, terminateMs);
  if (graceMs > 0) {
    stopTimer_->start(graceMs);
    return;
  }
  terminated_ = true;
  proc_->terminate();
  stopTimer_->start(terminateMs_);
}

void ProcessRunner::kill() {
  if (proc_) proc_->kill();
}

}  // namespace ps::ui
