// The pipeline executor: one worker thread per device of this process runs its step list in
// order; stages hand activations and gradients over through the mailbox (same process) or the
// remote transport (other processes). Every op is timed, stashed bytes are tracked, and the
// first failure stops every worker.
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>
#include <dlfcn.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "common/nvtx.h"
#include "model/model.h"
#include "pipestudio/core/analysis/iterations.h"
#include "pipestudio/core/analysis/validator.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/io/pytorch_csv.h"
#include "pipestudio/core/io/run_events.h"
#include "pipestudio/core/model/enum_names.h"
#include "pipestudio/core/model/hang_report.h"
#include "pipestudio/engine/engine.h"
#include "run/device_positions.h"
#include "run/optimizer.h"
#include "run/rank_report.h"
#include "run/stage_layout.h"
#include "transport/cuda_device.h"
#include "transport/transport.h"

namespace ps::engine {

using core::Op;
using core::OpKind;
using Clock = std::chrono::steady_clock;

namespace detail {

void Mailbox::put(const MessageKey& key, Envelope e) {
  {
    std::lock_guard lock(mu_);
    box_[key] = std::move(e);
  }
  cv_.notify_all();
}

std::optional<Envelope> Mailbox::take(const MessageKey& key, Clock::time_point deadline,
                                      const std::atomic<bool>& stop, const std::atomic<bool>* cancel) {
  std::unique_lock lock(mu_);
  for (;;) {
    if (auto it = box_.find(key); it != box_.end()) {
      Envelope e = std::move(it->second);
      box_.erase(it);
      return e;
    }
    // Deadline before stop: of two waits that both ran out, each reports its own timeout
    // and the run keeps the one that started first (the root cause).
    auto now = Clock::now();
    if (now >= deadline) return std::nullopt;
    if (stop.load() || (cancel && cancel->load())) throw Aborted{};
    // Wake at least every 50 ms: a cancel flag set by a signal handler notifies nobody.
    cv_.wait_until(lock, std::min(deadline, now + std::chrono::milliseconds(50)));
  }
}

void Mailbox::wakeAll() {
  std::lock_guard lock(mu_);
  cv_.notify_all();
}

void Mailbox::clear() {
  std::lock_guard lock(mu_);
  box_.clear();
}

}  // namespace detail

namespace {

using detail::Aborted;
using detail::Envelope;
using detail::MessageKey;
using detail::Model;
using detail::Stash;

struct OpFailure : std::runtime_error {
  OpFailure(std::string code_, const std::string& msg, double waitStart_ = -1, int lostRank_ = -1)
      : std::runtime_error(msg), code(std::move(code_)), waitStart(waitStart_), lostRank(lostRank_) {}
  std::string code;
  double waitStart;  // timeouts: when the wait began
  int lostRank;      // engine.peer-lost: the rank that ended without a word (-1 unknown)
};

double msBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Barrier for the worker threads of one process that gives up when the run stops.
class StopBarrier {
 public:
  explicit StopBarrier(int n) : n_(n) {}
  // Returns the time the last worker arrived (the iteration origin) or throws Aborted.
  Clock::time_point arrive(const std::atomic<bool>& stop, const std::atomic<bool>* cancel) {
    std::unique_lock lock(mu_);
    const long gen = generation_;
    if (++count_ == n_) {
      count_ = 0;
      ++generation_;
      origin_ = Clock::now();
      cv_.notify_all();
      return origin_;
    }
    while (gen == generation_) {
      if (stop.load() || (cancel && cancel->load())) throw Aborted{};
      cv_.wait_for(lock, std::chrono::milliseconds(50));
    }
    return origin_;
  }
  void wakeAll() { cv_.notify_all(); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_;
  int count_ = 0;
  long generation_ = 0;
  Clock::time_point origin_;
};

void setBlasThreads(int n) {
  // OpenBLAS keeps its own pool; without this every worker would spawn one per core.
  using Fn = void (*)(int);
  if (auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) fn(n);
}

// Structural checks the executor itself relies on (the full validator runs in the CLI).
core::Status checkRunnable(const core::Schedule& s) {
  auto report = core::validateSchedule(s);
  if (!report.valid()) {
    core::Diagnostics errs;
    for (auto& d : report.diagnostics)
      if (d.severity == core::Severity::Error) errs.push_back(d);
    return errs;
  }
  const auto& p = s.pipeline;
  const core::StageRoutes routes(p);
  if (static_cast<int>(s.devices.size()) != p.devices || static_cast<int>(p.stageToDevice.size()) != p.stages)
    return core::makeError("engine.schedule", "schedule has " + std::to_string(s.devices.size()) +
                                                  " device lists for " + std::to_string(p.devices) +
                                                  " devices");
  std::set<std::tuple<int, int, int>> seen;
  for (int d = 0; d < p.devices; ++d) {
    const auto& steps = s.devices[static_cast<size_t>(d)];
    for (size_t i = 0; i < steps.size(); ++i) {
      for (const Op* op : {&steps[i].first, steps[i].second ? &*steps[i].second : nullptr}) {
        if (!op) continue;
        if (op->stage < 0 || op->stage >= p.stages)
          return core::makeError("engine.schedule", "device " + std::to_string(d) + " step " +
                                                        std::to_string(i) + ": stage " +
                                                        std::to_string(op->stage) + " does not exist");
        if (p.deviceOf(op->stage) != d)
          return core::makeError("engine.schedule", "device " + std::to_string(d) + " runs " + s.opName(*op) +
                                                        " but stage " + std::to_string(op->stage) +
                                                        " is placed on device " +
                                                        std::to_string(p.deviceOf(op->stage)));
        if (!core::isStageLevelKind(op->kind) && !core::isUserKind(op->kind) &&
            (op->microbatch < 0 || op->microbatch >= p.microbatches))
          return core::makeError("engine.schedule", s.opName(*op) + " names a micro-batch outside 0.." +
                                                        std::to_string(p.microbatches - 1));
        if (op->kind == OpKind::F || op->kind == OpKind::B || op->kind == OpKind::I ||
            op->kind == OpKind::W) {
          if (!seen.insert({static_cast<int>(op->kind), op->stage, op->microbatch}).second)
            return core::makeError("engine.schedule", s.opName(*op) + " appears twice");
        }
      }
    }
  }
  for (int st = 0; st < p.stages; ++st)
    for (int m = 0; m < p.microbatches; ++m) {
      if (!routes.runs(st, m)) continue;  // not on the micro-batch's route
      auto has = [&](OpKind k) { return seen.count({static_cast<int>(k), st, m}) > 0; };
      std::string at = "micro-batch " + std::to_string(m) + " of stage " + std::to_string(st);
      if (!has(OpKind::F)) return core::makeError("engine.schedule", at + " has no F");
      if (has(OpKind::B) == has(OpKind::I))
        return core::makeError("engine.schedule", at + " needs exactly one of B or I");
      if (has(OpKind::I) != has(OpKind::W))
        return core::makeError("engine.schedule", at + " has I without W");
    }
  return core::okStatus();
}

using detail::ErrorInfo;
using detail::RankReport;

class Run {
 public:
  Run(const core::Schedule& s, const RunOptions& o) : sched_(s), opt_(o) {}

  core::Result<RunReport> execute();

 private:
  // --- setup
  core::Status setup();
  // --- workers
  void worker(int device);
  void runIteration(int device, int iteration);
  void execOp(int device, int step, const Op& op);
  void forward(int device, const Op& op, bool recompute);
  void backward(int device, const Op& op, bool inputsOnly);
  at::Tensor receive(int device, const Op& op, const MessageKey& key, int srcStage);
  at::Tensor inputGradientsKeepingGraph(Stash& st, const at::Tensor& grad, bool needInput);
  void weightGradientsByGraph(int device, const Op& op);
  void deliver(int device, const Op& op, const MessageKey& key, int dstStage, const at::Tensor& t);
  // Copies of one block (DualPipe's two directions) train as one set of parameters: each
  // device's stages with copies elsewhere exchange their gradients with them and all hold the
  // sum (before the optimizer step, or at the end of the iteration without one).
  void sumCopyGradients(int device);
  void fail(ErrorInfo e);
  void emit(const std::string& line);  // one run-event line (core::run_event writes them)
  // The run-event protocol's "op" event for a measured op of `iteration`.
  void emitOp(int iteration, const core::TimelineOp& r);
  void emitTransfer(int iteration, const core::Transfer& t);
  static double nowMs() { return msBetween(tlOrigin, Clock::now()); }
  static thread_local Clock::time_point tlOrigin;  // this worker's iteration origin
  // The running op's compute start (after its input arrived) and end (when its output was
  // handed over); waiting for input is idle time, not the op's.
  static thread_local double tlOpStart;
  static thread_local double tlOpEnd;
  int rankOf(int device) const { return remote_ ? device : 0; }
  // Stages, blocks and copies: stage s runs the layers of its model block, in the copy of the
  // model that stage holds (the first stage of a block: model_; a later one: copies_).
  int layerBegin(int s) const { return layout_.layerBegin(s); }
  int layerEnd(int s) const { return layout_.layerEnd(s); }
  Model& modelOf(int s) const {
    const int c = layout_.copyIndex(s);
    return c == 0 ? *model_ : *copies_[static_cast<size_t>(c - 1)];
  }
  // A stage's gradients for the gradient check: a later copy's parameters named after the
  // first's with " (copy on stage S)" appended (referenceName() takes it off again).
  std::vector<detail::NamedParam> checkedGradients(int s) const {
    auto out = modelOf(s).gradients(layerBegin(s), layerEnd(s));
    if (layout_.copyIndex(s) > 0)
      for (auto& p : out) p.name += copySuffix(s);
    return out;
  }
  static std::string copySuffix(int s) { return " (copy on stage " + std::to_string(s) + ")"; }
  std::string referenceName(const std::string& name) const {
    const auto at = name.rfind(" (copy on stage ");
    return at == std::string::npos ? name : name.substr(0, at);
  }
  std::vector<detail::Layer*> stageLayers(int s) const {
    std::vector<detail::Layer*> out;
    for (int l = layerBegin(s); l < layerEnd(s); ++l)
      out.push_back(modelOf(s).layers[static_cast<size_t>(l)].get());
    return out;
  }
  // GPU runs: the device's CudaDevice (streams, events), null on CPU.
  detail::CudaDevice* gpu(int device) const {
    return cuda_ ? gpus_[static_cast<size_t>(device)].get() : nullptr;
  }
  core::Status setupCuda();
  // Every rank must run the same thing: compared at the rendezvous through the store.
  nlohmann::json fingerprint() const;
  core::Status checkFingerprints();
  static thread_local int tlEvStart;  // GPU: event indices of the running op
  static thread_local int tlEvEnd;
  bool local(int device) const { return rankOf(device) == rank_; }
  void sampleMemory(int device, double t);
  // The OPTIMIZER op: the device's optimizer step (after a copy of the first iteration's
  // gradients when they are to be checked).
  void optimizerStep(int device);
  std::vector<detail::Layer*> layersOn(int device) const;
  // The hang's post-mortem: the stuck states of `all` devices (silent where unknown), the chain
  // of waits from the device that timed out appended to the error, its steps as related ops.
  void addHangReport(const std::vector<core::StuckDevice>& all);
  // --- after the run
  void gradientCheck(RunReport& r);
  void gatherRemote(RunReport& r);
  std::string opName(const Op& op) const { return sched_.opName(op); }

