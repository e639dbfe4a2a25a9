#pragma once
// Incremental reader of the run-event protocol (`pipestudio-cli run --events jsonl`,
// docs/engine.md): JSON lines arriving in arbitrary chunks from a pipe or an ssh channel.
// Complete lines are parsed as they arrive; a partial line is kept until its newline (or
// end()). Garbage, truncated and unknown lines become warnings naming the line, never errors:
// a stream from a crashed process must still give its partial timeline.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipestudio/core/model/hang_report.h"
#include "pipestudio/core/model/result.h"
#include "pipestudio/core/model/run_state.h"
#include "pipestudio/core/model/timeline.h"

namespace ps::core {

// Version of the run-event protocol this build writes and reads. Bump it on an incompatible
// change; `pipestudio-cli --version` reports it so a GUI can refuse a mismatched CLI.
inline constexpr int kRunEventProtocolVersion = 1;

// With `run - --cancel-on-eof` the schedule on stdin ends at this line (stdin stays open
// afterwards; its end cancels the run). A DSL comment, so it is harmless in a .pipe file.
inline constexpr std::string_view kScheduleEndMarker = "#%end-of-schedule";

// `started`
struct RunStartedInfo {
  int protocolVersion = 0;
  std::string schedule;
  std::string model;
  std::string device;  // "cpu" / "cuda"
  int devices = 0;
  int stages = 0;
  int microbatches = 0;
  int microbatchSize = 0;
  int iterations = 0;
  int warmup = 0;
  std::vector<int> partition;
  int rank = 0;
  int worldSize = 1;
  int threads = 0;  // intra-op threads of each worker
  std::string optimizer = "none";
  double learningRate = 0;
  int localWorldSize = 1;
  std::int64_t parameters = 0;  // the model's parameter count (every stage, every copy)
  std::int64_t seed = 0;        // --seed: weights and synthetic data
  std::int64_t startedMs = 0;   // when the run was started (Unix ms; the launcher's clock)
};

// `progress`
struct RunProgress {
  int iteration = -1;  // 0-based, warm-up included; -1 before the first progress event
  int iterations = 0;  // total, warm-up included
  bool warmup = false;
};

// `error`
struct RunErrorEvent {
  std::string code;
  std::string message;
  int device = -1;
  int step = -1;
  std::string stage;        // "refused" for a run refused before it started
  int protocolVersion = 0;  // in a refusal
  int line = 0;             // line of the stream it came from
  // A hang: the step each device of the wait chain was stuck in (hang_report.h), beyond
  // device/step. Written as "related": [[device, step], ...] when not empty.
  std::vector<OpRef> related;
};

struct RunGradientCheck {
  bool passed = false;
  double maxRelativeError = 0;
  std::string worstParameter;
  double lossRelativeError = 0;
  double tolerance = 0;
};

// `finished`
struct RunFinishedInfo {
  std::string status;                 // the stream's token: "finished", "failed", "cancelled"
  RunState state = RunState::Failed;  // the same in the one vocabulary (Succeeded for "finished")
  std::vector<double> losses;
  std::vector<double> iterationMs;
  double makespanMs = 0;
  double bubbleRatio = 0;
  std::optional<RunGradientCheck> gradientCheck;
};

class RunEventReader {
 public:
  // `source` names the stream in warnings (e.g. "ssh gpu1: pipestudio-cli run").
  explicit RunEventReader(std::string source = "<run events>");

  // The schedule's user-declared kinds (Schedule::userKinds names, in order): op events of
  // those kinds then map to OpKind(kFirstUserKind + i) as in the schedule; without them such
  // events are warnings. OPTIMIZER (`run --optimizer`'s step) is known without being set: it
  // maps to the kind after the schedule's own, as engine::scheduleWithOptimizerSteps declares it.
  void setUserKinds(std::vector<std::string> names) { userKinds_ = std::move(names); }

  // Parses every complete line in `bytes` (plus what was kept from before). Returns the
  // number of events accepted.
  size_t feed(std::string_view bytes);
  // The stream ended: a kept partial line is parsed when it is a whole JSON object (a
  // missing last newline), else reported as truncated.
  size_t end();

  const std::optional<RunStartedInfo>& started() const { return started_; }
  const RunProgress& progress() const { return progress_; }
  const std::optional<RunFinishedInfo>& finished() const { return finished_; }
  const std::vector<RunErrorEvent>& errors() const { return errors_; }
  // `stuck` events (a hung run's post-mortem: where each device stood), the latest per device.
  const std::vector<StuckDevice>& stuck() const { return stuck_; }
  // Losses from `finished` (empty before it).
  const std::vector<double>& losses() const;
  // Warnings about the stream itself (garbage, truncated, unknown type, bad fields), each
  // naming its line. At most kMaxWarnings are kept; warningCount() counts them all.
  const Diagnostics& warnings() const { return warnings_; }
  size_t warningCount() const { return warningCount_; }
  static constexpr size_t kMaxWarnings = 100;

