#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "cli.h"
#include "pipestudio/core/run_events.h"

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
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
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

namespace {
void printHelp() {
  auto cmds = ps::cli::registry();
  std::sort(cmds.begin(), cmds.end(), [](auto& a, auto& b) { return a.name < b.name; });
  std::cout << "pipestudio-cli " PIPESTUDIO_VERSION
               " - design, check, simulate and run pipeline-parallel schedules\n\n"
               "usage: pipestudio-cli COMMAND [ARGS...]\n\ncommands:\n";
  for (auto& c : cmds) {
    std::cout << "  " << c.name;
    for (size_t i = c.name.size(); i < 14; ++i) std::cout << ' ';
    std::cout << c.summary << "\n";
  }
  std::cout << "\n'pipestudio-cli COMMAND --help' shows a command's options.\n";
}
}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    printHelp();
    return args.empty() ? ps::cli::kExitUsage : ps::cli::kExitOk;
  }
  if (args[0] == "--version" || args[0] == "version") {
    // Stable, parseable form (core::parseCliVersion): a GUI checks it before a run.
    std::cout << ps::core::cliVersionLine(PIPESTUDIO_VERSION) << "\n";
    return 0;
  }
  for (auto& c : ps::cli::registry()) {
    if (c.name != args[0]) continue;
    std::vector<std::string> rest(args.begin() + 1, args.end());
    if (std::find(rest.begin(), rest.end(), "--help") != rest.end() ||
        std::find(rest.begin(), rest.end(), "-h") != rest.end()) {
      std::cout << c.usage;
      return 0;
    }
    try {
      return c.run(rest);
    } catch (const std::exception& e) {
      std::cerr << "pipestudio-cli " << c.name << ": internal error: " << e.what() << "\n";
      return 3;
    }
  }
  std::cerr << "pipestudio-cli: unknown command '" << args[0] << "' (see pipestudio-cli --help)\n";
  return ps::cli::kExitUsage;
}
