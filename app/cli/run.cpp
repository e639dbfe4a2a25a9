// pipestudio-cli run FILE --model SPEC ... : executes a schedule for real through the libtorch
// engine (CPU threads, local Gloo processes, torchrun-style ranks) and reports the measured
// timeline, the loss and, with --check-gradients, the gradient comparison.
#ifdef PIPESTUDIO_HAVE_ENGINE
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cli.h"
#include "pipestudio/core/chrome_trace.h"
#include "pipestudio/core/dsl.h"
#include "pipestudio/core/pytorch_csv.h"
#include "pipestudio/core/run_events.h"
#include "pipestudio/core/validator.h"
#include "pipestudio/engine/engine.h"
#include "pipestudio/engine/launcher.h"
#include "run_session.h"

namespace {

const char* kUsage =
    "usage: pipestudio-cli run FILE --model SPEC [--device cpu|cuda] [--nproc N] [--iterations K]\n"
    "         [--warmup K] [--microbatch-size B] [--check-gradients] [--trace OUT.json]\n"
    "         [--events jsonl] [--timeout S] [--partition N,N,...] [--seed N] [--threads N]\n"
    "         [--format pipe|csv] [--set name=value]... [--inject-fault KIND:OP] [--cancel-on-eof]\n"
    "         [--session DB [--profile P.json]]\n\n"
    "Runs the schedule in FILE (.pipe or PyTorch .csv; - reads stdin) on a built-in model split\n"
    "into the schedule's stages: SPEC is like 'mlp:layers=8,hidden=512' or\n"
    "'gpt:layers=8,hidden=256,heads=4,seq=128,vocab=1000' (add dtype=f64 for double).\n"
    "Each device runs its step list on a thread; --nproc N starts N local processes (one per\n"
    "device) that exchange tensors through c10d Gloo; ranks also start from torchrun-style\n"
    "RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT.\n"
    "--partition gives layers per stage (default: balanced by the model's compute).\n"
    "--check-gradients compares every gradient and the loss with the unpipelined model on\n"
    "the whole batch. --events jsonl streams the run-event protocol (docs/engine.md) on\n"
    "stdout. --inject-fault throw|nan|drop:OP makes one op fail (testing).\n"
    "--cancel-on-eof: the run is cancelled when stdin ends (a GUI or ssh client went away); with\n"
    "FILE '-' the schedule on stdin ends at a line '#%end-of-schedule' and stdin stays open.\n"
    "--session DB records the measured run in a session file together with its prediction: the\n"
    "schedule simulated with --profile P.json, else the model's analytic cost profile.\n"
    "Exit status: 0 finished (and gradients equal), 1 invalid schedule, failed, cancelled or\n"
    "gradient mismatch, 2 usage.\n";

std::atomic<bool> g_cancel{false};
void onSignal(int) { g_cancel = true; }

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int usage(const std::string& message) {
  std::cerr << "pipestudio-cli run: " << message << "\n" << kUsage;
  return ps::cli::kExitUsage;
}

void emitLine(const std::string& line) {
  std::cout << line << "\n";
  std::cout.flush();
}

int refuse(bool events, const ps::core::Diagnostics& ds, const std::string* text, int code) {
  std::cerr << ps::core::formatDiagnostics(ds, text);
  if (events)
    emitLine(nlohmann::json{{"type", "error"},
                            {"protocol_version", ps::core::kRunEventProtocolVersion},
                            {"code", ds.empty() ? "engine.refused" : ds.front().code},
                            {"message", ds.empty() ? "refused" : ds.front().message},
                            {"stage", "refused"}}
                 .dump());
  return code;
}

bool parseIntList(const std::string& s, std::vector<int>& out) {
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t pos = 0;
      int v = std::stoi(item, &pos);
      if (pos != item.size()) return false;
      out.push_back(v);
    } catch (...) {
      return false;
    }
  }
  return !out.empty();
}

