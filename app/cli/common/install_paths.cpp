#include "common/install_paths.h"

#include <unistd.h>

#include <filesystem>

#ifndef PIPESTUDIO_DATA_RELDIR
#define PIPESTUDIO_DATA_RELDIR "../share/pipestudio"
#endif

namespace ps::cli {

std::string selfDirectory() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  buf[n] = '\0';
  return std::filesystem::path(buf).parent_path().string();
}

std::string dataDirectory() {
  return (std::filesystem::path(selfDirectory()) / PIPESTUDIO_DATA_RELDIR).lexically_normal().string();
}

}  // namespace ps::cli
