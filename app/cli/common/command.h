#pragma once
// What every subcommand of pipestudio-cli (and of pipestudio-engine, which runs `run` and
// `profile`) shares: exit codes, the registry each app/cli/<name>.cpp adds itself to, the
// argument scanner, file/stdin input and output, and the way failures are reported.
#include <functional>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "pipestudio/core/model/result.h"

namespace ps::cli {

// Exit codes shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInvalid = 1;   // input parsed but is invalid (diagnostics printed)
inline constexpr int kExitUsage = 2;     // bad flags, unreadable file
inline constexpr int kExitInternal = 3;  // an exception escaped a subcommand
inline constexpr int kExitEngine = 4;    // pipestudio-engine (run, profile) not found or mismatched

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

// A subcommand's arguments, scanned by CLI11 (common/command_line.cpp, the one file that includes
// it): flags `--name value`, `--name=value`, boolean `--name`, repeated flags, and
// positionals ("-" is one: stdin or stdout). An unknown flag, a value flag without its value
// or a boolean flag given a value is a usage error, named in error().
class Args {
 public:
  Args(const std::vector<std::string>& args, const std::vector<std::string>& valueFlags,
       const std::vector<std::string>& boolFlags);
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  bool has(const std::string& flag) const;
  std::string value(const std::string& flag, const std::string& fallback = {}) const;  // the last given
  std::vector<std::string> values(const std::string& flag) const;  // repeated flags, in order
  const std::vector<std::string>& positionals() const { return positionals_; }
  const std::vector<std::string>& given() const { return given_; }  // as given, in order

 private:
  std::vector<std::string> given_;
  std::map<std::string, std::vector<std::string>> values_;  // given flags only
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

// How one subcommand reports: every message reads "pipestudio-cli NAME: ..." on stderr, and
// each helper returns the exit code to return.
class Reporter {
 public:
  Reporter(std::string command, std::string usage) : command_(std::move(command)), usage_(std::move(usage)) {}
  const std::string& command() const { return command_; }
  // The message, then the usage synopsis (the usage text up to its first blank line) and a
  // pointer to --help: kExitUsage.
  int usage(const std::string& message) const;
  // The message alone (a newline added unless it ends in one): `code` (a usage error, an
  // unreadable file, by default).
  int fail(const std::string& message, int code = kExitUsage) const;
  // Diagnostics as file:line:col with the source line when `text` is given: kExitInvalid.
  int invalid(const core::Diagnostics& diagnostics, const std::string* text = nullptr) const;
  // readInput / writeOutput, the failure reported.
  bool read(const std::string& path, std::string& text) const;
  bool write(const std::string& path, const std::string& text) const;

 private:
  std::string command_;
  std::string usage_;
};

// The synopsis of a usage text: its lines up to the first blank one.
std::string usageSynopsis(const std::string& usage);

// How many positionals a command takes, and the usage error when the count is off.
struct Positionals {
  std::size_t min = 0;
  std::size_t max = static_cast<std::size_t>(-1);
  std::string error;
};

// A command whose flags and positionals are declared with it: its arguments are scanned and
// counted, and a mistake reported with the usage, before `run` sees them. Most commands are one.
struct FlagCommand {
  std::string name;
  std::string summary;
  std::string usage;                    // for --help, and after a usage error
  std::vector<std::string> valueFlags;  // flags that take a value
  std::vector<std::string> boolFlags;   // switches
  Positionals positionals;
  std::function<int(const Args& args, const Reporter& reporter)> run;
  std::string errorUsage;  // after a usage error instead of `usage` when set
};

struct FlagCommandRegistrar {
  explicit FlagCommandRegistrar(const FlagCommand& c);
};

}  // namespace ps::cli