bool parseNumber(const std::string& s, double& out) {
  try {
    size_t pos = 0;
    out = std::stod(s, &pos);
    return pos == s.size();
  } catch (...) {
    return false;
  }
}

// --cancel-on-eof: the schedule on stdin ends at kScheduleEndMarker; false when stdin ended first.
bool readScheduleUntilMarker(std::string& out) {
  std::string line;
  while (std::getline(std::cin, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line == ps::core::kScheduleEndMarker) return true;
    out += line;
    out += '\n';
  }
  return false;
}

// --cancel-on-eof: a thread waits for the end of stdin and cancels the run (the GUI closed
// the pipe, or the ssh connection carrying it ended).
void cancelOnStdinEof() {
  std::thread([] {
    char buf[256];
    for (;;) {
      ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
      if (n > 0 || (n < 0 && errno == EINTR)) continue;
      g_cancel = true;
      return;
    }
  }).detach();
}

int runRun(const std::vector<std::string>& argv) {
  using namespace ps::core;
  using namespace ps::engine;
  const std::vector<std::string> valueFlags{"--model", "--device", "--nproc", "--iterations", "--warmup",
                                            "--microbatch-size", "--trace", "--events", "--timeout", "--partition",
                                            "--seed", "--threads", "--format", "--set", "--inject-fault",
                                            "--session", "--profile"};
  ps::cli::Args args(argv, valueFlags, {"--check-gradients", "--cancel-on-eof"});
  if (!args.ok()) return usage(args.error());
  if (args.positionals().size() != 1) return usage("expected one FILE (or -)");
  const std::string eventsMode = args.value("--events");
  if (!eventsMode.empty() && eventsMode != "jsonl") return usage("--events takes 'jsonl'");
  const bool events = eventsMode == "jsonl";
  if (!args.has("--model")) return usage("--model SPEC is required (e.g. mlp:layers=8,hidden=512)");

  RunOptions o;
  auto model = parseModelSpec(args.value("--model"));
  if (!model) return usage(model.error().message);
  o.model = *model;
  o.device = args.value("--device", "cpu");
  if (o.device != "cpu" && o.device != "cuda") return usage("--device is cpu or cuda");
  o.checkGradients = args.has("--check-gradients");
  double num = 0;
  auto intFlag = [&](const char* flag, int fallback, int minimum, int& out) -> bool {
    std::string v = args.value(flag);
    if (v.empty()) {
      out = fallback;
      return true;
    }
    if (!parseNumber(v, num) || num != static_cast<int>(num) || num < minimum) return false;
    out = static_cast<int>(num);
    return true;
  };
  int nproc = 1, seed = 1;
  if (!intFlag("--nproc", 1, 1, nproc)) return usage("--nproc needs a positive integer");
  if (!intFlag("--iterations", 1, 1, o.iterations)) return usage("--iterations needs a positive integer");
  if (!intFlag("--warmup", 0, 0, o.warmup)) return usage("--warmup needs an integer >= 0");
  if (!intFlag("--microbatch-size", 2, 1, o.microbatchSize)) return usage("--microbatch-size needs a positive integer");
  if (!intFlag("--seed", 1, 0, seed)) return usage("--seed needs an integer >= 0");
  if (!intFlag("--threads", 0, 0, o.threads)) return usage("--threads needs an integer >= 0");
  o.seed = static_cast<std::uint64_t>(seed);
  if (args.has("--timeout")) {
    if (!parseNumber(args.value("--timeout"), o.timeoutSeconds) || o.timeoutSeconds <= 0)
      return usage("--timeout needs a positive number of seconds");
  }
  if (args.has("--partition") && !parseIntList(args.value("--partition"), o.partition))
    return usage("--partition needs layers per stage, e.g. 2,3,3");
  if (args.has("--inject-fault")) {
    auto f = parseFaultInjection(args.value("--inject-fault"));
    if (!f) return usage(f.error().message);
    o.fault = *f;
  }

#ifdef PIPESTUDIO_HAVE_SESSIONS
  std::optional<ps::cli::PredictionProfile> predictionProfile;  // --session: read before the run
  if (args.has("--profile")) {
    if (!args.has("--session")) return usage("--profile is the prediction's cost profile: give it with --session DB");
    auto p = ps::cli::loadPredictionProfile(args.value("--profile"));
    if (!p) return refuse(events, p.errors(), nullptr, ps::cli::kExitInvalid);
    predictionProfile = std::move(*p);
  }
#else
  if (args.has("--session")) return usage("--session needs a build with session support");
#endif
  auto env = distributedFromEnvironment();
  if (!env) return usage(env.error().message);
  const bool cancelOnEof = args.has("--cancel-on-eof");
  if (nproc > 1 && !env->has_value()) {
    // The launcher: start the ranks (this same command) and wait for them.
    std::string error;
    std::vector<std::string> rankArgs{"run"};
    rankArgs.insert(rankArgs.end(), argv.begin(), argv.end());
    std::string scheduleFile;
    if (args.positionals()[0] == "-") {
      // The ranks cannot all read one stdin: hand them the schedule in a file.
      std::string text;
      if (cancelOnEof ? !readScheduleUntilMarker(text) : !ps::cli::readInput("-", text, error)) {
        std::cerr << "pipestudio-cli run: stdin ended before the schedule did (cancelled)\n";
        return ps::cli::kExitInvalid;
      }
      char tmpl[] = "/tmp/pipestudio-run-XXXXXX";
      int fd = mkstemp(tmpl);
      if (fd < 0 || ::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
        std::cerr << "pipestudio-cli run: cannot write a temporary schedule file\n";
        return ps::cli::kExitUsage;
      }
      ::close(fd);
      scheduleFile = tmpl;
      for (size_t i = 1; i < rankArgs.size(); ++i)  // the positional '-', not a flag's value
        if (rankArgs[i] == "-" &&
            std::find(valueFlags.begin(), valueFlags.end(), rankArgs[i - 1]) == valueFlags.end())
          rankArgs[i] = scheduleFile;
    }
    int rc = launchLocalRanks("/proc/self/exe", rankArgs, nproc, std::max(2.0, std::min(o.timeoutSeconds, 10.0)), error);
    if (!scheduleFile.empty()) ::unlink(scheduleFile.c_str());
    if (rc < 0) {
      std::cerr << "pipestudio-cli run: " << error << "\n";
      return ps::cli::kExitInvalid;
    }
    return rc;
  }
  if (env->has_value()) o.distributed = **env;
  const bool rank0 = o.distributed.rank == 0;

  const std::string path = args.positionals()[0];
  std::string format = args.value("--format", endsWith(path, ".csv") ? "csv" : "pipe");
  if (format != "pipe" && format != "csv") return usage("--format is pipe or csv, not '" + format + "'");
  std::string text, error;
  if (cancelOnEof && path == "-") {
    if (!readScheduleUntilMarker(text)) {
      std::cerr << "pipestudio-cli run: stdin ended before the schedule did (cancelled)\n";
      return ps::cli::kExitInvalid;
    }
  } else if (!ps::cli::readInput(path, text, error)) {
    std::cerr << "pipestudio-cli run: " << error << "\n";
    return ps::cli::kExitUsage;
  }
  const std::string name = path == "-" ? "<stdin>" : path;
  Result<Schedule> schedule = Diagnostics{};
  if (format == "csv") {
    CsvReadOptions co;
    co.filename = name;
    schedule = readPytorchCsv(text, co);
  } else {
    DslOptions dop;
    dop.filename = name;
    for (const auto& a : args.values("--set"))
      if (!parseOverride(a, dop, error)) return usage("--set " + error);
    schedule = parseDsl(text, dop);
  }
  if (!schedule) return refuse(events && rank0, schedule.errors(), &text, ps::cli::kExitInvalid);
  auto report = validateSchedule(*schedule);
  if (!report.valid()) {
    for (auto& d : report.diagnostics)
      if (d.location.file.empty()) d.location.file = name;
    return refuse(events && rank0, report.diagnostics, &text, ps::cli::kExitInvalid);
  }
  if (schedule->name.empty()) schedule->name = name;

  std::signal(SIGINT, onSignal);
  std::signal(SIGTERM, onSignal);
  o.cancel = &g_cancel;
  // Only rank 0 watches: its cancel ends the peers (they fail on it), while a peer cancelling
  // first would make rank 0 report a failure instead of the cancel.
  if (cancelOnEof && rank0) cancelOnStdinEof();
  if (events && rank0) o.events = emitLine;
  std::ostream& human = events ? std::cerr : std::cout;

  auto result = runSchedule(*schedule, o);
  if (!result) return refuse(events && rank0, result.errors(), nullptr, ps::cli::kExitInvalid);
  const RunReport& r = *result;
  if (!rank0) return r.status == RunStatus::Finished ? ps::cli::kExitOk : ps::cli::kExitInvalid;

  const auto& m = r.timeline.metrics;
  human << name << ": " << runStatusName(r.status) << " (" << schedule->pipeline.devices << " devices, "
        << schedule->pipeline.stages << " stages, " << schedule->pipeline.microbatches << " micro-batches of "
        << o.microbatchSize << ", model " << modelSpecToString(o.model) << ", " << r.parameterCount
        << " parameters, partition";
  for (size_t i = 0; i < r.partition.size(); ++i) human << (i ? "," : " ") << r.partition[i];
  human << ")\n";
  if (!r.iterationMs.empty()) {
    std::vector<double> it = r.iterationMs;
    std::sort(it.begin(), it.end());
    human << "  iteration: median " << it[it.size() / 2] << " ms over " << it.size() << " measured ("
          << o.warmup << " warm-up)\n";
  }
  human << "  last iteration: makespan " << m.makespan << " ms, bubble ratio " << m.bubbleRatio << ", "
        << r.timeline.ops.size() << " ops, " << r.timeline.transfers.size() << " transfers\n";
  if (!r.losses.empty()) human << "  loss: " << r.losses.back() << "\n";
  if (r.gradients.ran) {
    human << "  gradient check: " << (r.gradients.passed ? "passed" : "FAILED") << ", max relative error "
          << r.gradients.maxRelativeError << " (" << r.gradients.worstParameter << "), loss relative error "
          << r.gradients.lossRelativeError << ", tolerance " << r.gradients.tolerance << ", "
          << r.gradients.parameters.size() << " parameters\n";
  }
  for (const auto& d : r.diagnostics) std::cerr << "pipestudio-cli run: " << runStatusName(r.status) << ": " << d.message << "\n";
  if (args.has("--trace")) {
    if (!ps::cli::writeOutput(args.value("--trace"), exportChromeTrace(r.timeline, &*schedule), error)) {
      std::cerr << "pipestudio-cli run: " << error << "\n";
      return ps::cli::kExitUsage;
    }
  }
#ifdef PIPESTUDIO_HAVE_SESSIONS
  if (args.has("--session")) {
    ps::cli::RunSessionRecording rec{args.value("--session"), &*schedule, format == "pipe" ? text : printDsl(*schedule),
                                     o.distributed.worldSize > 1 ? "gloo" : o.device, &o, &r, predictionProfile};
    if (!ps::cli::recordRunInSession(rec, human)) return ps::cli::kExitInvalid;
  }
#endif
  if (r.status != RunStatus::Finished) return ps::cli::kExitInvalid;
  if (r.gradients.ran && !r.gradients.passed) return ps::cli::kExitInvalid;
  return ps::cli::kExitOk;
}

const ps::cli::CommandRegistrar kRegister{{"run", "execute a schedule on a real model (libtorch)", kUsage, runRun}};

}  // namespace
#endif  // PIPESTUDIO_HAVE_ENGINE
