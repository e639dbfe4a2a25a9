#pragma once
// What the Run and Profile Model dialogs share: the settings they keep their choices in, the
// target picker, the model fields (model, parameters, device, micro-batch size), and below
// them the command preview, a progress bar, a status line, the CLI's log and the buttons.
#include <QDialog>
#include <QString>

#include "remote/run_controller.h"
#include "remote/target_picker.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSettings;
class QSpinBox;
class QVBoxLayout;

namespace ps::ui {

// The parameters the dialogs propose for a built-in model ("gpt", "mlp"); empty otherwise.
QString defaultModelParameters(const QString& model);
// The built-in models (item data "gpt", "mlp"), then "torchscript" when asked for.
void addModelItems(QComboBox* combo, bool torchscript);

class CommandDialog : public QDialog {
  Q_OBJECT
 public:
  ~CommandDialog() override;

  void setLocalCli(const QString& path);
  QString commandPreview() const;
  QString statusText() const;
  QString logText() const;
  QProgressBar* progressBar() const { return progress_; }
  QPushButton* cancelButton() const { return cancelButton_; }
  TargetPicker* targetPicker() const { return target_; }
  // The child's stderr as it arrives: whole lines go to the log, a partial line waits for its
  // end (a pipe cuts the stream anywhere); flushStream() logs what is left when the child ends.
  void appendStream(const QString& chunk);
  void flushStream();

 protected:
  // settings: where the host list and the last choices live (default: PipeStudio's).
  CommandDialog(QWidget* parent, QSettings* settings, TargetPicker::Mode targets);

  // The model fields (model_ .. warmup_), not yet in a layout; the model combo proposes each
  // built-in model's parameters.
  // The model, its parameters, the micro-batch size and warm-up; the device choice (cpu or
  // cuda) only with `withDevice` (the profiler runs on the CPU only).
  void buildModelFields(bool torchscript, bool withDevice);
  // optimizer_: "none" (item data "") then SGD and AdamW.
  void buildOptimizerCombo(const QString& noneText, const QString& tip);
  // Appends "Command:", the preview, progress, status, log and a row of buttons: `leading`
  // (may be null), a stretch, start, cancel and close.
  void addOutput(QVBoxLayout* v, const QString& startText, const QString& cancelText, QPushButton* leading);
  void setPreview(const QString& text);
  void appendLog(const QString& text);
  // The model fields from and into a request.
  void readModelFields(RunRequest& r) const;
  void writeModelFields(const RunRequest& r);
  virtual void updatePreview() = 0;
  // Check boxes visible on a dark palette (widgets/indicators.h), for the palette shown with.
  void showEvent(QShowEvent* e) override;

  QSettings* settings_ = nullptr;
  bool ownSettings_ = false;
  QString localCli_;
  QString pendingLine_;  // stderr after its last newline
  TargetPicker* target_ = nullptr;
  QComboBox* model_ = nullptr;
  QLineEdit* params_ = nullptr;
  QComboBox* device_ = nullptr;
  QSpinBox* microbatch_ = nullptr;
  QSpinBox* warmup_ = nullptr;  // --warmup: iterations of a run, repetitions of a profile
  QComboBox* optimizer_ = nullptr;
  QLineEdit* preview_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QLabel* status_ = nullptr;
  QPlainTextEdit* log_ = nullptr;
  QPushButton* startButton_ = nullptr;
  QPushButton* cancelButton_ = nullptr;
  QPushButton* closeButton_ = nullptr;
};

}  // namespace ps::ui
