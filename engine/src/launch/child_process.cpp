#include "launch/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdlib>

namespace ps::engine::detail {

bool openPipe(Pipe& p) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return false;
  p.read = fds[0];
  p.write = fds[1];
  return true;
}

void closeFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

pid_t startChild(const ChildSpec& spec) {
  // Everything the child needs is made before the fork: it only calls what is safe there.
  std::vector<char*> argv;
  argv.reserve(spec.argv.size() + 1);
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid != 0) return pid;
  // The child. It ends with its parent (a cancel, a crash): the parent-death signal, and for a
  // parent that died before prctl took effect, the check that it is still the parent.
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) _exit(130);
  // Copies above every target first, so that a target that is another mapping's source is not
  // overwritten before it is copied; dup2 then clears close-on-exec on the targets.
  std::vector<std::pair<int, int>> moved;
  for (const auto& [target, source] : spec.fds) {
    const int copy = fcntl(source, F_DUPFD_CLOEXEC, 10);
    if (copy < 0) _exit(127);
    moved.emplace_back(target, copy);
  }
  for (const auto& [target, copy] : moved)
    if (dup2(copy, target) < 0) _exit(127);
  for (const auto& [name, value] : spec.environment) setenv(name.c_str(), value.c_str(), 1);
  if (spec.discardStdout) {
    const int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, STDOUT_FILENO);
  }
  if (spec.ownProcessGroup) setpgid(0, 0);
  if (spec.defaultSigpipe) signal(SIGPIPE, SIG_DFL);
  if (spec.searchPath)
    execvp(argv[0], argv.data());
  else
    execv(argv[0], argv.data());
  if (!spec.execFailedMessage.empty())
    (void)!::write(2, spec.execFailedMessage.data(), spec.execFailedMessage.size());
  _exit(127);
}

}  // namespace ps::engine::detail
