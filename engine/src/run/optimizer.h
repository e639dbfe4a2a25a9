#pragma once
// The optimizer step of one device (`run --optimizer`): libtorch's own SGD or AdamW over the
// parameters of the device's stages. Private to the engine; torch::optim stays in optimizer.cpp
// (its headers are heavy), this header needs only ATen.
#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "pipestudio/engine/engine.h"

namespace ps::engine::detail {

class StageOptimizer {
 public:
  virtual ~StageOptimizer() = default;
  // kind: SGD or AdamW (not None). layers: the device's layers, in order.
  static std::unique_ptr<StageOptimizer> make(Optimizer kind, double lr, std::vector<Layer*> layers);
  // One step from the gradients the iteration accumulated (Linear's own gradient buffers and
  // autograd's .grad of the other parameters).
  virtual void step() = 0;
  // Bytes of optimizer state held now (AdamW: exp_avg and exp_avg_sq once the first step ran;
  // plain SGD keeps none).
  virtual std::int64_t stateBytes() const = 0;
};

}  // namespace ps::engine::detail
