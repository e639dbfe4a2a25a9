#include "docks/session_controller.h"

#include <QFileInfo>

#include "pipestudio/sessions/session_store.h"

namespace ps::ui {

SessionController::SessionController(QObject* parent) : QObject(parent) {}

SessionController::~SessionController() = default;

bool SessionController::isReadOnly() const {
  return store_ && store_->readOnly();
}

bool SessionController::open(const QString& path, bool readOnly, QString* error) {
  store_.reset();
  path_.clear();
  if (!QFileInfo(path).isFile()) {
    if (error) *error = tr("Cannot open session %1: no such file").arg(path);
    Q_EMIT changed();
    return false;
  }
  sessions::OpenOptions o;
  o.mode = readOnly ? sessions::OpenMode::ReadOnly : sessions::OpenMode::ReadWrite;
  auto opened = sessions::SessionStore::open(path.toStdString(), o);
  if (!opened) {
    if (error)
      *error = tr("Cannot open session: %1")
                   .arg(QString::fromStdString(ps::core::formatDiagnostics(opened.errors())).trimmed());
    Q_EMIT changed();
    return false;
  }
  store_ = std::make_unique<sessions::SessionStore>(std::move(opened).value());
  path_ = QFileInfo(path).absoluteFilePath();
  Q_EMIT changed();
  return true;
}

void SessionController::close() {
  store_.reset();
  path_.clear();
  Q_EMIT changed();
}

}  // namespace ps::ui
