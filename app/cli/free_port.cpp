// pipestudio-cli free-port: prints a TCP port that is free on this host. A cluster run
// (`run --hosts`) asks its first host for one over ssh and makes it the ranks' MASTER_PORT
// (rank 0's c10d store listens there).
#include <iostream>

#include "common/command.h"
#include "pipestudio/core/io/cluster.h"

namespace {

const char* kUsage =
    "usage: pipestudio-cli free-port\n\n"
    "Prints a TCP port that is free on every address of this host, picked below the kernel's\n"
    "ephemeral range so that no connection or other store takes it before rank 0 binds it.\n"
    "`run --hosts` asks the first host for one: its rank 0 hosts the rendezvous store there\n"
    "(MASTER_PORT).\n";

int runFreePort(const std::vector<std::string>& args) {
  const ps::cli::Reporter rep("free-port", kUsage);
  if (!args.empty()) return rep.usage("takes no arguments");
  const int port = ps::core::pickRendezvousPort();
  if (port == 0) return rep.fail("cannot bind a TCP socket", ps::cli::kExitInvalid);
  std::cout << port << "\n";
  return ps::cli::kExitOk;
}

const ps::cli::CommandRegistrar kRegister{
    {"free-port", "print a free TCP port of this host (a cluster run's MASTER_PORT)", kUsage, runFreePort}};

}  // namespace
