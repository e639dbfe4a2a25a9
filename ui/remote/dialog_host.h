#pragma once
// What the Run and Profile dialogs need from the window that opens them: its document, its
// session dock, the measured overlay and the status bar. The shell's MainWindow implements it, so
// remote/ never includes shell/ (the shell opens the dialogs, not the other way round).
#include <QString>

#include "pipestudio/core/model/timeline.h"

class QWidget;

namespace ps::ui {

class ScheduleDocument;
class SessionDock;

class DialogHost {
 public:
  virtual ~DialogHost() = default;

  // The dialogs' parent: one dialog of each kind per window.
  virtual QWidget* hostWidget() = 0;
  virtual ScheduleDocument* document() const = 0;
  virtual SessionDock* sessionDock() const = 0;
  // A measured timeline over the plan (`live` while the run still streams).
  virtual void setMeasuredOverlay(const ps::core::Timeline& measured, const QString& what, bool live) = 0;
  // Opens `path` in the session dock; false (with the reason shown) when it cannot.
  virtual bool openSession(const QString& path, bool readOnly) = 0;
  virtual void showStatusMessage(const QString& message, int timeoutMs) = 0;

 protected:
  DialogHost() = default;
  DialogHost(const DialogHost&) = default;
  DialogHost& operator=(const DialogHost&) = default;
};

}  // namespace ps::ui
