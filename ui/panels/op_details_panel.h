#pragma once
// The Op dock (Perfetto's and Nsight's details panel): everything about the selected op in one
// place that stays while the pointer moves on. Its planned times (and measured ones with an
// overlay), how long it waited and for what, whether it is on the plan's critical path, the
// device's memory after it, its findings, and its flow: the inputs it waits for (the one that
// arrived last marked) and the ops that wait for it, each a click away on the timeline.
#include <QWidget>
#include <memory>

#include "pipestudio/core/analysis/critical_path.h"
#include "pipestudio/core/model/schedule.h"

class QLabel;
class QTreeWidget;
class QTreeWidgetItem;

namespace ps::ui {

class ScheduleDocument;
class TimelineView;
class MeasuredOverlay;
struct Analysis;

class OpDetailsPanel : public QWidget {
  Q_OBJECT
 public:
  // The op selected in `view`, with its measured times from `overlay`.
  OpDetailsPanel(ScheduleDocument* doc, MeasuredOverlay* overlay, TimelineView* view,
                 QWidget* parent = nullptr);
  void refresh();
  QTreeWidget* tree() const { return tree_; }
  QString headerText() const;
  // "label: value" per row, children indented (tests, copying).
  QString text() const;

 Q_SIGNALS:
  void opActivated(const ps::core::Op& op);

 protected:
  bool eventFilter(QObject* o, QEvent* e) override;

 private:
  const ps::core::CriticalPath& planCriticalPath();
  void rewrap();
  int wrappedAt_ = -1;
  ScheduleDocument* doc_;
  MeasuredOverlay* overlay_;
  TimelineView* view_;
  QLabel* header_ = nullptr;
  QTreeWidget* tree_ = nullptr;
  std::shared_ptr<const Analysis> criticalFor_;
  ps::core::CriticalPath critical_;
};

}  // namespace ps::ui
