#pragma once
// Summary dock: makespan, bubble ratio, efficiency against the lower bound, and per device
// peak memory and in-flight micro-batches, next to the schedule as last saved.
#include <QSet>
#include <QTreeWidget>
#include <optional>

#include "document/metrics_text.h"
#include "pipestudio/core/analysis/iterations.h"
#include "pipestudio/core/model/timeline.h"

namespace ps::ui {

class SummaryPanel : public QTreeWidget {
  Q_OBJECT
 public:
  explicit SummaryPanel(QWidget* parent = nullptr);
  void setMetrics(const ps::core::TimelineMetrics& current, const ps::core::TimelineMetrics& saved);
  // A side whose simulation did not finish shows "n/a" and how far it got; no change is
  // computed against it (a stalled schedule is never "better").
  void setMetrics(const ps::core::TimelineMetrics& current, const ps::core::TimelineMetrics& saved,
                  const SimulationProgress& currentProgress, const SimulationProgress& savedProgress);
  // K > 1 iterations shown (nullptr: one): an "Iterations" group with the boundary and the
  // core's steady-state iteration time, added by the next setMetrics (call this first).
  void setIterations(const ps::core::IterationResult* r);
  // How "Now" relates to "Saved", for the next setMetrics (call this first). A change is shown
  // only like with like: figures simulated with another cost model are not compared; and a
  // schedule with errors now (over memory, a broken dependency) is never "better".
  struct Baseline {
    bool sameModel = true;
    QString savedModel;  // the profile the saved figures were simulated with
    int currentErrors = 0;
    QString currentProblem;  // the first error, for the note
  };
  void setBaseline(const Baseline& b) { baseline_ = b; }
  // Text of a row's "change" column by metric name (tests).
  QString changeValue(const QString& metric) const;
  // Text of a row's "current" column by metric name (tests).
  QString currentValue(const QString& metric) const;
  // The colour of a row's "change" column (tests: green better, red worse, muted neither).
  QColor changeColor(const QString& metric) const;
  // The spanned notes above the figures (tests).
  QStringList notes() const;

 protected:
  void resizeEvent(QResizeEvent* e) override;

 private:
  void addIterationRows();
  // Columns as wide as their figures (the spanned notes do not count), the change column
  // taking the rest and eliding, with the whole value in its tooltip.
  void fitColumns();
  void fitToViewport();
  int fitted_[3] = {80, 60, 60};  // columns' widths for their contents
  Baseline baseline_;
  struct IterationFigures {
    int iterations = 0;
    ps::core::IterationBoundary boundary = ps::core::IterationBoundary::Overlap;
    double steadyStateMs = 0;
    double firstIterationMs = 0;
    double maxSteadySpan = 0;
    bool complete = true;
  };
  std::optional<IterationFigures> iterations_;
  QSet<QString> collapsed_;
};

}  // namespace ps::ui
