// pipestudio-cli compare PLAN TRACE... : the plan simulated with a cost profile against the
// measured timeline of one or more Chrome traces (torch.profiler PP:<action> ranges, or our
// own export). Exit 0 ok, 1 invalid plan or trace, 2 usage or unreadable file.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/command.h"
#include "common/flags.h"
#include "common/profile_input.h"
#include "common/schedule_input.h"
#include "common/text.h"
#include "pipestudio/core/analysis/comparison.h"
#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/analysis/validator.h"
#include "pipestudio/core/io/trace_files.h"
#include "pipestudio/core/io/trace_import.h"
#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/sessions/measured_run.h"
#include "pipestudio/sessions/recording.h"
#include "pipestudio/sessions/session_store.h"

namespace {

using namespace ps::core;

const char* kUsage =
    "usage: pipestudio-cli compare PLAN TRACE... [--profile P.json | --cost F=1,I=1,W=1] [--comm T]\n"
    "                              [--comm posted|nccl|dualpipe] [--batch-p2p]\n"
    "                              [--partition 3,4,4,5] [--set name=value]...\n"
    "                              [--align absolute|scaled] [--side auto|gpu|cpu] [--iteration K]\n"
    "                              [--trace-step N] [--progress] [--gaps N] [--json]\n\n"
    "Simulates PLAN (.pipe or PyTorch .csv) with the cost profile (--profile, --cost, or the\n"
    "profile named in the .pipe header) and compares it with the measured timeline read from the\n"
    "TRACE files: Chrome traces written by torch.profiler (plain or .json.gz), whose pipeline\n"
    "actions are ranges named PP:<action> (or Forward i / Backward i, ScheduleGPipe's), one file\n"
    "per rank, one merged file, or a folder: torchtitan's (profiling/traces/iteration_<N>),\n"
    "Megatron-LM's (torch_profile/rank-<R>.json.gz), tensorboard_trace_handler's, or any folder of\n"
    "trace files; or PipeStudio's own trace export; or one run of a session file, DB:ID (e.g.\n"
    "recorded by `run --session`): then the profile defaults to the one its prediction used and\n"
    "the partition to the run's.\n"
    "Prints the predicted and measured makespan, the relative error, the error per op kind and\n"
    "per device, the measured critical path and the attribution of each device's idle time.\n"
    "  --align     absolute (default) or scaled: measured times scaled to the planned makespan\n"
    "  --side      torch.profiler ranges to use: auto (GPU-side when present, default), gpu, cpu\n"
    "  --iteration which training iteration of a multi-iteration trace (default: the last)\n"
    "  --trace-step N  torchtitan's iteration_<N> folder to read (default: the newest)\n"
    "  --progress  report reading progress on stderr (default: when stderr is a terminal and\n"
    "              the traces are large)\n"
    "  --gaps N    idle gaps listed per device in the text output (largest first, default 5)\n"
    "  --comm      how the plan's explicit SEND/RECV behave (posted, nccl, dualpipe; as simulate),\n"
    "              and/or a fixed time per transfer in ms\n"
    "  --json      one JSON object instead of text (docs/debugger.md)\n"
    "Exit status: 0 ok, 1 invalid plan or trace (diagnostics on stderr), 2 usage or unreadable file.\n";

const char* kLoweredNote =
    "the trace holds the actions PyTorch's runtime adds to a compute-only order (SEND/RECV, UNSHARD/RESHARD, "
    "REDUCE_GRAD): the plan is compared as PyTorch lowers it (the compute_comms CSV `convert` writes)";

std::string fmt(double v, int decimals = 3) {
  return ps::cli::fixed(v, decimals);
}

std::string pad(std::string s, size_t width, bool right = false) {
  return ps::cli::pad(std::move(s), width, right);
}

std::string percent(double v) {
  return (v >= 0 ? "+" : "") + fmt(v * 100.0, 1) + "%";
}

// Reading progress on stderr: a line rewritten in place on a terminal (for traces over 64 MiB,
// or always with --progress), one line per tenth otherwise (--progress into a file or pipe).
class ProgressLine {
 public:
  explicit ProgressLine(bool forced) : forced_(forced), tty_(isatty(STDERR_FILENO) != 0) {}
  void update(const TraceProgress& p) {
    if (p.bytesTotal == 0) return;
    if (!forced_ && (!tty_ || p.bytesTotal < (std::uint64_t{64} << 20))) return;
    const int tenth = static_cast<int>(p.bytesRead * 10 / p.bytesTotal);
    const int percent = static_cast<int>(p.bytesRead * 100 / p.bytesTotal);
    if (tty_) {
      if (percent == lastPercent_) return;
      std::fprintf(stderr, "\rreading traces: %3d%% (%.1f of %.1f MiB, file %zu of %zu)", percent,
                   static_cast<double>(p.bytesRead) / 1048576.0,
                   static_cast<double>(p.bytesTotal) / 1048576.0, p.file + 1, p.files);
      shown_ = true;
    } else {
      if (tenth == lastTenth_) return;
      std::fprintf(stderr, "reading traces: %d%%\n", tenth * 10);
    }
    lastPercent_ = percent;
    lastTenth_ = tenth;
  }
  void done() {
    if (shown_) std::fprintf(stderr, "\r%60s\r", "");
  }

