// `run --hosts` and `run --print-launch` (run_cluster.h).
#include "run_cluster.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "common/command.h"
#include "pipestudio/core/io/chrome_trace.h"
#include "pipestudio/core/io/cluster.h"
#include "pipestudio/core/io/run_events.h"
#include "pipestudio/engine/cluster_launcher.h"

namespace ps::cli {

namespace {

constexpr int kExitCancelled = 130;

std::string flagName(const std::string& a) {
  return a.substr(0, a.find('='));
}

// A plain file name: what a rank can be given relative to its staged folder, and what its
// messages then show (never a flag, never a hidden or a path).
bool plainFileName(const std::string& name) {
  return !name.empty() && name.size() < 200 &&
         (std::isalnum(static_cast<unsigned char>(name[0])) || name[0] == '_') &&
         name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") ==
             std::string::npos;
}

// The name a file is staged under: its own base name when that is a plain file name (so the
// ranks' messages name it as the user does), else `fallback`; never a name already taken.
std::string stagedName(const std::string& path, const std::string& fallback,
                       std::vector<std::string>& taken) {
  const std::string base = path.substr(path.find_last_of('/') + 1);
  std::string name = path != "-" && plainFileName(base) ? base : fallback;
  for (int i = 2; std::find(taken.begin(), taken.end(), name) != taken.end(); ++i)
    name = std::to_string(i) + "-" + fallback;
  taken.push_back(name);
  return name;
}

// The ranks' arguments: the run's own, less what only the launcher does (hosts, events, the
// session, the trace: `keepRank0Flags` keeps these for ranks started by torchrun or srun on
// this host, where rank 0 does them), with the schedule and the files the ranks read (a
// TorchScript model, an --inputs batch) at `dir` + their staged names ("" + name: relative to
// the staged folder a rank starts in).
struct RankArgs {
  std::vector<std::string> args;
  std::vector<core::StagedFile> files;  // the schedule first, then the model and the batch, as given
};

RankArgs rankArguments(const ClusterRun& c, const std::string& dir, bool staging, bool keepRank0Flags) {
  static const std::vector<std::string> launcherOnly{"--hosts",   "--print-launch", "--events", "--session",
                                                     "--profile", "--trace",        "--nproc",  "--format"};
  static const std::vector<std::string> launcherOnlyHere{"--hosts", "--print-launch", "--nproc", "--format"};
  const auto& dropped = keepRank0Flags ? launcherOnlyHere : launcherOnly;
  RankArgs out;
  std::vector<std::string> taken;
  const std::string scheduleName =
      stagedName(c.path, c.format == "csv" ? "schedule.csv" : "schedule.pipe", taken);
  out.files.push_back({c.path == "-" ? "SCHEDULE" : c.path, dir + scheduleName, "the schedule"});
  const std::string modelFile =
      c.options->model.kind == engine::ModelKind::TorchScript ? c.options->model.path : "";
  const std::string inputsFile = c.options->inputsPath;
  std::string modelStaged, inputsStaged;
  if (!modelFile.empty()) {
    modelStaged = dir + stagedName(modelFile, "model.pt", taken);
    out.files.push_back({modelFile, modelStaged, "the TorchScript model"});
  }
  if (!inputsFile.empty()) {
    inputsStaged = dir + stagedName(inputsFile, "inputs.pt", taken);
    out.files.push_back({inputsFile, inputsStaged, "the --inputs batch"});
  }
  bool positionalDone = false;
  for (size_t i = 0; i < c.argv.size(); ++i) {
    const std::string& a = c.argv[i];
    const bool isFlag = a.size() > 2 && a.rfind("--", 0) == 0;
    if (isFlag) {
      const std::string name = flagName(a);
      const bool inlineValue = a.find('=') != std::string::npos;
      const bool takesValue = std::find(c.valueFlags.begin(), c.valueFlags.end(), name) != c.valueFlags.end();
      std::string value = inlineValue ? a.substr(a.find('=') + 1)
                                      : (takesValue && i + 1 < c.argv.size() ? c.argv[i + 1] : "");
      if (takesValue && !inlineValue) ++i;
      if (name == "--cancel-on-eof") continue;
      if (std::find(dropped.begin(), dropped.end(), name) != dropped.end()) continue;
      if (staging && name == "--model" && !modelFile.empty()) {
        // torchscript:path=net.pt,features=4 -> the staged copy's path.
        const size_t p = value.find("path=");
        if (p != std::string::npos) {
          const size_t e = value.find(',', p);
          value.replace(p + 5, (e == std::string::npos ? value.size() : e) - p - 5, modelStaged);
        }
      }
      if (staging && name == "--inputs") value = inputsStaged;
      out.args.push_back(name);
      if (takesValue) out.args.push_back(value);
      continue;
    }
    if (!positionalDone && a == c.path) {
      out.args.push_back(staging ? out.files[0].staged : a);
      positionalDone = true;
      continue;
    }
    out.args.push_back(a);
  }
  out.args.push_back("--format");
  out.args.push_back(c.format);
  return out;
}

}  // namespace

int runOnCluster(const ClusterRun& c) {
  using namespace ps::core;
  std::string text, error;
  const auto kind = c.printLaunch == "slurm" ? LaunchKind::Slurm : LaunchKind::Torchrun;
  // The rendezvous port of printed commands: MASTER_PORT when set, else torchrun's default.
  int port = 29500;
  if (const char* mp = std::getenv("MASTER_PORT"); mp && std::atoi(mp) > 0 && std::atoi(mp) < 65536)
    port = std::atoi(mp);
  const int devices = c.executed->pipeline.devices;
  if (c.hostsPath.empty()) {
    // --print-launch alone: the ranks on this host, reading the files where this run would.
    if (c.path == "-") {
      std::cerr << "pipestudio-cli run: --print-launch prints commands that read the schedule from a file: "
                   "save it and give its path instead of -\n";
      return kExitUsage;
    }
    const RankArgs ra = rankArguments(c, "", /*staging=*/false, /*keepRank0Flags=*/true);
    std::cout << printLocalLaunchCommands(kind, devices, ra.args, port);
    return kExitOk;
  }
  if (!readInput(c.hostsPath, text, error)) {
    std::cerr << "pipestudio-cli run: " << error << "\n";
    return kExitUsage;
  }
  auto hosts = parseHostFile(text, c.hostsPath);
  if (!hosts) {
    std::cerr << formatDiagnostics(hosts.errors(), &text);
    return kExitUsage;
  }
  const int world = clusterWorldSize(*hosts);
  if (world != devices) {
    std::cerr << "pipestudio-cli run: " << c.hostsPath << " gives " << world
              << " ranks (one per device), the schedule has " << devices << " devices\n";
    return kExitUsage;
  }

  if (!c.printLaunch.empty()) {
    // Every file the ranks read goes to the same folder on every host; the first lines say how.
    const RankArgs ra = rankArguments(c, "/tmp/pipestudio-run/", /*staging=*/true, /*keepRank0Flags=*/false);
    std::cout << printLaunchCommands(*hosts, kind, ra.args, ra.files, port);
    return kExitOk;
  }

  // Each rank starts in its host's staged folder and is given the files by their staged
  // names, which are the user's own file names where they are plain: the ranks' messages name
  // the files as the user does, not a temporary folder.
  const RankArgs ra = rankArguments(c, "", /*staging=*/true, /*keepRank0Flags=*/false);
  engine::ClusterLaunchOptions lo;
  lo.hosts = *hosts;
  lo.files.push_back({ra.files[0].staged, c.text});
  // Files the ranks read go with the schedule: a TorchScript model, an --inputs batch.
  for (size_t f = 1; f < ra.files.size(); ++f) {
    std::string content;
    if (!readInput(ra.files[f].local, content, error)) {
      std::cerr << "pipestudio-cli run: " << error << "\n";
      return kExitUsage;
    }
    lo.files.push_back({ra.files[f].staged, std::move(content)});
  }
  lo.args = ra.args;
  lo.environment = {{kScheduleNameVariable, c.name}};
  lo.rank0Args = {"--events", "jsonl"};
  lo.connectTimeoutSeconds = c.connectTimeoutSeconds;
  lo.cancel = c.cancel;
  std::ostream& human = c.events ? std::cerr : std::cout;

  std::vector<std::string> kinds;
  for (const auto& k : c.executed->userKinds) kinds.push_back(k.name);
  std::vector<RunEventReader> readers;
  for (int r = 0; r < world; ++r) {
    readers.emplace_back("rank " + std::to_string(r));
    readers.back().setUserKinds(kinds);
  }
  std::vector<std::string> rankHost(static_cast<size_t>(world));
  {
    int r = 0;
    for (const auto& h : *hosts)
      for (int l = 0; l < h.ranks; ++l) rankHost[static_cast<size_t>(r++)] = h.label();
  }
  bool errorEmitted = false;
  // Every device's ops live: each rank's own op events go on as they come (rank 0 alone
  // streams only its device until it merges the others' at the end); those merged copies are
  // then left out, so a reader gets each op once.
  std::set<std::tuple<int, int, int>> forwarded;  // (iteration, device, step)
  auto opKey = [](const nlohmann::json& j) {
    return std::make_tuple(j.value("iteration", -1), j.value("device", -1), j.value("step", -1));
  };
  lo.onEvent = [&](int r, const std::string& line) {
    readers[static_cast<size_t>(r)].feed(line + "\n");
    if (!c.events) return;
    const bool maybeOp = line.find("\"op\"") != std::string::npos;
    if (r == 0) {
      if (maybeOp) {
        auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_object() && j.value("type", "") == "op" && j.value("device", 0) != 0 &&
            forwarded.count(opKey(j)))
          return;
      }
      emitEventLine(line);
    } else if (maybeOp) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_object() && j.value("type", "") == "op" && j.value("device", -1) == r &&
          !readers[0].finished()) {
        forwarded.insert(opKey(j));
        emitEventLine(line);
      }
    }
  };
  lo.onStderr = [&](int r, const std::string& line) {
    // One write a line: a reader of our stderr (the GUI's log) gets whole lines.
    if (r == 0)
      human << (line + "\n");
    else
      std::cerr << ("[rank " + std::to_string(r) + " on " + rankHost[static_cast<size_t>(r)] + "] " + line +
                    "\n");
    human.flush();
  };
  lo.onPhase = [&](const std::string& m) { std::cerr << ("pipestudio-cli run: " + m + "\n"); };
  lo.onRankFailed = [&](const engine::ClusterRankEnd& e, const std::string& message) {
    std::cerr << ("pipestudio-cli run: " + message + "; ending the other ranks\n");
    // Rank 0 failing on its own (exit 1) has reported why itself.
    if (e.rank == 0 && e.exitCode != 255) return;
    if (c.events && !readers[0].finished())
      emitEventLine(run_event::error({"cluster.rank-lost", message, e.rank, -1}));
    errorEmitted = true;
  };

  const auto started = std::chrono::system_clock::now();
  auto res = engine::launchClusterRanks(lo);
  for (auto& r : readers) r.end();

  engine::RunReport rep;
  const RunEventReader& r0 = readers[0];
  rep.started = r0.started();
  rep.finished = r0.finished();
  int exitStatus = kExitInvalid;
  if (!res) {
    // Nothing ran: a host is unreachable, refuses the key, lacks the CLI or another version.
    std::cerr << formatDiagnostics(res.errors(), &text);
    if (c.events) emitEventLine(run_event::refused(res.error().code, res.error().message));
    rep.status = ps::core::RunState::Failed;
    rep.diagnostics = res.errors();
    rep.timeline.devices = devices;
    rep.timeline.label = c.executed->name;
    rep.timeline.source = TimelineSource::Measured;
    rep.timeline.complete = false;
    rep.timeline.diagnostics = res.errors();
  } else if (r0.finished()) {
    // Rank 0's own report (it gathers every device's timeline) stands.
    const auto& f = *r0.finished();
    rep.status = f.state;
    rep.timeline = r0.timeline();
    rep.iterationMs = f.iterationMs;
    rep.losses = f.losses;
    if (f.gradientCheck) {
      rep.gradients.ran = true;
      rep.gradients.passed = f.gradientCheck->passed;
      rep.gradients.maxRelativeError = f.gradientCheck->maxRelativeError;
      rep.gradients.worstParameter = f.gradientCheck->worstParameter;
    }
    for (const auto& e : r0.errors()) rep.diagnostics.push_back(makeError(e.code, e.message));
    if (!res->failure.empty() && rep.status != ps::core::RunState::Succeeded)
      rep.diagnostics.insert(rep.diagnostics.begin(), makeError("cluster.rank-lost", res->failure));
    exitStatus = rep.status == ps::core::RunState::Succeeded ? (res->exitStatus == 0 ? kExitOk : kExitInvalid)
                 : rep.status == ps::core::RunState::Cancelled ? kExitCancelled
                                                               : kExitInvalid;
  } else {
    // Rank 0 could not report: the partial timeline from what each rank sent about its device.
    Timeline tl = partialTimelineFromRanks(readers, devices, c.executed->name);
    const bool cancelled = res->cancelled && res->failure.empty();
    Diagnostic d =
        cancelled
            ? makeError("engine.cancelled", "cancelled before rank 0 could report")
            : makeError("cluster.rank-lost",
                        (res->failure.empty() ? std::string("rank 0 ended without a report") : res->failure) +
                            "; the run is failed with its partial timeline");
    tl.diagnostics.push_back(d);
    tl.metrics = computeMetrics(tl);
    rep.status = cancelled ? ps::core::RunState::Cancelled : ps::core::RunState::Failed;
    rep.diagnostics.push_back(d);
    rep.timeline = tl;
    if (r0.started()) rep.partition = r0.started()->partition;
    if (c.events) {
      if (!errorEmitted || cancelled) emitEventLine(run_event::error({d.code, d.message, -1, -1}));
      emitEventLine(
          run_event::endedEarly(cancelled ? ps::core::RunState::Cancelled : ps::core::RunState::Failed, tl));
    }
    human << c.name << ": " << (cancelled ? "cancelled" : "failed") << " (" << devices << " devices on "
          << hosts->size() << " hosts; " << tl.ops.size() << " ops measured before the end)\n";
    exitStatus = cancelled ? kExitCancelled : kExitInvalid;
  }
  if (res && !res->failure.empty()) std::cerr << ("pipestudio-cli run: failed: " + res->failure + "\n");
  if (!c.tracePath.empty() && res) {
    if (!writeOutput(c.tracePath, exportChromeTrace(rep.timeline, c.executed), error)) {
      std::cerr << "pipestudio-cli run: " << error << "\n";
      return kExitUsage;
    }
  }
  if (!c.sessionPath.empty()) {
    RunSessionRecording rec{c.sessionPath, c.executed, c.sessionText, clusterTargetName(*hosts),
                            c.options,     &rep,       c.prediction};
    std::string hostFile = formatHostFile(*hosts);
    while (!hostFile.empty() && std::isspace(static_cast<unsigned char>(hostFile.back())))
      hostFile.pop_back();
    rec.host = hostFile;
    rec.worldSize = world;
    rec.startedMs = std::chrono::duration_cast<std::chrono::milliseconds>(started.time_since_epoch()).count();
    if (!recordRunInSession(rec, human)) return kExitInvalid;
  }
  return exitStatus;
}

}  // namespace ps::cli
