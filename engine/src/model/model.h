#pragma once
// Built-in models as lists of layers (private to the engine: torch types allowed here).
// Linear layers are our own so the weight-gradient matmuls can be deferred: the backward
// pass (I) computes only dX = dY·W through autograd and keeps (X, dY); W later computes
// dW = dYᵀ·X and db = Σ dY. Every other parameter gets its gradient from autograd in I.
#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "pipestudio/engine/engine.h"

namespace ps::engine::detail {

// A tensor the engine keeps for a backward; OFFLOAD moves it to host memory and RELOAD back.
struct Slot {
  at::Tensor t;
  bool offloaded = false;
};

// What one forward (one stage, one micro-batch) leaves for its backward.
struct Stash {
  at::Tensor input;   // the stage input (a leaf; requires grad for float inputs)
  at::Tensor output;  // the stage output, or the loss on the last stage, with its graph
  bool hasGraph = false;
  std::vector<std::shared_ptr<Slot>> slots;  // inputs saved by linear layers
  std::shared_ptr<Slot> inputSlot;           // the stage input as the engine keeps it (for R)
  // Models whose weight gradients cannot be deferred inside the layers (TorchScript): each
  // layer's output (layer index, tensor with graph), and after I the gradient of each.
  std::vector<std::pair<int, at::Tensor>> layerOutputs;
  std::vector<at::Tensor> layerOutputGrads;
  bool inputGradDone = false;  // I ran; the graph is kept for W
  std::int64_t deviceBytes() const;
  std::int64_t hostBytes() const;
};

struct ForwardCtx {
  int microbatch = -1;     // -1: the whole-batch reference pass
  Stash* stash = nullptr;  // where linear layers keep their inputs
};

class Linear {
 public:
  Linear(std::string name, int64_t in, int64_t out, at::Generator& gen, const at::TensorOptions& opt);
  at::Tensor forward(const at::Tensor& x, ForwardCtx& ctx);
  // W: weight gradients of one micro-batch's deferred (X, dY) pairs. Returns false when none.
  bool weightGrad(int microbatch);
  std::int64_t pendingBytes() const;
  void zeroGrad();
  void clearPending() { pending_.clear(); }

  std::string name;
  at::Tensor weight, bias;          // plain tensors: autograd never computes their grads
  at::Tensor gradWeight, gradBias;  // accumulated by B or W
  bool deferWeightGrad = false;     // set by the executor around I (true) and B (false)

 private:
  void onOutputGrad(const std::shared_ptr<Slot>& x, int microbatch, const at::Tensor& dy);
  void accumulate(const at::Tensor& x, const at::Tensor& dy);
  int64_t in_, out_;
  std::map<int, std::vector<std::pair<at::Tensor, at::Tensor>>> pending_;
};

struct NamedParam {
  std::string name;
  at::Tensor value;
};

class Layer {
 public:
  virtual ~Layer() = default;
  virtual at::Tensor forward(const at::Tensor& x, ForwardCtx& ctx) = 0;
  // Moves every tensor of the layer to `device` in place (set_data keeps each tensor's
  // identity, so members and `params` still alias).
  virtual void to(const at::Device& device);
  // Train or eval mode (dropout, batch norm) of layers that have one: TorchScript children.
  virtual void setTraining(bool) {}
  std::string name;
  std::vector<Linear*> linears;    // owned below, listed for W and gradients
  std::vector<NamedParam> params;  // autograd parameters (LayerNorm, embeddings)
  std::vector<std::unique_ptr<Linear>> owned;
  Linear* addLinear(const std::string& n, int64_t in, int64_t out, at::Generator& gen,
                    const at::TensorOptions& opt);
};

class Model {
 public:
  // Throws std::exception with a message naming the file and child for TorchScript models.
  // `inputsPath`: a batch saved by torch.save (data_file.h) instead of synthetic data; its
  // targets, when it has none, still come from the seed.
  // `training`: TorchScript modules run in train mode (dropout on, batch norm on the
  // micro-batch's statistics), as a training run (--optimizer) needs; else in eval mode. The
  // built-in models have no such layers and compute the same either way.
  static std::unique_ptr<Model> build(const ModelSpec& spec, std::uint64_t seed, int microbatchSize,
                                      int microbatches, const std::string& inputsPath = "",
                                      bool training = false);

  ModelSpec spec;
  int microbatchSize = 1;
  int microbatches = 1;
  at::TensorOptions options;
  std::vector<std::unique_ptr<Layer>> layers;
  at::Tensor inputs, targets;  // the whole batch; micro-batch m is rows [m·b, (m+1)·b)
  // Where they come from: "synthetic" (from the seed) or "file <FNV-1a of its bytes>"
  // (+ " with synthetic targets"); ranks compare it at rendezvous.
  std::string dataSource = "synthetic";
  std::string dataNote;  // the same for people (RunReport::data)

  at::Tensor microInput(int m) const;
  at::Tensor microTarget(int m) const;
  // Mean loss of a batch of outputs against its targets, times scale.
  at::Tensor loss(const at::Tensor& output, const at::Tensor& target, double scale) const;
  // Shape of what crosses a stage boundary after layer `layer` (activation and its gradient)
  // for b samples.
  std::vector<int64_t> boundaryShape(int b, int layer) const;
  bool inputIsFloat() const { return spec.kind != ModelKind::Gpt; }
  // W of layers whose weights autograd owns (TorchScript): I keeps the graph and the
  // gradient of every layer output; W runs autograd from each layer's output to its own
  // parameters only.
  bool weightGradByGraph = false;
  // Per-sample output shape of each layer (TorchScript; measured by a probe forward).
  std::vector<std::vector<int64_t>> layerOutputShapes;
  // TorchScript: the module's mode, and whether its forward draws random numbers in that mode
  // (dropout in train mode). A stochastic forward must be seeded per op (seedForward), or
  // micro-batches would not be reproducible and the gradient check could not compare them.
  bool training = false;
  bool stochastic = false;
  // What ranks compare for the model besides its spec: "torchscript <FNV-1a of the file's
  // bytes>", so that a file staged under another path on each host is still the same model.
  std::string modelSource;
  std::int64_t parameterCount() const;
  void to(const at::Device& device);  // layers, data and options

  // Gradients (name, tensor) of the layers [first, last); undefined grads read as zeros.
  std::vector<NamedParam> gradients(int first, int last) const;
  // The same gradients as one flat tensor, in gradients()' order, and back: each gradient of
  // [first, last) set from its slice of `flat` (a block's copies sum theirs through these).
  at::Tensor flatGradients(int first, int last) const;
  void setFlatGradients(int first, int last, const at::Tensor& flat);
  void zeroGrad();
};

// TorchScript models (model_torchscript.cpp): fills layers, data and shapes of a Model whose
// spec, sizes, options and mode are set; throws with a message naming the file and child.
void buildTorchScript(Model& model, std::uint64_t seed, const std::string& inputsPath);

// The seed of one forward of a stochastic model: of stage `stage`, micro-batch `microbatch`
// in iteration `iteration` of a run seeded `runSeed`. The pipelined F, its recompute R and the
// gradient check's reference of the same micro-batch draw the same numbers (dropout masks).
std::uint64_t forwardSeed(std::uint64_t runSeed, int iteration, int stage, int microbatch);
// Seeds the default generators (CPU and every GPU) that TorchScript's random ops draw from.
// They are global: callers running forwards on several threads hold one lock around the seed
// and the forward.
void seedGlobalGenerators(std::uint64_t seed);
core::CostProfile torchScriptCostProfile(const Model& model, int microbatchSize);

}  // namespace ps::engine::detail
