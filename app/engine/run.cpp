// pipestudio-cli run FILE --model SPEC ... : executes a schedule for real through the libtorch
// engine (CPU threads, local Gloo processes, torchrun-style ranks) and reports the measured
// timeline, the loss and, with --check-gradients, the gradient comparison.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <thread>

#include "common/command.h"
#include "common/engine_commands.h"
#include "common/flags.h"
#include "common/schedule_input.h"
#include "pipestudio/core/analysis/validator.h"
#include "pipestudio/core/io/chrome_trace.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/io/pytorch_csv.h"
#include "pipestudio/core/io/run_events.h"
#include "pipestudio/core/io/schedule_file.h"
#include "pipestudio/core/model/hang_report.h"
#include "pipestudio/engine/engine.h"
#include "pipestudio/engine/launcher.h"
#include "run_cluster.h"
#include "run_session.h"

namespace {

const char* kUsage =
    "usage: pipestudio-cli run FILE --model SPEC [--device cpu|cuda] [--nproc N] [--iterations K]\n"
    "         [--warmup K] [--microbatch-size B] [--check-gradients] [--trace OUT.json]\n"
    "         [--events jsonl] [--timeout S] [--connect-timeout S] [--partition N,N,...] [--seed N]\n"
    "         [--threads N] [--format pipe|csv] [--set name=value]... [--inject-fault KIND:OP]\n"
    "         [--cancel-on-eof] [--session DB [--profile P.json]] [--optimizer sgd|adamw [--lr X]]\n"
    "         [--inputs BATCH.pt] [--hosts HOSTS.txt] [--print-launch torchrun|slurm]\n\n"
    "Runs the schedule in FILE (.pipe or PyTorch .csv; - reads stdin) on a model split into the\n"
    "schedule's stages. SPEC is a built-in model, 'mlp:layers=8,hidden=512' or\n"
    "'gpt:layers=8,hidden=256,heads=4,seq=128,vocab=1000' (add dtype=f64 for double), or your own\n"
    "TorchScript module, 'torchscript:path=net.pt[,features=N][,seq=N][,loss=mse|ce]', saved with\n"
    "torch.jit.save(torch.jit.script(model)); it is split at its top-level children, and its\n"
    "forward must be the plain chain of them (nn.Sequential-like; docs/engine.md).\n"
    "Each device runs its step list on a thread; --nproc N starts N local processes (one per\n"
    "device) that exchange tensors through c10d Gloo. Ranks also start from torchrun's variables\n"
    "(RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) or Slurm's (SLURM_PROCID,\n"
    "SLURM_NTASKS, SLURM_NTASKS_PER_NODE, SLURM_JOB_NODELIST); each rank uses cores / ranks on\n"
    "its host intra-op threads unless --threads is given. Every rank must be given the same\n"
    "arguments (checked at the rendezvous). For example, two hosts of 4 ranks each:\n"
    "  torchrun --nnodes 2 --node-rank R --master-addr HOST0 --master-port 29500 \\\n"
    "      --nproc-per-node 4 --no-python pipestudio-cli run s.pipe --model gpt --events jsonl\n"
    "  srun --nodes 2 --ntasks-per-node 4 pipestudio-cli run s.pipe --model gpt\n"
    "(torchrun before PyTorch 2.0 takes only --nproc_per_node, --node_rank, --master_addr,\n"
    "--master_port, --no_python; 2.x takes both spellings, and --print-launch prints those.)\n"
    "--timeout S bounds each wait for a tensor (default 60); --connect-timeout S bounds the\n"
    "rendezvous of the ranks (default 60).\n"
    "--partition gives layers per stage (default: balanced by the model's compute).\n"
    "Data are synthetic, drawn from --seed (docs/engine.md), unless --inputs BATCH.pt gives a\n"
    "batch saved by torch.save: a tensor of inputs, a tuple (inputs, targets) or a dict with\n"
    "'inputs' and 'targets' (targets missing: drawn from the seed); the first micro-batches x\n"
    "--microbatch-size samples are used, and every rank must read the same bytes.\n"
    "--optimizer sgd|adamw makes every iteration a training step: after its last op each device\n"
    "steps its own stages' parameters with libtorch's SGD or AdamW (PyTorch's defaults, learning\n"
    "rate --lr X, default 0.01 for sgd and 0.001 for adamw), timed as an OPTIMIZER op of the\n"
    "timeline; AdamW's state (2 x the parameter bytes) counts in the device's memory. The loss of\n"
    "every iteration is printed. Without it, iterations repeat forward and backward only.\n"
    "--check-gradients compares every gradient (of the first iteration, before any step) and the\n"
    "loss with the unpipelined model on the whole batch. --events jsonl streams the run-event protocol "
    "(docs/engine.md) on\n"
    "stdout. --inject-fault throw|nan|drop|grad:OP makes one op of the schedule fail (testing;\n"
    "grad: the input gradient a B or I sends is off by 1e-4, which --check-gradients must catch).\n"
    "--cancel-on-eof: the run is cancelled when stdin ends (a GUI or ssh client went away); with\n"
    "FILE '-' the schedule on stdin ends at a line '#%end-of-schedule' and stdin stays open.\n"
    "--session DB records the measured run in a session file together with its prediction: the\n"
    "schedule simulated with --profile P.json, else the model's analytic cost profile.\n"
    "With --nproc, a rank that dies (killed, crashed) fails the run at once, naming the rank,\n"
    "its device and the signal; the partial timeline still reaches the events and the session.\n"
    "--hosts HOSTS.txt runs the ranks on several hosts, started over ssh (BatchMode) with torchrun's\n"
    "variables: one host a line, '[user@]host[:port] ranks=N [key=PATH] [cli=PATH] [addr=A] [ssh=OPT]'\n"
    "(docs/cli.md). Every host is checked first (reachable, key, CLI, same protocol), the schedule\n"
    "is staged in a temporary folder there, rank 0's events come back here, a host that fails\n"
    "fails the run at once (named) and ends every rank. --print-launch torchrun|slurm prints the\n"
    "torchrun and srun/sbatch commands for the same run instead of starting it: on the hosts of\n"
    "--hosts (with how to copy every file they read there), or without --hosts on this host.\n"
    "Exit status: 0 finished (and gradients equal), 1 invalid schedule, failed or gradient\n"
    "mismatch, 2 usage, 130 cancelled (SIGINT, SIGTERM, --cancel-on-eof).\n";

constexpr int kExitCancelled = 130;
using ps::cli::kScheduleNameVariable;
// Rank 0 tells its launcher (on the launcher's private event pipe, never on stdout) that the
// session record is written: a rank 0 killed after `finished` but before that still gets one.
constexpr const char* kSessionRecordedLine = "{\"type\":\"pipestudio-session-recorded\"}";

std::atomic<bool> g_cancel{false};
// A launched rank: its launcher's pid, and whether the launcher went away under the run (the
// parent-death signal, or the end of the lifeline).
pid_t g_launcherPid = 0;
std::atomic<bool> g_launcherLost{false};
void onSignal(int) {
  // The launcher's loss is known before the cancel it causes: the run reads them in that order.
  if (g_launcherPid > 0 && getppid() != g_launcherPid) g_launcherLost = true;
  g_cancel = true;
}

int usage(const std::string& message) {
  return ps::cli::Reporter("run", kUsage).usage(message);
}

// A launched rank: its launcher's pipes (launcher.h). -1 when absent.
int inheritedFd(const char* variable) {
  const char* v = std::getenv(variable);
  if (!v || !*v) return -1;
  char* end = nullptr;
  const long fd = std::strtol(v, &end, 10);
  if (*end != '\0' || fd < 0 || fcntl(static_cast<int>(fd), F_GETFD) < 0) return -1;
  return static_cast<int>(fd);
}

// A launched rank watches its lifeline: its end means the launcher is gone (killed, or its
// ssh channel dropped), so the rank cancels, and leaves for good if the cancel is not done
// within a few seconds (a wait on a peer that will never answer).
void watchLifeline(int fd) {
  std::thread([fd] {
    char buf[64];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0 || (n < 0 && errno == EINTR)) continue;
      break;
    }
    g_launcherLost = true;
    g_cancel = true;
    // Rank 0 records the run (its session is a file of this host); the others only end.
    std::this_thread::sleep_for(std::chrono::seconds(10));
    std::_Exit(130);
  }).detach();
}