 private:
  bool forced_;
  bool tty_;
  bool shown_ = false;
  int lastPercent_ = -1;
  int lastTenth_ = -1;
};

void printTable(std::ostream& os, const std::string& title, const std::vector<ErrorStats>& rows,
                const ErrorStats& all) {
  os << title << ":\n";
  os << "  " << pad("", 10) << pad("ops", 6, true) << pad("planned ms", 13, true)
     << pad("measured ms", 13, true) << pad("ratio", 8, true) << pad("mean |dev-1|", 14, true)
     << pad("min dev", 9, true) << pad("max dev", 9, true) << "\n";
  auto row = [&](const ErrorStats& s) {
    // Ops planned to take no time (SEND/RECV without --comm) have no ratio or deviation: "-".
    const bool timed = s.plannedMs > 0;
    auto orDash = [&](const std::string& v) { return timed ? v : std::string("-"); };
    os << "  " << pad(s.label, 10) << pad(std::to_string(s.count), 6, true) << pad(fmt(s.plannedMs), 13, true)
       << pad(fmt(s.measuredMs), 13, true) << pad(orDash(fmt(s.ratio)), 8, true)
       << pad(orDash(fmt(s.meanAbsError * 100.0, 1) + "%"), 14, true)
       << pad(orDash(fmt(s.minDeviation, 2)), 9, true) << pad(orDash(fmt(s.maxDeviation, 2)), 9, true)
       << "\n";
  };
  for (const auto& s : rows) row(s);
  row(all);
}

// A measured run of a session named DB:ID, as compare reads it.
struct SessionRun {
  std::string db;
  ps::sessions::Id id = 0;
  Timeline timeline;
  std::vector<int> partition;              // from the run's configuration, when recorded
  std::optional<std::string> profileJson;  // of the run's prediction, when recorded
  std::string profileName;
  bool analyticProfile = false;  // the engine's uncalibrated analytic profile
};

// "DB:ID" where DB is an existing file and ID a run id; false when `arg` is not of that form.
bool splitSessionRun(const std::string& arg, std::string& db, ps::sessions::Id& id) {
  std::error_code ec;
  auto colon = arg.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == arg.size()) return false;
  if (std::filesystem::exists(arg, ec)) return false;  // a trace file whose name has a colon
  const std::string digits = arg.substr(colon + 1);
  if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 15) return false;
  db = arg.substr(0, colon);
  if (!std::filesystem::is_regular_file(db, ec)) return false;
  id = std::stoll(digits);
  return true;
}

Result<SessionRun> loadSessionRun(const std::string& db, ps::sessions::Id id) {
  using namespace ps::sessions;
  auto store = SessionStore::open(db, {OpenMode::ReadOnly});
  PS_TRY(store);
  auto run = store->run(id);
  PS_TRY(run);
  auto timeline = store->loadTimeline(id);
  PS_TRY(timeline);
  SessionRun out;
  out.db = db;
  out.id = id;
  out.timeline = std::move(*timeline);
  out.timeline.label = db + ":" + std::to_string(id);
  out.partition = ps::sessions::runConfigFromJson(run->configJson).partition;
  std::optional<Id> profileId = run->summary.profileId;
  if (auto link = predictionFor(*store, id)) profileId = link->profileId;
  if (profileId) {
    auto profile = store->profile(*profileId);
    PS_TRY(profile);
    out.profileJson = profile->json;
    out.profileName = db + ": profile " + std::to_string(*profileId) + " '" + profile->info.name + "'";
    out.analyticProfile = profile->info.source == ProfileSource::Analytic;
  }
  return out;
}

