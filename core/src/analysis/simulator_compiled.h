#pragma once
// The schedule flattened for the simulator's hot loop (simulator.cpp) and its builder
// (simulator_compile.cpp): flat arrays, op ids precomputed once per call. Internal to core.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "pipestudio/core/analysis/dependency_graph.h"
#include "pipestudio/core/analysis/simulator.h"

namespace ps::core::detail {

constexpr int kNone = -1;

// The memory sweep's per-op lambdas are small but called a few million times per simulation.
#if defined(__GNUC__)
#define PS_INLINE_LAMBDA __attribute__((always_inline))
#else
#define PS_INLINE_LAMBDA
#endif

// One entry of a device's order: only what the timing loop touches (24 bytes). The timing
// loop visits the devices' step lists in a wavefront that defeats the prefetcher, so its
// cost is mostly the bytes of these records and of the edges; the rest (first op, op count,
// device) lives in Compiled::stepOp and the device ranges.
struct StepRec {
  double time = 0;          // when its dependencies are ready; once scheduled, its start
  double dur = 0;           // ends at time + dur once scheduled
  int pending = 0;          // dependencies not yet scheduled
  std::uint32_t edges = 0;  // first successor in Compiled::edges (the next record's is the end), | kCopyBit
};
constexpr std::uint32_t kCopyBit = 0x80000000u;  // runs on the copy stream
constexpr std::uint32_t kEdgeMask = ~kCopyBit;

// A dependency from a producer step to a consumer step.
struct Edge {
  int consumerStep = 0;
  int consumerDevice = 0;
  // Across devices: lower stage << 2 | producer slot << 1 | consumer slot (the slot is which
  // op of a pair); -1 on one device (no transfer).
  int link = -1;
};

// An edge while the lists are built: its producer step and link (see Edge).
struct PendingEdge {
  int producerStep = 0;
  int link = -1;
};

// The schedule flattened for the hot loop. Op ids are the DependencyGraph's: device by
// device, step by step, both ops of a pair in order, so steps are contiguous per device.
struct Compiled {
  int D = 0, S = 0, M = 0;
  DependencyGraph ownGraph;            // built here unless the caller gives one
  const DependencyGraph* g = nullptr;  // ownGraph or the caller's
  std::vector<StepRec> steps;          // one more than the steps: its `edges` ends the last one's
  std::vector<int> stepOp;             // first op id of each step, then the op count
  std::vector<int> opStep;
  std::vector<char> hasCopy;     // per device: some step runs on the copy stream
  std::vector<double> linkCost;  // per lower stage: transfer time across devices
  std::vector<int> devBegin;     // steps of device d: [devBegin[d], devBegin[d + 1])
  std::vector<Edge> edges;
  std::vector<char> recomputed;  // per (stage, mb): the schedule has its R
  std::vector<int> count;
  std::vector<PendingEdge> pending;
  size_t timedTransfers = 0;  // edges across devices whose link takes time (the most transfers)
  bool anyUnshard = false;    // some step is an UNSHARD: the stage's ops wait for it
  // Memory sweep state.
  std::vector<std::int64_t> stash, offloaded;
  std::vector<int> live;

  const Op& op(int id) const { return g->op(id); }
  int stepOf(int opId) const { return opStep.empty() ? opId : opStep[static_cast<size_t>(opId)]; }
};

// Scratch reused by successive calls on one thread (the GUI re-simulates on every drag
// step): large buffers stay mapped instead of being faulted in again each time.
inline Compiled& scratch() {
  thread_local Compiled c;
  return c;
}

// Fills `c` for one simulation of `s` (with `given`, the caller's DependencyGraph of s, or one
// built into c.ownGraph): steps, their durations and dependency edges, link costs.
Status compile(const Schedule& s, const SimulationModel& model, Compiled& c, const DependencyGraph* given);

}  // namespace ps::core::detail
