// libFuzzer target: a host file (`run --hosts`, the GUI's cluster list) parsed; what parses is
// written back and must read back the same (the GUI saves its list so), and the torchrun and
// Slurm commands printed for it are built.
#include <cstddef>
#include <cstdint>
#include <string>

#include "pipestudio/core/io/cluster.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ps::core;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto hosts = parseHostFile(text, "hosts.txt");
  if (!hosts.ok()) return 0;
  const std::string written = formatHostFile(*hosts);
  auto again = parseHostFile(written, "again");
  if (!again.ok() || again->size() != hosts->size() || formatHostFile(*again) != written) __builtin_trap();
  for (size_t i = 0; i < hosts->size(); ++i) {
    const ClusterHost& a = (*hosts)[i];
    const ClusterHost& b = (*again)[i];
    if (a.host != b.host || a.user != b.user || a.port != b.port || a.ranks != b.ranks || a.key != b.key ||
        a.cli != b.cli || a.addr != b.addr || a.sshOptions != b.sshOptions)
      __builtin_trap();
  }
  if (clusterWorldSize(*hosts) > 1 << 16) return 0;  // the printed Slurm host file has a line a rank
  const std::vector<StagedFile> files{{"s.pipe", "/tmp/s.pipe", "the schedule"}};
  (void)printLaunchCommands(*hosts, LaunchKind::Torchrun, {"/tmp/s.pipe"}, files, 29500);
  (void)printLaunchCommands(*hosts, LaunchKind::Slurm, {"/tmp/s.pipe"}, files, 29500);
  return 0;
}
