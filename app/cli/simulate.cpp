// pipestudio-cli simulate: predicted timeline, metrics and memory of a schedule.
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#if defined(__GLIBC__) && defined(__linux__)
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "common/command.h"
#include "common/flags.h"
#include "common/profile_input.h"
#include "common/schedule_input.h"
#include "common/text.h"
#include "pipestudio/core/analysis/iterations.h"
#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/analysis/validator.h"
#include "pipestudio/core/io/chrome_trace.h"
#include "pipestudio/core/io/units.h"
#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/sessions/recording.h"

namespace ps::cli {
namespace {

using namespace ps::core;

const char* kUsage =
    "usage: pipestudio-cli simulate FILE [--profile P.json | --cost F=1,I=1,W=1] [--comm T]\n"
    "                                [--comm posted|nccl|dualpipe] [--batch-p2p]\n"
    "                                [--partition 3,4,4,5] [--memory-limit BYTES] [--json]\n"
    "                                [--trace OUT.json] [--iterations K [--boundary sync|overlap]\n"
    "                                [--optimizer-step MS]]\n"
    "\n"
    "Simulates a schedule (.pipe or PyTorch .csv) with a cost model and prints makespan, bubble\n"
    "ratio, lower bound, efficiency and per-device busy time, span, peak memory and peak\n"
    "micro-batches in flight.\n"
    "\n"
    "  --profile P.json     cost profile (docs/formats.md); default: the .pipe header's profile,\n"
    "                       relative to the .pipe file\n"
    "  --cost SPEC          uniform costs per stage: F, B, I, W, R in ms (B defaults to I+W, R to\n"
    "                       F), act, out, weight in bytes, mem (device bytes), overlap\n"
    "  --comm T             fixed time (ms) per cross-device transfer, instead of the link model\n"
    "  --comm SEMANTICS     how explicit SEND/RECV behave (docs/formats.md): posted (PyTorch's\n"
    "                       runtime over Gloo), nccl (each rank's SEND/RECV in order on one\n"
    "                       stream, a send completes when the peer's receive runs: head-of-line\n"
    "                       waits and hangs appear), dualpipe (each compute waits for the\n"
    "                       transfers posted before it). Default: nccl for a compute+comms CSV,\n"
    "                       else posted. --comm may be given twice (a semantics and a time)\n"
    "  --batch-p2p          consecutive SEND/RECV of a rank are one batch_isend_irecv (nccl)\n"
    "  --partition LIST     layers per stage, e.g. 3,4,4,5 (default: the .pipe header's, else\n"
    "                       one layer per stage or balanced by time)\n"
    "  --memory-limit BYTES device memory limit (overrides the profile's; suffixes K M G KiB MiB GiB)\n"
    "  --json               print one JSON object instead of the table\n"
    "  --trace OUT.json     write a Chrome trace (Perfetto, chrome://tracing); with --iterations,\n"
    "                       of all K iterations\n"
    "  --iterations K       also simulate K iterations back to back and print the steady-state\n"
    "                       iteration time (the last iteration's end minus the one before) and\n"
    "                       each device's span (first op to last op of one iteration)\n"
    "  --boundary B         between iterations: overlap (default; each device starts its next\n"
    "                       iteration after its own optimizer step, Zero Bubble's post-validation)\n"
    "                       or sync (all devices finish, then the optimizer step, then the next)\n"
    "  --optimizer-step MS  optimizer step time per stage (default: the profile's\n"
    "                       optimizer_step_ms per layer, summed; 0 when absent)\n"
    "  --session FILE       record the run (schedule version, profile, timeline) in a session\n"
    "                       file, created when missing (docs/sessions.md)\n"
    "  --session-name NAME  the schedule's name in the session (default: its name, else the\n"
    "                       file name); changed text becomes a new version of that name\n"
    "\n"
    "Exit status: 0 valid, 1 invalid (deadlock, memory over the limit, schedule errors; the\n"
    "diagnostics go to stderr), 2 usage or unreadable input.\n";

// Times as every report of the CLI prints them: `prec` + 2 significant digits.
std::string fmt(double v, int prec = 4) {
  return formatSignificant(v, prec + 2);
}

std::string pad(std::string s, size_t w, bool right = true) {
  return ps::cli::pad(std::move(s), w, right);
}

nlohmann::ordered_json diagnosticJson(const Diagnostic& d) {
  nlohmann::ordered_json j = {{"severity", d.severity == Severity::Error     ? "error"
                                           : d.severity == Severity::Warning ? "warning"
                                                                             : "note"},
                              {"code", d.code},
                              {"message", d.message}};
  if (d.location.valid())
    j["location"] = {{"file", d.location.file}, {"line", d.location.line}, {"column", d.location.column}};
  if (!d.related.empty()) {
    nlohmann::ordered_json rel = nlohmann::ordered_json::array();
    for (const OpRef& r : d.related) rel.push_back({{"device", r.device}, {"step", r.step}});
    j["related"] = std::move(rel);
  }
  return j;
}

// A large schedule's buffers (tens of MB, each touched about once) cost more in page faults
// than in simulation: have them come from one heap region backed by transparent huge pages
// where the kernel offers them on request (THP "madvise"), so there are few faults.
void preferHugePages() {
#if defined(__GLIBC__) && defined(__linux__)
  constexpr size_t kRegion = size_t{64} << 20, kHuge = size_t{2} << 20;
  // main() already keeps freed memory (M_TRIM_THRESHOLD); serve big buffers from the heap too.
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TOP_PAD, static_cast<int>(kRegion));  // grow the heap in one step
  void* probe = malloc(kHuge);
  if (!probe) return;
  auto lo = (reinterpret_cast<std::uintptr_t>(probe) + kHuge - 1) & ~(kHuge - 1);
  auto hi = reinterpret_cast<std::uintptr_t>(sbrk(0)) & ~(kHuge - 1);
  free(probe);
  // NOLINTNEXTLINE(performance-no-int-to-ptr): madvise takes the page-aligned address as a pointer
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);  // advice only
#endif
}

