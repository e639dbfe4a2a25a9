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

#include "pipestudio/core/model/result.h"
#include "pipestudio/core/model/schedule.h"
#include "pipestudio/core/model/timeline.h"

namespace ps::core {

// ---------------------------------------------------------------------------------------
// Critical path

// How one step of the critical path follows from the step before it.
enum class CriticalLink : std::uint8_t {
  Start,        // the first op of the chain: nothing it waited for
  Dependency,   // it waited for the previous step's output (maybe carried by a transfer)
  DeviceOrder,  // it waited for its device to finish the previous step
};
std::string_view criticalLinkName(CriticalLink l);  // "start", "dependency", "device"

struct CriticalStep {
  size_t op = 0;                    // index into Timeline::ops
  CriticalLink via = CriticalLink::Start;
  std::optional<size_t> transfer;   // index into Timeline::transfers (cross-device dependency)
  double arrival = 0;               // when what it waited for was there (its own start for Start)
  double waitMs = 0;                // start - arrival: idle time not explained by the chain
};

struct CriticalPath {
  std::vector<CriticalStep> steps;  // first to last; the last one ends at the makespan
  double start = 0;                 // start of the first step
  double end = 0;                   // end of the last step
  double computeMs = 0;             // sum of op durations on the chain
  double transferMs = 0;            // time between a producer's end and its transfer's arrival
  double waitMs = 0;                // sum of waits
};

// The chain of ops and transfers that set the makespan: from the last-ending op, walk back to
// whichever arrived last of its dependencies (through their transfers, when the timeline has
// them) and the previous op on its device; ties go to the dependency. Dependencies come from
// the plan's rules (DependencyGraph) applied to the timeline's ops; ops of the timeline that
// the plan lacks (e.g. measured SEND/RECV) are still chained by device order.
CriticalPath criticalPath(const Timeline& t, const Schedule& plan);

// ---------------------------------------------------------------------------------------
// Bubble attribution

enum class BubbleCause : std::uint8_t {
  Dependency,   // idle until an input arrived: waitedFor names it (op, device, transfer)
  Unexplained,  // inputs had arrived but the device stayed idle (launch gaps, host stalls)
  Tail,         // after the device's last op, until the makespan ends
};
std::string_view bubbleCauseName(BubbleCause c);  // "dependency", "unexplained", "tail"

struct Bubble {
  int device = 0;
  double start = 0;
  double end = 0;
  double duration() const { return end - start; }
  BubbleCause cause = BubbleCause::Unexplained;
  std::optional<size_t> before;     // the op that ran after the gap (none for Tail)
  // Dependency: the input the device waited for.
  Op waitedFor;
  std::optional<size_t> waitedOp;   // its index in Timeline::ops
  int waitedOnDevice = -1;
  std::optional<size_t> transfer;   // the transfer that carried it, when recorded
};

struct DeviceWait {
  int device = 0;      // the device waited on
  double ms = 0;
};

struct DeviceBubbles {
  int device = 0;
  double idleMs = 0;         // makespan minus the time the device was busy (any op running)
  double dependencyMs = 0;
  double unexplainedMs = 0;
  double tailMs = 0;
  std::vector<Bubble> bubbles;       // time-ordered
  std::vector<DeviceWait> waitedOn;  // dependency wait per producing device, largest first
};

// Each idle gap of each device, from the timeline's first start (warm-up) to its makespan end
// (tail), attributed to the dependency of the op after the gap that arrived last. A gap
// longer than that wait is split: the part until the input arrived (Dependency), the rest
// (Unexplained). Gaps shorter than minGapMs are ignored.
std::vector<DeviceBubbles> attributeBubbles(const Timeline& t, const Schedule& plan, double minGapMs = 1e-6);

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
  size_t planned = 0;    // index into the planned Timeline::ops
  size_t measured = 0;   // index into the measured Timeline::ops
  double plannedStart = 0, plannedEnd = 0;    // relative to the planned timeline's first start
  double measuredStart = 0, measuredEnd = 0;  // aligned (see Comparison::align)
  double plannedMs = 0, measuredMs = 0;       // durations as they were (not scaled)
  // measured / predicted duration; none when the plan gives the op no time.
  std::optional<double> deviation;
};

struct ErrorStats {
  std::string label;               // "F", "device 2", "all"
  std::optional<OpKind> kind;
  int device = -1;
  size_t count = 0;                // matched ops
  double plannedMs = 0;            // sum of planned durations
  double measuredMs = 0;           // sum of measured durations
  double ratio = 0;                // measuredMs / plannedMs (0 when plannedMs == 0)
  double meanAbsError = 0;         // mean |deviation - 1| over ops that have a deviation
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
  double relativeError = 0;        // (measured - planned) / planned makespan
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
  CriticalPath criticalPath;              // of the measured timeline
  std::vector<DeviceBubbles> bubbles;     // of the measured timeline
  Diagnostics diagnostics;                // e.g. ops on another device than planned
};

// Matches by (device, kind, stage, micro-batch); an op found on another device than planned
// is still matched, with a warning. `plan` names user kinds and gives the dependency rules.
Comparison compareTimelines(const Schedule& plan, const Timeline& planned, const Timeline& measured,
                            const ComparisonOptions& options = {});

// One JSON object (the `compare --json` output), op names as the DSL prints them.
std::string comparisonToJson(const Comparison& c, const Schedule& plan, const Timeline& planned,
                             const Timeline& measured);

}  // namespace ps::core
