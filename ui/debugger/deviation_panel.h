#pragma once
// The Deviation dock: measured-versus-planned error tables (overall, per kind, per device)
// from compareTimelines, shown while a measured overlay is set.
#include <QWidget>

class QLabel;
class QTableWidget;

namespace ps::core {
struct Comparison;
}

namespace ps::ui {

class DeviationPanel : public QWidget {
  Q_OBJECT
 public:
  explicit DeviationPanel(QWidget* parent = nullptr);
  // Null clears the tables.
  void setComparison(const ps::core::Comparison* c);
  QTableWidget* table() const { return table_; }
  QString headline() const;

 private:
  QLabel* headline_ = nullptr;
  QTableWidget* table_ = nullptr;
};

}  // namespace ps::ui
