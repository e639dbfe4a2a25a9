// profileModel: per-layer F, I and W times and bytes of a built-in model, measured with the
// same layer code, deferred weight gradients and thread settings the executor uses, so that a
// schedule simulated with the result predicts what `run` measures.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "model.h"
#include "pipestudio/engine/engine.h"

namespace ps::engine {

namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

std::int64_t bytesOf(const at::Tensor& t) { return t.defined() ? t.numel() * static_cast<std::int64_t>(t.element_size()) : 0; }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void setBlasThreads(int n) {
  // Same as the executor: OpenBLAS keeps its own pool beside ATen's.
  using Fn = void (*)(int);
  if (auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) fn(n);
}

// Restores the process-wide thread settings however profiling ends.
struct ThreadSetting {
  explicit ThreadSetting(int n) {
    at::set_num_threads(n);
    setBlasThreads(n);
  }
  ~ThreadSetting() {
    const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    at::set_num_threads(hw);
    setBlasThreads(hw);
  }
  ThreadSetting(const ThreadSetting&) = delete;
  ThreadSetting& operator=(const ThreadSetting&) = delete;
};

struct LayerSample {
  double f = 0, i = 0, w = 0;
  std::int64_t activation = 0, pending = 0, output = 0;
};

// One F, I, W of layer `l` on input x, as the executor runs them for one micro-batch.
LayerSample runLayerOnce(detail::Model& model, size_t l, const at::Tensor& x, const at::Tensor& dy,
                         const at::Tensor& target) {
  const bool last = l + 1 == model.layers.size();
  detail::Layer& layer = *model.layers[l];
  LayerSample s;
  detail::Stash stash;
  detail::ForwardCtx ctx{0, &stash};
  at::Tensor in = x.detach();
  if (in.is_floating_point()) in.requires_grad_(true);
  at::Tensor out;
  auto t0 = Clock::now();
  {
    c10::AutoGradMode grad(true);
    out = layer.forward(in, ctx);
    if (last) out = model.loss(out, target, 1.0);
  }
  s.f = msSince(t0);
  for (const auto& slot : stash.slots) s.activation += bytesOf(slot->t);
  s.activation += bytesOf(out);
  s.output = bytesOf(out);

  for (auto* lin : layer.linears) lin->deferWeightGrad = true;
  t0 = Clock::now();
  if (last)
    torch::autograd::backward({out});
  else
    torch::autograd::backward({out}, {dy});
  if (in.requires_grad()) (void)in.grad();
  s.i = msSince(t0);
  for (const auto* lin : layer.linears) s.pending += lin->pendingBytes();

  t0 = Clock::now();
  for (auto* lin : layer.linears) (void)lin->weightGrad(0);
  s.w = msSince(t0);
  for (auto* lin : layer.linears) lin->deferWeightGrad = false;
  return s;
}

}  // namespace

int intraOpThreads(int threads, int workersOnHost) {
  if (threads > 0) return threads;
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, hw / std::max(1, workersOnHost));
}

core::Result<core::CostProfile> profileModel(const ModelSpec& spec, const ProfileOptions& o) {
  if (o.device != "cpu" && o.device != "cuda")
    return core::makeError("engine.options", "profile: device must be cpu or cuda, got '" + o.device + "'");
  if (o.device == "cuda") {
    if (!cudaCompiled())
      return core::makeError("engine.cuda", "profile --device cuda: this engine was built against a CPU-only libtorch");
    if (!cudaAvailable()) return core::makeError("engine.cuda", "profile --device cuda: no GPU is visible");
    return core::makeError("engine.cuda",
                           "profile --device cuda: the built-in models are profiled on the CPU only in this version");
  }
  if (o.microbatchSize < 1) return core::makeError("engine.options", "profile: the micro-batch size must be at least 1");
  if (o.repetitions < 1) return core::makeError("engine.options", "profile: at least one repetition is needed");
  if (o.warmup < 0) return core::makeError("engine.options", "profile: warm-up repetitions cannot be negative");
  if (o.threads < 0 || o.workers < 1)
    return core::makeError("engine.options", "profile: threads must be >= 0 and workers >= 1");
  auto checked = parseModelSpec(modelSpecToString(spec));
  if (!checked) return checked.errors();

  try {
    ThreadSetting threads(intraOpThreads(o.threads, o.workers));
    auto model = detail::Model::build(spec, o.seed, o.microbatchSize, 1);
    if (model->weightGradByGraph)
      return core::makeError("engine.profile",
                             "profile: " + spec.kind + " models are not profiled yet (their weight gradients come from "
                             "the autograd graph, not from deferred Linear layers); built-in mlp and gpt are");
    const auto names = modelLayerNames(spec);
    if (names.size() != model->layers.size())
      return core::makeError("engine.model", "profile: the model has " + std::to_string(model->layers.size()) +
                                                 " layers but names " + std::to_string(names.size()));
    // The input of every layer: the micro-batch carried through the layers before it.
    std::vector<at::Tensor> inputs;
    {
      c10::NoGradGuard noGrad;
      detail::ForwardCtx ctx{-1, nullptr};
      at::Tensor x = model->microInput(0);
      for (auto& layer : model->layers) {
        inputs.push_back(x);
        x = layer->forward(x, ctx);
      }
    }
    const at::Tensor target = model->microTarget(0);

    core::CostProfile profile;
    profile.name = "profiled " + modelSpecToString(spec) + " b=" + std::to_string(o.microbatchSize);
    for (size_t l = 0; l < model->layers.size(); ++l) {
      const detail::Layer& layer = *model->layers[l];
      at::Tensor dy;
      if (l + 1 < model->layers.size()) {
        // The gradient that arrives from the next stage: shaped like this layer's output.
        c10::NoGradGuard noGrad;
        detail::ForwardCtx ctx{-1, nullptr};
        dy = at::randn_like(model->layers[l]->forward(inputs[l], ctx)) * 1e-3;
      }
      std::vector<double> f, i, w;
      LayerSample last;
      for (int r = 0; r < o.warmup + o.repetitions; ++r) {
        last = runLayerOnce(*model, l, inputs[l], dy, target);
        if (r < o.warmup) continue;
        f.push_back(last.f);
        i.push_back(last.i);
        w.push_back(last.w);
      }
      core::LayerCost c;
      c.name = names[l];
      c.forwardMs = median(f);
      c.backwardInputMs = median(i);
      c.backwardWeightMs = layer.linears.empty() ? 0.0 : median(w);
      c.activationBytes = last.activation;
      c.weightGradStashBytes = std::min(last.pending, last.activation);
      c.outputBytes = last.output;
      std::int64_t weights = 0;
      for (const auto* lin : layer.linears) weights += bytesOf(lin->weight) + bytesOf(lin->bias);
      for (const auto& p : layer.params) weights += bytesOf(p.value);
      c.weightBytes = weights;
      profile.layers.push_back(c);
    }
    // Gradients and optimizer: the engine keeps one gradient per weight and no optimizer state.
    profile.gradientBytesPerWeightByte = 1;
    profile.optimizerBytesPerWeightByte = 0;
    return profile;
  } catch (const c10::Error& e) {
    return core::makeError("engine.profile", std::string("profile: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return core::makeError("engine.profile", std::string("profile: ") + e.what());
  }
}

}  // namespace ps::engine
