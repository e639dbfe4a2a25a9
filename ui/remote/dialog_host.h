#pragma once
// What the Run and Profile dialogs read from the window that opens them: its document and the
// session open in it. What they have to tell (measured timelines, stored runs and profiles,
// status messages) they emit; the window connects to each dialog it adopts. The shell's
// MainWindow implements it, so remote/ never includes shell/ (the shell opens the dialogs, not
// the other way round).
class QWidget;

namespace ps::ui {

class ScheduleDocument;
class SessionController;
class RunDialog;
class ProfileDialog;

class DialogHost {
 public:
  virtual ~DialogHost() = default;

  // The dialogs' parent: one dialog of each kind per window.
  virtual QWidget* hostWidget() = 0;
  virtual ScheduleDocument* document() const = 0;
  // The session runs and profiles are stored in when it is writable (the dialogs only read it).
  virtual SessionController* session() const = 0;
  // A dialog made for this window, once: the window connects to the signals it follows.
  virtual void adopt(RunDialog* dialog) = 0;
  virtual void adopt(ProfileDialog* dialog) = 0;

 protected:
  DialogHost() = default;
  DialogHost(const DialogHost&) = default;
  DialogHost& operator=(const DialogHost&) = default;
};

}  // namespace ps::ui
