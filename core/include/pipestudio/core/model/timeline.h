#pragma once
// One Timeline type for simulated, measured and imported timelines: what ran where and when,
// what crossed the links, and memory per device over time. Times are milliseconds from the
// timeline's origin.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pipestudio/core/model/result.h"
#include "pipestudio/core/model/schedule.h"

namespace ps::core {

enum class TimelineSource : std::uint8_t { Simulated, Measured, Imported };
// "simulated", "measured", "imported"; an unknown name reads as Simulated.
std::string_view timelineSourceName(TimelineSource s);
TimelineSource timelineSourceFromName(std::string_view name);

struct TimelineOp {
  int device = 0;
  int step = 0;  // index in the device's step list (-1 when unknown, e.g. imported)
  Op op;
  bool overlapped = false;  // part of an overlapped pair
  double start = 0;
  double end = 0;
  double duration() const { return end - start; }
};

struct Transfer {
  int srcDevice = 0;
  int dstDevice = 0;
  Op producer;  // the op whose output travels (F: activation forward; B/I: gradient backward)
  Op consumer;  // the op that waits for it
  std::int64_t bytes = 0;
  double start = 0;
  double end = 0;
};

// Stages that are copies of one model block (Pipeline::stageBlock, DualPipe's two directions)
// sum their weight gradients before the optimizer step: a pair of copies on two devices
// exchanges its gradients once both copies' last backward (B or W) has ended.
struct CopyGradientSync {
  int block = 0;
  int stage = 0, peerStage = 0;    // the two copies
  int device = 0, peerDevice = 0;  // where they live
  std::int64_t bytes = 0;          // the gradients each side sends
  double start = 0;
  double end = 0;
};

// A point-to-point op that waited behind an earlier one of its rank's communication stream (a
// head-of-line wait: simulated under nccl and dualpipe, comm_semantics.h): from when it was
// issued until the op before it on the stream completed.
struct HeadOfLineWait {
  int device = 0;
  int step = 0;  // the op that waited: its step on the device
  Op op;
  int blockerStep = 0;  // the op it waited behind
  Op blocker;
  double start = 0;
  double end = 0;
  double duration() const { return end - start; }
};

struct MemorySample {
  double time = 0;
  std::int64_t bytes = 0;
};

struct DeviceMetrics {
  int device = 0;
  double start = 0;  // first op start
  double end = 0;    // last op end
  double busy = 0;   // sum of op durations (overlapped pairs counted once, by their span)
  double span() const { return end - start; }
  std::int64_t staticBytes = 0;
  std::int64_t peakMemoryBytes = 0;
  double peakMemoryTime = 0;
  OpRef peakMemoryOp;  // the op at the peak
  int peakInflightMicrobatches = 0;
};

struct TimelineMetrics {
  double makespan = 0;     // first start to last end over all devices
  double bubbleRatio = 0;  // 1 - sum(busy) / (devices * makespan)
  double lowerBound = 0;   // max over devices of busy
  double efficiency = 0;   // lowerBound / makespan
  size_t ops = 0;
  std::vector<DeviceMetrics> devices;
  // Head-of-line waits (Timeline::headOfLine): how many, and their summed time.
  size_t headOfLineWaits = 0;
  double headOfLineMs = 0;
  // When the last gradient exchange between block copies ends (CopyGradientSync); 0 without.
  double copySyncEnd = 0;
};

struct Timeline {
  TimelineSource source = TimelineSource::Simulated;
  std::string label;  // e.g. schedule name, run id, trace file
  int devices = 0;
  std::vector<TimelineOp> ops;  // sorted by (device, start)
  std::vector<Transfer> transfers;
  std::vector<HeadOfLineWait> headOfLine;         // sorted by (device, start)
  std::vector<CopyGradientSync> copySyncs;        // simulated, for pipelines with block copies
  std::vector<std::vector<MemorySample>> memory;  // per device, time-ordered step curve
  TimelineMetrics metrics;
  Diagnostics diagnostics;  // e.g. memory over the limit, deadlock (for a stalled simulation)
  bool complete = true;     // false for a stalled simulation or a failed/partial run
  // The communication semantics a simulation applied to explicit SEND/RECV ("posted", "nccl",
  // "dualpipe"; comm_semantics.h); empty for measured and imported timelines.
  std::string comm;
};

// OFFLOAD / RELOAD, and the data-parallel collectives UNSHARD (all-gather) and REDUCE_GRAD,
// run on a device's copy stream beside compute: they count towards span but not busy time.
bool runsOnCopyStream(OpKind k);

// Recomputes makespan, busy, span, bubble ratio, lower bound and efficiency from ops, and
// peaks from the memory curves. A micro-batch is in flight on a device from the start of its
// first F there to the end of its last B or I there (W only holds the weight-gradient share).
TimelineMetrics computeMetrics(const Timeline& t);

}  // namespace ps::core
