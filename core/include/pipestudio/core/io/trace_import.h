#pragma once
// Import of measured timelines from Chrome trace JSON (docs/debugger.md):
//  - traces written by torch.profiler for torch.distributed.pipelining runs, whose ranges
//    for pipeline actions are named "PP:<action>" ("PP:0F1", "PP:1SEND_F0",
//    "PP:(0F7;7B3)OVERLAP_F_B"), or "Forward i" / "Backward i" as ScheduleGPipe names them;
//    one file per rank (plain or gzip) or one merged file;
//  - PipeStudio's own Chrome trace export (recognised by its metadata).
// Files are streamed: memory grows with the pipeline actions found, not with the file.
// The result is a Timeline (source Imported) whose device is the rank.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipestudio/core/model/result.h"
#include "pipestudio/core/model/schedule.h"
#include "pipestudio/core/model/timeline.h"

namespace ps::core {

// One action of torch.distributed.pipelining's _Action format: "<stage><KIND><mb>", e.g.
// "0F1", "2I0", "2W0", "1SEND_F0", "0UNSHARD" (stage-level: no micro-batch), or an
// overlapped pair "(0F7;7B3)OVERLAP_F_B".
struct PipelineAction {
  Op op;
  std::optional<Op> second;  // set for an overlapped pair
  bool overlapped() const { return second.has_value(); }
};

// Parses one action (without the "PP:" prefix). Built-in kinds only (F, B, I, W, R,
// OFFLOAD, RELOAD, SEND_F, RECV_F, SEND_B, RECV_B, UNSHARD, RESHARD, REDUCE_GRAD).
Result<PipelineAction> parsePipelineAction(std::string_view text);

// Which side of a torch.profiler trace a rank's ops are taken from. GPU-side ranges are
// the record_function ranges projected on the GPU streams (category "gpu_user_annotation");
// CPU-side ones are the host ranges (category "user_annotation" and anything else).
enum class TraceSide : std::uint8_t {
  Auto,  // per rank: GPU-side ranges when the rank has any, else CPU-side
  Gpu,
  Cpu,
};

struct TraceFile {
  std::string name;         // file name: used in diagnostics and to find the rank ("rank3")
  std::string text;         // the JSON (or its gzip) when `path` is empty
  std::optional<int> rank;  // forces the rank of every event in this file
  std::string path;         // when set, the file is streamed from here instead (plain or gzip)
};

// How far an import has read: bytes of the files as stored (compressed ones count compressed).
struct TraceProgress {
  size_t file = 0;  // the file being read (index into the files given)
  size_t files = 0;
  std::uint64_t bytesRead = 0;
  std::uint64_t bytesTotal = 0;
};

struct TraceImportOptions {
  TraceSide side = TraceSide::Auto;
  // A trace may hold several training iterations (each op appears once per iteration).
  // -1 = the last one; 0-based otherwise.
  int iteration = -1;
  std::string label;  // Timeline::label; default: the file names
  // Called as the files are read (about every 256 KiB); returning false cancels the import,
  // which then fails with "trace.cancelled". Called on the importing thread.
  std::function<bool(const TraceProgress&)> progress;
};

enum class TraceFormat : std::uint8_t { TorchProfiler, PipeStudio };

// GPU traces: a range of a compute action (F, B, I, W, R) projected on a communication stream,
// one that runs only NCCL kernels: the sends and receives a single-stage schedule posts inside
// "Forward i", tensor-parallel collectives. It is communication, not the op's compute, and is
// kept out of the op's measured time.
struct CommunicationRange {
  int device = 0;
  Op op;  // the action that launched it
  double start = 0;
  double end = 0;
};

struct ImportedTrace {
  Timeline timeline;  // source Imported, device = rank, times in ms from the first op
  TraceFormat format = TraceFormat::TorchProfiler;
  int iterations = 1;                             // iterations found in the trace
  int iteration = 0;                              // the one imported
  std::vector<TraceSide> deviceSides;             // per device: where its ops came from (Gpu or Cpu)
  size_t ignoredEvents = 0;                       // events that were not pipeline actions
  std::vector<CommunicationRange> communication;  // of the imported iteration, by device and start
  size_t communicationKernels = 0;                // NCCL kernels in the trace (all iterations)
  std::uint64_t bytesRead = 0;                    // JSON text read (decompressed)
};

// Reads every file and merges them into one Timeline. Errors name the file, and for
// malformed JSON the line:column and byte offset of the parse error; an unreadable file is
// "trace.open", bad or truncated gzip "trace.gzip". Two files of one rank, or a file whose name and content
// name different ranks, are "trace.rank" errors naming both. Unknown events are ignored;
// oddities (an unparsable PP: name, an unmatched "B" event) become warnings in
// timeline.diagnostics.
Result<ImportedTrace> importChromeTraces(const std::vector<TraceFile>& files,
                                         const TraceImportOptions& options = {});

// Convenience for one file.
Result<ImportedTrace> importChromeTrace(std::string_view text, const std::string& filename,
                                        const TraceImportOptions& options = {});

// A schedule with the order in which each device ran its ops (overlapped pairs rebuilt),
// stages placed where they ran, for analysing a trace that has no plan. Fails when a stage
// ran on more than one device.
Result<Schedule> scheduleFromTimeline(const Timeline& t);

}  // namespace ps::core