  size_t lines() const { return line_; }         // complete lines seen
  size_t events() const { return events_; }      // events accepted
  size_t opEvents() const { return opEvents_; }  // op events accepted (for redraw throttling)
  bool ended() const { return ended_; }

  // The measured timeline so far: ops and memory samples of the newest measured iteration
  // (earlier iterations are dropped as a later one starts, like the engine's own timeline),
  // metrics computed, complete only when `finished` said "finished". Diagnostics: the run's
  // error events.
  Timeline timeline() const;
  int timelineIteration() const { return iteration_; }

 private:
  size_t parseLine(std::string_view line);
  // A kind name of the stream: built-in, the schedule's own (setUserKinds) or OPTIMIZER.
  std::optional<OpKind> kindFromName(const std::string& name);
  // An event of `iteration`: false when an older one; a newer one drops the kept timeline.
  bool enterIteration(int iteration);
  void warn(std::string code, std::string message);

  std::string source_;
  std::string partial_;
  size_t line_ = 0;
  size_t events_ = 0;
  size_t opEvents_ = 0;
  bool ended_ = false;
  bool dropping_ = false;  // inside a line that was too long
  std::optional<RunStartedInfo> started_;
  RunProgress progress_;
  std::optional<RunFinishedInfo> finished_;
  std::vector<RunErrorEvent> errors_;
  std::vector<StuckDevice> stuck_;
  Diagnostics warnings_;
  size_t warningCount_ = 0;
  int iteration_ = -1;  // iteration the kept ops belong to
  int maxDevice_ = -1;
  std::vector<TimelineOp> ops_;
  std::vector<std::string> userKinds_;
  std::vector<std::vector<MemorySample>> memory_;
  std::vector<Transfer> transfers_;
};

// The writer beside the reader: one event line each (JSON, no newline), read back by
// RunEventReader. The engine, the CLI's launchers and the engine hand-off all write through
// these, so the protocol's field names live here and in the reader only.
namespace run_event {
std::string started(const RunStartedInfo& s);
std::string progress(const RunProgress& p);
// A measured op of `iteration`; `opName` as the schedule prints it ("F3s1"), `kindName` its kind.
std::string op(int iteration, const TimelineOp& op, std::string_view opName, std::string_view kindName);
std::string memory(int iteration, int device, double timeMs, std::int64_t bytes);
// A tensor that arrived at t.dstDevice in `iteration` (the receiver reports it).
std::string transfer(int iteration, const Transfer& t, std::string_view producerName,
                     std::string_view consumerName);
// `stage` and `protocolVersion` are written only when set (a refusal before the run).
std::string error(const RunErrorEvent& e);
// Where a device stood when a hung run was stopped (its rank says so as the run fails).
std::string stuck(const StuckDevice& d);
std::string finished(const RunFinishedInfo& f);  // the status token from f.state
// A run refused before it started: an error with stage "refused" and this build's protocol.
std::string refused(const std::string& code, const std::string& message);
// The `finished` event of a run that ended early (failed or cancelled) with only a partial
// timeline: no losses, the partial timeline's makespan and bubble ratio.
std::string endedEarly(RunState state, const Timeline& partial);
}  // namespace run_event

// "pipestudio-cli 0.1.0 (run-event protocol 1)": what `pipestudio-cli --version` prints.
std::string cliVersionLine(std::string_view programVersion);
struct CliVersion {
  std::string program;  // "0.1.0"
  int protocol = 0;     // 0 when the line names none (an older CLI)
};
// Parses the first line of `pipestudio-cli --version` output; nullopt when it is not one.
std::optional<CliVersion> parseCliVersion(std::string_view output);
// The partial timeline of a multi-process run whose rank 0 could not report, from what each
// rank streamed about its own device (rank r runs device r): its ops, the transfers into it and
// its memory, of the newest iteration any rank reached; sorted by device and start, measured,
// incomplete, without metrics (the caller adds its diagnostic first).
Timeline partialTimelineFromRanks(const std::vector<RunEventReader>& readers, int devices, std::string label);

// The same for any program's "NAME VERSION (run-event protocol N)" line (the engine's too);
// trailing blanks and NULs (an ELF section's padding) are ignored.
std::optional<CliVersion> parseVersionLine(std::string_view output, std::string_view programName);

}  // namespace ps::core
