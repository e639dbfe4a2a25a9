// `run --hosts` and `run --print-launch` (run_cluster.h).
#include "run_cluster.h"

#include <unistd.h>

#include <algorithm>
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

// The ranks' arguments: the run's own, less what only the launcher does (hosts, events, the
// session, the trace), the schedule and a TorchScript file as staged ("{dir}/...").
struct RankArgs {
  std::vector<std::string> args;
  std::string modelFile;   // a TorchScript model to stage (as model.pt), as given
  std::string inputsFile;  // --inputs BATCH.pt to stage (as inputs.pt), as given
};

RankArgs rankArguments(const ClusterRun& c, const std::string& stagedSchedule, const std::string& stagedModel,
                       const std::string& stagedInputs) {
  static const std::vector<std::string> launcherOnly{"--hosts",   "--print-launch", "--events", "--session",
                                                     "--profile", "--trace",        "--nproc",  "--format"};
  RankArgs out;
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
      if (std::find(launcherOnly.begin(), launcherOnly.end(), name) != launcherOnly.end()) continue;
      if (name == "--model" && value.rfind("torchscript:", 0) == 0) {
        // torchscript:path=net.pt,features=4 -> the staged copy's path.
        std::string spec = value;
        const size_t p = spec.find("path=");
        if (p != std::string::npos) {
          const size_t e = spec.find(',', p);
          out.modelFile = spec.substr(p + 5, e == std::string::npos ? std::string::npos : e - p - 5);
          spec.replace(p + 5, out.modelFile.size(), stagedModel);
        }
        value = spec;
      }
      if (name == "--inputs") {
        out.inputsFile = value;
        value = stagedInputs;
      }
      out.args.push_back(name);
      if (takesValue) out.args.push_back(value);
      continue;
    }
    if (!positionalDone && a == c.path) {
      out.args.push_back(stagedSchedule);
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
  if (c.hostsPath.empty()) {
    std::cerr << "pipestudio-cli run: --print-launch needs --hosts FILE (the nodes and their ranks)\n";
    return kExitUsage;
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
  const int devices = c.executed->pipeline.devices;
  if (world != devices) {
    std::cerr << "pipestudio-cli run: " << c.hostsPath << " gives " << world
              << " ranks (one per device), the schedule has " << devices << " devices\n";
    return kExitUsage;
  }
  // Staged under its own name (the ranks' messages name it), when that is a plain file name.
  std::string scheduleFile = c.format == "csv" ? "schedule.csv" : "schedule.pipe";
  if (c.path != "-") {
    const std::string base = c.path.substr(c.path.find_last_of('/') + 1);
    if (!base.empty() && base.front() != '.' && base.size() < 200 &&
        base.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") ==
            std::string::npos)
      scheduleFile = base;
  }

  if (!c.printLaunch.empty()) {
    const std::string dir = "/tmp/pipestudio-run";
    RankArgs ra = rankArguments(c, dir + "/" + scheduleFile, dir + "/model.pt", dir + "/inputs.pt");
    const auto kind = c.printLaunch == "slurm" ? LaunchKind::Slurm : LaunchKind::Torchrun;
    // The rendezvous port: MASTER_PORT when set, else torchrun's default.
    int port = 29500;
    if (const char* mp = std::getenv("MASTER_PORT"); mp && std::atoi(mp) > 0 && std::atoi(mp) < 65536)
      port = std::atoi(mp);
    std::cout << printLaunchCommands(*hosts, kind, ra.args, dir + "/" + scheduleFile, port,
                                     c.path == "-" ? std::string("SCHEDULE") : c.path);
    if (!ra.modelFile.empty())
      std::cout << "# and the TorchScript model " << ra.modelFile << " at " << dir
                << "/model.pt on every host\n";
    if (!ra.inputsFile.empty())
      std::cout << "# and the --inputs batch " << ra.inputsFile << " at " << dir
                << "/inputs.pt on every host\n";
    return kExitOk;
  }

  RankArgs ra = rankArguments(c, "{dir}/" + scheduleFile, "{dir}/model.pt", "{dir}/inputs.pt");
  engine::ClusterLaunchOptions lo;
  lo.hosts = *hosts;
  lo.files.push_back({scheduleFile, c.text});
  // Files the ranks read go with the schedule: a TorchScript model, an --inputs batch.
  for (const auto& [local, staged] : {std::pair{ra.modelFile, std::string("model.pt")},
                                      std::pair{ra.inputsFile, std::string("inputs.pt")}}) {
    if (local.empty()) continue;
    std::string content;
    if (!readInput(local, content, error)) {
      std::cerr << "pipestudio-cli run: " << error << "\n";
      return kExitUsage;
    }
    lo.files.push_back({staged, std::move(content)});
  }
  lo.args = ra.args;
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
    RunSessionRecording rec{c.sessionPath, c.executed, c.sessionText, "gloo", c.options, &rep, c.prediction};
    rec.startedMs = std::chrono::duration_cast<std::chrono::milliseconds>(started.time_since_epoch()).count();
    if (!recordRunInSession(rec, human)) return kExitInvalid;
  }
  return exitStatus;
}

}  // namespace ps::cli
