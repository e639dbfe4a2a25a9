#include "document/metrics_text.h"

#include <QCoreApplication>
#include <algorithm>

#include "document/schedule_document.h"
#include "widgets/units_text.h"

namespace ps::ui {

namespace {
QString tr(const char* s) {
  return QCoreApplication::translate("ps::ui::MetricsText", s);
}
}  // namespace

SimulationProgress simulationProgress(const Analysis& a) {
  SimulationProgress p;
  p.total = a.schedule.opCount();
  p.done = a.timeline.ops.size();
  for (const auto& op : a.timeline.ops) p.stalledAt = std::max(p.stalledAt, op.end);
  // A timeline that stopped early, or none at all for a schedule with ops (the model could
  // not be built or the simulation failed), has not finished.
  p.finished = a.timeline.complete && !(p.total > 0 && p.done == 0);
  return p;
}

QString stalledText(const SimulationProgress& p) {
  return tr("stalled at %1, %2 of %3 ops done").arg(msText(p.stalledAt)).arg(p.done).arg(p.total);
}

QString notAvailableText(const SimulationProgress& p) {
  return tr("not available (%1)").arg(stalledText(p));
}

QString makespanText(const Analysis& a) {
  const SimulationProgress p = simulationProgress(a);
  return p.finished ? msText(a.makespan()) : notAvailableText(p);
}

}  // namespace ps::ui
