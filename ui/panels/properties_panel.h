#pragma once
// Pipeline & cost-profile dock: the pipeline's shape, and the cost model in an editable table
// (per layer; one layer per stage for per-stage costs), device memory and the link. Every
// change is one undo command on the document.
#include <QWidget>

#include "pipestudio/core/model/cost_profile.h"

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QTableWidget;
class QPushButton;

namespace ps::ui {

class ScheduleDocument;

class PropertiesPanel : public QWidget {
  Q_OBJECT
 public:
  explicit PropertiesPanel(ScheduleDocument* doc, QWidget* parent = nullptr);
  QTableWidget* costTable() const { return table_; }
  // The inline error of the last edit ("" when it was taken), naming the field.
  QString errorText() const;

 Q_SIGNALS:
  void newFromTemplateRequested();

 private:
  void refresh();
  void commitTable(int row, int column);
  void commitScalars();
  void profileChosen(int index);
  void showError(const QString& text);
  void reject(const QString& why);

  ScheduleDocument* doc_;
  QLabel* shape_ = nullptr;
  QLabel* placement_ = nullptr;
  QComboBox* profileCombo_ = nullptr;
  QLineEdit* memory_ = nullptr;  // a byte size (core::parseByteSize; a plain number is GiB)
  QDoubleSpinBox* bandwidth_ = nullptr;
  QDoubleSpinBox* latency_ = nullptr;
  QDoubleSpinBox* host_ = nullptr;
  QTableWidget* table_ = nullptr;
  QLabel* error_ = nullptr;
  bool refreshing_ = false;
};

}  // namespace ps::ui
