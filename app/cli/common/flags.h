#pragma once
// Values of flags, read one way by every subcommand: whole numbers, numbers, lists, byte sizes
// and times (the last two by core/io/units, so "80GiB" and "2.5ms" read as in the GUI and the
// DSL). Each returns nullopt when the text is not a whole value of its kind.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/command.h"
#include "pipestudio/core/analysis/comm_semantics.h"
#include "pipestudio/core/analysis/pytorch_lowering.h"

namespace ps::cli {

// A whole decimal number in [min, max], nothing before or after it.
std::optional<int> parseInt(std::string_view text, int min = std::numeric_limits<int>::min(),
                            int max = 1'000'000'000);
// parseInt into `out`; false (out untouched) when the text is not such a number.
bool readInt(std::string_view text, int min, int& out);
// A finite decimal number of at least `min`.
std::optional<double> parseNumber(std::string_view text, double min = std::numeric_limits<double>::lowest());
// Comma-separated whole numbers of at least `min` ("3,4,4,5"): at least one.
std::optional<std::vector<int>> parseIntList(std::string_view text,
                                             int min = std::numeric_limits<int>::min());
// A non-negative byte size: "85899345920", "80GiB", "40GB", "512M".
std::optional<std::int64_t> parseBytes(std::string_view text);
// A non-negative time in ms: "2.5", "2.5ms", "300us", "1.5s".
std::optional<double> parseMs(std::string_view text);

// "pipe" or "csv" from `path`'s extension (.pipe, .csv), else `fallback`.
std::string formatOfPath(const std::string& path, const std::string& fallback);

// --memory-limit BYTES into `out` when given; false, with the reason printed, when bad.
bool memoryLimitFlag(const Args& args, const Reporter& reporter, std::optional<std::int64_t>& out);

// --comm, which may be given twice: a communication semantics (posted, nccl, dualpipe:
// comm_semantics.h) and/or a fixed time per cross-device transfer ("0.1", "2ms"); --batch-p2p:
// consecutive SEND/RECV of a rank are one batch_isend_irecv.
struct CommFlags {
  std::optional<core::CommSemantics> semantics;  // named on the command line
  bool batchConsecutive = false;
  std::optional<double> fixedMs;
  // The semantics that applies to `s` (the named one, else defaultCommSemantics) and the line
  // that says which and why ("communication: nccl (a compute+comms CSV, ...)").
  core::CommOptions optionsFor(const core::Schedule& s, bool fromPytorchCsv) const;
  std::string lineFor(const core::Schedule& s, bool fromPytorchCsv) const;
};
// nullopt (the usage error printed, `code` set) for a value that is neither.
std::optional<CommFlags> commFlags(const Args& args, const Reporter& reporter, int& code);

// --pytorch VERSION (2.11 to 2.15, default 2.11) and, where a command takes it, --defer-recv
// pytorch|safe (where a compute+comms order's receives go: 2.13 and later; alone it means 2.15):
// the PyTorch whose compute+comms form is meant. nullopt (the usage error printed, `code` set)
// for a bad value.
std::optional<core::PytorchTarget> pytorchTargetFlags(const Args& args, const Reporter& reporter, int& code);

}  // namespace ps::cli
