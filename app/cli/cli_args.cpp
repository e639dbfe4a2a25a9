// Shared by pipestudio-cli and pipestudio-engine: the subcommand registry, the argument
// scanner and file/stdin helpers of cli.h.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "cli.h"

namespace ps::cli {

std::vector<Command>& registry() {
  static std::vector<Command> commands;
  return commands;
}

Args::Args(const std::vector<std::string>& args, std::vector<std::string> valueFlags,
           std::vector<std::string> boolFlags) {
  auto contains = [](const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() > 1 && a[0] == '-' && a != "-") {
      std::string name = a;
      std::string val;
      bool hasInline = false;
      if (auto eq = a.find('='); eq != std::string::npos) {
        name = a.substr(0, eq);
        val = a.substr(eq + 1);
        hasInline = true;
      }
      if (contains(boolFlags, name)) {
        if (hasInline) {
          error_ = "flag " + name + " takes no value";
          return;
        }
        flags_.emplace_back(name, "");
      } else if (contains(valueFlags, name)) {
        if (!hasInline) {
          if (i + 1 >= args.size()) {
            error_ = "flag " + name + " needs a value";
            return;
          }
          val = args[++i];
        }
        flags_.emplace_back(name, val);
      } else {
        error_ = "unknown flag " + name;
        return;
      }
    } else {
      positionals_.push_back(a);
    }
  }
}

bool Args::has(const std::string& flag) const {
  return std::any_of(flags_.begin(), flags_.end(), [&](auto& p) { return p.first == flag; });
}

std::string Args::value(const std::string& flag, const std::string& fallback) const {
  for (auto it = flags_.rbegin(); it != flags_.rend(); ++it)
    if (it->first == flag) return it->second;
  return fallback;
}

std::vector<std::string> Args::values(const std::string& flag) const {
  std::vector<std::string> out;
  for (auto& p : flags_)
    if (p.first == flag) out.push_back(p.second);
  return out;
}

bool readInput(const std::string& path, std::string& out, std::string& error) {
  if (path == "-") {
    out.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    return true;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = path + ": cannot open file";
    return false;
  }
  // One read into a string of the file's size (no stream buffer growing and copying).
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(0, std::ios::beg);
  if (size > 0) {
    out.resize(static_cast<size_t>(size));
    in.read(out.data(), size);
    out.resize(static_cast<size_t>(in.gcount()));
    return true;
  }
  in.clear();  // not seekable (a pipe, /dev/stdin): read it as a stream
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

void writeLine(int fd, const std::string& line) {
  const std::string s = line + "\n";
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

void emitEventLine(const std::string& line) {
  std::cout.flush();
  writeLine(STDOUT_FILENO, line);
}

bool writeOutput(const std::string& path, const std::string& text, std::string& error) {
  if (path.empty() || path == "-") {
    std::cout << text;
    std::cout.flush();
    return true;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    error = path + ": cannot write file";
    return false;
  }
  out << text;
  if (!out) {
    error = path + ": write failed";
    return false;
  }
  return true;
}

}  // namespace ps::cli