// A comparison's measured side: a session run's timeline, or trace files read.
struct Measurement {
  Timeline timeline;
  std::string format = "session run";
  int iteration = 0, iterations = 1;
  std::vector<CommunicationRange> communication;  // GPU traces: compute actions' ranges on NCCL streams
  size_t communicationKernels = 0;
};

// The trace files and folders after the plan; the exit code (kExitOk when `out` has them).
int readMeasuredTraces(const ps::cli::Args& args, const ps::cli::Reporter& rep,
                       TraceImportOptions importOptions, Measurement& out) {
  // Files and folders (torchtitan's, Megatron-LM's, tensorboard_trace_handler's layouts),
  // streamed: a multi-GB trace is read in bounded memory.
  std::vector<std::string> paths(args.positionals().begin() + 1, args.positionals().end());
  TraceDiscoveryOptions discovery;
  if (args.has("--trace-step")) {
    auto n = ps::cli::parseInt(args.value("--trace-step"));
    if (!n || *n < 0) return rep.usage("--trace-step needs the N of an iteration_<N> folder");
    discovery.step = *n;
  }
  ProgressLine progress(args.has("--progress"));
  importOptions.progress = [&](const TraceProgress& p) {
    progress.update(p);
    return true;
  };
  auto imported = importTraceFiles(paths, importOptions, discovery);
  progress.done();
  if (!imported.ok()) {
    const std::string& code = imported.error().code;
    // A file or folder that cannot be read is a usage error, as any unreadable input.
    if (code == "trace.open" || code == "trace.folder" || code == "trace.input") {
      std::cerr << formatDiagnostics(imported.errors());
      return ps::cli::kExitUsage;
    }
    return rep.invalid(imported.errors());
  }
  out.timeline = std::move(imported->trace.timeline);
  out.format = imported->trace.format == TraceFormat::PipeStudio ? "PipeStudio trace" : "torch.profiler";
  out.iteration = imported->trace.iteration;
  out.iterations = imported->trace.iterations;
  out.communication = std::move(imported->trace.communication);
  out.communicationKernels = imported->trace.communicationKernels;
  return ps::cli::kExitOk;
}

// What a comparison prints: the plan and its simulation, the measurement, and how they compare.
struct CompareReport {
  const std::string& planPath;
  const Schedule& plan;
  const SimulationModel& model;
  const Timeline& planned;
  const Timeline& measured;
  const Measurement& measurement;
  const Comparison& c;
  const std::string& profileName;
  bool uncalibrated = false;  // the session run's own prediction, from the analytic profile
};

void printCompareJson(std::ostream& os, const CompareReport& r) {
  const Schedule& plan = r.plan;
  const Measurement& m = r.measurement;
  // Plus what the prediction was made with.
  auto j = nlohmann::json::parse(comparisonToJson(r.c, plan, r.planned, r.measured));
  j["profile"] = r.profileName;
  // An uncalibrated analytic profile's prediction is no measurement of this machine.
  j["profile_calibrated"] = !r.uncalibrated;
  if (m.communicationKernels > 0) {
    auto& comm = j["communication"] = nlohmann::json::object();
    comm["kernels"] = m.communicationKernels;
    comm["ranges"] = nlohmann::json::array();
    for (const auto& range : m.communication)
      comm["ranges"].push_back({{"device", range.device},
                                {"op", plan.opName(range.op)},
                                {"start", range.start},
                                {"end", range.end}});
  }
  j["partition"] = nlohmann::json::array();
  for (const auto& st : r.model.stages) j["partition"].push_back(st.layerCount);
  os << j.dump(2) << "\n";
}