  const core::Schedule& sched_;
  RunOptions opt_;
  std::unique_ptr<Model> model_;
  detail::StageLayout layout_;                  // layers, copies and routes of the stages
  std::vector<std::unique_ptr<Model>> copies_;  // the second, third... copy of the model
  std::set<std::pair<int, int>> recompute_;
  int M_ = 1, S_ = 1, D_ = 1;
  int rank_ = 0;
  std::unique_ptr<detail::RemoteTransport> remote_;
  bool cuda_ = false;
  std::vector<std::unique_ptr<detail::CudaDevice>> gpus_;  // per device of this process
  detail::Mailbox mailbox_;
  std::unique_ptr<StopBarrier> barrier_;
  std::atomic<bool> stop_{false};
  std::mutex errMu_;
  std::optional<ErrorInfo> error_;
  std::mutex eventMu_;
  int firstLocal_ = 0;
  int iteration_ = 0;
  bool measured_ = false;
  int iterationsDone_ = 0;  // iterations every local worker completed (warm-up included)

  // Per device (touched only by its worker while running).
  std::vector<std::map<std::pair<int, int>, Stash>> stashes_;
  std::vector<std::vector<core::TimelineOp>> ops_;
  std::vector<std::vector<core::Transfer>> transfers_;
  std::vector<std::vector<core::MemorySample>> memory_;
  std::vector<double> iterEndMs_;
  // --optimizer: the step's kind in sched_, the optimizer and its state bytes per device; for
  // the gradient check, the first iteration's gradients (per device, before its step) and
  // every parameter's initial value.
  std::optional<OpKind> stepKind_;
  std::vector<std::unique_ptr<detail::StageOptimizer>> optimizers_;
  std::vector<std::int64_t> stateBytes_;
  std::vector<std::vector<detail::NamedParam>> firstGradients_;  // named as checkedGradients names
  std::vector<at::Tensor> initialParams_;

  std::mutex rngMu_;  // stochastic forwards: the global generators' seed and its draws

  // Where each device of this process stands, for a hang's post-mortem.
  detail::DevicePositions positions_;
  std::vector<core::StuckDevice> stuck_;  // set with the post-mortem of a hang

