#pragma once
// The libtorch pipeline executor: runs any Schedule on a real model split into stages, one
// worker per device, and records what really happened as a measured Timeline. No torch types
// appear here, so the CLI and tests include it without paying for torch headers.
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipestudio/core/io/run_events.h"
#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/core/model/hang_report.h"
#include "pipestudio/core/model/result.h"
#include "pipestudio/core/model/run_state.h"
#include "pipestudio/core/model/schedule.h"
#include "pipestudio/core/model/timeline.h"

namespace ps::engine {

// Which model: the built-in MLP or GPT, or a user's TorchScript module ("mlp", "gpt",
// "torchscript" before the ':' of a spec).
enum class ModelKind : std::uint8_t { Mlp, Gpt, TorchScript };
std::string_view modelKindName(ModelKind k);

// The model's floating-point type ("dtype=f32|f64" in a spec).
enum class DType : std::uint8_t { F32, F64 };
// A TorchScript model's loss ("loss=mse|ce"): mean squared error against random targets, or
// cross-entropy of the output as logits against random classes.
enum class Loss : std::uint8_t { Mse, CrossEntropy };

// Built-in model, from a spec string such as "gpt:layers=8,hidden=256,heads=4,seq=128,vocab=1000"
// or "mlp:layers=8,hidden=512", or a user's TorchScript module, "torchscript:path=FILE" (split
// at its top-level children; docs/engine.md). Keys not given keep their defaults.
struct ModelSpec {
  ModelKind kind = ModelKind::Mlp;
  int layers = 4;  // mlp: Linear+GELU blocks; gpt: decoder blocks
  int hidden = 64;
  int heads = 4;    // gpt
  int seq = 16;     // gpt: tokens per sample
  int vocab = 128;  // gpt
  int ffn = 4;      // gpt: MLP width = ffn x hidden
  DType dtype = DType::F32;
  // torchscript only
  std::string path;  // the saved module (torch.jit.save / torch::jit::Module::save)
  int features = 0;  // input width; 0 = the last dimension of the first 2-D parameter
  Loss loss = Loss::Mse;
};

core::Result<ModelSpec> parseModelSpec(std::string_view spec);
std::string modelSpecToString(const ModelSpec& m);
// Layers the partitioner sees: mlp = blocks; gpt = embedding + blocks + LM head.
int modelLayerCount(const ModelSpec& m);
// Names of those layers in order ("embedding", "block0", ..., "head").
std::vector<std::string> modelLayerNames(const ModelSpec& m);
// Analytic per-layer costs of a built-in model for micro-batches of b samples: times from
// FLOPs at a nominal 50 GFLOP/s, fp32/f64 bytes. The engine's default partition balances these.
core::CostProfile modelCostProfile(const ModelSpec& m, int microbatchSize);
// Loads a TorchScript model and runs one forward through its children on a synthetic batch
// (built-in models always pass). Errors name the file and the failing child.
core::Status checkModel(const ModelSpec& m);

// Where this process sits in a multi-process run (torchrun-style). worldSize 1 = every device
// of the schedule runs as a thread of this process.
struct DistributedOptions {
  int rank = 0;
  int worldSize = 1;
  std::string masterAddr = "127.0.0.1";
  int masterPort = 29500;
  int localWorldSize = 1;  // ranks on this host (LOCAL_WORLD_SIZE), to share its cores
  // Bound of the rendezvous (every rank joining the store and the process group), apart from
  // RunOptions::timeoutSeconds, which bounds each wait of the run itself.
  double connectTimeoutSeconds = 60;
};

// Test and demonstration hook: make one op fail on purpose. kind: "throw" (exception in the
// op), "nan" (the op's output becomes NaN), "drop" (the op's output is never sent, so the
// consumer's receive times out). op: the op's name as the DSL prints it, e.g. "B1@s1".
// --inject-fault KIND:OP makes one op of the schedule go wrong, on purpose (tests, demos):
// throw (the op fails), nan (its output or input gradient is NaN), drop (its output is never
// delivered: the consumer times out), grad (the input gradient a B or I sends is off by 1e-4,
// relative: a wrong gradient the gradient check must catch, ten times its f32 tolerance).
struct FaultInjection {
  std::string kind;
  std::string op;
  bool active() const { return !kind.empty(); }
};
core::Result<FaultInjection> parseFaultInjection(std::string_view text);  // "throw:B1@s1"
// A fault naming an op that is not in the schedule would never fire: an error naming the op.
core::Status checkFaultInjection(const core::Schedule& schedule, const FaultInjection& fault);

// Where a run's ops execute; spelled "cpu" and "cuda" on the command line, in the `started`
// event and in a session's config.
enum class Device : std::uint8_t { Cpu, Cuda };
std::string_view deviceName(Device d);
std::optional<Device> deviceFromName(std::string_view name);

// A run's training steps; spelled "sgd" and "adamw" by --optimizer, "none" in the `started`
// event and a session's config.
enum class Optimizer : std::uint8_t { None, Sgd, AdamW };
std::string_view optimizerName(Optimizer o);  // "none", "sgd", "adamw"
// What --optimizer takes: "sgd" or "adamw" (not "none": leave the flag out).
std::optional<Optimizer> optimizerFromName(std::string_view name);

struct RunOptions {
  ModelSpec model;
  Device device = Device::Cpu;
  int microbatchSize = 2;
  int iterations = 1;  // measured iterations
  int warmup = 0;      // iterations run first and left out of the timeline
  bool checkGradients = false;
  double timeoutSeconds = 60;  // a receive that waits longer fails the run
  std::vector<int> partition;  // layers per stage; empty = the schedule's, else an even split
  std::uint64_t seed = 1;
  std::int64_t startedMs = 0;  // when the run was started (Unix ms), for its `started` event; 0: now
  // A batch saved by PyTorch's torch.save instead of synthetic data (docs/engine.md, "Data"):
  // a tensor of inputs, a tuple (inputs, targets) or a dict {"inputs", "targets"}; the first
  // micro-batches x microbatchSize samples are used. Empty: synthetic data from the seed.
  std::string inputsPath;
  int threads = 0;  // intra-op threads per worker (0 = cores / workers on this host)
  DistributedOptions distributed;
  FaultInjection fault;
  // Training steps: none (forward and backward only), SGD or AdamW (libtorch's, with PyTorch's
  // defaults apart from the learning rate). Each device steps the parameters of its own stages
  // after its last op of every iteration, as an OPTIMIZER op of the timeline.
  Optimizer optimizer = Optimizer::None;
  double learningRate = 0;  // > 0 when optimizer is set
  // Set from another thread (or a signal handler) to cancel: workers stop at the next op.
  const std::atomic<bool>* cancel = nullptr;
  // Set when the launcher of this rank is gone (with it the store it hosted): a cancelled run
  // then gathers no reports from the other ranks, which are ending too.
  const std::atomic<bool>* orphaned = nullptr;
  // JSON lines of the run-event protocol (docs/engine.md), one call per line; called from
  // worker threads but never concurrently.
  std::function<void(const std::string&)> events;
};

// The learning rate each optimizer uses unless one is given: SGD 0.01, AdamW 0.001.
double defaultLearningRate(Optimizer optimizer);
// Nominal optimizer step times for an analytic profile (the model's, modelCostProfile): each
// layer's optimizer_step_ms from the bytes the step streams over its weights (SGD 3 passes:
// read p and g, write p; AdamW 22, as libtorch's per-tensor AdamW runs it) at a nominal
// 10 GB/s. Optimizer::None leaves the profile as it is.
void addNominalOptimizerStepCosts(core::CostProfile& profile, Optimizer optimizer);
// The schedule an optimizer run executes: `s` with the user kind OPTIMIZER (core's optimizer
// step, iterations.h) declared last and one OPTIMIZER op (micro-batch 0, the device's first
// stage) appended to every device's order. The measured timeline's OPTIMIZER ops name these
// steps, so traces and sessions of such a run use this schedule. Error: `s` already declares
// a kind named OPTIMIZER.
core::Result<core::Schedule> scheduleWithOptimizerSteps(const core::Schedule& s);

struct ParameterError {
  std::string name;          // e.g. "block3.attn.qkv.weight"
  double relativeError = 0;  // max |g - g_ref| / max |g_ref|
};

struct GradientCheck {
  bool ran = false;
  bool passed = false;
  double tolerance = 0;
  double lossPipelined = 0;
  double lossReference = 0;
  double lossRelativeError = 0;
  double maxRelativeError = 0;  // over every parameter this process owns
  std::string worstParameter;
  std::vector<ParameterError> parameters;
};

struct RunReport {
  core::RunState status = core::RunState::Succeeded;  // Succeeded, Failed or Cancelled
  // The run's `started` and `finished` events as this process wrote them (run_events.h): what a
  // reader of the stream learns, so a recording from the report and one from the stream agree.
  std::optional<core::RunStartedInfo> started;
  std::optional<core::RunFinishedInfo> finished;
  core::Diagnostics diagnostics;    // the failure (op, device, peer) when not finished
  core::Timeline timeline;          // last measured iteration (partial when failed)
  std::vector<double> iterationMs;  // wall time of each measured iteration
  std::vector<double> losses;       // loss of each iteration (warm-up included)
  // With an optimizer: bytes of optimizer state per device at the end (0 for other ranks'
  // devices and for SGD).
  std::vector<std::int64_t> optimizerStateBytes;
  GradientCheck gradients;
  std::vector<int> partition;  // layers per stage actually used
  std::int64_t parameterCount = 0;
  // Where the batch came from, for people: "synthetic from seed 1", or "FILE: samples 0..7 of
  // 12, targets from the file" (or "from seed 1").
  std::string data;
  // TorchScript models: the module's mode, for people: "train (...)" with --optimizer, else
  // "eval (...)". Empty for the built-in models, which have no dropout or batch norm.
  std::string modelMode;
  // A run that timed out (a hang): where every device stood when it was stopped, the action it
  // was in and what it waited for (hang_report.h); the wait chain is in the diagnostic.
  std::vector<core::StuckDevice> stuck;
};

// Refuses (error Result) what cannot start: invalid schedule, bad model or partition, CUDA
// asked for without a CUDA build. Everything that goes wrong after the start is reported in
// RunReport::status and diagnostics, with the partial timeline kept.
core::Result<RunReport> runSchedule(const core::Schedule& schedule, const RunOptions& options);

// Seconds as messages print them: "5.00 s", "0.25 s", "0.001 s".
std::string formatSeconds(double seconds);

// --- Profiler: measured per-layer costs of a built-in model (engine/src/profile/profiler.cpp) ---

struct ProfileOptions {
  // On the CPU: GPU profiling (CUDA events, allocator bytes) is not implemented.
  int microbatchSize = 2;
  int repetitions = 10;  // timed repetitions per layer; each time is their median
  int warmup = 3;        // repetitions run first and left out
  // Intra-op threads, set as a run sets them per worker: threads > 0 as given, else
  // cores / workers (RunOptions::threads = 0 with `workers` devices on this host). Ops are
  // timed on `workers` worker threads at once, each on its own copy of the model, as the
  // workers of a run share this host's cores. Profile with the setting of the run to predict.
  int threads = 0;
  int workers = 1;
  std::uint64_t seed = 1;
  // SGD or AdamW: also time each layer's optimizer step (libtorch's, as `run --optimizer`
  // steps), written as optimizer_step_ms; None leaves it out.
  Optimizer optimizer = Optimizer::None;
};

// The intra-op thread count a run (and the profiler) uses per worker: `threads` when > 0, else
// max(1, cores / workersOnHost).
int intraOpThreads(int threads, int workersOnHost);

// Per layer of the model (modelLayerNames order): forward, backward-input and backward-weight
// times, each the median over the repetitions of the engine's own F, I (autograd with the
// weight gradients deferred) and W (the deferred weight-gradient matmuls); the last layer's F
// and I include the loss. Bytes: weights = the layer's parameters; activation = what F stashes
// for the backward as the engine counts it (inputs of the linear layers plus the layer's
// output); weight_grad_stash = what W still holds after I (X and dY of each linear, at most the
// activation); output = the layer's output (the loss, 1 element, for the last layer).
// Errors: bad options, cuda without a CUDA build or GPU.
core::Result<core::CostProfile> profileModel(const ModelSpec& model, const ProfileOptions& options);

// True when this engine was built against a libtorch with CUDA.
bool cudaCompiled();
// True when CUDA is compiled in and at least one GPU is present.
bool cudaAvailable();
// GPUs visible to this process (0 without CUDA).
int cudaDeviceCount();

}  // namespace ps::engine
