#pragma once
// Planned-versus-measured analysis (docs/debugger.md): matching measured ops to planned ops,
// per-op deviation, error tables, the measured critical path and bubble attribution. Pure
// functions returning immutable value structs, shared by `pipestudio-cli compare` and the
// GUI's overlay. Indices refer to the `ops` / `transfers` of the timelines passed in.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipestudio/core/analysis/critical_path.h"
#include "pipestudio/core/model/result.h"
#include "pipestudio/core/model/schedule.h"
#include "pipestudio/core/model/timeline.h"

namespace ps::core {

// ---------------------------------------------------------------------------------------
// Comparison

enum class Alignment : std::uint8_t {
  Absolute,  // both timelines start at 0; measured times kept as measured
  Scaled,    // measured times also scaled so both makespans are equal
};
std::string_view alignmentName(Alignment a);  // "absolute", "scaled"
std::optional<Alignment> alignmentFromName(std::string_view name);

struct OpMatch {
  int device = 0;
  Op op;
  size_t planned = 0;                         // index into the planned Timeline::ops
  size_t measured = 0;                        // index into the measured Timeline::ops
  double plannedStart = 0, plannedEnd = 0;    // relative to the planned timeline's first start
  double measuredStart = 0, measuredEnd = 0;  // aligned (see Comparison::align)
  double plannedMs = 0, measuredMs = 0;       // durations as they were (not scaled)
  // measured / predicted duration; none when the plan gives the op no time.
  std::optional<double> deviation;
};

struct ErrorStats {
  std::string label;  // "F", "device 2", "all"
  std::optional<OpKind> kind;
  int device = -1;
  size_t count = 0;         // matched ops
  double plannedMs = 0;     // sum of planned durations
  double measuredMs = 0;    // sum of measured durations
  double ratio = 0;         // measuredMs / plannedMs (0 when plannedMs == 0)
  double meanAbsError = 0;  // mean |deviation - 1| over ops that have a deviation
  double minDeviation = 0, maxDeviation = 0;
};

struct ComparisonOptions {
  Alignment alignment = Alignment::Absolute;
  bool analyseMeasured = true;  // also compute the measured critical path and bubbles
  double minGapMs = 1e-6;
};

struct Comparison {
  Alignment alignment = Alignment::Absolute;
  double plannedMakespan = 0;
  double measuredMakespan = 0;
  double relativeError = 0;  // (measured - planned) / planned makespan
  // Measured time m is shown at (m - measuredOrigin) * scale on the planned axis.
  double measuredOrigin = 0;
  double plannedOrigin = 0;
  double scale = 1;
  double align(double measuredTime) const { return (measuredTime - measuredOrigin) * scale; }

  std::vector<OpMatch> matches;           // in planned op order
  std::vector<size_t> unmatchedPlanned;   // planned ops the measurement lacks
  std::vector<size_t> unmatchedMeasured;  // measured ops the plan lacks (e.g. SEND/RECV)
  std::vector<ErrorStats> byKind;         // kinds in OpKind order
  std::vector<ErrorStats> byDevice;       // devices in order
  ErrorStats overall;
  CriticalPath criticalPath;           // of the measured timeline
  std::vector<DeviceBubbles> bubbles;  // of the measured timeline
  Diagnostics diagnostics;             // e.g. ops on another device than planned
};

// Matches by (device, kind, stage, micro-batch); an op found on another device than planned
// is still matched, with a warning. `plan` names user kinds and gives the dependency rules.
Comparison compareTimelines(const Schedule& plan, const Timeline& planned, const Timeline& measured,
                            const ComparisonOptions& options = {});

// The plan as PyTorch's runtime ran it. That runtime lowers a compute-only order before it runs
// it (SEND/RECV, UNSHARD/RESHARD, REDUCE_GRAD: pytorch_lowering.h) and its traces show those
// actions; when `measured` holds any and `plan` holds none, this is the plan lowered the same way,
// less the kinds the measurement never shows (PyTorch versions that add no UNSHARD/RESHARD or
// REDUCE_GRAD), so that every measured action has its planned one. nullopt when the plan is
// compared as it is; an error when it cannot be lowered.
Result<std::optional<Schedule>> loweredPlanFor(const Schedule& plan, const Timeline& measured);

// One JSON object (the `compare --json` output), op names as the DSL prints them.
std::string comparisonToJson(const Comparison& c, const Schedule& plan, const Timeline& planned,
                             const Timeline& measured);

}  // namespace ps::core
