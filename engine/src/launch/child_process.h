#pragma once
// Starting a child process, once for both launchers (launcher.cpp: local ranks; cluster_launcher.cpp:
// ssh clients): close-on-exec pipes, and a fork/exec whose child dies with its parent (the
// parent-death signal, and a check that the parent did not die before it took effect), gets
// its file descriptors in place, its environment, optionally a process group of its own, and
// execs. Linux only (prctl).
#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace ps::engine::detail {

// Both ends of a pipe, close-on-exec; -1 when closed.
struct Pipe {
  int read = -1;
  int write = -1;
};
// Opens `p`; false (errno set) when the system refuses.
bool openPipe(Pipe& p);
// Closes `fd` when open and sets it to -1.
void closeFd(int& fd);

struct ChildSpec {
  std::vector<std::string> argv;  // argv[0]: the program (a path, or a name looked up in PATH)
  bool searchPath = false;        // execvp rather than execv
  // The child's descriptors: {child's fd, the parent's fd it is a copy of}. Every other
  // descriptor of the parent is closed at exec (they are all close-on-exec).
  std::vector<std::pair<int, int>> fds;
  std::vector<std::pair<std::string, std::string>> environment;  // set in the child
  bool discardStdout = false;                                    // stdout to /dev/null
  bool ownProcessGroup = false;   // a terminal's Ctrl-C reaches the parent only
  bool defaultSigpipe = false;    // SIGPIPE's default action even if the parent ignores it
  std::string execFailedMessage;  // written to the child's stderr when exec fails
};

// Forks and execs `spec`; the child's pid, or -1 (errno set) when fork fails. The child ends
// with SIGTERM when the parent dies, exits 130 when the parent is already gone, and 127 when
// its descriptors cannot be set up or the exec fails.
pid_t startChild(const ChildSpec& spec);

}  // namespace ps::engine::detail
