// StageOptimizer over torch::optim: the same update rules (and defaults) as torch.optim.SGD and
// torch.optim.AdamW. The engine's Linear layers keep their gradients apart from autograd, so
// they are lent to the parameters' .grad for the step and taken back afterwards.
#include "run/optimizer.h"

#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <utility>

namespace ps::engine::detail {
namespace {

class TorchStageOptimizer final : public StageOptimizer {
 public:
  TorchStageOptimizer(Optimizer kind, double lr, std::vector<Layer*> layers)
      : adamw_(kind == Optimizer::AdamW) {
    for (Layer* l : layers) {
      for (Linear* lin : l->linears) {
        linearParams_.push_back({lin->weight, &lin->gradWeight});
        if (lin->bias.defined()) linearParams_.push_back({lin->bias, &lin->gradBias});
      }
      for (auto& p : l->params)
        if (p.value.is_floating_point()) autogradParams_.push_back(p.value);
    }
    std::vector<at::Tensor> all;
    for (auto& [p, g] : linearParams_) all.push_back(p);
    all.insert(all.end(), autogradParams_.begin(), autogradParams_.end());
    if (adamw_)
      opt_ = std::make_unique<torch::optim::AdamW>(all, torch::optim::AdamWOptions(lr));
    else
      opt_ = std::make_unique<torch::optim::SGD>(all, torch::optim::SGDOptions(lr));
  }

  void step() override {
    for (auto& [p, g] : linearParams_)
      if (g->defined()) p.mutable_grad() = *g;
    opt_->step();
    // The gradients stay where the engine keeps them; the parameters hold no alias.
    for (auto& [p, g] : linearParams_) p.mutable_grad() = at::Tensor();
  }

  std::int64_t stateBytes() const override {
    if (!adamw_) return 0;
    std::int64_t bytes = 0;
    auto size = [](const at::Tensor& t) {
      return t.defined() ? t.numel() * static_cast<std::int64_t>(t.element_size()) : 0;
    };
    for (const auto& [key, state] : opt_->state()) {
      const auto& s = static_cast<const torch::optim::AdamWParamState&>(*state);
      bytes += size(s.exp_avg()) + size(s.exp_avg_sq()) + size(s.max_exp_avg_sq());
    }
    return bytes;
  }

 private:
  bool adamw_;
  std::vector<std::pair<at::Tensor, at::Tensor*>> linearParams_;
  std::vector<at::Tensor> autogradParams_;
  std::unique_ptr<torch::optim::Optimizer> opt_;
};

}  // namespace

std::unique_ptr<StageOptimizer> StageOptimizer::make(Optimizer kind, double lr, std::vector<Layer*> layers) {
  return std::make_unique<TorchStageOptimizer>(kind, lr, std::move(layers));
}

}  // namespace ps::engine::detail
