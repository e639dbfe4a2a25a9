#pragma once
// What a rank of a multi-process run tells rank 0 at its end, through the c10d store (key
// "report/RANK"): its measured ops, transfers and memory samples, losses, iteration times,
// gradient-check errors, its error and where its devices stood. Rank 0 merges the reports into
// the run's report and picks the run's root cause among every rank's errors (rootCause). Torch-
// free: a unit of its own, tested without a run (tests/engine/rank_report_test.cpp).
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pipestudio/core/model/hang_report.h"
#include "pipestudio/core/model/result.h"
#include "pipestudio/core/model/timeline.h"
#include "pipestudio/engine/engine.h"

namespace ps::engine::detail {

// A device's failure as the executor records it (an `error` event's fields, and what the root
// cause is chosen by).
struct ErrorInfo {
  std::string code;
  std::string message;
  int device = -1;
  int step = -1;
  double waitStart = -1;                  // timeouts: when the wait began
  int lostRank = -1;                      // engine.peer-lost: the rank that ended without reporting
  std::vector<core::OpRef> related = {};  // a hang: the step each device of its wait chain is in
};

struct RankMemorySample {
  int device = 0;
  core::MemorySample sample;
};

struct RankReport {
  std::vector<core::TimelineOp> ops;  // of the measured iteration
  std::vector<core::Transfer> transfers;
  std::vector<RankMemorySample> memory;
  std::vector<double> losses;              // per iteration, of the routes' last stages this rank holds
  std::vector<double> iterationMs;         // per iteration
  std::vector<ParameterError> parameters;  // the gradient check, for the parameters it holds
  std::optional<ErrorInfo> error;
  std::vector<core::StuckDevice> stuck;  // a failed run: where its devices stood
};

// A process's report as it travels: a JSON object with named fields ("ops": [{"device", "step",
// "kind", "stage", "microbatch", "overlapped", "start_ms", "end_ms"}], "transfers", "memory",
// "losses", "iteration_ms", "parameters", "error", "stuck").
std::string rankReportToJson(const RankReport& r);
// The report rank `rank` sent: refused with "engine.rank-report", naming the rank and the
// field, when it is not one (another build's, or cut short).
core::Result<RankReport> rankReportFromJson(std::string_view text, int rank);

// The run's root cause among every rank's errors (an index into `errors`, which must not be
// empty): a cancel on any rank first (the peers' lost connections follow from it); else the
// error whose message the failing rank published under "abort" (a timeout excepted); else the
// timeout whose wait began first (every rank saw only timeouts or lost peers); else the first.
size_t rootCause(const std::vector<ErrorInfo>& errors, const std::optional<std::string>& abortMessage);

}  // namespace ps::engine::detail
