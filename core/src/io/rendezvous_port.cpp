// pickRendezvousPort (cluster.h): a port the kernel will not hand out on its own meanwhile.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <random>

#include "pipestudio/core/io/cluster.h"

namespace ps::core {

namespace {

// Binds `port` (0: the kernel's choice) on every address; returns the bound port or 0.
int bindable(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  socklen_t len = sizeof addr;
  int got = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    got = ntohs(addr.sin_port);
  ::close(fd);
  return got;
}

}  // namespace

int pickRendezvousPort() {
  constexpr int kLowest = 10000;
  int ephemeralLow = 32768;  // Linux's default when the file cannot be read
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> ephemeralLow;
  if (ephemeralLow - kLowest >= 1000) {
    std::random_device seed;
    std::mt19937 gen(seed());
    std::uniform_int_distribution<int> pick(kLowest, ephemeralLow - 1);
    for (int attempt = 0; attempt < 64; ++attempt)
      if (const int port = bindable(pick(gen)); port != 0) return port;
  }
  return bindable(0);
}

}  // namespace ps::core
