#pragma once
// One child process of the Run and Profile Model dialogs: the CLI on this machine, or the ssh
// client that runs it on a remote host. Starts it, writes its stdin, passes stdout and stderr on
// as they arrive (keeping a bounded stderr tail: the end says why it died) and stops it in
// stages: stdin closed (the CLI's cancel on EOF, locally or through the ssh channel), then
// SIGTERM after a grace period, then SIGKILL.
#include <QByteArray>
#include <QObject>
#include <QProcess>
#include <QString>
#include <QStringList>

class QTimer;

namespace ps::ui {

struct ProcessCommand {
  QString program;
  QStringList arguments;
  QString display() const;  // shell-quoted, for logs and the dialogs' preview
};

// POSIX shell quoting: the word as one argument for sh (single quotes; ' becomes '\'').
QString shellQuote(const QString& word);
// The last `lines` lines of `text` (trimmed): the end of a log says why a process died.
QString lastLines(const QString& text, int lines);

class ProcessRunner : public QObject {
  Q_OBJECT
 public:
  explicit ProcessRunner(QObject* parent = nullptr);
  ~ProcessRunner() override;  // a child still running gets its stdin closed, then is killed

  // Starts `c` (false, nothing started, while one is running). The stderr tail starts empty.
  // A program that cannot start is reported by failedToStart (possibly before this returns).
  bool start(const ProcessCommand& c);
  bool isRunning() const { return proc_ != nullptr; }
  qint64 processId() const;  // 0 when none
  QString program() const { return command_.program; }

  void write(const QByteArray& bytes);  // buffered until the process has started
  void closeStdin();
  // Closes stdin; SIGTERM after graceMs (at once when <= 0) unless it has ended; SIGKILL
  // terminateMs after that.
  void stop(int graceMs, int terminateMs);
  void kill();  // SIGKILL now

  // The last `chars` characters of stderr are kept (default 256 KiB of text).
  void setStderrLimit(int chars) { stderrLimit_ = chars; }
  const QString& stderrTail() const { return stderr_; }
  void clearStderrTail() { stderr_.clear(); }

 Q_SIGNALS:
  void stdoutReceived(const QByteArray& bytes);
  void stderrReceived(const QString& text);
  // After all output was passed on; crashed: ended by a signal.
  void finished(int exitCode, bool crashed);
  void failedToStart(const QString& errorString);

 private:
  void readStdout();
  void readStderr();
  void release();

  QProcess* proc_ = nullptr;
  ProcessCommand command_;
  QString stderr_;
  int stderrLimit_ = 256 * 1024;
  QTimer* stopTimer_ = nullptr;
  int terminateMs_ = 0;
  bool terminated_ = false;
};

}  // namespace ps::ui
