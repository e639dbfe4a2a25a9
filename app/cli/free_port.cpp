// pipestudio-cli free-port: prints a TCP port that is free on this host. A cluster run
// (`run --hosts`) asks its first host for one over ssh and makes it the ranks' MASTER_PORT
// (rank 0's c10d store listens there).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <iostream>

#include "cli.h"

namespace {

const char* kUsage =
    "usage: pipestudio-cli free-port\n\n"
    "Prints a TCP port no socket of this host listens on (the kernel's choice of an ephemeral\n"
    "port on all addresses). `run --hosts` asks the first host for one: its rank 0 hosts the\n"
    "rendezvous store there (MASTER_PORT).\n";

int runFreePort(const std::vector<std::string>& args) {
  if (!args.empty()) {
    std::cerr << "pipestudio-cli free-port: takes no arguments\n" << kUsage;
    return ps::cli::kExitUsage;
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::cerr << "pipestudio-cli free-port: cannot bind a TCP socket\n";
    if (fd >= 0) ::close(fd);
    return ps::cli::kExitInvalid;
  }
  std::cout << ntohs(addr.sin_port) << "\n";
  ::close(fd);
  return ps::cli::kExitOk;
}

const ps::cli::CommandRegistrar kRegister{
    {"free-port", "print a free TCP port of this host (a cluster run's MASTER_PORT)", kUsage, runFreePort}};

}  // namespace
