// Shared by pipestudio-cli and pipestudio-engine: the subcommand registry, file/stdin input
// and output, and the Reporter of common/command.h.
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "common/command.h"
#include "pipestudio/core/io/input_limits.h"
#include "pipestudio/core/model/result.h"

namespace ps::cli {

std::vector<Command>& registry() {
  static std::vector<Command> commands;
  return commands;
}

FlagCommandRegistrar::FlagCommandRegistrar(const FlagCommand& c) {
  auto run = [c](const std::vector<std::string>& argv) {
    const Reporter reporter(c.name, c.errorUsage.empty() ? c.usage : c.errorUsage);
    const Args args(argv, c.valueFlags, c.boolFlags);
    if (!args.ok()) return reporter.usage(args.error());
    const std::size_t n = args.positionals().size();
    if (n < c.positionals.min || n > c.positionals.max) return reporter.usage(c.positionals.error);
    return c.run(args, reporter);
  };
  registry().push_back({c.name, c.summary, c.usage, std::move(run)});
}

bool readInput(const std::string& path, std::string& out, std::string& error) {
  // Regular files only, up to the input limit (docs/limits.md); stdin up to the same limit.
  auto text = path == "-" ? core::readUserStream(stdin, "stdin") : core::readUserFile(path, path);
  if (!text) {
    error = text.error().message;
    return false;
  }
  out = std::move(text).value();
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

std::string usageSynopsis(const std::string& usage) {
  const size_t end = usage.find("\n\n");
  std::string synopsis = end == std::string::npos ? usage : usage.substr(0, end + 1);
  if (!synopsis.empty() && synopsis.back() != '\n') synopsis += '\n';
  return synopsis;
}

int Reporter::usage(const std::string& message) const {
  // The mistake, the command's synopsis and where the rest is: the whole usage text after
  // every slip would bury the one line that matters.
  std::cerr << "pipestudio-cli " << command_ << ": " << message << "\n"
            << usageSynopsis(usage_) << "('pipestudio-cli " << command_
            << " --help' describes every option)\n";
  return kExitUsage;
}

int Reporter::fail(const std::string& message, int code) const {
  std::cerr << "pipestudio-cli " << command_ << ": " << message;
  if (message.empty() || message.back() != '\n') std::cerr << "\n";  // diagnostics end in one already
  return code;
}

int Reporter::invalid(const core::Diagnostics& diagnostics, const std::string* text) const {
  std::cerr << core::formatDiagnostics(diagnostics, text);
  return kExitInvalid;
}

bool Reporter::read(const std::string& path, std::string& text) const {
  std::string error;
  if (readInput(path, text, error)) return true;
  fail(error);
  return false;
}

bool Reporter::write(const std::string& path, const std::string& text) const {
  std::string error;
  if (writeOutput(path, text, error)) return true;
  fail(error);
  return false;
}

}  // namespace ps::cli
