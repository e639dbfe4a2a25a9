#pragma once
// The Deviation dock: measured-versus-planned error tables (overall, per kind, per device)
// from compareTimelines, shown while a measured overlay is set. The headline says what the
// plan was simulated with, and for a plan whose simulation stalls that it has no makespan and
// which measured ops it never reached (they are in the plan, not "not in the plan").
#include <QString>
#include <QWidget>

#include "document/metrics_text.h"

class QLabel;
class QTableWidget;

namespace ps::core {
struct Comparison;
}

namespace ps::ui {

// What the comparison is against, beyond the Comparison itself.
struct PlanContext {
  SimulationProgress progress;  // of the plan's simulation
  int notReached = 0;           // measured ops in the plan that its stalled simulation never reached
  int notInPlan = 0;            // measured ops the plan does not have (e.g. measured SEND/RECV)
  QString costModel;            // the profile's name
  bool defaultModel = false;    // the designer's uniform default, not a measured or chosen profile
};

class DeviationPanel : public QWidget {
  Q_OBJECT
 public:
  explicit DeviationPanel(QWidget* parent = nullptr);
  // Null clears the tables.
  void setComparison(const ps::core::Comparison* c, const PlanContext& plan = {});
  QTableWidget* table() const { return table_; }
  QString headline() const;

 private:
  QLabel* headline_ = nullptr;
  QTableWidget* table_ = nullptr;
};

}  // namespace ps::ui