int runSimulate(const Args& args, const Reporter& rep) {
  preferHugePages();
  auto usage = [&](const std::string& msg) { return rep.usage(msg); };
  if (args.has("--profile") && args.has("--cost")) return usage("give --profile or --cost, not both");
  const std::string file = args.positionals()[0];

  // The CSV cells' locations are only needed to place diagnostics: they are read again
  // below when there are any (a location per op is a string per op).
  ScheduleInput in = readSchedule(rep, file, {}, /*withCells=*/false);
  if (!in.schedule) return in.exitCode;
  const std::string& text = in.text;
  Schedule& s = *in.schedule;

  // Cost profile: flags first, then the .pipe header's (relative to the .pipe file).
  std::optional<CostProfile> profile;
  if (args.has("--cost")) {
    auto uniform = uniformCostProfile(args.value("--cost"), s.pipeline.blocks());
    if (!uniform) return usage(uniform.error().message);
    profile = std::move(uniform).value();
  } else {
    std::string path = args.value("--profile");
    if (path.empty() && s.profile) path = resolveProfilePath(*s.profile, file);
    if (path.empty()) return usage("no cost profile: give --profile P.json or --cost F=1,I=1,W=1");
    int code = kExitOk;
    profile = loadProfile(rep, path, code, /*nameAfterFile=*/false);
    if (!profile) return code;
  }
  int commCode = kExitOk;
  const auto comm = commFlags(args, rep, commCode);
  if (!comm) return commCode;
  if (comm->fixedMs) profile->fixedCommMs = *comm->fixedMs;
  const bool csv = in.format == ScheduleFormat::Csv;
  std::vector<int> partition;
  if (args.has("--partition")) {
    auto list = parseIntList(args.value("--partition"), 1);
    if (!list) return usage("--partition: expected layers per stage, e.g. 3,4,4,5");
    partition = std::move(*list);
  }
  SimulationOptions opts;
  opts.comm = comm->optionsFor(s, csv);
  opts.recordTransfers = args.has("--trace") || args.has("--session");
  opts.recordMemory = args.has("--trace") || args.has("--session");
  if (args.has("--memory-limit")) {
    auto lim = parseBytes(args.value("--memory-limit"));
    if (!lim || *lim <= 0) return usage("--memory-limit: expected a byte count, e.g. 80GiB");
    opts.memoryLimitBytes = *lim;
  }

  int iterations = 0;
  IterationBoundary boundary = IterationBoundary::Overlap;
  std::optional<double> optimizerStep;
  if (args.has("--iterations")) {
    auto k = parseInt(args.value("--iterations"), 1, 10000);
    if (!k) return usage("--iterations: expected a whole number from 1 to 10000");
    iterations = *k;
  }
  if (args.has("--boundary")) {
    auto b = iterationBoundaryFromName(args.value("--boundary"));
    if (!b) return usage("--boundary: expected sync or overlap");
    if (!iterations) return usage("--boundary needs --iterations K");
    boundary = *b;
  }
  if (args.has("--optimizer-step")) {
    auto v = parseMs(args.value("--optimizer-step"));
    if (!v) return usage("--optimizer-step: expected a non-negative number of ms");
    if (!iterations) return usage("--optimizer-step needs --iterations K");
    optimizerStep = *v;
  }

  auto model = makeSimulationModel(s, *profile, partition);
  if (!model) {
    std::cerr << formatDiagnostics(model.errors());
    return kExitInvalid;
  }
  // One dependency graph for both the validator and the simulator.
  const DependencyGraph graph(s);
  ValidateOptions vo;
  vo.comm = opts.comm;
  ValidationReport report = validateSchedule(s, vo, graph);
  if (in.format == ScheduleFormat::Csv && !report.diagnostics.empty()) {
    readCells(in);
    locateScheduleDiagnostics(report.diagnostics, in.name, in.format, in.cells);
  }
  auto timeline = simulate(s, *model, opts, graph);
  if (!timeline) {
    std::cerr << formatDiagnostics(report.diagnostics) << formatDiagnostics(timeline.errors());
    return kExitInvalid;
  }
  Timeline& t = *timeline;

  std::optional<IterationResult> iter;
  if (iterations) {
    IterationOptions io;
    io.iterations = iterations;
    io.boundary = boundary;
    io.optimizerStepMs = optimizerStep;
    io.simulation = opts;
    io.buildTimeline = args.has("--trace");
    auto r = simulateIterations(s, *model, io);
    if (!r) {
      std::cerr << formatDiagnostics(r.errors());
      return kExitInvalid;
    }
    iter = std::move(r).value();
  }

  // The validator's deadlock is the simulator's stall too: report it once.
  Diagnostics diags;
  for (const Diagnostic& d : report.diagnostics)
    if (!(d.code == "validate.deadlock" && !t.complete)) diags.push_back(d);
  diags.insert(diags.end(), t.diagnostics.begin(), t.diagnostics.end());
  if (iter && t.complete)  // one iteration's problems are already listed
    for (const Diagnostic& d : iter->diagnostics)
      if (d.code != "simulate.memory" || !hasErrors(t.diagnostics)) diags.push_back(d);
  const bool valid = t.complete && !hasErrors(diags) && (!iter || iter->complete);
  const TimelineMetrics& m = t.metrics;

  if (args.has("--trace")) {
    const std::string trace =
        iter ? exportChromeTrace(iter->timeline, &iter->unrolled) : exportChromeTrace(t, &s);
    if (!rep.write(args.value("--trace"), trace)) return kExitUsage;
  }

  if (args.has("--session")) {
    sessions::SimulationRecording rec;
    rec.sessionPath = args.value("--session");
    rec.schedule = &s;
    std::string fileStem = file == "-" ? "" : std::filesystem::path(file).stem().string();
    rec.scheduleName = args.value("--session-name", s.name.empty() ? fileStem : s.name);
    if (in.format == ScheduleFormat::Pipe) rec.pipeText = text;  // keep the user's own form of the .pipe
    rec.profile = &*profile;
    rec.configJson = nlohmann::json{{"file", file}, {"args", args.given()}}.dump();
    auto recorded = sessions::recordSimulation(rec, t);
    if (!recorded) {
      std::cerr << formatDiagnostics(recorded.errors());
      return kExitUsage;
    }
    std::cerr << "recorded run " << recorded->runId << " in " << rec.sessionPath << "\n";
  }

  if (args.has("--json")) {
    nlohmann::ordered_json j;
    j["file"] = file;
    j["schedule"] = s.name;
    j["profile"] = profile->name;
    j["device_count"] = s.pipeline.devices;
    j["stages"] = s.pipeline.stages;
    j["microbatches"] = s.pipeline.microbatches;
    j["makespan"] = m.makespan;
    j["bubble_ratio"] = m.bubbleRatio;
    j["lower_bound"] = m.lowerBound;
    j["efficiency"] = m.efficiency;
    j["ops"] = m.ops;
    j["comm"] = std::string(commSemanticsName(opts.comm.semantics));
    j["head_of_line_waits"] = m.headOfLineWaits;
    j["head_of_line_ms"] = m.headOfLineMs;
    if (!t.copySyncs.empty()) {
      j["copy_gradient_syncs"] = t.copySyncs.size();
      j["copy_gradient_sync_end"] = m.copySyncEnd;
    }
    j["valid"] = valid;
    j["complete"] = t.complete;
    nlohmann::ordered_json devs = nlohmann::ordered_json::array();
    for (const DeviceMetrics& d : m.devices) {
      nlohmann::ordered_json dj = {{"device", d.device},
                                   {"busy", d.busy},
                                   {"span", d.span()},
                                   {"start", d.start},
                                   {"end", d.end},
                                   {"static_memory_bytes", d.staticBytes},
                                   {"peak_memory_bytes", d.peakMemoryBytes},
                                   {"peak_memory_time", d.peakMemoryTime},
                                   {"peak_inflight_microbatches", d.peakInflightMicrobatches}};
      if (d.peakMemoryOp.step >= 0) {
        const Step& st = s.devices[static_cast<size_t>(d.device)][static_cast<size_t>(d.peakMemoryOp.step)];
        dj["peak_memory_op"] = s.opName(st.first);
      }
      devs.push_back(std::move(dj));
    }
    j["devices"] = std::move(devs);
    nlohmann::ordered_json dl = nlohmann::ordered_json::array();
    for (const Diagnostic& d : diags) dl.push_back(diagnosticJson(d));
    j["diagnostics"] = std::move(dl);
    if (iter) {
      nlohmann::ordered_json ij;
      ij["count"] = iter->iterations;
      ij["boundary"] = std::string(iterationBoundaryName(iter->boundary));
      ij["complete"] = iter->complete;
      ij["steady_state_ms"] = iter->steadyStateMs;
      ij["first_iteration_ms"] = iter->firstIterationMs;
      ij["iteration_ends_ms"] = iter->iterationEnds;
      ij["max_stage_span_ms"] = iter->maxFirstSpan;
      ij["max_steady_stage_span_ms"] = iter->maxSteadySpan;
      ij["peak_memory_bytes"] = iter->peakMemoryBytes;
      nlohmann::ordered_json idevs = nlohmann::ordered_json::array();
      for (const auto& d : iter->devices)
        idevs.push_back({{"device", d.device},
                         {"optimizer_step_ms", d.optimizerStepMs},
                         {"span_ms", d.firstSpan},
                         {"steady_span_ms", d.steadySpan},
                         {"period_ms", d.period},
                         {"peak_memory_bytes", d.peakMemoryBytes}});
      ij["devices"] = std::move(idevs);
      j["iterations"] = std::move(ij);
    }
    std::cout << j.dump(2) << "\n";
  } else {
    std::ostringstream o;
    o << (s.name.empty() ? file : s.name) << ": " << s.pipeline.devices << " devices, " << s.pipeline.stages
      << " stages, " << s.pipeline.microbatches << " micro-batches, " << m.ops << " ops; profile "
      << (profile->name.empty() ? "(unnamed)" : profile->name) << "\n";
    o << "makespan " << fmt(m.makespan) << " ms   lower bound " << fmt(m.lowerBound) << " ms   efficiency "
      << fmt(100 * m.efficiency, 2) << "%   bubble " << fmt(100 * m.bubbleRatio, 2) << "%   "
      << (valid ? "valid" : "INVALID") << "\n";
    o << comm->lineFor(s, csv) << "\n";
    if (m.headOfLineWaits > 0)
      o << "head-of-line waits: " << m.headOfLineWaits << ", " << fmt(m.headOfLineMs)
        << " ms in all (point-to-point ops queued behind an earlier one of their rank)\n";
    if (!t.copySyncs.empty())
      o << "block copies: " << t.copySyncs.size() << " gradient exchanges between devices, the last ends at "
        << fmt(m.copySyncEnd)
        << " ms (each copy's weights, gradients and optimizer state count on its device)\n";
    o << "\n";
    o << pad("device", 6) << pad("busy ms", 12) << pad("span ms", 12) << pad("idle %", 8)
      << pad("peak memory", 13) << pad("at ms", 11) << "  " << pad("peak op", 12, false)
      << pad("in flight", 9) << "\n";
    for (const DeviceMetrics& d : m.devices) {
      std::string opName = "-";
      if (d.peakMemoryOp.step >= 0)
        opName = s.opName(
            s.devices[static_cast<size_t>(d.device)][static_cast<size_t>(d.peakMemoryOp.step)].first);
      double idle = d.span() > 0 ? 100.0 * (1 - d.busy / d.span()) : 0;
      o << pad(std::to_string(d.device), 6) << pad(fmt(d.busy), 12) << pad(fmt(d.span()), 12)
        << pad(fmt(idle, 2), 8) << pad(formatByteSizeFixed(d.peakMemoryBytes), 13)
        << pad(fmt(d.peakMemoryTime), 11) << "  " << pad(opName, 12, false)
        << pad(std::to_string(d.peakInflightMicrobatches), 9) << "\n";
    }
    if (iter) {
      o << "\n"
        << iter->iterations << " iterations, " << iterationBoundaryName(iter->boundary) << " boundary: ";
      if (iter->complete)
        o << "steady-state iteration " << fmt(iter->steadyStateMs) << " ms   first iteration "
          << fmt(iter->firstIterationMs) << " ms   longest device span " << fmt(iter->maxFirstSpan)
          << " ms\n";
      else
        o << "stalled (see the diagnostics)\n";
      o << pad("device", 6) << pad("step ms", 10) << pad("span ms", 12) << pad("steady span", 13)
        << pad("period ms", 12) << pad("peak memory", 13) << "\n";
      for (const auto& d : iter->devices)
        o << pad(std::to_string(d.device), 6) << pad(fmt(d.optimizerStepMs), 10) << pad(fmt(d.firstSpan), 12)
          << pad(fmt(d.steadySpan), 13) << pad(fmt(d.period), 12)
          << pad(formatByteSizeFixed(d.peakMemoryBytes), 13) << "\n";
    }
    std::cout << o.str();
  }
  if (!diags.empty()) std::cerr << formatDiagnostics(diags);
  return valid ? kExitOk : kExitInvalid;
}

const FlagCommandRegistrar kRegister{
    {"simulate",
     "predict a schedule's timeline, bubbles and memory",
     kUsage,
     {"--profile", "--cost", "--comm", "--partition", "--memory-limit", "--trace", "--session",
      "--session-name", "--iterations", "--boundary", "--optimizer-step"},
     {"--json", "--batch-p2p"},
     {1, 1, "expected one schedule file"},
     runSimulate}};

}  // namespace
}  // namespace ps::cli
