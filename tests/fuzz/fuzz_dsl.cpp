// libFuzzer target: the .pipe DSL (explicit and programmable form), then its printer.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "pipestudio/core/io/dsl.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  ps::core::DslOptions o;
  o.filename = "fuzz.pipe";
  // Small caps keep one input fast; the limits themselves are tested in tests/core.
  o.maxOps = 200'000;
  o.maxSteps = 1'000'000;
  auto s = ps::core::parseDsl(text, o);
  if (s.ok()) {
    std::string printed = ps::core::printDsl(*s);
    (void)ps::core::parseDsl(printed, o);
  }
  return 0;
}