int refuse(bool events, const ps::core::Diagnostics& ds, const std::string* text, int code) {
  std::cerr << ps::core::formatDiagnostics(ds, text);
  if (events)
    ps::cli::emitEventLine(ps::core::run_event::refused(ds.empty() ? "engine.refused" : ds.front().code,
                                                        ds.empty() ? "refused" : ds.front().message));
  return code;
}

bool parseNumber(const std::string& s, double& out) {
  auto v = ps::cli::parseNumber(s);
  if (v) out = *v;
  return v.has_value();
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

// `--nproc N` without torchrun variables: this process starts the ranks and watches them. It
// reads every rank's run events (a pipe each), so when a rank dies (kill -9, a crash) it names
// the rank, its device and the signal at once, ends the others, and when rank 0 cannot report
// any more it writes the `error` event, the partial timeline and the session record itself.
struct LauncherRun {
  const ps::core::Schedule& schedule;
  const ps::engine::RunOptions& options;
  std::string name;
  bool events = false;
  int nproc = 2;
  std::optional<ps::cli::RunSessionRecording> session;
  std::vector<ps::core::RunEventReader> readers;
  std::string deathMessage;
  bool sessionRecorded = false;
  std::vector<ps::core::StuckDevice> stuckStates;  // a hang the launcher reports itself

  int launch(const std::vector<std::string>& rankArgs) {
    using namespace ps::engine;
    std::vector<std::string> kinds;
    for (const auto& k : schedule.userKinds) kinds.push_back(k.name);
    for (int r = 0; r < nproc; ++r) {
      readers.emplace_back("rank " + std::to_string(r));
      readers.back().setUserKinds(kinds);
    }
    const auto started = std::chrono::system_clock::now();
    LaunchOptions lo;
    lo.program = "/proc/self/exe";
    lo.args = rankArgs;
    lo.nproc = nproc;
    lo.graceSeconds = std::max(2.0, std::min(options.timeoutSeconds, 10.0));
    lo.deathGraceSeconds = 4;
    // Rank 0 gathers the other ranks' reports for at most min(--timeout, 30) + 2 s.
    lo.reportSeconds = std::min(options.timeoutSeconds, 30.0) + 8;
    lo.cancelSeconds = 5;
    lo.cancelled = &g_cancel;
    lo.onEvent = [this](int rank, const std::string& line) {
      if (line == kSessionRecordedLine) {
        sessionRecorded = true;
        return;
      }
      readers[static_cast<size_t>(rank)].feed(line + "\n");
    };
    lo.onRankDied = [this](const RankEnd& e) {
      deathMessage = "rank " + std::to_string(e.rank) + " (device " + std::to_string(e.rank) +
                     ") was killed by " + signalName(e.signal) + " (signal " + std::to_string(e.signal) + ")";
      std::cerr << "pipestudio-cli run: " << deathMessage << "; ending the other ranks\n";
    };
    auto res = launchLocalRanks(lo);
    if (!res) {
      std::cerr << "pipestudio-cli run: " << res.error().message << "\n";
      return ps::cli::kExitInvalid;
    }
    for (auto& r : readers) r.end();
    for (int r : res->stopped)
      std::cerr << "pipestudio-cli run: rank " << r << " (device " << r
                << ") was stopped (SIGSTOP, or a debugger) and never answered: the launcher ended it\n";
    if (res->cancelSignal) {
      // Cancelled: rank 0 reports it when it can; the run ends within seconds either way.
      if (!readers[0].finished())
        takeOver(
            *res, started, true,
            ps::core::makeError("engine.cancelled", "cancelled (" + signalName(res->cancelSignal) +
                                                        ") before rank 0 could report; the ranks were ended"),
            ps::core::RunState::Cancelled);
      return kExitCancelled;
    }
    if (res->death) {
      // Rank 0 outlived the death and reported it (naming the lost peer): its outcome stands,
      // unless it died itself before its session record was written.
      if (readers[0].finished()) {
        if (session && !sessionRecorded && res->death->rank == 0)
          takeOver(*res, started, /*eventsToo=*/false, deathDiagnostic());
        return ps::cli::kExitInvalid;
      }
      takeOver(*res, started, true, deathDiagnostic());
      return ps::cli::kExitInvalid;
    }
    if (res->exitStatus != 0 && !readers[0].finished()) {
      // A failure rank 0 could not report (stopped, or past its time): the launcher does, with
      // where every rank stood as they said before ending.
      takeOver(*res, started, true, hangDiagnostic(*res));
      return ps::cli::kExitInvalid;
    }
    // A rank 0 the launcher had to kill after it reported is no killed run.
    return res->exitStatus > 128 && res->exitStatus != kExitCancelled ? ps::cli::kExitInvalid
                                                                      : res->exitStatus;
  }

  ps::core::Diagnostic deathDiagnostic() const {
    return ps::core::makeError("engine.rank-died",
                               deathMessage + "; the run is failed with its partial timeline");
  }

  // The ranks' own account: the first error a rank sent (a timeout first), and the wait chain
  // from its device through the `stuck` states the ranks sent; a rank that sent none is silent.
  ps::core::Diagnostic hangDiagnostic(const ps::engine::LaunchResult& res) {
    using ps::core::StuckDevice;
    const int D = schedule.pipeline.devices;
    std::vector<StuckDevice> all(static_cast<size_t>(D));
    std::optional<ps::core::RunErrorEvent> root;
    for (int r = 0; r < nproc && r < D; ++r) {
      const auto& rd = readers[static_cast<size_t>(r)];
      for (const auto& st : rd.stuck())
        if (st.device >= 0 && st.device < D) all[static_cast<size_t>(st.device)] = st;
      for (const auto& e : rd.errors())
        if (!root || (e.code == "engine.timeout" && root->code != "engine.timeout")) root = e;
    }
    for (int r = 0; r < nproc && r < D; ++r) {
      StuckDevice& st = all[static_cast<size_t>(r)];
      if (st.device >= 0) continue;
      st.device = r;
      st.state = StuckDevice::State::Silent;
      const bool stopped = std::find(res.stopped.begin(), res.stopped.end(), r) != res.stopped.end();
      const auto& end = res.ends[static_cast<size_t>(r)];
      st.note = stopped                                   ? "stopped (SIGSTOP, or a debugger)"
                : end.signal > 0 && !end.killedByLauncher ? "killed by " + ps::engine::signalName(end.signal)
                                                          : "sent no report";
      const auto tl = readers[static_cast<size_t>(r)].timeline();
      double last = -1;
      for (const auto& op : tl.ops)
        if (op.device == r && op.end > last) {
          last = op.end;
          st.note += ", last op " + schedule.opName(op.op);
        }
    }
    std::string msg = root ? root->message : "the run failed and rank 0 did not report";
    const int from = root && root->device >= 0 ? root->device : 0;
    const auto h = ps::core::describeHang(all, from, "rank");
    if (!h.text.empty()) msg += "; " + ps::core::hangClause(h);
    ps::core::Diagnostic d =
        ps::core::makeError(root && !root->code.empty() ? root->code : "engine.rank-lost", msg);
    d.related = h.stuck;
    std::cerr << "pipestudio-cli run: where every rank stood:\n";
    for (const auto& st : all) std::cerr << "  " << ps::core::describeStuckDevice(st, "rank") << "\n";
    stuckStates = all;
    return d;
  }

  // Rank 0 cannot report: the launcher does, from the events the ranks sent before.
  void takeOver(const ps::engine::LaunchResult& res, std::chrono::system_clock::time_point started,
                bool eventsToo, ps::core::Diagnostic d,
                ps::core::RunState state = ps::core::RunState::Failed) {
    using namespace ps::core;
    const int D = schedule.pipeline.devices;
    Timeline tl = partialTimelineFromRanks(readers, D, schedule.name);
    const int blamed = res.death ? res.death->rank : d.related.empty() ? -1 : d.related.front().device;
    tl.diagnostics.push_back(d);
    tl.metrics = computeMetrics(tl);
    const std::string token(runEventStatusToken(state));
    if (events && eventsToo) {
      for (const auto& st : stuckStates) ps::cli::emitEventLine(ps::core::run_event::stuck(st));
      RunErrorEvent e{d.code, d.message, blamed, -1};
      e.related = d.related;
      ps::cli::emitEventLine(ps::core::run_event::error(e));
      ps::cli::emitEventLine(ps::core::run_event::endedEarly(state, tl));
    }
    std::ostream& human = events ? std::cerr : std::cout;
    if (eventsToo) {
      human << name << ": " << token << " (" << D << " devices, " << schedule.pipeline.stages << " stages, "
            << schedule.pipeline.microbatches << " micro-batches; " << tl.ops.size()
            << " ops measured before the " << (state == RunState::Cancelled ? "cancel" : "failure") << ")\n";
      std::cerr << "pipestudio-cli run: " << token << ": " << d.message << "\n";
    }
    if (session) {
      ps::engine::RunReport rep;
      rep.status = state;
      rep.diagnostics.push_back(d);
      rep.stuck = stuckStates;
      rep.timeline = tl;
      rep.started = readers[0].started();
      if (rep.started) rep.partition = rep.started->partition;
      session->report = &rep;
      session->startedMs =
          std::chrono::duration_cast<std::chrono::milliseconds>(started.time_since_epoch()).count();
      ps::cli::recordRunInSession(*session, human);
    }
  }
};

// The flags `run` takes with a value; the rest are switches (kRegister).
const std::vector<std::string> kValueFlags{
    "--model",     "--device", "--nproc",   "--iterations",      "--warmup",       "--microbatch-size",
    "--trace",     "--events", "--timeout", "--connect-timeout", "--partition",    "--seed",
    "--threads",   "--format", "--set",     "--inject-fault",    "--session",      "--profile",
    "--optimizer", "--lr",     "--inputs",  "--hosts",           "--print-launch", "--comm"};

// One `run`, in steps: its flags, its schedule, the process counts checked, then the run on
// the hosts of --hosts, as the launcher of --nproc ranks, or here (one process, or one rank).
// Each step returns the exit code when the command ends there.
struct RunCommand {
  const ps::cli::Args& args;
  ps::engine::RunOptions o;
  int nproc = 1;
  bool events = false;        // --events jsonl
  bool cancelOnEof = false;   // --cancel-on-eof
  bool launchedRank = false;  // started as a rank (RANK / WORLD_SIZE set)
  bool launcher = false;      // --nproc N: starts the ranks
  bool rank0 = true;
  std::optional<ps::cli::CommFlags> commFlags;
  std::optional<ps::cli::PredictionProfile> predictionProfile;  // --session: read before the run
  std::string path, text, name, format;
  ps::core::Schedule schedule;  // as loaded
  ps::core::Schedule executed;  // what the engine runs: with --optimizer, plus a step per device
  ps::core::CommOptions comm;

  std::optional<int> parseOptions();
  std::optional<int> readSchedule();
  std::optional<int> checkProcesses();
  int runOnHosts();
  int launchRanks();
  int runHere();
  // The schedule as a session stores it: the file's text, or the executed form when that differs.
  std::string sessionText() const {
    return format == "pipe" && o.optimizer == ps::engine::Optimizer::None ? text
                                                                          : ps::core::printDsl(executed);
  }
};

std::optional<int> RunCommand::parseOptions() {
  using namespace ps::core;
  using namespace ps::engine;
  // From the start: a Ctrl-C or SIGTERM while the model loads or the ranks meet cancels too
  // (the default action would end the process as killed, 130 + the signal).
  std::signal(SIGINT, onSignal);
  std::signal(SIGTERM, onSignal);
  const std::string eventsMode = args.value("--events");
  if (!eventsMode.empty() && eventsMode != "jsonl") return usage("--events takes 'jsonl'");
  events = eventsMode == "jsonl";
  if (!args.has("--model")) return usage("--model SPEC is required (e.g. mlp:layers=8,hidden=512)");

  auto model = parseModelSpec(args.value("--model"));
  if (!model) return usage(model.error().message);
  o.model = *model;
  const auto device = ps::engine::deviceFromName(args.value("--device", "cpu"));
  if (!device) return usage("--device is cpu or cuda");
  o.device = *device;
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
  int seed = 1;
  if (!intFlag("--nproc", 1, 1, nproc)) return usage("--nproc needs a positive integer");
  if (!intFlag("--iterations", 1, 1, o.iterations)) return usage("--iterations needs a positive integer");
  if (!intFlag("--warmup", 0, 0, o.warmup)) return usage("--warmup needs an integer >= 0");
  if (!intFlag("--microbatch-size", 2, 1, o.microbatchSize))
    return usage("--microbatch-size needs a positive integer");
  if (!intFlag("--seed", 1, 0, seed)) return usage("--seed needs an integer >= 0");
  if (!intFlag("--threads", 0, 0, o.threads)) return usage("--threads needs an integer >= 0");
  o.seed = static_cast<std::uint64_t>(seed);
  if (args.has("--timeout")) {
    if (!parseNumber(args.value("--timeout"), o.timeoutSeconds) || o.timeoutSeconds <= 0)
      return usage("--timeout needs a positive number of seconds");
  }
  if (args.has("--connect-timeout")) {
    double c = 0;
    if (!parseNumber(args.value("--connect-timeout"), c) || c <= 0)
      return usage("--connect-timeout needs a positive number of seconds");
    o.distributed.connectTimeoutSeconds = c;
  }
  if (args.has("--partition")) {
    auto list = ps::cli::parseIntList(args.value("--partition"));
    if (!list) return usage("--partition needs layers per stage, e.g. 2,3,3");
    o.partition = std::move(*list);
  }
  if (args.has("--optimizer")) {
    const auto optimizer = ps::engine::optimizerFromName(args.value("--optimizer"));
    if (!optimizer) return usage("--optimizer takes sgd or adamw, not '" + args.value("--optimizer") + "'");
    o.optimizer = *optimizer;
    o.learningRate = defaultLearningRate(o.optimizer);
  }
  if (args.has("--lr")) {
    if (o.optimizer == ps::engine::Optimizer::None)
      return usage("--lr is the optimizer's learning rate: give it with --optimizer sgd|adamw");
    if (!parseNumber(args.value("--lr"), o.learningRate) || !(o.learningRate > 0) ||
        !std::isfinite(o.learningRate))
      return usage("--lr needs a positive learning rate, e.g. 0.01");
  }
  if (args.has("--inputs")) {
    o.inputsPath = args.value("--inputs");
    if (o.inputsPath.empty()) return usage("--inputs needs a file saved by torch.save");
  }
  if (args.has("--inject-fault")) {
    auto f = parseFaultInjection(args.value("--inject-fault"));
    if (!f) return usage(f.error().message);
    o.fault = *f;
  }

  int commCode = 0;
  commFlags = ps::cli::commFlags(args, ps::cli::Reporter("run", kUsage), commCode);
  if (!commFlags) return commCode;
  if (commFlags->fixedMs)
    return usage("--comm takes posted, nccl or dualpipe here: how the prediction treats SEND/RECV");
  if (args.has("--profile")) {
    if (!args.has("--session"))
      return usage("--profile is the prediction's cost profile: give it with --session DB");
    auto p = ps::cli::loadPredictionProfile(args.value("--profile"));
    if (!p) return refuse(events, p.errors(), nullptr, ps::cli::kExitInvalid);
    predictionProfile = std::move(*p);
  }
  auto env = distributedFromEnvironment();
  if (!env) return usage(env.error().message);
  cancelOnEof = args.has("--cancel-on-eof");
  launchedRank = env->has_value();
  launcher = nproc > 1 && !launchedRank;
  if (launchedRank) {
    const double connect = o.distributed.connectTimeoutSeconds;
    o.distributed = **env;
    o.distributed.connectTimeoutSeconds = connect;
  }
  rank0 = o.distributed.rank == 0;
  return std::nullopt;
}

std::optional<int> RunCommand::readSchedule() {
  using namespace ps::core;
  using namespace ps::engine;
  path = args.positionals()[0];
  ScheduleLoadOptions load;
  load.path = path;
  load.overrides = args.values("--set");
  if (args.has("--format")) {
    load.format = scheduleFormatFromName(args.value("--format"));
    if (!load.format) return usage("--format is pipe or csv, not '" + args.value("--format") + "'");
  }
  std::string error;
  if (cancelOnEof && path == "-") {
    if (!readScheduleUntilMarker(text)) {
      std::cerr << "pipestudio-cli run: stdin ended before the schedule did (cancelled)\n";
      return ps::cli::kExitInvalid;
    }
  } else if (!ps::cli::readInput(path, text, error)) {
    std::cerr << "pipestudio-cli run: " << error << "\n";
    return ps::cli::kExitUsage;
  }
  // A rank given a staged copy of the schedule (--hosts, --nproc with FILE -) names it as the
  // user did, as its launcher tells it.
  name = ps::cli::inputName(path);
  if (const char* given = std::getenv(kScheduleNameVariable); given && *given && launchedRank) name = given;
  load.format = resolveScheduleFormat(text, load);
  format = scheduleFormatName(*load.format);
  Result<Schedule> loaded = loadSchedule(text, load);
  if (!loaded) {
    if (auto bad = ps::cli::overrideError(loaded.errors(), *load.format)) return usage(*bad);
    return refuse(events && rank0, loaded.errors(), &text, ps::cli::kExitInvalid);
  }
  schedule = std::move(loaded).value();
  auto report = validateSchedule(schedule);
  if (!report.valid()) {
    locateScheduleDiagnostics(report.diagnostics, name, *load.format);
    return refuse(events && rank0, report.diagnostics, &text, ps::cli::kExitInvalid);
  }
  if (schedule.name.empty()) schedule.name = name;
  comm = commFlags->optionsFor(schedule, *load.format == ScheduleFormat::Csv);
  // What the engine runs: with --optimizer, the schedule plus an OPTIMIZER step per device.
  // Traces, sessions and the launcher's event readers name the measured ops by this one.
  executed = schedule;
  if (o.optimizer != ps::engine::Optimizer::None) {
    auto w = scheduleWithOptimizerSteps(schedule);
    if (!w) return refuse(events && rank0, w.errors(), nullptr, ps::cli::kExitInvalid);
    executed = std::move(*w);
  }
  return std::nullopt;
}

std::optional<int> RunCommand::checkProcesses() {
  using namespace ps::core;
  using namespace ps::engine;
  if (auto st = checkFaultInjection(executed, o.fault); !st) return usage(st.error().message);
  // Process counts are checked before anything starts: one process per pipeline device, and
  // with NCCL one GPU per process on this host (NCCL refuses two ranks on one GPU).
  const int devices = executed.pipeline.devices;
  if (args.has("--nproc") && !launchedRank && nproc != devices)
    return usage("--nproc " + std::to_string(nproc) + " does not match the schedule's " +
                 std::to_string(devices) + (devices == 1 ? " device" : " devices") +
                 ": a multi-process run starts one process per device" +
                 (devices > 1 ? " (--nproc " + std::to_string(devices) +
                                    "), or leave --nproc out to run the devices "
                                    "as threads of one process"
                              : ""));
  if (o.device == ps::engine::Device::Cuda) {
    const int perHost = launcher ? nproc : launchedRank ? std::max(1, o.distributed.localWorldSize) : 1;
    const int gpus = cudaDeviceCount();
    if (!cudaCompiled())
      return refuse(events && rank0,
                    {makeError("engine.cuda",
                               "--device cuda: this engine was built against a CPU-only libtorch; "
                               "rebuild with a CUDA libtorch (docs/engine.md, \"Builds\")")},
                    nullptr, ps::cli::kExitInvalid);
    if (perHost > 1 && gpus < perHost)
      return refuse(
          events && rank0,
          {makeError("engine.cuda",
                     std::to_string(perHost) + " processes on this host need " + std::to_string(perHost) +
                         " GPUs over NCCL (one GPU per rank: NCCL refuses two ranks on one GPU), and " +
                         std::to_string(gpus) + (gpus == 1 ? " is" : " are") +
                         " visible. Leave out --nproc to run the pipeline devices as threads of one "
                         "process, which share a GPU with a CUDA stream each")},
          nullptr, ps::cli::kExitInvalid);
  }
  return std::nullopt;
}

// Ranks on several hosts (run_cluster.h): this process launches, watches and records; or the
// torchrun / srun commands for the run, on the hosts of --hosts or on this one.
int RunCommand::runOnHosts() {
  const std::string pl = args.value("--print-launch");
  if (args.has("--print-launch") && pl != "torchrun" && pl != "slurm")
    return usage("--print-launch takes torchrun or slurm, not '" + pl + "'");
  if (args.has("--hosts") && args.has("--nproc"))
    return usage("--hosts gives the ranks of each host: leave out --nproc");
  if (launchedRank)
    return usage(std::string(args.has("--hosts")
                                 ? "--hosts starts the ranks itself"
                                 : "--print-launch prints the commands that start the ranks") +
                 ": unset RANK / WORLD_SIZE (torchrun, Slurm)");
  const ps::cli::ClusterRun cr{.hostsPath = args.value("--hosts"),
                               .printLaunch = pl,
                               .argv = args.given(),
                               .valueFlags = kValueFlags,
                               .path = path,
                               .format = format,
                               .text = text,
                               .name = name,
                               .executed = &executed,
                               .sessionText = sessionText(),
                               .options = &o,
                               .events = events,
                               .cancel = &g_cancel,
                               .connectTimeoutSeconds = std::min(60.0, o.distributed.connectTimeoutSeconds),
                               .sessionPath = args.value("--session"),
                               .tracePath = args.value("--trace"),
                               .prediction = predictionProfile};
  if (pl.empty()) {
    std::signal(SIGINT, onSignal);
    std::signal(SIGTERM, onSignal);
    if (cancelOnEof) cancelOnStdinEof();
  }
  return ps::cli::runOnCluster(cr);
}

// The launcher of --nproc: start the ranks (this same command) and watch them.
int RunCommand::launchRanks() {
  using namespace ps::engine;
  std::vector<std::string> rankArgs{"run"};
  rankArgs.insert(rankArgs.end(), args.given().begin(), args.given().end());
  int scheduleFd = -1;
  if (path == "-") {
    // The ranks cannot all read one stdin: hand them the schedule in a memory file they
    // inherit (/proc/self/fd/N opens it afresh in each), which leaves nothing on disk behind
    // however the launcher ends, and tell them its name.
    const int mem = memfd_create("pipestudio-schedule", 0);
    // Above the descriptors the launcher hands its ranks (3 and 4, launcher.h).
    scheduleFd = mem >= 0 ? fcntl(mem, F_DUPFD, 64) : -1;
    if (mem >= 0) ::close(mem);
    if (scheduleFd < 0 ||
        ::write(scheduleFd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
      std::cerr << "pipestudio-cli run: cannot hand the schedule to the ranks: " << std::strerror(errno)
                << "\n";
      return ps::cli::kExitUsage;
    }
    const std::string scheduleFile = "/proc/self/fd/" + std::to_string(scheduleFd);
    for (size_t i = 1; i < rankArgs.size(); ++i)  // the positional '-', not a flag's value
      if (rankArgs[i] == "-" &&
          std::find(kValueFlags.begin(), kValueFlags.end(), rankArgs[i - 1]) == kValueFlags.end())
        rankArgs[i] = scheduleFile;
    setenv(kScheduleNameVariable, name.c_str(), 1);
  }
  LauncherRun lr{executed, o, name, events, nproc};
  if (args.has("--session"))
    lr.session = ps::cli::RunSessionRecording{
        args.value("--session"), &executed, sessionText(), std::string(ps::core::kThisMachine), &o, nullptr,
        predictionProfile};
  if (lr.session) {
    lr.session->comm = comm;
    lr.session->worldSize = nproc;
  }
  const int rc = lr.launch(rankArgs);
  if (scheduleFd >= 0) ::close(scheduleFd);
  return rc;
}

// One process runs the schedule: all its devices as threads, or its rank's.
int RunCommand::runHere() {
  using namespace ps::core;
  using namespace ps::engine;
  o.cancel = &g_cancel;
  o.orphaned = &g_launcherLost;
  // Only rank 0 watches: its cancel ends the peers (they fail on it), while a peer cancelling
  // first would make rank 0 report a failure instead of the cancel.
  if (cancelOnEof && rank0) cancelOnStdinEof();
  // Started by a launcher (--nproc): every rank's events also go to the launcher's pipe, and
  // the rank ends when its launcher does.
  const int eventFd = inheritedFd(kEventFdVariable);
  if (const int lifeline = inheritedFd(kLifelineFdVariable); lifeline >= 0) {
    g_launcherPid = getppid();
    watchLifeline(lifeline);
  }
  if (eventFd >= 0) std::signal(SIGPIPE, SIG_IGN);
  const bool streamEvents = events && rank0;
  if (streamEvents || eventFd >= 0)
    o.events = [streamEvents, eventFd](const std::string& line) {
      if (streamEvents) ps::cli::emitEventLine(line);
      if (eventFd >= 0) ps::cli::writeLine(eventFd, line);
    };
  std::ostream& human = events ? std::cerr : std::cout;

  const auto runStarted = std::chrono::system_clock::now();  // the session's STARTED
  o.startedMs = std::chrono::duration_cast<std::chrono::milliseconds>(runStarted.time_since_epoch()).count();
  auto result = runSchedule(schedule, o);
  if (!result) return refuse(events && rank0, result.errors(), nullptr, ps::cli::kExitInvalid);
  if (g_launcherLost && result->status != ps::core::RunState::Succeeded) {
    // The launcher went away (killed, crashed): the ranks cancelled because of it, and whatever
    // they saw of each other since is its consequence. Say what happened.
    Diagnostic lost = makeError("engine.launcher-lost",
                                "launcher lost: the launcher (pid " + std::to_string(g_launcherPid) +
                                    ") ended while the run was going (killed or crashed); "
                                    "the ranks cancelled the run");
    result->status = ps::core::RunState::Cancelled;
    result->diagnostics = {lost};
    result->timeline.diagnostics = {lost};
    result->stuck.clear();
  }
  const RunReport& r = *result;
  // A cancelled run exits as shells report SIGINT: 128 + 2.
  const int statusExit = r.status == ps::core::RunState::Succeeded   ? ps::cli::kExitOk
                         : r.status == ps::core::RunState::Cancelled ? kExitCancelled
                                                                     : ps::cli::kExitInvalid;
  if (!rank0) return statusExit;

  const auto& m = r.timeline.metrics;
  human << name << ": " << ps::core::runEventStatusToken(r.status) << " (" << schedule.pipeline.devices
        << " devices, " << schedule.pipeline.stages << " stages, " << schedule.pipeline.microbatches
        << " micro-batches of " << o.microbatchSize << ", model " << modelSpecToString(o.model) << ", "
        << r.parameterCount << " parameters, partition";
  for (size_t i = 0; i < r.partition.size(); ++i) human << (i ? "," : " ") << r.partition[i];
  human << ")\n";
  if (!r.data.empty()) human << "  data: " << r.data << "\n";
  if (!r.modelMode.empty()) human << "  model mode: " << r.modelMode << "\n";
  if (!r.iterationMs.empty()) {
    std::vector<double> it = r.iterationMs;
    std::sort(it.begin(), it.end());
    human << "  iteration: median " << it[it.size() / 2] << " ms over " << it.size() << " measured ("
          << o.warmup << " warm-up)\n";
  }
  human << "  last iteration: makespan " << m.makespan << " ms, bubble ratio " << m.bubbleRatio << ", "
        << r.timeline.ops.size() << " ops, " << r.timeline.transfers.size() << " transfers\n";
  // A failed or cancelled run has no loss worth printing (the iteration did not complete).
  if (r.status == ps::core::RunState::Succeeded && !r.losses.empty())
    human << "  loss: " << r.losses.back() << "\n";
  if (o.optimizer != ps::engine::Optimizer::None && !r.losses.empty()) {
    human << "  loss per iteration (" << ps::engine::optimizerName(o.optimizer) << ", lr " << o.learningRate
          << "):";
    for (size_t i = 0; i < r.losses.size(); ++i) human << (i ? ", " : " ") << r.losses[i];
    human << "\n";
    std::int64_t state = 0;
    for (auto b : r.optimizerStateBytes) state += b;
    human << "  optimizer state: " << state << " bytes on this process's devices\n";
  }
  if (r.gradients.ran) {
    human << "  gradient check: " << (r.gradients.passed ? "passed" : "FAILED") << ", max relative error "
          << r.gradients.maxRelativeError << " (" << r.gradients.worstParameter << "), loss relative error "
          << r.gradients.lossRelativeError << ", tolerance " << r.gradients.tolerance << ", "
          << r.gradients.parameters.size() << " parameters\n";
  }
  for (const auto& d : r.diagnostics)
    std::cerr << "pipestudio-cli run: " << ps::core::runEventStatusToken(r.status) << ": " << d.message
              << "\n";
  if (!r.stuck.empty()) {
    const char* word = o.distributed.worldSize > 1 ? "rank" : "device";
    std::cerr << "pipestudio-cli run: where every " << word << " stood:\n";
    for (const auto& d : r.stuck)
      if (d.device >= 0) std::cerr << "  " << ps::core::describeStuckDevice(d, word) << "\n";
  }
  if (args.has("--trace")) {
    std::string error;
    if (!ps::cli::writeOutput(args.value("--trace"), exportChromeTrace(r.timeline, &executed), error)) {
      std::cerr << "pipestudio-cli run: " << error << "\n";
      return ps::cli::kExitUsage;
    }
  }
  if (args.has("--session")) {
    ps::cli::RunSessionRecording rec{
        args.value("--session"), &executed, sessionText(), std::string(ps::core::kThisMachine), &o, &r,
        predictionProfile};
    rec.comm = comm;
    rec.startedMs =
        std::chrono::duration_cast<std::chrono::milliseconds>(runStarted.time_since_epoch()).count();
    if (!ps::cli::recordRunInSession(rec, human)) return ps::cli::kExitInvalid;
    if (eventFd >= 0) ps::cli::writeLine(eventFd, kSessionRecordedLine);
  }
  if (r.status != ps::core::RunState::Succeeded) return statusExit;
  if (r.gradients.ran && !r.gradients.passed) return ps::cli::kExitInvalid;
  return ps::cli::kExitOk;
}

int runRun(const ps::cli::Args& args, const ps::cli::Reporter&) {
  RunCommand run{args};
  if (auto rc = run.parseOptions()) return *rc;
  if (auto rc = run.readSchedule()) return *rc;
  if (auto rc = run.checkProcesses()) return *rc;
  if (args.has("--hosts") || args.has("--print-launch")) return run.runOnHosts();
  if (run.launcher) return run.launchRanks();
  return run.runHere();
}

const ps::cli::FlagCommandRegistrar kRegister{{"run",
                                               ps::cli::engineCommandSummary("run"),
                                               kUsage,
                                               kValueFlags,
                                               {"--check-gradients", "--cancel-on-eof", "--batch-p2p"},
                                               {1, 1, "expected one FILE (or -)"},
                                               runRun}};

}  // namespace