void printCompareText(std::ostream& os, const CompareReport& r, int gaps) {
  const Schedule& plan = r.plan;
  const Timeline& planned = r.planned;
  const Timeline& measured = r.measured;
  const Measurement& m = r.measurement;
  const Comparison& c = r.c;
  const SimulationModel& model = r.model;
  const std::string& planPath = r.planPath;
  const std::string& profileName = r.profileName;
  const bool uncalibrated = r.uncalibrated;
  os << "plan:      " << planPath << " (" << plan.pipeline.devices << " devices, " << plan.opCount()
     << " ops), simulated with " << profileName << ", partition";
  for (size_t i = 0; i < model.stages.size(); ++i) os << (i ? "," : " ") << model.stages[i].layerCount;
  os << (planned.complete ? "" : " [stalled]") << "\n";
  os << "measured:  " << measured.label << " (" << m.format << ", " << measured.devices << " rank(s), "
     << measured.ops.size() << " ops";
  if (m.iterations > 1) os << ", iteration " << m.iteration << " of " << m.iterations;
  os << (measured.complete ? "" : ", incomplete") << ")\n";
  if (m.communicationKernels > 0) {
    // GPU traces: NCCL kernels the compute actions launched (single-stage schedules' sends and
    // receives, tensor-parallel collectives) are communication, not the ops' compute.
    double ms = 0;
    for (const auto& range : m.communication) ms += range.end - range.start;
    os << "comm:      " << m.communicationKernels << " NCCL kernel(s); " << m.communication.size()
       << " range(s) of compute actions on communication streams, " << fmt(ms)
       << " ms, not counted in the ops' times\n";
  }
  os << "makespan:  predicted " << fmt(c.plannedMakespan) << " ms"
     << (uncalibrated ? std::string(" ") + ps::cli::kUncalibratedMark : std::string()) << ", measured "
     << fmt(c.measuredMakespan) << " ms, error " << percent(c.relativeError) << "\n";
  if (uncalibrated)
    os << "           " << ps::cli::kUncalibratedExplanation
       << "; measure a profile (pipestudio-cli profile) and compare with --profile P.json\n";
  os << "alignment: " << alignmentName(c.alignment);
  if (c.alignment == Alignment::Scaled) os << " (measured x " << fmt(c.scale, 4) << ")";
  os << "\nmatched:   " << c.matches.size() << " ops";
  if (!c.unmatchedPlanned.empty()) os << "; " << c.unmatchedPlanned.size() << " planned op(s) not measured";
  if (!c.unmatchedMeasured.empty())
    os << "; " << c.unmatchedMeasured.size() << " measured op(s) not in the plan";
  os << "\n\n";
  printTable(os, "error per kind (deviation = measured / predicted duration)", c.byKind, c.overall);
  os << "\n";
  printTable(os, "error per device", c.byDevice, c.overall);

  const CriticalPath& cp = c.criticalPath;
  os << "\ncritical path: " << cp.steps.size() << " ops, " << fmt(cp.start) << " - " << fmt(cp.end)
     << " ms (compute " << fmt(cp.computeMs) << ", transfers " << fmt(cp.transferMs) << ", waits "
     << fmt(cp.waitMs) << ")\n";
  for (size_t i = 0; i < cp.steps.size(); ++i) {
    const CriticalStep& s = cp.steps[i];
    const TimelineOp& o = measured.ops[s.op];
    os << "  device " << o.device << "  " << pad(plan.opName(o.op), 12) << pad(fmt(o.start), 10, true)
       << " - " << pad(fmt(o.end), 10, true) << "  ";
    if (s.via == CriticalLink::Start) {
      os << "start";
    } else {
      const TimelineOp& p = measured.ops[cp.steps[i - 1].op];
      os << (s.via == CriticalLink::Dependency ? "input from " : "after ") << plan.opName(p.op);
      if (s.via == CriticalLink::Dependency && p.device != o.device) os << " on device " << p.device;
      if (s.transfer)
        os << " (transfer "
           << fmt(measured.transfers[*s.transfer].end - measured.transfers[*s.transfer].start) << " ms)";
    }
    if (s.waitMs > 1e-9) os << ", waited " << fmt(s.waitMs) << " ms more";
    os << "\n";
  }

  os << "\nidle time per device (attributed to what each gap waited for):\n";
  for (const auto& db : c.bubbles) {
    os << "  device " << db.device << ": idle " << fmt(db.idleMs) << " ms = waiting " << fmt(db.dependencyMs);
    if (!db.waitedOn.empty()) {
      os << " (";
      for (size_t i = 0; i < db.waitedOn.size(); ++i)
        os << (i ? ", " : "") << "on device " << db.waitedOn[i].device << " " << fmt(db.waitedOn[i].ms);
      os << ")";
    }
    os << " + unexplained " << fmt(db.unexplainedMs) << " + tail " << fmt(db.tailMs) << "\n";
    std::vector<const Bubble*> largest;
    for (const auto& b : db.bubbles)
      if (b.cause == BubbleCause::Dependency) largest.push_back(&b);
    std::stable_sort(largest.begin(), largest.end(),
                     [](const Bubble* a, const Bubble* b) { return a->duration() > b->duration(); });
    if (static_cast<int>(largest.size()) > gaps) largest.resize(static_cast<size_t>(std::max(gaps, 0)));
    for (const Bubble* b : largest)
      os << "    " << pad(fmt(b->start), 10, true) << " - " << pad(fmt(b->end), 10, true) << "  "
         << fmt(b->duration()) << " ms waiting for " << plan.opName(b->waitedFor) << " on device "
         << b->waitedOnDevice << " before " << plan.opName(measured.ops[*b->before].op) << "\n";
  }
  if (!c.unmatchedPlanned.empty()) {
    os << "\nplanned but not measured:";
    size_t shown = 0;
    for (size_t i : c.unmatchedPlanned) {
      if (shown++ == 20) {
        os << " ...";
        break;
      }
      os << " " << plan.opName(planned.ops[i].op) << "(d" << planned.ops[i].device << ")";
    }
    os << "\n";
  }
}

