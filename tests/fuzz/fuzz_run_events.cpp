// libFuzzer target: the engine's JSON-lines run-event stream, fed in uneven pieces.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "pipestudio/core/io/run_events.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  ps::core::RunEventReader r("fuzz.jsonl");
  // Pieces of 1, 2, 3, ... bytes: lines split across reads as a pipe splits them.
  size_t piece = 1;
  while (!bytes.empty()) {
    size_t n = std::min(piece++, bytes.size());
    r.feed(bytes.substr(0, n));
    bytes.remove_prefix(n);
  }
  r.end();
  (void)r.timeline();
  return 0;
}
