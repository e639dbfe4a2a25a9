#pragma once
// The critical path of a timeline and the attribution of each device's idle gaps (bubbles):
// what set the makespan and what every wait waited for. Over any Timeline (simulated,
// measured, imported), judged by the plan's dependency rules.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

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
  size_t op = 0;  // index into Timeline::ops
  CriticalLink via = CriticalLink::Start;
  std::optional<size_t> transfer;  // index into Timeline::transfers (cross-device dependency)
  double arrival = 0;              // when what it waited for was there (its own start for Start)
  double waitMs = 0;               // start - arrival: idle time not explained by the chain
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
  std::optional<size_t> before;  // the op that ran after the gap (none for Tail)
  // Dependency: the input the device waited for.
  Op waitedFor;
  std::optional<size_t> waitedOp;  // its index in Timeline::ops
  int waitedOnDevice = -1;
  std::optional<size_t> transfer;  // the transfer that carried it, when recorded
};

struct DeviceWait {
  int device = 0;  // the device waited on
  double ms = 0;
};

struct DeviceBubbles {
  int device = 0;
  double idleMs = 0;  // makespan minus the time the device was busy (any op running)
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

}  // namespace ps::core