int runCompare(const ps::cli::Args& args, const ps::cli::Reporter& rep) {
  auto usage = [&](const std::string& message) { return rep.usage(message); };
  // RUN may be a session run DB:ID instead of trace files.
  std::optional<std::pair<std::string, std::int64_t>> sessionRunArg;
  for (size_t i = 1; i < args.positionals().size(); ++i) {
    std::string db;
    std::int64_t id = 0;
    if (!splitSessionRun(args.positionals()[i], db, id)) continue;
    if (args.positionals().size() != 2)
      return usage("a session run DB:ID is compared alone, not with trace files");
    sessionRunArg = std::make_pair(db, id);
  }
  std::optional<SessionRun> sessionRun;
  if (sessionRunArg) {
    auto loaded = loadSessionRun(sessionRunArg->first, sessionRunArg->second);
    if (!loaded) {
      std::cerr << formatDiagnostics(loaded.errors());
      return ps::cli::kExitInvalid;
    }
    sessionRun = std::move(*loaded);
  }
  if (args.has("--profile") && args.has("--cost")) return usage("give --profile or --cost, not both");

  auto alignment = alignmentFromName(args.value("--align", "absolute"));
  if (!alignment) return usage("--align is absolute or scaled, not '" + args.value("--align") + "'");
  TraceImportOptions importOptions;
  std::string side = args.value("--side", "auto");
  if (side == "auto")
    importOptions.side = TraceSide::Auto;
  else if (side == "gpu")
    importOptions.side = TraceSide::Gpu;
  else if (side == "cpu")
    importOptions.side = TraceSide::Cpu;
  else
    return usage("--side is auto, gpu or cpu, not '" + side + "'");
  if (args.has("--iteration")) {
    auto k = ps::cli::parseInt(args.value("--iteration"));
    if (!k) return usage("--iteration needs a number");
    if (*k < 0) return usage("--iteration counts from 0");
    importOptions.iteration = *k;
  }
  int gaps = 5;
  if (args.has("--gaps")) {
    auto n = ps::cli::parseInt(args.value("--gaps"));
    if (!n) return usage("--gaps needs a number");
    gaps = *n;
  }
  std::vector<int> partition;
  if (args.has("--partition")) {
    auto list = ps::cli::parseIntList(args.value("--partition"), 1);
    if (!list) return usage("--partition is a comma-separated list of layers per stage, e.g. 3,4,4,5");
    partition = std::move(*list);
  }

  // The plan.
  const std::string planPath = args.positionals()[0];
  ScheduleLoadOptions planOptions;
  planOptions.overrides = args.values("--set");
  ps::cli::ScheduleInput planInput = ps::cli::readSchedule(rep, planPath, planOptions);
  if (!planInput.schedule) return planInput.exitCode;
  std::optional<Schedule>& plan = planInput.schedule;
  int commCode = ps::cli::kExitOk;
  const auto comm = ps::cli::commFlags(args, rep, commCode);
  if (!comm) return commCode;
  const bool planCsv = planInput.format == ScheduleFormat::Csv;
  ValidateOptions vo;
  vo.comm = comm->optionsFor(*plan, planCsv);
  ValidationReport report = validateSchedule(*plan, vo);
  if (!report.valid()) {
    locateScheduleDiagnostics(report.diagnostics, planInput.name, planInput.format, planInput.cells);
    return rep.invalid(report.diagnostics);
  }

  // The cost profile.
  Result<CostProfile> profile = Diagnostics{};
  std::string profileName;
  bool uncalibrated = false;  // the session run's own prediction, from the analytic profile
  if (args.has("--cost")) {
    profile = uniformCostProfile(args.value("--cost"), plan->pipeline.blocks());
    profileName = "--cost " + args.value("--cost");
  } else {
    std::string path = args.value("--profile");
    std::string text;
    // A session run's own prediction profile comes before the one the plan names.
    if (path.empty() && sessionRun && sessionRun->profileJson) {
      text = *sessionRun->profileJson;
      profileName = sessionRun->profileName;
      path = profileName;
      uncalibrated = sessionRun->analyticProfile;
    }
    if (profileName.empty()) {
      if (path.empty() && plan->profile) path = ps::cli::resolveProfilePath(*plan->profile, planPath);
      if (path.empty())
        return usage("the plan names no cost profile: give --profile P.json or --cost F=1,I=1,W=1");
      if (!rep.read(path, text)) return ps::cli::kExitUsage;
      profileName = path;
    }
    profile = parseCostProfile(text, path);
  }
  if (!profile.ok()) return rep.invalid(profile.errors());
  if (comm->fixedMs) profile->fixedCommMs = *comm->fixedMs;
  // The layers per stage the measured run used, when it recorded them and they fit.
  if (partition.empty() && sessionRun &&
      static_cast<int>(sessionRun->partition.size()) == plan->pipeline.stages) {
    int total = 0;
    for (int n : sessionRun->partition) total += n;
    if (total == static_cast<int>(profile->layers.size())) partition = sessionRun->partition;
  }
  if (partition.empty()) partition = plan->partition;
  // The measurement: trace files, or a session run.
  Measurement measurement;
  if (sessionRun) {
    measurement.timeline = sessionRun->timeline;
  } else if (int code = readMeasuredTraces(args, rep, importOptions, measurement); code != ps::cli::kExitOk) {
    return code;
  }
  const Timeline& measured = measurement.timeline;

  // PyTorch's runtime lowers a compute-only order before it runs it (UNSHARD/RESHARD,
  // REDUCE_GRAD, SEND/RECV), and its trace shows those actions. A plan without them is compared
  // as that lowering, so that every measured action has its planned one. (A session run is the
  // engine's, which runs the plan as it is.)
  Diagnostics notes;
  if (!sessionRunArg) {
    auto lowered = loweredPlanFor(*plan, measured);
    if (!lowered.ok()) return rep.invalid(lowered.errors());
    if (*lowered) {
      *plan = std::move(**lowered);
      Diagnostic d;
      d.severity = Severity::Note;
      d.code = "compare.lowered";
      d.message = kLoweredNote;
      notes.push_back(std::move(d));
    }
  }
  auto model = makeSimulationModel(*plan, *profile, partition);
  if (!model.ok()) return rep.invalid(model.errors());
  SimulationOptions so;
  so.comm = vo.comm;
  auto planned = simulate(*plan, *model, so);
  if (!planned.ok()) return rep.invalid(planned.errors());
  if (planned->label.empty()) planned->label = planPath;

  ComparisonOptions co;
  co.alignment = *alignment;
  Comparison c = compareTimelines(*plan, *planned, measured, co);

  // Warnings (trace oddities, simulation and matching problems) on stderr in both modes.
  for (const auto& d : measured.diagnostics) notes.push_back(d);
  for (const auto& d : planned->diagnostics) notes.push_back(d);
  for (const auto& d : c.diagnostics) notes.push_back(d);
  if (!notes.empty()) std::cerr << formatDiagnostics(notes);

  const CompareReport printed{planPath,    *plan, *model,      *planned,    measured,
                              measurement, c,     profileName, uncalibrated};
  if (args.has("--json"))
    printCompareJson(std::cout, printed);
  else
    printCompareText(std::cout, printed, gaps);
  // A mostly-unmatched comparison (compare.unmatched) is printed, but is no result.
  return hasErrors(c.diagnostics) ? ps::cli::kExitInvalid : ps::cli::kExitOk;
}

const ps::cli::FlagCommandRegistrar kCompare({"compare",
                                              "compare a plan's simulated timeline with measured traces",
                                              kUsage,
                                              {"--profile", "--cost", "--comm", "--partition", "--set",
                                               "--align", "--side", "--iteration", "--trace-step", "--gaps"},
                                              {"--json", "--batch-p2p", "--progress"},
                                              {2, static_cast<std::size_t>(-1),
                                               "expected PLAN and at least one TRACE (or DB:ID)"},
                                              runCompare});

}  // namespace
