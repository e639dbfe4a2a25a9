#pragma once
// New from template: kind, devices, micro-batches and chunks, with a live preview of the
// generated schedule simulated under the default cost model.
#include <QDialog>
#include <optional>

#include "pipestudio/core/model/schedule.h"
#include "pipestudio/core/planning/generators.h"

class QComboBox;
class QSpinBox;
class QLabel;
class QDialogButtonBox;

namespace ps::ui {

class ScheduleDocument;
struct Analysis;
class TimelineView;
class LegendBar;

class TemplateDialog : public QDialog {
  Q_OBJECT
 public:
  explicit TemplateDialog(QWidget* parent = nullptr);

  void setKind(ps::core::ScheduleKind k);
  void setDevices(int d);
  void setMicrobatches(int m);
  void setChunks(int c);
  // The generated schedule, or nothing when the kind cannot serve these sizes.
  const std::optional<ps::core::Schedule>& schedule() const { return schedule_; }
  QString errorText() const;
  // What the dialog shows now (tests; the last accepted values come back next time).
  QString kindName() const;
  int devices() const;
  int microbatches() const;
  int chunks() const;
  // The preview's analysis under the default model (makespan, stalled or not).
  const Analysis& previewAnalysis() const;
  TimelineView* preview() const { return preview_; }
  LegendBar* legend() const { return legend_; }

 protected:
  void showEvent(QShowEvent* e) override;

 private:
  void regenerate();

  QComboBox* kind_ = nullptr;
  QSpinBox* devices_ = nullptr;
  QSpinBox* microbatches_ = nullptr;
  QSpinBox* chunks_ = nullptr;
  QLabel* info_ = nullptr;
  QDialogButtonBox* buttons_ = nullptr;
  ScheduleDocument* previewDoc_ = nullptr;
  TimelineView* preview_ = nullptr;
  LegendBar* legend_ = nullptr;
  std::optional<ps::core::Schedule> schedule_;
};

}  // namespace ps::ui
