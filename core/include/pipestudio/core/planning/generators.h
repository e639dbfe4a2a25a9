#pragma once
// Built-in schedule generators.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipestudio/core/model/schedule.h"

namespace ps::core {

enum class ScheduleKind : std::uint8_t {
  GPipe,
  OneFOneB,
  Interleaved1F1B,
  LoopedBFS,
  ZBH1,
  ZBH2,
  ZBV,
  DualPipeV,
  DualPipe
};

// "gpipe", "1f1b", "interleaved-1f1b", "looped-bfs", "zb-h1", "zb-h2", "zb-v", "dualpipe-v",
// "dualpipe"
std::string_view scheduleKindName(ScheduleKind k);
std::optional<ScheduleKind> scheduleKindFromName(std::string_view name);
const std::vector<ScheduleKind>& allScheduleKinds();

struct GeneratorOptions {
  int devices = 1;
  int microbatches = 1;
  int chunks = 0;  // stages per device; 0 = the kind's default (defaultChunks)
};

// Stages per device when GeneratorOptions::chunks is 0: 2 for interleaved-1f1b, looped-bfs,
// zb-v and dualpipe-v; 1 otherwise (zb-h1 with more chunks is PyTorch's
// ScheduleInterleavedZeroBubble).
int defaultChunks(ScheduleKind k);

// A clear error naming the constraint when the kind cannot serve these sizes:
//   gpipe, 1f1b, zb-h2: chunks 1;  interleaved-1f1b, and zb-h1 with chunks > 1: micro-batches
//   a multiple of max(1, M / D) (PyTorch's rounds);  zb-v: chunks 2;  dualpipe-v: chunks 2 and
//   micro-batches >= 2 x devices;  dualpipe: chunks 2, even devices, even micro-batches
//   >= 2 x devices (DualPipe.step's assertions).
// Orders of the kinds PyTorch also has are PyTorch's (torch 2.11): gpipe = ScheduleGPipe,
// 1f1b = what Schedule1F1B runs, interleaved-1f1b = ScheduleInterleaved1F1B, looped-bfs =
// ScheduleLoopedBFS, zb-h1 = ScheduleInterleavedZeroBubble, zb-v = ScheduleZBVZeroBubble,
// dualpipe-v = ScheduleDualPipeV (tests/core/pytorch_orders_test.cpp). dualpipe is DeepSeek's
// DualPipe.step (deepseek-ai/DualPipe, tests/core/deepseek_dualpipe_test.cpp): a routed
// pipeline of 2·D stages in a V placement, micro-batches 0..M/2-1 down stages 0..D-1 and
// M/2..M-1 up stages D..2D-1, stage D+k a copy of stage k's block.
Result<Schedule> generateSchedule(ScheduleKind kind, const GeneratorOptions& options);

}  // namespace ps::core
