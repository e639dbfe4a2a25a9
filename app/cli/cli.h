#pragma once
// Subcommand registry of pipestudio-cli: each app/cli/<name>.cpp registers one
// subcommand with a static CommandRegistrar, so adding a command touches one file.
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

namespace ps::cli {

// Exit codes shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInvalid = 1;  // input parsed but is invalid (diagnostics printed)
inline constexpr int kExitUsage = 2;    // bad flags, unreadable file
// 3: internal error (an exception escaped a subcommand).
inline constexpr int kExitEngine = 4;   // pipestudio-engine (run, profile) not found or mismatched

struct Command {
  std::string name;
  std::string summary;  // one line for `pipestudio-cli --help`
  std::string usage;    // full usage text for `pipestudio-cli NAME --help`
  std::function<int(const std::vector<std::string>& args)> run;  // args exclude the name
};

std::vector<Command>& registry();

struct CommandRegistrar {
  explicit CommandRegistrar(Command c) { registry().push_back(std::move(c)); }
};

// Small argument scanner shared by subcommands: flags `--name value`, `--name=value`,
// boolean `--name`, and positionals. Unknown flags are usage errors.
class Args {
 public:
  Args(const std::vector<std::string>& args, std::vector<std::string> valueFlags,
       std::vector<std::string> boolFlags);
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  bool has(const std::string& flag) const;
  std::string value(const std::string& flag, const std::string& fallback = {}) const;
  std::vector<std::string> values(const std::string& flag) const;  // repeated flags
  const std::vector<std::string>& positionals() const { return positionals_; }

 private:
  std::vector<std::pair<std::string, std::string>> flags_;
  std::vector<std::string> positionals_;
  std::string error_;
};

// Reads a whole file, or stdin when path is "-". Returns false and sets error on failure.
bool readInput(const std::string& path, std::string& out, std::string& error);
// Writes a file, or stdout when path is "-" or empty.
bool writeOutput(const std::string& path, const std::string& text, std::string& error);
// One line (a newline added) in one write where the pipe allows: a process killed mid-stream
// never leaves half a line (pipes take writes up to PIPE_BUF whole; longer lines are rare and
// still written in one call). Errors end the write silently (the reader is gone).
void writeLine(int fd, const std::string& line);
// A run-event line on stdout, after whatever std::cout holds (the human text before it).
void emitEventLine(const std::string& line);

}  // namespace ps::cli
