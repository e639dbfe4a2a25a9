#pragma once
// The "Iterations" spin box (1..16) and "Boundary" combo (sync / overlap) of View ›
// Iterations: how many training iterations the designer shows back to back (docs/gui.md,
// "Iterations"). They set the document's view setting; the core simulates.
#include <QPointer>
#include <QWidget>

class QComboBox;
class QSpinBox;

namespace ps::ui {

class ScheduleDocument;

class IterationsControls : public QWidget {
  Q_OBJECT
 public:
  explicit IterationsControls(ScheduleDocument* doc, QWidget* parent = nullptr);
  QSpinBox* countBox() const { return count_; }
  QComboBox* boundaryBox() const { return boundary_; }

 private:
  void apply();
  void follow();
  QPointer<ScheduleDocument> doc_;
  QSpinBox* count_ = nullptr;
  QComboBox* boundary_ = nullptr;
};

}  // namespace ps::ui
