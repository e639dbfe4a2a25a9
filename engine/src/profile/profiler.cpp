// profileModel: per-layer F, I and W times and bytes of a built-in model, measured with the
// same layer code, deferred weight gradients and thread settings the executor uses, so that a
// schedule simulated with the result predicts what `run` measures.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <dlfcn.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <thread>

#include "common/error_text.h"
#include "model/model.h"
#include "pipestudio/engine/engine.h"
#include "run/optimizer.h"

namespace ps::engine {

namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::int64_t bytesOf(const at::Tensor& t) {
  return t.defined() ? t.numel() * static_cast<std::int64_t>(t.element_size()) : 0;
}

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
  if (o.microbatchSize < 1)
    return core::makeError("engine.options", "profile: the micro-batch size must be at least 1");
  if (o.repetitions < 1)
    return core::makeError("engine.options", "profile: at least one repetition is needed");
  if (o.warmup < 0)
    return core::makeError("engine.options", "profile: warm-up repetitions cannot be negative");
  if (o.threads < 0 || o.workers < 1)
    return core::makeError("engine.options", "profile: threads must be >= 0 and workers >= 1");
  auto checked = parseModelSpec(modelSpecToString(spec));
  PS_TRY(checked);

  try {
    // As in a run: the thread count is set by the calling thread, and ops run on worker
    // threads, `workers` of them at once (each on its own copy of the model), so the timings
    // include what the workers of a run do to each other on this host's cores.
    ThreadSetting threads(intraOpThreads(o.threads, o.workers));
    const int W = o.workers;
    std::vector<std::unique_ptr<detail::Model>> models;
    for (int w = 0; w < W; ++w) models.push_back(detail::Model::build(spec, o.seed, o.microbatchSize, 1));
    const detail::Model& model0 = *models.front();
    if (model0.weightGradByGraph)
      return core::makeError(
          "engine.profile",
          "profile: " + std::string(modelKindName(spec.kind)) +
              " models are not profiled yet (their weight gradients come from "
              "the autograd graph, not from deferred Linear layers); built-in mlp and gpt are");
    const auto names = modelLayerNames(spec);
    if (names.size() != model0.layers.size())
      return core::makeError("engine.model", "profile: the model has " +
                                                 std::to_string(model0.layers.size()) + " layers but names " +
                                                 std::to_string(names.size()));
    const size_t L = model0.layers.size();
    // The input of every layer: the micro-batch carried through the layers before it; and the
    // gradient that arrives from the next stage, shaped like the layer's output.
    std::vector<std::vector<at::Tensor>> inputs(static_cast<size_t>(W)), grads(static_cast<size_t>(W));
    for (int w = 0; w < W; ++w) {
      c10::NoGradGuard noGrad;
      detail::ForwardCtx ctx{-1, nullptr};
      detail::Model& m = *models[static_cast<size_t>(w)];
      at::Tensor x = m.microInput(0);
      for (size_t l = 0; l < L; ++l) {
        inputs[static_cast<size_t>(w)].push_back(x);
        x = m.layers[l]->forward(x, ctx);
        grads[static_cast<size_t>(w)].push_back(l + 1 < L ? at::randn_like(x) * 1e-3 : at::Tensor());
      }
    }

    std::vector<std::vector<std::vector<LayerSample>>> samples(static_cast<size_t>(W),
                                                               std::vector<std::vector<LayerSample>>(L));
    std::vector<std::string> errors(static_cast<size_t>(W));
    std::vector<std::vector<std::vector<double>>> stepMs(static_cast<size_t>(W),
                                                         std::vector<std::vector<double>>(L));
    std::barrier sync(W);
    auto worker = [&](int w) {
      detail::quietTorchLogging();
      const auto wi = static_cast<size_t>(w);
      detail::Model& m = *models[wi];
      const at::Tensor target = m.microTarget(0);
      bool failed = false;
      for (size_t l = 0; l < L; ++l)
        for (int r = 0; r < o.warmup + o.repetitions; ++r) {
          sync.arrive_and_wait();  // the workers start each repetition together
          if (failed) continue;
          try {
            LayerSample one = runLayerOnce(m, l, inputs[wi][l], grads[wi][l], target);
            if (r >= o.warmup) samples[wi][l].push_back(one);
          } catch (const c10::Error& e) {
            errors[wi] = detail::errorText(e);
            failed = true;
          } catch (const std::exception& e) {
            errors[wi] = detail::errorText(e);
            failed = true;
          }
        }
      // The optimizer step of each layer on its own, over the gradients the repetitions above
      // left (a step's time does not depend on their values).
      if (o.optimizer == Optimizer::None) return;
      for (size_t l = 0; l < L; ++l) {
        const bool hasParams = !m.layers[l]->linears.empty() || !m.layers[l]->params.empty();
        auto step = failed || !hasParams
                        ? nullptr
                        : detail::StageOptimizer::make(o.optimizer, defaultLearningRate(o.optimizer),
                                                       {m.layers[l].get()});
        for (int r = 0; r < o.warmup + o.repetitions; ++r) {
          sync.arrive_and_wait();  // as above: the workers step together
          if (failed || !step) continue;
          try {
            const auto t0 = std::chrono::steady_clock::now();
            step->step();
            const double ms =
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            if (r >= o.warmup) stepMs[wi][l].push_back(ms);
          } catch (const std::exception& e) {
            errors[wi] = detail::errorText(e);
            failed = true;
          }
        }
      }
    };
    std::vector<std::thread> pool;
    for (int w = 0; w < W; ++w) pool.emplace_back(worker, w);
    for (auto& t : pool) t.join();
    for (const auto& e : errors)
      if (!e.empty()) return core::makeError("engine.profile", "profile: " + e);

    core::CostProfile profile;
    profile.name = "profiled " + modelSpecToString(spec) + " b=" + std::to_string(o.microbatchSize);
    for (size_t l = 0; l < L; ++l) {
      const detail::Layer& layer = *model0.layers[l];
      std::vector<double> f, i, w;
      for (const auto& perWorker : samples)
        for (const LayerSample& one : perWorker[l]) {
          f.push_back(one.f);
          i.push_back(one.i);
          w.push_back(one.w);
        }
      const LayerSample& last = samples.front()[l].back();
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
      if (o.optimizer != Optimizer::None) {
        std::vector<double> steps;
        for (const auto& perWorker : stepMs)
          steps.insert(steps.end(), perWorker[l].begin(), perWorker[l].end());
        c.optimizerStepMs = weights > 0 && !steps.empty() ? median(steps) : 0.0;
      }
      profile.layers.push_back(c);
    }
    // Gradients and optimizer: the engine keeps one gradient per weight; AdamW's state is two
    // more (exp_avg, exp_avg_sq), plain SGD keeps none.
    profile.gradientBytesPerWeightByte = 1;
    profile.optimizerBytesPerWeightByte = o.optimizer == Optimizer::AdamW ? 2 : 0;
    return profile;
  } catch (const c10::Error& e) {
    return core::makeError("engine.profile", std::string("profile: ") + detail::errorText(e));
  } catch (const std::exception& e) {
    return core::makeError("engine.profile", std::string("profile: ") + detail::errorText(e));
  }
}

}  // namespace ps::engine
