#pragma once
// Which files of a folder are the per-rank traces of one profiled step (docs/debugger.md):
//  - torchtitan: <dump>/profiling/traces/iteration_<N>/rank<R>_trace.json.gz (a folder per
//    profiled step; torchft adds a replica folder under it);
//  - Megatron-LM: <tensorboard-dir>/../torch_profile/rank-<R>.json.gz (its chakra/ beside it
//    holds execution traces, not Chrome traces, and is left alone);
//  - tensorboard_trace_handler: <dir>/<host>_<pid>.<ns>.pt.trace.json[.gz], one file per worker
//    and profiling cycle, the rank inside (distributedInfo.rank);
//  - any folder of *.json / *.json.gz files.
// Paths are read with the non-throwing std::filesystem forms: an unreadable entry or a symlink
// loop is reported in `notes`, never thrown.
#include <optional>
#include <string>
#include <vector>

#include "pipestudio/core/io/trace_import.h"
#include "pipestudio/core/model/result.h"

namespace ps::core {

struct TraceDiscoveryOptions {
  // torchtitan's iteration_<N> folder to read; default: the newest (largest N).
  std::optional<long long> step;
};

enum class TraceLayout : std::uint8_t { Files, Folder, Torchtitan, Megatron, TensorBoard };
std::string_view traceLayoutName(TraceLayout l);  // "files", "folder", "torchtitan", ...

struct TraceSelection {
  std::vector<std::string> files;  // the trace files, ranks in natural name order
  TraceLayout layout = TraceLayout::Files;
  std::vector<long long> steps;   // torchtitan: every iteration_<N> found, ascending
  std::optional<long long> step;  // torchtitan: the one chosen
  Diagnostics notes;              // what was chosen, what was skipped and why (warnings, notes)
};

// Expands the arguments: a file stands for itself, a folder for the traces of the layout found
// in it (one profiled step). Errors name the folder: nothing found, a step that does not exist
// (listing those that do), several torchft replicas under one step.
Result<TraceSelection> findTraceFiles(const std::vector<std::string>& paths,
                                      const TraceDiscoveryOptions& options = {});

// Ordered as people number files: "rank2" before "rank10".
bool naturalLess(const std::string& a, const std::string& b);

// findTraceFiles and importChromeTraces in one (files streamed from disk); the selection's
// notes are added to the timeline's diagnostics.
struct TraceImport {
  ImportedTrace trace;
  TraceSelection selection;
};
Result<TraceImport> importTraceFiles(const std::vector<std::string>& paths,
                                     const TraceImportOptions& options = {},
                                     const TraceDiscoveryOptions& discovery = {});

}  // namespace ps::core
