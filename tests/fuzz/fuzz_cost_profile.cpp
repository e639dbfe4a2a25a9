// libFuzzer target: cost profile JSON, then the per-stage sums and a short simulation.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/model/cost_profile.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto p = ps::core::parseCostProfile(text, "fuzz.json");
  if (!p.ok()) return 0;
  (void)ps::core::costProfileToJson(*p);
  static const auto schedule = ps::core::parseDsl(
      "devices 2\nstages 2\nmicrobatches 2\ndevice 0: F0 F1 B0 B1\ndevice 1: F0 B0 F1 B1\n");
  int stages = static_cast<int>(std::min<size_t>(p->layers.size(), 2));
  (void)ps::core::stageCosts(*p, stages);
  if (p->layers.size() >= 2 && schedule.ok()) {
    auto m = ps::core::makeSimulationModel(*schedule, *p);
    if (m.ok()) (void)ps::core::simulate(*schedule, *m);
  }
  return 0;
}
