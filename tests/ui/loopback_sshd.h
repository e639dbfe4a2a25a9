#pragma once
// A real OpenSSH server on a loopback address at a high port, started and stopped by a test,
// with throw-away keys (host key, user key, a wrong key) in the test's temporary folder and a
// known_hosts file that trusts it, so BatchMode needs no prompt and the key is really checked.
// Several can run at once (127.0.0.1, 127.0.0.2, ...: one "host" each), sharing the keys and
// known_hosts. start() says why when sshd cannot run here (no openssh-server, not allowed).
#include <pwd.h>
#include <unistd.h>

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QString>
#include <QStringList>

namespace runtest {

class LoopbackSshd {
 public:
  LoopbackSshd() = default;
  LoopbackSshd(const LoopbackSshd&) = delete;
  LoopbackSshd& operator=(const LoopbackSshd&) = delete;
  ~LoopbackSshd() { stop(); }

  static QString userName() {
    if (const passwd* pw = getpwuid(getuid())) return QString::fromLocal8Bit(pw->pw_name);
    return QString::fromLocal8Bit(qgetenv("USER"));
  }

  // host_key, user_key, wrong_key and authorized_keys (the user key) in `dir`, once.
  static bool makeKeys(const QString& dir, QString& why) {
    if (!QFileInfo(QStringLiteral("/usr/sbin/sshd")).isExecutable()) {
      why = QStringLiteral("/usr/sbin/sshd is not installed (openssh-server)");
      return false;
    }
    for (const char* k : {"host_key", "user_key", "wrong_key"}) {
      if (QFileInfo::exists(QDir(dir).filePath(QLatin1String(k)))) continue;
      QString err;
      if (!run(QStringLiteral("ssh-keygen"),
               {"-q", "-t", "ed25519", "-N", "", "-f", QDir(dir).filePath(QLatin1String(k))}, &err)) {
        why = QStringLiteral("ssh-keygen failed: ") + err;
        return false;
      }
    }
    QFile::copy(QDir(dir).filePath(QStringLiteral("user_key.pub")),
                QDir(dir).filePath(QStringLiteral("authorized_keys")));
    return true;
  }

  // Starts sshd on `address` (keys from makeKeys in `dir`) and adds it to dir/known_hosts.
  bool start(const QString& dir, const QString& address, QString& why) {
    dir_ = dir;
    address_ = address;
    if (!makeKeys(dir, why)) return false;
    // sshd refuses to start without its privilege separation directory.
    QDir().mkpath(QStringLiteral("/run/sshd"));
    const QString tag = QString(address).replace(QLatin1Char('.'), QLatin1Char('_'));
    const int salt = static_cast<int>(qHash(address) % 7919);
    for (int attempt = 0; attempt < 5; ++attempt) {
      port_ = 20000 + static_cast<int>((::getpid() * 7 + attempt * 977 + salt * 13) % 30000);
      const QString cfgPath = path(QStringLiteral("sshd_config_") + tag);
      QFile cfg(cfgPath);
      if (!cfg.open(QIODevice::WriteOnly | QIODevice::Truncate)) {
        why = QStringLiteral("cannot write sshd_config");
        return false;
      }
      cfg.write(
          QStringLiteral("Port %1\nListenAddress %5\nHostKey %2\nPidFile %3\nAuthorizedKeysFile %4\n"
                         "StrictModes no\nPubkeyAuthentication yes\nPasswordAuthentication no\n"
                         "KbdInteractiveAuthentication no\nUsePAM no\nPermitRootLogin prohibit-password\n"
                         "LogLevel INFO\n")
              .arg(port_)
              .arg(path(QStringLiteral("host_key")),
                   path(QStringLiteral("sshd_") + tag + QStringLiteral(".pid")),
                   path(QStringLiteral("authorized_keys")), address)
              .toUtf8());
      cfg.close();
      sshd_.setProcessChannelMode(QProcess::MergedChannels);
      sshd_.start(QStringLiteral("/usr/sbin/sshd"), {"-D", "-e", "-f", cfgPath});
      if (!sshd_.waitForStarted(5000)) {
        why = QStringLiteral("sshd did not start: ") + sshd_.errorString();
        return false;
      }
      QByteArray log;
      QElapsedTimer t;
      t.start();
      while (t.elapsed() < 10000 && sshd_.state() == QProcess::Running && !log.contains("Server listening")) {
        sshd_.waitForReadyRead(200);
        log += sshd_.readAll();
      }
      if (log.contains("Server listening")) {
        QFile pub(path(QStringLiteral("host_key.pub")));
        QFile known(knownHosts());
        if (!pub.open(QIODevice::ReadOnly) || !known.open(QIODevice::WriteOnly | QIODevice::Append))
          return false;
        known.write(QStringLiteral("[%1]:%2 ").arg(address).arg(port_).toUtf8() + pub.readAll());
        return true;
      }
      sshd_.kill();
      sshd_.waitForFinished(3000);
      why = QStringLiteral("sshd did not start listening: ") + QString::fromUtf8(log).trimmed();
      if (!log.contains("Address already in use")) return false;
    }
    return false;
  }

  // Ends the listening sshd (sessions it started end on their own).
  void stop() {
    if (sshd_.state() == QProcess::NotRunning) return;
    sshd_.terminate();
    if (!sshd_.waitForFinished(5000)) sshd_.kill();
    sshd_.waitForFinished(3000);
  }

  bool running() const { return sshd_.state() == QProcess::Running; }
  int port() const { return port_; }
  QString address() const { return address_; }
  QString path(const QString& name) const { return QDir(dir_).filePath(name); }
  QString knownHosts() const { return path(QStringLiteral("known_hosts")); }
  QString userKey() const { return path(QStringLiteral("user_key")); }
  // The ssh -o options that trust only this test's known_hosts.
  QStringList sshOptions() const {
    return {QStringLiteral("UserKnownHostsFile=") + knownHosts(),
            QStringLiteral("StrictHostKeyChecking=yes")};
  }

  static bool run(const QString& program, const QStringList& args, QString* err = nullptr) {
    QProcess p;
    p.start(program, args);
    if (!p.waitForFinished(30000) || p.exitStatus() != QProcess::NormalExit || p.exitCode() != 0) {
      if (err) *err = program + ": " + QString::fromUtf8(p.readAllStandardError()) + p.errorString();
      return false;
    }
    return true;
  }

 private:
  QProcess sshd_;
  QString dir_;
  QString address_;
  int port_ = 0;
};

}  // namespace runtest
