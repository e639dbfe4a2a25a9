#pragma once
// State dock (docs/gui.md, "Step-through"): the state at the playhead, per device the running
// op(s), the next op and each input it still waits for (op, device, not-started / running /
// in-transit / never-ran), idle / blocked / finished, ops done of planned, micro-batches in
// flight, memory in use (measured and planned); the transfers in the air. Clicking an op
// selects it on the timeline. Below it, the breakpoints list.
#include <QWidget>
#include <optional>
#include <vector>

#include "pipestudio/core/analysis/stepper.h"
#include "pipestudio/core/model/hang_report.h"

class QLabel;
class QListWidget;
class QComboBox;
class QSpinBox;
class QTreeWidget;
class QTreeWidgetItem;

namespace ps::ui {

class StatePanel : public QWidget {
  Q_OBJECT
 public:
  explicit StatePanel(QWidget* parent = nullptr);
  // `measured`: the stepped timeline is a measured run (memory reads "measured").
  void setState(const ps::core::StepState& state, const ps::core::Stepper& stepper, bool measured);
  void clearState(const QString& why);
  // A run still in progress: what it has not measured yet is pending, not "never-ran", and
  // the end of its stream is not where it stopped.
  void setLive(bool live) { live_ = live; }
  bool isLive() const { return live_; }
  // A run the user cancelled: where it stopped is no failure, and what it never ran is not
  // missing.
  void setCancelled(bool cancelled) { cancelled_ = cancelled; }
  // A run that hung (core::findHang): where it stopped reads "Hung here", with the wait cycle,
  // and each device whose step the post-mortem names says it is stuck there.
  void setHang(std::optional<ps::core::RunHang> hang) { hang_ = std::move(hang); }

  QTreeWidget* tree() const { return tree_; }
  QString headerText() const;
  // The device's item (top level), or null.
  QTreeWidgetItem* deviceItem(int device) const;
  QTreeWidgetItem* transfersItem() const { return transfers_; }
  // Child rows of an item as "label: value" (direct children only).
  static QStringList rows(const QTreeWidgetItem* item);
  // Every row, indented by depth: for tests and copying.
  QString text() const;

 Q_SIGNALS:
  void opActivated(const ps::core::Op& op);

 private:
  bool live_ = false;
  bool cancelled_ = false;
  std::optional<ps::core::RunHang> hang_;
  QLabel* header_ = nullptr;
  QTreeWidget* tree_ = nullptr;
  QTreeWidgetItem* transfers_ = nullptr;
};

// The breakpoints list: add by device / kind / stage / micro-batch, on start or end; remove.
class BreakpointsPanel : public QWidget {
  Q_OBJECT
 public:
  explicit BreakpointsPanel(QWidget* parent = nullptr);
  void setBreakpoints(const std::vector<ps::core::Breakpoint>& bps);
  QListWidget* list() const { return list_; }
  // The breakpoint the add row describes now.
  ps::core::Breakpoint draft() const;
  void setDraft(const ps::core::Breakpoint& bp);

 Q_SIGNALS:
  void addRequested(const ps::core::Breakpoint& bp);
  void removeRequested(size_t index);

 private:
  QListWidget* list_ = nullptr;
  QSpinBox* device_ = nullptr;
  QComboBox* kind_ = nullptr;
  QSpinBox* stage_ = nullptr;
  QSpinBox* microbatch_ = nullptr;
  QComboBox* on_ = nullptr;
};

}  // namespace ps::ui
