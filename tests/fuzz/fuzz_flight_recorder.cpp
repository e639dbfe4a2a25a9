// libFuzzer target: a flight-recorder dump (pickle or JSON, postmortem's input) read, and when it
// reads, mapped against a two-rank plan as rank 0's and rank 1's dump.
#include <cstddef>
#include <cstdint>
#include <string>

#include "pipestudio/core/io/flight_recorder.h"
#include "pipestudio/core/io/flight_recorder_hang.h"
#include "pipestudio/core/io/pytorch_csv.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ps::core;
  static const Schedule plan = *readPytorchCsv(
      "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
      "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n");
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto dump = readFlightRecorderDump(bytes, "fuzz_rank0", 0);
  if (!dump.ok()) return 0;
  FlightRecorderDump other = *dump;
  other.rank = 1;
  auto reading = readHangFromFlightRecorder(plan, {*dump, other});
  if (reading.ok() && reading->ranks.size() != 2) __builtin_trap();
  return 0;
}
