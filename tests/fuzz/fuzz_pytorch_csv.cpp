// libFuzzer target: PyTorch pipelining CSV, read and written back.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "pipestudio/core/io/pytorch_csv.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  ps::core::CsvReadOptions o;
  o.filename = "fuzz.csv";
  auto s = ps::core::readPytorchCsv(text, o);
  if (s.ok()) (void)ps::core::writePytorchCsv(*s, ps::core::CsvFormat::ComputeComms).ok();
  return 0;
}