  std::mutex lossMu_;
  std::vector<double> losses_;
  std::vector<double> iterationMs_;
  core::Timeline lastTimeline_;
};

void Run::emit(const std::string& line) {
  if (!opt_.events) return;
  std::lock_guard lock(eventMu_);
  opt_.events(line);
}

void Run::fail(ErrorInfo e) {
  {
    std::lock_guard lock(errMu_);
    const bool earlierTimeout =
        error_ && error_->waitStart >= 0 && e.waitStart >= 0 && e.waitStart < error_->waitStart;
    if (!error_ || earlierTimeout) error_ = e;
  }
  stop_ = true;
  mailbox_.wakeAll();
  if (barrier_) barrier_->wakeAll();
  if (remote_) {
    try {
      if (!remote_->hasKey("abort")) remote_->setKey("abort", e.message);
    } catch (const std::exception&) {
    }
  }
}

core::Status Run::setup() {
  const auto& p = sched_.pipeline;
  M_ = p.microbatches;
  S_ = p.stages;
  D_ = p.devices;
  PS_TRY(checkRunnable(sched_));
  if (opt_.microbatchSize < 1)
    return core::makeError("engine.options", "micro-batch size must be at least 1");
  if (opt_.iterations < 1 || opt_.warmup < 0)
    return core::makeError("engine.options", "iterations must be at least 1 and warm-up at least 0");
  if (opt_.device == Device::Cuda && !cudaAvailable())
    return core::makeError("engine.cuda", cudaCompiled()
                                              ? "--device cuda: no GPU is visible"
                                              : "--device cuda: this engine was built against a CPU-only "
                                                "libtorch; rebuild with a CUDA libtorch");
  PS_TRY(checkFaultInjection(sched_, opt_.fault));
  try {
    // A training run (--optimizer) runs TorchScript modules in train mode: dropout on, batch
    // norm on each micro-batch's statistics. The gradient check then compares like with like.
    model_ = Model::build(opt_.model, opt_.seed, opt_.microbatchSize, M_, opt_.inputsPath,
                          opt_.optimizer != Optimizer::None);
  } catch (const std::exception& e) {
    return core::makeError("engine.model", std::string("cannot build model: ") + detail::errorText(e));
  }
  const core::CostProfile costs = model_->weightGradByGraph
                                      ? detail::torchScriptCostProfile(*model_, opt_.microbatchSize)
                                      : modelCostProfile(opt_.model, opt_.microbatchSize);
  auto part = core::partitionLayers(
      costs, p.blocks(), !opt_.partition.empty() ? opt_.partition : sched_.partition, p.partitionUnit());
  if (!part) {
    core::Diagnostics ds = part.errors();
    for (auto& d : ds) d.code = "engine.partition";
    return ds;
  }
  layout_ = detail::StageLayout(p, M_, *part);
  try {
    // Every copy starts as the first does: the same seed, the same file.
    while (copies_.size() < layout_.copies())
      copies_.push_back(Model::build(opt_.model, opt_.seed, opt_.microbatchSize, M_, opt_.inputsPath,
                                     opt_.optimizer != Optimizer::None));
  } catch (const std::exception& e) {
    return core::makeError("engine.model",
                           std::string("cannot build a copy of the model: ") + detail::errorText(e));
  }
  for (const auto& dev : sched_.devices)
    for (const auto& st : dev)
      for (const Op* op : {&st.first, st.second ? &*st.second : nullptr})
        if (op && op->kind == OpKind::R) recompute_.insert({op->stage, op->microbatch});

  if (opt_.distributed.worldSize > 1) {
    if (opt_.distributed.worldSize != D_)
      return core::makeError("engine.distributed",
                             "a multi-process run needs one process per device: world size " +
                                 std::to_string(opt_.distributed.worldSize) + ", schedule has " +
                                 std::to_string(D_) + " devices");
    cuda_ = opt_.device == Device::Cuda;
#ifdef PIPESTUDIO_HAVE_CUDA
    if (cuda_) {
      // One NCCL link per direction between ranks whose stages are neighbours.
      // Neighbours on a route, and the devices holding copies of one block.
      const std::vector<std::pair<int, int>> pairs = layout_.linkedDevices();
      const int local = opt_.distributed.rank % std::max(1, opt_.distributed.localWorldSize);
      auto conn = detail::connectNccl(opt_.distributed, opt_.timeoutSeconds,
                                      local % std::max(1, detail::cudaDeviceCount()), pairs);
      PS_TRY(conn);
      remote_ = std::move(conn.value());
    }
#endif
    if (!remote_) {
      auto conn = detail::connectGloo(opt_.distributed, opt_.timeoutSeconds);
      PS_TRY(conn);
      remote_ = std::move(conn.value());
    }
    rank_ = opt_.distributed.rank;
    if (auto st = checkFingerprints(); !st) return st;
  }
  cuda_ = opt_.device == Device::Cuda;
  if (cuda_) {
    PS_TRY(setupCuda());
  }
  stateBytes_.assign(static_cast<size_t>(D_), 0);
  firstGradients_.resize(static_cast<size_t>(D_));
  optimizers_.resize(static_cast<size_t>(D_));
  if (opt_.optimizer != Optimizer::None) {
    stepKind_ = sched_.kindFromName(core::kOptimizerStepKind);
    if (!stepKind_) return core::makeError("engine.optimizer", "the schedule has no OPTIMIZER steps");
    try {
      for (int d = 0; d < D_; ++d)
        if (local(d))
          optimizers_[static_cast<size_t>(d)] =
              detail::StageOptimizer::make(opt_.optimizer, opt_.learningRate, layersOn(d));
      if (opt_.checkGradients) {
        at::NoGradGuard noGrad;
        for (const auto& l : model_->layers) {
          for (auto* lin : l->linears) {
            initialParams_.push_back(lin->weight.detach().clone());
            initialParams_.push_back(lin->bias.defined() ? lin->bias.detach().clone() : at::Tensor());
          }
          for (auto& p : l->params) initialParams_.push_back(p.value.detach().clone());
        }
      }
    } catch (const std::exception& e) {
      return core::makeError("engine.optimizer", "cannot set up the optimizer: " + detail::errorText(e));
    }
  }
  stashes_.resize(static_cast<size_t>(D_));
  ops_.resize(static_cast<size_t>(D_));
  transfers_.resize(static_cast<size_t>(D_));
  memory_.resize(static_cast<size_t>(D_));
  iterEndMs_.assign(static_cast<size_t>(D_), 0.0);
  positions_.reset(sched_, D_);
  return core::okStatus();
}

void Run::addHangReport(const std::vector<core::StuckDevice>& all) {
  std::lock_guard lock(errMu_);
  if (!error_ || error_->code != "engine.timeout" || error_->device < 0) return;
  stuck_ = all;
  const core::HangReport h = core::describeHang(all, error_->device, remote_ ? "rank" : "device");
  if (h.text.empty()) return;
  error_->message += "; " + core::hangClause(h);
  error_->related = h.stuck;
}

nlohmann::json Run::fingerprint() const {
  // FNV-1a of the schedule as the DSL prints it: equal schedules, equal text.
  const std::string text = core::printDsl(sched_);
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  // A TorchScript file is compared by its bytes, not its path: every host stages it under a
  // folder of its own (--hosts), and torchrun or Slurm ranks may read their own copies.
  ModelSpec model = opt_.model;
  if (!model_->modelSource.empty()) model.path.clear();
  return {{"protocol version", core::kRunEventProtocolVersion},
          {"world size", opt_.distributed.worldSize},
          {"schedule", std::string(hex)},
          {"model", modelSpecToString(model)},
          {"model file", model_->modelSource},
          {"seed", opt_.seed},
          {"data", model_->dataSource},
          {"partition", layout_.partition()},
          {"micro-batch size", opt_.microbatchSize},
          {"iterations", opt_.iterations + opt_.warmup},
          {"device", deviceName(opt_.device)},
          {"optimizer", opt_.optimizer == Optimizer::None ? std::string("none")
                                                          : std::string(optimizerName(opt_.optimizer)) +
                                                                " lr " + std::to_string(opt_.learningRate)}};
}

core::Status Run::checkFingerprints() {
  const auto connect =
      std::chrono::milliseconds(static_cast<long>(opt_.distributed.connectTimeoutSeconds * 1000));
  const nlohmann::json mine = fingerprint();
  std::vector<nlohmann::json> all(static_cast<size_t>(remote_->worldSize()));
  try {
    remote_->setKey("fingerprint/" + std::to_string(rank_), mine.dump());
    for (int q = 0; q < remote_->worldSize(); ++q) {
      auto text = remote_->getKey("fingerprint/" + std::to_string(q), connect);
      if (!text)
        return core::makeError("engine.distributed",
                               "rank " + std::to_string(q) + " did not describe its run in time");
      all[static_cast<size_t>(q)] = nlohmann::json::parse(*text, nullptr, false);
    }
  } catch (const std::exception& e) {
    return core::makeError("engine.distributed", "comparing the ranks' runs: " + detail::errorText(e));
  }
  // The first field in which some rank differs from rank 0, with every rank that differs.
  std::string error;
  for (const auto& [field, value] : all[0].items()) {
    std::string ranks;
    for (size_t q = 1; q < all.size(); ++q)
      if (!all[q].is_object() || !all[q].contains(field) || all[q][field] != value)
        ranks += (ranks.empty() ? "" : ", ") + std::string("rank ") + std::to_string(q) + " has " +
                 (all[q].is_object() && all[q].contains(field) ? all[q][field].dump() : std::string("none"));
    if (!ranks.empty()) {
      error = "the ranks do not run the same thing: " + field + " differs (rank 0 has " + value.dump() +
              ", " + ranks +
              "); start every rank with the same schedule, --model, --seed, --partition, --microbatch-size, "
              "iterations and --optimizer/--lr";
      break;
    }
  }
  // Rank 0 hosts the store: it leaves only once every rank has read what it needs.
  try {
    remote_->setKey("fingerprint-read/" + std::to_string(rank_), "1");
    if (rank_ == 0)
      for (int q = 1; q < remote_->worldSize(); ++q)
        (void)remote_->getKey("fingerprint-read/" + std::to_string(q), std::chrono::milliseconds(5000));
  } catch (const std::exception&) {
  }
  if (!error.empty()) return core::makeError("engine.mismatch", error);
  return core::okStatus();
}

// GPU: every device of a single process shares GPU 0 with streams of its own; rank r of a
// multi-process run uses GPU (r mod ranks per host).
core::Status Run::setupCuda() {
#ifdef PIPESTUDIO_HAVE_CUDA
  const int count = detail::cudaDeviceCount();
  const int gpuIndex =
      remote_ ? (opt_.distributed.rank % std::max(1, opt_.distributed.localWorldSize)) % std::max(1, count)
              : 0;
  try {
    gpus_.resize(static_cast<size_t>(D_));
    for (int d = 0; d < D_; ++d)
      if (local(d)) gpus_[static_cast<size_t>(d)] = detail::makeCudaDevice(gpuIndex);
    model_->to(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(gpuIndex)));
    for (auto& c : copies_) c->to(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(gpuIndex)));
  } catch (const std::exception& e) {
    return core::makeError("engine.cuda", "GPU " + std::to_string(gpuIndex) + ": " + detail::errorText(e));
  }
  return core::okStatus();
#else
  return core::makeError("engine.cuda", "this engine was built without CUDA");
#endif
}

at::Tensor Run::receive(int device, const Op& op, const MessageKey& key, int srcStage) {
  const int srcDevice = sched_.pipeline.deviceOf(srcStage);
  const auto timeout = std::chrono::milliseconds(static_cast<long>(opt_.timeoutSeconds * 1000));
  const char* what = key.kind == 0 ? "the activation" : "the gradient";
  Op producer{key.kind == 0 ? OpKind::F : OpKind::B, srcStage, key.microbatch};
  auto timedOut = [&, start = nowMs()]() {
    return OpFailure("engine.timeout",
                     "timed out after " + formatSeconds(opt_.timeoutSeconds) + " waiting for " + what +
                         " of micro-batch " + std::to_string(key.microbatch) + " from stage " +
                         std::to_string(srcStage) + " on device " + std::to_string(srcDevice),
                     start);
  };
  const double start = nowMs();
  // The post-mortem's "waits in OP for PRODUCER on DEVICE": the step that sends this.
  positions_.startWait(device, srcDevice, producer);
  // A wait that ends without its data (a timeout, a stop) keeps its place for the post-mortem.
  struct WaitEnd {
    detail::DevicePositions& positions;
    int device;
    bool arrived = false;
    ~WaitEnd() { positions.endWait(device, arrived); }
  } waitEnd{positions_, device};
  if (local(srcDevice)) {
    auto env = mailbox_.take(key, Clock::now() + timeout, stop_, opt_.cancel);
    if (!env) throw timedOut();
    tlOpStart = nowMs();
    if (auto* g = gpu(device)) {
      g->waitReady(env->ready, env->tensor);
      tlEvStart = g->recordEvent();  // the op starts on the GPU once its input is there
    }
    if (srcDevice != device)
      transfers_[static_cast<size_t>(device)].push_back(
          {srcDevice, device, env->producer, op,
           static_cast<std::int64_t>(env->tensor.numel() * env->tensor.element_size()), env->sentMs,
           nowMs()});
    if (srcDevice != device && measured_)
      emitTransfer(iteration_, transfers_[static_cast<size_t>(device)].back());
    waitEnd.arrived = true;
    return env->tensor;
  }
  // Activation for stage s: the output of the previous block's last layer; gradient for stage
  // s: of stage s's own output.
  const int boundaryLayer = (key.kind == 0 ? layerBegin(key.stage) : layerEnd(key.stage)) - 1;
  std::optional<at::Tensor> t;
  try {
    t = remote_->recv(key, rankOf(srcDevice), model_->boundaryShape(opt_.microbatchSize, boundaryLayer),
                      model_->options, timeout, stop_, opt_.cancel);
  } catch (const detail::PeerLost& e) {
    throw OpFailure("engine.peer-lost",
                    std::string(e.what()) + " while this device waited for " + what + " of micro-batch " +
                        std::to_string(key.microbatch) + " from stage " + std::to_string(srcStage),
                    -1, e.rank);
  }
  if (!t) throw timedOut();
  waitEnd.arrived = true;
  tlOpStart = nowMs();
  if (auto* g = gpu(device)) tlEvStart = g->recordEvent();
  transfers_[static_cast<size_t>(device)].push_back(
      {srcDevice, device, producer, op, static_cast<std::int64_t>(t->numel() * t->element_size()), start,
       nowMs()});
  if (measured_) emitTransfer(iteration_, transfers_[static_cast<size_t>(device)].back());
  return *t;
}

void Run::deliver(int device, const Op& op, const MessageKey& key, int dstStage, const at::Tensor& t) {
  tlOpEnd = nowMs();
  std::shared_ptr<void> ready;
  if (auto* g = gpu(device)) {
    tlEvEnd = g->recordEvent();
    ready = g->markReady();
  }
  if (opt_.fault.active() && opt_.fault.kind == "drop" && opt_.fault.op == opName(op)) return;
  const int dst = sched_.pipeline.deviceOf(dstStage);
  if (local(dst)) {
    mailbox_.put(key, Envelope{t, device, op, tlOpEnd, std::move(ready)});
  } else {
    try {
      remote_->send(key, t.contiguous(), rankOf(dst));
    } catch (const detail::PeerLost& e) {
      throw OpFailure("engine.peer-lost", e.what(), -1, e.rank);
    }
  }
}

void Run::forward(int device, const Op& op, bool recompute) {
  auto& stashes = stashes_[static_cast<size_t>(device)];
  const int s = op.stage, m = op.microbatch;
  // The route's first stage reads the micro-batch, its last computes the loss.
  const int prev = layout_.routes().prev(s, m), next = layout_.routes().next(s, m);
  const bool first = prev < 0, last = next < 0;
  Stash* st = nullptr;
  at::Tensor x;
  if (recompute) {
    auto it = stashes.find({s, m});
    if (it == stashes.end() || !it->second.inputSlot)
      throw OpFailure("engine.order",
                      "R needs the stashed input of F" + std::to_string(m) + "@s" + std::to_string(s));
    st = &it->second;
    if (st->inputSlot->offloaded)
      throw OpFailure("engine.order", "the stashed input is offloaded; RELOAD must come before R");
    x = st->inputSlot->t;
    st->slots.clear();
    st->layerOutputs.clear();
  } else {
    x = first ? model_->microInput(m) : receive(device, op, MessageKey{0, s, m}, prev);
    st = &stashes[{s, m}];
    *st = Stash{};
    st->inputSlot = std::make_shared<detail::Slot>();
    st->inputSlot->t = x;
  }
  const bool keepGraph = recompute || !recompute_.count({s, m});
  at::Tensor in = x.detach();
  if (keepGraph && x.is_floating_point()) in.requires_grad_(true);
  detail::ForwardCtx ctx{m, st};
  at::Tensor out;
  {
    // A stochastic forward (dropout in train mode) draws from the global generators: seeded per
    // op, under one lock, so F and its R draw the same masks whatever the other workers do.
    std::unique_lock<std::mutex> rng(rngMu_, std::defer_lock);
    if (model_->stochastic) {
      rng.lock();
      detail::seedGlobalGenerators(detail::forwardSeed(opt_.seed, iteration_, s, m));
    }
    c10::AutoGradMode mode(keepGraph);
    out = in;
    for (int l = layerBegin(s); l < layerEnd(s); ++l) {
      out = modelOf(s).layers[static_cast<size_t>(l)]->forward(out, ctx);
      if (keepGraph && model_->weightGradByGraph) st->layerOutputs.emplace_back(l, out);
    }
    if (last) out = model_->loss(out, model_->microTarget(m), 1.0 / M_);
  }
  if (opt_.fault.active() && opt_.fault.kind == "nan" && opt_.fault.op == opName(op))
    out = out + std::numeric_limits<double>::quiet_NaN();
  if (!at::isfinite(out).all().item<bool>())
    throw OpFailure("engine.nan", last ? "the loss is not finite (NaN or Inf)"
                                       : "the output activation has NaN or Inf values");
  st->input = keepGraph ? in : at::Tensor();
  st->output = out;
  st->hasGraph = keepGraph;
  if (last) {
    if (!recompute) {
      std::lock_guard lock(lossMu_);
      losses_.back() += out.item<double>();
    }
  } else if (!recompute) {
    deliver(device, op, MessageKey{0, next, m}, next, out.detach());
  }
}

void Run::backward(int device, const Op& op, bool inputsOnly) {
  auto& stashes = stashes_[static_cast<size_t>(device)];
  const int s = op.stage, m = op.microbatch;
  auto it = stashes.find({s, m});
  if (it == stashes.end() || !it->second.hasGraph)
    throw OpFailure("engine.order",
                    std::string(inputsOnly ? "I" : "B") + " has no forward graph (F" + std::to_string(m) +
                        "@s" + std::to_string(s) +
                        (recompute_.count({s, m}) ? " ran without one and R has not run)" : " has not run)"));
  Stash& st = it->second;
  const int prev = layout_.routes().prev(s, m), next = layout_.routes().next(s, m);
  at::Tensor grad;
  if (next >= 0) grad = receive(device, op, MessageKey{1, s, m}, next);
  if (st.inputGradDone)
    throw OpFailure("engine.order", std::string(inputsOnly ? "I" : "B") + " ran twice for this micro-batch");
  at::Tensor dx;
  const bool byGraph = inputsOnly && model_->weightGradByGraph;
  if (byGraph) {
    dx = inputGradientsKeepingGraph(st, grad, prev >= 0);
  } else {
    for (auto* layer : stageLayers(s))
      for (auto* lin : layer->linears) lin->deferWeightGrad = inputsOnly;
    if (grad.defined())
      torch::autograd::backward({st.output}, {grad});
    else
      torch::autograd::backward({st.output});
    if (prev >= 0) dx = st.input.grad();
  }
  if (prev >= 0) {
    if (opt_.fault.active() && opt_.fault.kind == "nan" && opt_.fault.op == opName(op))
      dx = dx + std::numeric_limits<double>::quiet_NaN();
    if (opt_.fault.active() && opt_.fault.kind == "grad" && opt_.fault.op == opName(op))
      dx = dx * (1.0 + 1e-4);
    if (!at::isfinite(dx).all().item<bool>())
      throw OpFailure("engine.nan", "the input gradient has NaN or Inf values");
    deliver(device, op, MessageKey{1, prev, m}, prev, dx);
  }
  if (byGraph) {
    st.inputGradDone = true;  // W needs the graph and the layer-output gradients
  } else {
    stashes.erase(it);
  }
}

// I for layers whose weights autograd owns: the gradients of the stage input and of every
// layer output, without accumulating any parameter gradient (autograd::grad computes only
// what leads to the tensors asked for, so no weight-gradient kernels run). The graph stays.
at::Tensor Run::inputGradientsKeepingGraph(Stash& st, const at::Tensor& grad, bool needInput) {
  std::vector<at::Tensor> wrt;
  std::vector<int> slot;  // index in layerOutputs, -1 = the stage input
  if (needInput && st.input.requires_grad()) {
    wrt.push_back(st.input);
    slot.push_back(-1);
  }
  st.layerOutputGrads.assign(st.layerOutputs.size(), at::Tensor());
  for (size_t i = 0; i < st.layerOutputs.size(); ++i) {
    const at::Tensor& y = st.layerOutputs[i].second;
    if (y.is_same(st.output)) {
      st.layerOutputGrads[i] = grad;  // the stage output: its gradient is the one received
    } else if (y.requires_grad()) {
      wrt.push_back(y);
      slot.push_back(static_cast<int>(i));
    }
  }
  at::Tensor dx;
  if (wrt.empty()) return dx;
  std::vector<at::Tensor> outs{st.output};
  std::vector<at::Tensor> gouts;
  if (grad.defined()) gouts.push_back(grad);
  auto gs = torch::autograd::grad(outs, wrt, gouts, /*retain_graph=*/true, /*create_graph=*/false,
                                  /*allow_unused=*/true);
  for (size_t k = 0; k < gs.size(); ++k) {
    if (slot[k] < 0)
      dx = gs[k].defined() ? gs[k] : at::zeros_like(st.input);
    else
      st.layerOutputGrads[static_cast<size_t>(slot[k])] = gs[k];
  }
  return dx;
}

// W for layers whose weights autograd owns: from each layer's output gradient (kept by I)
// back to that layer's own parameters only. This repeats the activation-gradient work inside
// a child (e.g. through its nonlinearity) but no other child's, and does every weight-gradient
// kernel, which I skipped.
void Run::weightGradientsByGraph(int device, const Op& op) {
  auto& stashes = stashes_[static_cast<size_t>(device)];
  auto it = stashes.find({op.stage, op.microbatch});
  if (it == stashes.end() || !it->second.inputGradDone)
    throw OpFailure("engine.order", "W found no kept graph (its I has not run)");
  Stash& st = it->second;
  for (size_t i = 0; i < st.layerOutputs.size(); ++i) {
    const at::Tensor& dy = st.layerOutputGrads[i];
    const auto& layer = modelOf(op.stage).layers[static_cast<size_t>(st.layerOutputs[i].first)];
    std::vector<at::Tensor> leaves;
    for (const auto& p : layer->params)
      if (p.value.requires_grad()) leaves.push_back(p.value);
    if (leaves.empty() || !dy.defined()) continue;
    try {
      torch::autograd::backward({st.layerOutputs[i].second}, {dy}, /*retain_graph=*/true,
                                /*create_graph=*/false, leaves);
    } catch (const c10::Error& e) {
      // A parameter the child does not use is no error: its gradient stays zero.
      const std::string what = e.what_without_backtrace();
      if (what.find("not have been used") == std::string::npos &&
          what.find("does not require grad") == std::string::npos)
        throw;
    }
  }
  stashes.erase(it);
}

void Run::sampleMemory(int device, double t) {
  std::int64_t bytes = 0;
  if (auto* g = gpu(device)) {
    bytes = g->allocatedBytes();
  } else {
    for (const auto& [key, st] : stashes_[static_cast<size_t>(device)]) bytes += st.deviceBytes();
    for (int s : sched_.pipeline.stagesOn(device))
      for (auto* layer : stageLayers(s))
        for (auto* lin : layer->linears) bytes += lin->pendingBytes();
    // Optimizer state is the device's from the first step on (the GPU's allocator sees it).
    bytes += stateBytes_[static_cast<size_t>(device)];
  }
  auto& mem = memory_[static_cast<size_t>(device)];
  if (!mem.empty() && mem.back().bytes == bytes) return;
  mem.push_back({t, bytes});
  if (measured_) emit(core::run_event::memory(iteration_, device, t, bytes));
}

void Run::execOp(int device, int step, const Op& op) {
  if (opt_.fault.active() && opt_.fault.kind == "throw" && opt_.fault.op == opName(op))
    throw OpFailure("engine.injected", "injected failure");
  auto& stashes = stashes_[static_cast<size_t>(device)];
  (void)step;
  if (stepKind_ && op.kind == *stepKind_) {
    optimizerStep(device);
    return;
  }
  switch (op.kind) {
    case OpKind::F:
      forward(device, op, false);
      break;
    case OpKind::R:
      forward(device, op, true);
      break;
    case OpKind::B:
      backward(device, op, false);
      break;
    case OpKind::I:
      backward(device, op, true);
      break;
    case OpKind::W: {
      if (model_->weightGradByGraph) {
        weightGradientsByGraph(device, op);
        break;
      }
      bool any = false, hasLinear = false;
      for (auto* layer : stageLayers(op.stage))
        for (auto* lin : layer->linears) {
          hasLinear = true;
          any = lin->weightGrad(op.microbatch) || any;
        }
      // A stage without linear layers (an embedding alone) has no weight work to defer.
      if (hasLinear && !any)
        throw OpFailure("engine.order", "W found no deferred weight gradients (its I has not run)");
      break;
    }
    case OpKind::Offload:
    case OpKind::Reload: {
      const bool off = op.kind == OpKind::Offload;
      auto it = stashes.find({op.stage, op.microbatch});
      if (it == stashes.end()) break;  // nothing stashed (already consumed): nothing to move
      std::vector<std::shared_ptr<detail::Slot>> slots = it->second.slots;
      if (it->second.inputSlot) slots.push_back(it->second.inputSlot);
      for (auto& slot : slots) {
        if (!slot->t.defined() || slot->offloaded == off) continue;
        if (auto* g = gpu(device)) {
          // GPU: pinned host memory, copied on the side stream.
          slot->t = off ? g->offload(slot->t) : g->reload(slot->t);
        } else {
          // CPU: a copy into fresh host memory, releasing the original when nothing else holds it.
          slot->t = slot->t.clone();
        }
        slot->offloaded = off;
      }
      break;
    }
    default:
      // SEND/RECV are implied by F and B; FSDP actions and user kinds have no work on a
      // single replica. They are recorded with their (tiny) duration.
      break;
  }
}

void Run::sumCopyGradients(int device) {
  const auto& p = sched_.pipeline;
  const auto timeout = std::chrono::milliseconds(static_cast<long>(opt_.timeoutSeconds * 1000));
  constexpr int kCopyGradient = 2;  // MessageKey kind: {2, receiving stage, sending stage}
  // Every stage of the device sends before any waits: two devices each holding a copy of the
  // other's block would otherwise wait for each other.
  std::map<int, at::Tensor> owns;
  for (int s : p.stagesOn(device)) {
    const auto& copies = layout_.blockStagesOf(s);
    if (copies.size() < 2) continue;
    const at::Tensor own = modelOf(s).flatGradients(layerBegin(s), layerEnd(s)).contiguous();
    owns[s] = own;
    std::shared_ptr<void> ready;
    if (auto* g = gpu(device)) ready = g->markReady();
    for (int t : copies) {
      if (t == s) continue;
      const int dst = p.deviceOf(t);
      if (local(dst)) {
        mailbox_.put({kCopyGradient, t, s},
                     Envelope{own.clone(), device, Op{OpKind::W, s, -1}, nowMs(), ready});
      } else {
        try {
          remote_->send({kCopyGradient, t, s}, own, rankOf(dst));
        } catch (const detail::PeerLost& e) {
          throw OpFailure("engine.peer-lost", e.what(), -1, e.rank);
        }
      }
    }
  }
  for (const auto& [s, own] : owns) {
    const auto& copies = layout_.blockStagesOf(s);
    // Summed in stage order on every copy, so that all of them hold the same bits.
    at::Tensor sum = at::zeros_like(own);
    for (int t : copies) {
      if (t == s) {
        sum.add_(own);
        continue;
      }
      const int src = p.deviceOf(t);
      const std::string what = "the gradients of block " + std::to_string(p.blockOf(s)) +
                               " from its copy on stage " + std::to_string(t) + " (device " +
                               std::to_string(src) + ")";
      std::optional<at::Tensor> theirs;
      if (local(src)) {
        if (auto env = mailbox_.take({kCopyGradient, s, t}, Clock::now() + timeout, stop_, opt_.cancel)) {
          if (auto* g = gpu(device)) g->waitReady(env->ready, env->tensor);
          theirs = env->tensor;
        }
      } else {
        try {
          theirs = remote_->recv({kCopyGradient, s, t}, rankOf(src), {own.numel()}, own.options(), timeout,
                                 stop_, opt_.cancel);
        } catch (const detail::PeerLost& e) {
          throw OpFailure("engine.peer-lost", std::string(e.what()) + " while this device waited for " + what,
                          -1, e.rank);
        }
      }
      if (!theirs)
        throw OpFailure("engine.timeout",
                        "timed out after " + formatSeconds(opt_.timeoutSeconds) + " waiting for " + what);
      sum.add_(*theirs);
    }
    modelOf(s).setFlatGradients(layerBegin(s), layerEnd(s), sum);
  }
}

std::vector<detail::Layer*> Run::layersOn(int device) const {
  std::vector<detail::Layer*> out;
  for (int s : sched_.pipeline.stagesOn(device))
    for (auto* layer : stageLayers(s)) out.push_back(layer);
  return out;
}

void Run::optimizerStep(int device) {
  auto& opt = optimizers_[static_cast<size_t>(device)];
  if (!opt) return;
  if (!copies_.empty()) {
    // The copies of a block step with the same (summed) gradient. Waiting for the other
    // copies' gradients is idle time, as a receive's wait is, not the step's.
    sumCopyGradients(device);
    tlOpStart = nowMs();
  }
  if (opt_.checkGradients && iteration_ == 0) {
    // The check compares the first iteration's gradients, which the step is about to use.
    auto& keep = firstGradients_[static_cast<size_t>(device)];
    for (int s : sched_.pipeline.stagesOn(device))
      for (auto& p : checkedGradients(s)) keep.push_back({p.name, p.value.clone()});
    tlOpStart = nowMs();  // the copy is not the step's time
  }
  at::NoGradGuard noGrad;
  opt->step();
  stateBytes_[static_cast<size_t>(device)] = opt->stateBytes();
}

thread_local Clock::time_point Run::tlOrigin;
thread_local double Run::tlOpStart = 0;
thread_local double Run::tlOpEnd = -1;
thread_local int Run::tlEvStart = -1;
thread_local int Run::tlEvEnd = -1;

void Run::runIteration(int device, int iteration) {
  const auto& steps = sched_.devices[static_cast<size_t>(device)];
  std::vector<std::pair<int, int>> events;  // GPU: start and end event of every op
  for (size_t i = 0; i < steps.size(); ++i) {
    if (stop_.load()) throw Aborted{};
    if (opt_.cancel && opt_.cancel->load()) throw Aborted{};
    const auto& step = steps[i];
    std::vector<Op> ops{step.first};
    if (step.second) ops.push_back(*step.second);
    // One range per step, spelled as PyTorch's runtime names its profiler ranges ("PP:1F3",
    // "PP:(0F7;7B3)OVERLAP_F_B"), so one trace reader reads Nsight views of both.
    detail::NvtxRange range("PP:" + core::pytorchStepText(sched_, step));
    for (size_t k = 0; k < ops.size(); ++k) {
      const Op& op = ops[k];
      positions_.enterStep(device, static_cast<int>(i), op);
      tlOpStart = nowMs();
      tlOpEnd = -1;
      tlEvStart = tlEvEnd = -1;
      try {
        if (auto* g = gpu(device)) {
          // The second op of an overlapped pair goes to the overlap stream.
          if (k == 1) g->beginOverlap();
          tlEvStart = g->recordEvent();
        }
        execOp(device, static_cast<int>(i), op);
        if (auto* g = gpu(device)) {
          if (tlEvEnd < 0) tlEvEnd = g->recordEvent();
          if (k + 1 == ops.size()) g->endOverlap();
        }
      } catch (const Aborted&) {
        throw;
      } catch (const OpFailure& e) {
        fail({e.code, "device " + std::to_string(device) + " at " + opName(op) + ": " + e.what(), device,
              static_cast<int>(i), e.waitStart, e.lostRank});
        throw Aborted{};
      } catch (const c10::Error& e) {
        fail({"engine.torch",
              "device " + std::to_string(device) + " at " + opName(op) + ": " + detail::errorText(e), device,
              static_cast<int>(i)});
        throw Aborted{};
      } catch (const std::exception& e) {
        fail({"engine.op-failed",
              "device " + std::to_string(device) + " at " + opName(op) + ": " + detail::errorText(e), device,
              static_cast<int>(i)});
        throw Aborted{};
      }
      const double start = tlOpStart;
      const double end = tlOpEnd >= 0 ? tlOpEnd : nowMs();
      core::TimelineOp rec{device, static_cast<int>(i), op, step.overlapped(), start, end};
      ops_[static_cast<size_t>(device)].push_back(rec);
      if (gpu(device)) {
        events.emplace_back(tlEvStart, tlEvEnd);  // times and op events after the iteration
      } else if (measured_)
        emitOp(iteration, rec);
      sampleMemory(device, end);
    }
  }
  if (!stepKind_) {
    // Without an optimizer step the copies of a block sum their gradients as the iteration ends.
    try {
      sumCopyGradients(device);
    } catch (const OpFailure& e) {
      fail({e.code, "device " + std::to_string(device) + " after its last step: " + e.what(), device, -1,
            e.waitStart, e.lostRank});
      throw Aborted{};
    }
  }
  positions_.finish(device);
  if (remote_) remote_->flush(std::chrono::milliseconds(static_cast<long>(opt_.timeoutSeconds * 1000)));
  if (auto* g = gpu(device)) {
    // GPU ops: times of their events on the device's streams, ms after the origin event that
    // was recorded as the iteration began, i.e. on the same clock as the host's origin.
    const std::vector<double> ms = g->resolveEvents();
    auto& recs = ops_[static_cast<size_t>(device)];
    for (size_t j = 0; j < recs.size() && j < events.size(); ++j) {
      auto [a, b] = events[j];
      if (a >= 0 && b >= 0) {
        recs[j].start = ms[static_cast<size_t>(a)];
        recs[j].end = std::max(ms[static_cast<size_t>(b)], recs[j].start);
      }
      if (measured_) emitOp(iteration, recs[j]);
    }
  }
  iterEndMs_[static_cast<size_t>(device)] = nowMs();
}

void Run::worker(int device) {
  try {
    if (auto* g = gpu(device)) g->bindThread();
    for (int it = 0; it < opt_.warmup + opt_.iterations; ++it) {
      // The first worker to reach the barrier of an iteration cannot know the others are
      // done with the previous one, so per-iteration state is reset between two barriers.
      barrier_->arrive(stop_, opt_.cancel);
      if (device == firstLocal_) {
        iteration_ = it;
        measured_ = it >= opt_.warmup;
        std::lock_guard lock(lossMu_);
        losses_.push_back(0.0);
        emit(core::run_event::progress({it, opt_.warmup + opt_.iterations, it < opt_.warmup}));
      }
      for (int s : sched_.pipeline.stagesOn(device))
        for (auto* layer : stageLayers(s)) {
          for (auto* lin : layer->linears) lin->zeroGrad();
          for (auto& p : layer->params) p.value.mutable_grad() = at::Tensor();
        }
      positions_.clear(device);
      stashes_[static_cast<size_t>(device)].clear();
      ops_[static_cast<size_t>(device)].clear();
      transfers_[static_cast<size_t>(device)].clear();
      memory_[static_cast<size_t>(device)].clear();
      if (device == firstLocal_ && remote_)
        remote_->barrier(std::chrono::milliseconds(static_cast<long>(opt_.timeoutSeconds * 1000)),
                         opt_.cancel);
      tlOrigin = barrier_->arrive(stop_, opt_.cancel);
      if (auto* g = gpu(device)) g->beginIteration();
      {
        // The curve's first sample (the device's static bytes), streamed like the others.
        const std::int64_t bytes = gpu(device) ? 0 : stateBytes_[static_cast<size_t>(device)];
        memory_[static_cast<size_t>(device)].push_back({0.0, bytes});
        if (measured_) emit(core::run_event::memory(iteration_, device, 0.0, bytes));
      }
      runIteration(device, it);
      barrier_->arrive(stop_, opt_.cancel);
      if (device == firstLocal_ && it >= opt_.warmup) {
        double end = 0;
        for (int d = 0; d < D_; ++d)
          if (local(d)) end = std::max(end, iterEndMs_[static_cast<size_t>(d)]);
        iterationMs_.push_back(end);
      }
      if (device == firstLocal_) ++iterationsDone_;
    }
  } catch (const Aborted&) {
    if (opt_.cancel && opt_.cancel->load()) {
      std::lock_guard lock(errMu_);
      if (!error_) error_ = ErrorInfo{"engine.cancelled", "run cancelled", -1, -1};
    }
    stop_ = true;
    mailbox_.wakeAll();
    barrier_->wakeAll();
  } catch (const detail::PeerLost& e) {
    fail({"engine.peer-lost", "device " + std::to_string(device) + ": " + e.what(), device, -1, -1, e.rank});
  } catch (const detail::WaitTimedOut& e) {
    fail({"engine.timeout", "device " + std::to_string(device) + ": " + e.what(), device, -1});
  } catch (const std::exception& e) {
    fail({"engine.worker", "device " + std::to_string(device) + ": " + detail::errorText(e), device, -1});
  }
}

void Run::gradientCheck(RunReport& r) {
  GradientCheck& g = r.gradients;
  g.ran = true;
  // GPU f32 kernels sum in other orders than the CPU's (and than each other across batch
  // sizes): a looser bound there.
  g.tolerance = opt_.model.dtype == DType::F64 ? 1e-10 : (cuda_ ? 1e-4 : 1e-5);
  std::vector<detail::NamedParam> piped;
  if (stepKind_) {
    // Optimizer runs: the first iteration's gradients, against the model as it was then.
    for (int d = 0; d < D_; ++d)
      if (local(d))
        for (auto& p : firstGradients_[static_cast<size_t>(d)]) piped.push_back(p);
    at::NoGradGuard noGrad;
    size_t i = 0;
    for (const auto& l : model_->layers) {
      for (auto* lin : l->linears) {
        lin->weight.detach().copy_(initialParams_[i++]);
        if (lin->bias.defined()) lin->bias.detach().copy_(initialParams_[i]);
        ++i;
      }
      for (auto& p : l->params) p.value.detach().copy_(initialParams_[i++]);
    }
  } else {
    // This process's stages (all of them with threads), every copy of a block.
    for (int s = 0; s < S_; ++s)
      if (local(sched_.pipeline.deviceOf(s)))
        for (auto& p : checkedGradients(s)) piped.push_back({p.name, p.value.clone()});
  }
  model_->zeroGrad();
  for (auto& l : model_->layers)
    for (auto* lin : l->linears) lin->deferWeightGrad = false;
  detail::ForwardCtx ctx{-1, nullptr};
  at::Tensor loss;
  if (!model_->training) {
    // Eval mode: the whole batch at once, which micro-batching must not change.
    at::Tensor x = model_->inputs;
    if (x.is_floating_point()) x = x.detach().requires_grad_(true);
    at::Tensor out = x;
    for (auto& l : model_->layers) out = l->forward(out, ctx);
    loss = model_->loss(out, model_->targets, 1.0);
    torch::autograd::backward({loss});
  } else {
    // Train mode: batch norm normalises each micro-batch by its own statistics and dropout
    // draws per op, so the reference runs the same micro-batches unpipelined, stage by stage
    // with the seeds the pipelined forwards had (of the checked iteration), and sums.
    const int checked = stepKind_ ? 0 : opt_.warmup + opt_.iterations - 1;
    for (int m = 0; m < M_; ++m) {
      at::Tensor out = model_->microInput(m);
      if (out.is_floating_point()) out = out.detach().requires_grad_(true);
      // Along the micro-batch's route, each block in the first copy of the model.
      for (int s = layout_.routeStart(m); s >= 0; s = layout_.routes().next(s, m)) {
        if (model_->stochastic) detail::seedGlobalGenerators(detail::forwardSeed(opt_.seed, checked, s, m));
        for (int l = layerBegin(s); l < layerEnd(s); ++l)
          out = model_->layers[static_cast<size_t>(l)]->forward(out, ctx);
      }
      at::Tensor part = model_->loss(out, model_->microTarget(m), 1.0 / M_);
      torch::autograd::backward({part});
      loss = loss.defined() ? loss + part.detach() : part.detach();
    }
  }
  std::map<std::string, at::Tensor> ref;
  double largest = 0;  // the largest reference gradient of the whole model
  for (auto& p : model_->gradients(0, static_cast<int>(model_->layers.size()))) {
    ref[p.name] = p.value;
    if (p.value.numel() > 0) largest = std::max(largest, p.value.abs().max().item<double>());
  }
  g.passed = true;
  for (const auto& p : piped) {
    const at::Tensor& rg = ref.at(referenceName(p.name));
    const double diff = (p.value - rg).abs().max().item<double>();
    // Relative to the parameter's own gradient, but never to less than a thousandth of the
    // model's largest: a gradient that is zero in exact arithmetic (the bias of a layer before
    // batch norm, which normalises it away) is rounding noise, and noise over noise says nothing.
    const double scale = std::max(rg.numel() > 0 ? rg.abs().max().item<double>() : 0.0, 1e-3 * largest);
    const double rel = scale > 0 ? diff / scale : diff;
    g.parameters.push_back({p.name, rel});
    if (rel > g.maxRelativeError || g.worstParameter.empty()) {
      g.maxRelativeError = std::max(g.maxRelativeError, rel);
      if (rel >= g.maxRelativeError) g.worstParameter = p.name;
    }
  }
  g.lossReference = loss.item<double>();
  // With several processes rank 0 sums the losses of every rank holding a route's end.
  if (std::any_of(layout_.lossStages().begin(), layout_.lossStages().end(),
                  [&](int s) { return local(sched_.pipeline.deviceOf(s)); })) {
    g.lossPipelined = losses_.empty() ? 0 : stepKind_ ? losses_.front() : losses_.back();
    g.lossRelativeError =
        std::abs(g.lossPipelined - g.lossReference) / std::max(std::abs(g.lossReference), 1e-30);
  }
  g.passed = g.maxRelativeError <= g.tolerance && g.lossRelativeError <= g.tolerance;
}

// What this rank tells rank 0 at the end (rank_report.h).
RankReport rankReportOf(const RunReport& r, const std::optional<ErrorInfo>& err,
                        const std::vector<core::StuckDevice>& stuck) {
  RankReport out;
  out.ops = r.timeline.ops;
  out.transfers = r.timeline.transfers;
  for (size_t d = 0; d < r.timeline.memory.size(); ++d)
    for (const auto& m : r.timeline.memory[d]) out.memory.push_back({static_cast<int>(d), m});
  out.losses = r.losses;
  out.iterationMs = r.iterationMs;
  out.parameters = r.gradients.parameters;
  out.error = err;
  out.stuck = stuck;
  return out;
}

void Run::emitOp(int iteration, const core::TimelineOp& r) {
  emit(core::run_event::op(iteration, r, opName(r.op), sched_.kindName(r.op.kind)));
}

void Run::emitTransfer(int iteration, const core::Transfer& t) {
  emit(core::run_event::transfer(iteration, t, sched_.kindName(t.producer.kind),
                                 sched_.kindName(t.consumer.kind)));
}

void Run::gatherRemote(RunReport& r) {
  const auto wait =
      std::chrono::milliseconds(static_cast<long>(std::min(opt_.timeoutSeconds, 30.0) * 1000) + 2000);
  std::optional<ErrorInfo> err;
  {
    std::lock_guard lock(errMu_);
    err = error_;
  }
  // A failed run: where each of this rank's devices stands, for the post-mortem (and, through
  // its event pipe, for a launcher whose rank 0 cannot report).
  std::vector<core::StuckDevice> mine;
  if (err || stop_.load())
    for (int d = 0; d < D_; ++d)
      if (local(d)) mine.push_back(positions_.stuck(d));
  const bool orphaned = opt_.orphaned && opt_.orphaned->load();
  if (rank_ != 0) {
    for (const auto& d : mine) emit(core::run_event::stuck(d));
    if (orphaned) return;  // the store went with the launcher
    try {
      remote_->setKey("report/" + std::to_string(rank_),
                      detail::rankReportToJson(rankReportOf(r, err, mine)));
    } catch (const std::exception&) {
    }
    return;
  }
  std::vector<core::StuckDevice> all(static_cast<size_t>(D_));
  for (const auto& d : mine) all[static_cast<size_t>(d.device)] = d;
  std::optional<std::string> abortMsg;
  try {
    if (remote_->hasKey("abort")) abortMsg = remote_->getKey("abort", std::chrono::milliseconds(1000));
  } catch (const std::exception&) {
  }
  std::vector<ErrorInfo> errors;
  if (err) errors.push_back(*err);
  // The reports, in the order they arrive. A rank named lost by a peer (or any lost
  // connection, when it could not be told whose) will send none: it is waited for briefly,
  // not for the whole timeout.
  const auto start = std::chrono::steady_clock::now();
  std::vector<RankReport> reports;
  std::set<int> missing, named;
  for (int q = 1; q < remote_->worldSize(); ++q) missing.insert(q);
  bool connectionLost = err && err->code == "engine.peer-lost";
  if (err && err->lostRank >= 0) named.insert(err->lostRank);
  while (!missing.empty()) {
    for (auto it = missing.begin(); it != missing.end();) {
      std::optional<std::string> text;
      try {
        if (remote_->hasKey("report/" + std::to_string(*it)))
          text = remote_->getKey("report/" + std::to_string(*it), std::chrono::milliseconds(1000));
      } catch (const std::exception&) {
      }
      if (!text) {
        ++it;
        continue;
      }
      auto report = detail::rankReportFromJson(*text, *it);
      if (!report) {
        // Not a report this build writes: the rank's results are lost, and the run says why.
        errors.push_back({"engine.rank-report", report.errors().front().message, -1, -1});
      } else {
        if (const auto& e = report->error) {
          connectionLost = connectionLost || e->code == "engine.peer-lost";
          if (e->lostRank >= 0) named.insert(e->lostRank);
        }
        for (const auto& d : report->stuck)
          if (d.device >= 0 && d.device < D_) all[static_cast<size_t>(d.device)] = d;
        reports.push_back(std::move(report).value());
      }
      it = missing.erase(it);
    }
    const auto waited = std::chrono::steady_clock::now() - start;
    // A rank that another waits on and that has not reported is stopped or hung: a second is
    // enough for it, not the whole wait.
    std::set<int> waitedOn;
    for (const auto& d : all)
      if (d.device >= 0 && d.state == core::StuckDevice::State::Waiting) waitedOn.insert(d.waitsOnDevice);
    const bool onlySuspects = std::all_of(missing.begin(), missing.end(), [&](int q) {
      return named.count(q) > 0 || waitedOn.count(rankOf(q)) > 0;
    });
    if (onlySuspects && waited >= std::chrono::milliseconds(1000)) break;
    // The launcher may be found gone while this rank waits (its lifeline ends after the
    // cancel): its ranks report to nobody then, so none is waited for.
    if (orphaned || (opt_.orphaned && opt_.orphaned->load())) break;
    const bool onlyLost =
        std::all_of(missing.begin(), missing.end(), [&](int q) { return named.count(q) > 0; });
    if (missing.empty() || waited >= wait || (onlyLost && waited >= std::chrono::milliseconds(500)) ||
        (connectionLost && waited >= std::chrono::milliseconds(2000)))
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // The loss lives with the routes' last stages: without one of their ranks' reports there is
  // none to give.
  for (int s : layout_.lossStages())
    if (const int lossRank = rankOf(sched_.pipeline.deviceOf(s)); lossRank != 0 && missing.count(lossRank))
      r.losses.clear();
  for (int q : missing) {
    core::StuckDevice& silent = all[static_cast<size_t>(q)];
    silent.device = q;
    silent.state = core::StuckDevice::State::Silent;
    silent.note = named.count(q) > 0 ? "ended without a word" : "sent no report: stopped, hung or killed";
    const bool died = named.count(q) > 0 || connectionLost;
    errors.push_back({"engine.rank-lost",
                      "rank " + std::to_string(q) + " (device " + std::to_string(q) + ") " +
                          (died ? "ended without reporting an error (killed or crashed)"
                                : "sent no report (it crashed or hung)"),
                      q, -1, -1, q});
  }
  for (const RankReport& rep : reports) {
    // Only this rank streams events, so the other ranks' ops and memory of the measured
    // iteration reach the event stream here, before "finished": a reader of the stream ends
    // with every device, as the returned timeline does.
    for (const auto& o : rep.ops) {
      r.timeline.ops.push_back(o);
      if (measured_) emitOp(iteration_, o);
    }
    for (const auto& t : rep.transfers) {
      r.timeline.transfers.push_back(t);
      if (measured_) emitTransfer(iteration_, t);
    }
    for (const auto& [device, sample] : rep.memory) {
      const auto d = static_cast<size_t>(device);
      if (device < 0 || d >= r.timeline.memory.size()) continue;
      r.timeline.memory[d].push_back(sample);
      if (measured_) emit(core::run_event::memory(iteration_, device, sample.time, sample.bytes));
    }
    for (size_t i = 0; i < rep.losses.size() && i < r.losses.size(); ++i) r.losses[i] += rep.losses[i];
    for (size_t i = 0; i < rep.iterationMs.size() && i < r.iterationMs.size(); ++i)
      r.iterationMs[i] = std::max(r.iterationMs[i], rep.iterationMs[i]);
    if (r.gradients.ran) {
      for (const auto& p : rep.parameters) {
        r.gradients.parameters.push_back(p);
        if (p.relativeError > r.gradients.maxRelativeError) {
          r.gradients.maxRelativeError = p.relativeError;
          r.gradients.worstParameter = p.name;
        }
      }
    }
    if (rep.error) errors.push_back(*rep.error);
  }
  std::sort(r.timeline.ops.begin(), r.timeline.ops.end(), [](const auto& a, const auto& b) {
    return std::tie(a.device, a.start) < std::tie(b.device, b.start);
  });
  if (r.gradients.ran && !r.losses.empty()) {
    // Every rank's losses are summed above: the pipelined loss is the checked iteration's.
    GradientCheck& g = r.gradients;
    g.lossPipelined = stepKind_ ? r.losses.front() : r.losses.back();
    g.lossRelativeError =
        std::abs(g.lossPipelined - g.lossReference) / std::max(std::abs(g.lossReference), 1e-30);
  }
  if (r.gradients.ran)
    r.gradients.passed = r.gradients.maxRelativeError <= r.gradients.tolerance &&
                         r.gradients.lossRelativeError <= r.gradients.tolerance;
  if (!errors.empty()) {
    // The root cause (rank_report.h): a cancel, else what the failing rank published as
    // "abort", else the wait that began first.
    {
      std::lock_guard lock(errMu_);
      error_ = errors[detail::rootCause(errors, abortMsg)];
    }
    addHangReport(all);
  }
}

core::Result<RunReport> Run::execute() {
  try {
    PS_TRY(setup());
  } catch (const c10::Error& e) {
    return core::makeError("engine.setup", detail::errorText(e));
  } catch (const std::exception& e) {
    return core::makeError("engine.setup", detail::errorText(e));
  }
  std::vector<int> localDevices;
  for (int d = 0; d < D_; ++d)
    if (local(d)) localDevices.push_back(d);
  firstLocal_ = localDevices.front();
  const int hw = std::max(1u, std::thread::hardware_concurrency());
  const int workersOnHost =
      static_cast<int>(localDevices.size()) * std::max(1, opt_.distributed.localWorldSize);
  const int perWorker = opt_.threads > 0 ? opt_.threads : std::max(1, hw / workersOnHost);
  at::set_num_threads(perWorker);
  setBlasThreads(perWorker);
  barrier_ = std::make_unique<StopBarrier>(static_cast<int>(localDevices.size()));
  core::RunStartedInfo started;
  started.protocolVersion = core::kRunEventProtocolVersion;
  started.schedule = sched_.name;
  started.model = modelSpecToString(opt_.model);
  started.device = deviceName(opt_.device);
  started.devices = D_;
  started.stages = S_;
  started.microbatches = M_;
  started.microbatchSize = opt_.microbatchSize;
  started.iterations = opt_.iterations;
  started.warmup = opt_.warmup;
  started.partition = layout_.partition();
  started.rank = rank_;
  started.worldSize = remote_ ? remote_->worldSize() : 1;
  started.threads = perWorker;
  started.optimizer = optimizerName(opt_.optimizer);
  started.learningRate = opt_.learningRate;
  started.localWorldSize = remote_ ? std::max(1, opt_.distributed.localWorldSize) : 1;
  started.parameters = model_->parameterCount();
  started.seed = static_cast<std::int64_t>(opt_.seed);
  started.startedMs = opt_.startedMs > 0 ? opt_.startedMs
                                         : std::chrono::duration_cast<std::chrono::milliseconds>(
                                               std::chrono::system_clock::now().time_since_epoch())
                                               .count();
  emit(core::run_event::started(started));
  std::vector<std::thread> threads;
  for (int d : localDevices)
    threads.emplace_back([this, d] {
      detail::quietTorchLogging();
      worker(d);
    });
  for (auto& t : threads) t.join();
  at::set_num_threads(hw);
  setBlasThreads(hw);

  RunReport r;
  r.started = started;
  r.partition = layout_.partition();
  r.parameterCount = model_->parameterCount();
  r.data = model_->dataNote;
  if (model_->weightGradByGraph)
    r.modelMode =
        model_->training
            ? std::string("train (dropout on, batch norm on each micro-batch's statistics") +
                  (model_->stochastic ? "; random draws seeded per stage, micro-batch and iteration)" : ")")
            : "eval (dropout off, batch norm on its running statistics; --optimizer trains in train mode)";
  r.losses = losses_;
  r.iterationMs = iterationMs_;
  if (stepKind_) r.optimizerStateBytes = stateBytes_;
  core::Timeline& tl = r.timeline;
  tl.source = core::TimelineSource::Measured;
  tl.label = sched_.name.empty() ? "run" : sched_.name;
  tl.devices = D_;
  tl.memory.resize(static_cast<size_t>(D_));
  for (int d : localDevices) {
    auto& o = ops_[static_cast<size_t>(d)];
    tl.ops.insert(tl.ops.end(), o.begin(), o.end());
    auto& t = transfers_[static_cast<size_t>(d)];
    tl.transfers.insert(tl.transfers.end(), t.begin(), t.end());
    tl.memory[static_cast<size_t>(d)] = memory_[static_cast<size_t>(d)];
  }
  if (!error_ && opt_.checkGradients) {
    try {
      gradientCheck(r);
    } catch (const std::exception& e) {
      fail({"engine.gradient-check", std::string("gradient check failed to run: ") + detail::errorText(e), -1,
            -1});
    }
  }
  if (remote_) {
    if (error_ || stop_) remote_->close();
    gatherRemote(r);
  } else if (error_) {
    std::vector<core::StuckDevice> all;
    for (int d = 0; d < D_; ++d) all.push_back(positions_.stuck(d));
    addHangReport(all);
  }
  r.stuck = stuck_;
  // A failed or cancelled iteration's loss is partial (some micro-batches never got there).
  if (error_ && r.losses.size() > static_cast<size_t>(iterationsDone_))
    r.losses.resize(static_cast<size_t>(iterationsDone_));
  tl.complete = !error_.has_value();
  tl.metrics = core::computeMetrics(tl);
  if (error_) {
    r.status =
        error_->code == "engine.cancelled" ? ps::core::RunState::Cancelled : ps::core::RunState::Failed;
    core::Diagnostic d = core::makeError(error_->code, error_->message);
    if (error_->device >= 0 && error_->step >= 0) d.related.push_back({error_->device, error_->step});
    for (const core::OpRef& ref : error_->related)
      if (ref.device != error_->device || ref.step != error_->step) d.related.push_back(ref);
    r.diagnostics.push_back(d);
    tl.diagnostics.push_back(d);
    // The post-mortem first: where every device stood, then the error naming the wait chain.
    for (const auto& st : stuck_)
      if (st.device >= 0) emit(core::run_event::stuck(st));
    core::RunErrorEvent e;
    e.code = error_->code;
    e.message = error_->message;
    e.device = error_->device;
    e.step = error_->step;
    e.related = error_->related;
    emit(core::run_event::error(e));
  }
  core::RunFinishedInfo fin;
  fin.state = r.status;
  fin.losses = r.losses;
  fin.iterationMs = r.iterationMs;
  fin.makespanMs = tl.metrics.makespan;
  fin.bubbleRatio = tl.metrics.bubbleRatio;
  if (r.gradients.ran)
    fin.gradientCheck =
        core::RunGradientCheck{r.gradients.passed, r.gradients.maxRelativeError, r.gradients.worstParameter,
                               r.gradients.lossRelativeError, r.gradients.tolerance};
  r.finished = fin;
  if (rank_ == 0) emit(core::run_event::finished(fin));
  return r;
}

}  // namespace

constexpr core::EnumName<Device> kDeviceNames[] = {{Device::Cpu, "cpu"}, {Device::Cuda, "cuda"}};
PS_ENUM_NAME_FUNCTION(Device, kDeviceNames, deviceName);
PS_ENUM_FROM_NAME_FUNCTION(Device, kDeviceNames, deviceFromName);

constexpr core::EnumName<Optimizer> kOptimizerNames[] = {
    {Optimizer::None, "none"}, {Optimizer::Sgd, "sgd"}, {Optimizer::AdamW, "adamw"}};
PS_ENUM_NAME_FUNCTION(Optimizer, kOptimizerNames, optimizerName);

std::optional<Optimizer> optimizerFromName(std::string_view name) {
  const auto o = core::enumFromName(name, kOptimizerNames);
  return o == Optimizer::None ? std::nullopt : o;  // no training step: leave --optimizer out
}

double defaultLearningRate(Optimizer optimizer) {
  return optimizer == Optimizer::AdamW ? 1e-3 : 1e-2;
}

void addNominalOptimizerStepCosts(core::CostProfile& profile, Optimizer optimizer) {
  if (optimizer == Optimizer::None) return;
  constexpr double kBytesPerMs = 10e9 / 1e3;
  const double passes = optimizer == Optimizer::AdamW ? 22.0 : 3.0;
  for (auto& l : profile.layers)
    l.optimizerStepMs = passes * static_cast<double>(l.weightBytes) / kBytesPerMs;
}

core::Result<core::Schedule> scheduleWithOptimizerSteps(const core::Schedule& s) {
  const std::string name(core::kOptimizerStepKind);
  if (s.kindFromName(name))
    return core::makeError("engine.optimizer",
                           "the schedule already declares a kind named " + name +
                               ", the name of the optimizer step; rename that kind to run with "
                               "--optimizer");
  core::Schedule out = s;
  core::UserKind u;
  u.name = name;
  // The stage's optimizer step; a prediction adds the device's other stages (run_session).
  u.durationExpr = "O";
  out.userKinds.push_back(u);
  const auto kind = static_cast<OpKind>(core::kFirstUserKind + out.userKinds.size() - 1);
  for (int d = 0; d < out.pipeline.devices && d < static_cast<int>(out.devices.size()); ++d) {
    const auto stages = out.pipeline.stagesOn(d);
    if (!stages.empty())
      out.devices[static_cast<size_t>(d)].push_back(core::Step{Op{kind, stages.front(), 0}, std::nullopt});
  }
  return out;
}

core::Result<RunReport> runSchedule(const core::Schedule& schedule, const RunOptions& options) {
  detail::quietTorchLogging();
  std::optional<core::Schedule> withSteps;
  if (options.optimizer != Optimizer::None) {
    if (!(options.learningRate > 0) || !std::isfinite(options.learningRate))
      return core::makeError("engine.options", "the learning rate must be a positive number");
    auto w = scheduleWithOptimizerSteps(schedule);
    PS_TRY(w);
    withSteps = std::move(*w);
  }
  Run run(withSteps ? *withSteps : schedule, options);
  try {
    return run.execute();
  } catch (const c10::Error& e) {
    return core::makeError("engine.torch", detail::errorText(e));
  } catch (const std::exception& e) {
    return core::makeError("engine.internal", detail::errorText(e));
  }
}

bool cudaCompiled() {
#ifdef PIPESTUDIO_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

bool cudaAvailable() {
  return cudaCompiled() && at::hasCUDA();
}

int cudaDeviceCount() {
#ifdef PIPESTUDIO_HAVE_CUDA
  return detail::cudaDeviceCount();
#else
  return 0;
#endif
}

}  // namespace ps::engine
