#pragma once
// Built-in schedule generators.
#include <string>
#include <string_view>
#include <vector>

#include "pipestudio/core/schedule.h"

namespace ps::core {

enum class ScheduleKind : std::uint8_t {
  GPipe, OneFOneB, Interleaved1F1B, LoopedBFS, ZBH1, ZBH2, ZBV, DualPipeV
};

// "gpipe", "1f1b", "interleaved-1f1b", "looped-bfs", "zb-h1", "zb-h2", "zb-v", "dualpipe-v"
std::string_view scheduleKindName(ScheduleKind k);
std::optional<ScheduleKind> scheduleKindFromName(std::string_view name);
const std::vector<ScheduleKind>& allScheduleKinds();

struct GeneratorOptions {
  int devices = 1;
  int microbatches = 1;
  int chunks = 0;  // stages per device; 0 = the kind's default (1; 2 for zb-v, dualpipe-v, interleaved)
};

// A clear error naming the constraint when the kind cannot serve these sizes.
Result<Schedule> generateSchedule(ScheduleKind kind, const GeneratorOptions& options);

}  // namespace ps::core
