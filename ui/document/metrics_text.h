#pragma once
// A schedule whose simulation does not finish (a deadlock, an order the simulator cannot
// complete, a model it cannot build) has no makespan, bubble or peak memory: its partial
// figures are smaller than any real schedule's and must never read as an improvement. These
// helpers say how far it got instead, the same way in the Summary, the status bar, the drag
// preview and the search table.
#include <QString>
#include <cstddef>

namespace ps::ui {

struct Analysis;

struct SimulationProgress {
  bool finished = true;
  double stalledAt = 0;   // ms: the last simulated op's end
  std::size_t done = 0;   // ops simulated
  std::size_t total = 0;  // ops in the schedule
};

SimulationProgress simulationProgress(const Analysis& a);
// "stalled at 14.33 ms, 40 of 64 ops done"
QString stalledText(const SimulationProgress& p);
// "not available (stalled at 14.33 ms, 40 of 64 ops done)"
QString notAvailableText(const SimulationProgress& p);
// The makespan for a status line: "36.49 ms" or "not available (stalled at …)".
QString makespanText(const Analysis& a);

}  // namespace ps::ui
