// libFuzzer target: Chrome / torch.profiler trace import, then the stepper's plan from it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "pipestudio/core/io/trace_import.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // The first line, when short, is the file name (ranks may come from "x.rank3.json").
  std::string text(reinterpret_cast<const char*>(data), size);
  std::string name = "fuzz.json";
  if (auto nl = text.find('\n');
      nl != std::string::npos && nl < 64 && text.compare(0, 1, "{") != 0 && text.compare(0, 1, "[") != 0) {
    name = text.substr(0, nl);
    text.erase(0, nl + 1);
  }
  auto r = ps::core::importChromeTrace(text, name);
  if (r.ok()) (void)ps::core::scheduleFromTimeline(r->timeline);
  return 0;
}
