#pragma once
// The session open in a window (docs/sessions.md): its file, whether it may be written, and its
// store. The shell owns one; the Session dock shows it, and the Run and Profile dialogs read
// where to store a run or a profile from it. Opening and closing emit changed(); a writer that
// stored something says so with written(), and the views re-read the file.
#include <QObject>
#include <QString>
#include <memory>

namespace ps::sessions {
class SessionStore;
}

namespace ps::ui {

class SessionController : public QObject {
  Q_OBJECT
 public:
  explicit SessionController(QObject* parent = nullptr);
  ~SessionController() override;

  // Opens an existing session file (the store would create a missing one): false with the
  // reason in `error`, and nothing open then. readOnly: never write to it.
  bool open(const QString& path, bool readOnly, QString* error);
  void close();

  bool hasSession() const { return store_ != nullptr; }
  bool isReadOnly() const;
  QString path() const { return path_; }  // absolute; empty without a session
  // Where a run or a profile goes: the open session when it may be written, else "".
  QString writablePath() const { return hasSession() && !isReadOnly() ? path_ : QString(); }
  ps::sessions::SessionStore* store() const { return store_.get(); }

  // Something was stored in the open session by another store object (a run, a profile).
  void notifyWritten() { Q_EMIT written(); }

 Q_SIGNALS:
  void changed();  // opened (another file) or closed
  void written();  // the open file has more in it

 private:
  std::unique_ptr<ps::sessions::SessionStore> store_;
  QString path_;
};

}  // namespace ps::ui
