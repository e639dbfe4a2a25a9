// Fork/exec of local ranks. The parent only starts, forwards signals and waits; the ranks
// find each other through the TCPStore that rank 0 hosts on MASTER_PORT.
#include "pipestudio/engine/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>

namespace ps::engine {

namespace {
std::vector<pid_t> g_children;
volatile sig_atomic_t g_forwarded = 0;

void forwardSignal(int sig) {
  g_forwarded = sig;
  for (pid_t p : g_children)
    if (p > 0) kill(p, sig);
}

std::optional<int> envInt(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end != '\0') return -1;
  return static_cast<int>(x);
}
}  // namespace

int pickFreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  int port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

core::Result<std::optional<DistributedOptions>> distributedFromEnvironment() {
  auto rank = envInt("RANK"), world = envInt("WORLD_SIZE");
  if (!rank || !world) return std::optional<DistributedOptions>{};
  DistributedOptions d;
  d.rank = *rank;
  d.worldSize = *world;
  if (d.worldSize < 1 || d.rank < 0 || d.rank >= d.worldSize)
    return core::makeError("engine.distributed", "RANK " + std::to_string(d.rank) + " / WORLD_SIZE " +
                                                     std::to_string(d.worldSize) + " do not make a rank");
  if (const char* a = std::getenv("MASTER_ADDR"); a && *a) d.masterAddr = a;
  if (auto p = envInt("MASTER_PORT")) d.masterPort = *p;
  if (auto l = envInt("LOCAL_WORLD_SIZE"); l && *l >= 1) d.localWorldSize = *l;
  if (d.masterPort <= 0 || d.masterPort > 65535)
    return core::makeError("engine.distributed", "MASTER_PORT is not a port number");
  return std::optional<DistributedOptions>{d};
}

int launchLocalRanks(const std::string& program, const std::vector<std::string>& args, int nproc, double graceSeconds,
                     std::string& error) {
  const int port = pickFreePort();
  if (port == 0) {
    error = "no free TCP port on 127.0.0.1 for the ranks' store";
    return -1;
  }
  g_children.assign(static_cast<size_t>(nproc), 0);
  struct sigaction sa {};
  sa.sa_handler = forwardSignal;
  sigemptyset(&sa.sa_mask);
  struct sigaction oldInt {}, oldTerm {};
  sigaction(SIGINT, &sa, &oldInt);
  sigaction(SIGTERM, &sa, &oldTerm);
  for (int r = 0; r < nproc; ++r) {
    pid_t pid = fork();
    if (pid < 0) {
      error = std::string("fork failed: ") + std::strerror(errno);
      forwardSignal(SIGTERM);
      break;
    }
    if (pid == 0) {
      setenv("RANK", std::to_string(r).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      if (r != 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) dup2(devnull, STDOUT_FILENO);
      }
      std::vector<char*> argv;
      argv.push_back(const_cast<char*>(program.c_str()));
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(program.c_str(), argv.data());
      _exit(127);
    }
    g_children[static_cast<size_t>(r)] = pid;
  }
  std::vector<int> status(static_cast<size_t>(nproc), -1);
  int running = 0;
  for (pid_t p : g_children) running += p > 0 ? 1 : 0;
  bool killPending = false;
  auto killAt = std::chrono::steady_clock::now();
  while (running > 0) {
    int st = 0;
    pid_t pid = waitpid(-1, &st, WNOHANG);
    if (pid > 0) {
      for (size_t r = 0; r < g_children.size(); ++r)
        if (g_children[r] == pid) {
          status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
          g_children[r] = 0;
          --running;
          if (status[r] != 0 && !killPending) {
            killPending = true;
            killAt = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<long>(graceSeconds * 1000));
          }
        }
      continue;
    }
    if (killPending && std::chrono::steady_clock::now() >= killAt) {
      for (pid_t p : g_children)
        if (p > 0) kill(p, SIGKILL);
      killPending = false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  sigaction(SIGINT, &oldInt, nullptr);
  sigaction(SIGTERM, &oldTerm, nullptr);
  g_children.clear();
  if (status[0] != 0) return status[0];
  for (int s : status)
    if (s != 0) return s;
  return 0;
}

}  // namespace ps::engine
