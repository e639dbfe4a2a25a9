// Built-in models: mlp (Linear+GELU blocks, MSE loss) and gpt (embedding, pre-LayerNorm
// decoder blocks with causal self-attention and MLP, LM head with cross-entropy).
#include "model/model.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <stdexcept>

#include "common/data_file.h"

namespace ps::engine::detail {

namespace {
std::int64_t bytesOf(const at::Tensor& t) {
  return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0;
}
}  // namespace

std::int64_t Stash::deviceBytes() const {
  std::int64_t n = 0;
  if (inputSlot && !inputSlot->offloaded) n += bytesOf(inputSlot->t);
  if (hasGraph) n += bytesOf(output);
  for (const auto& s : slots)
    if (!s->offloaded) n += bytesOf(s->t);
  for (const auto& [layer, t] : layerOutputs) n += bytesOf(t);
  for (const auto& g : layerOutputGrads) n += bytesOf(g);
  return n;
}

std::int64_t Stash::hostBytes() const {
  std::int64_t n = 0;
  if (inputSlot && inputSlot->offloaded) n += bytesOf(inputSlot->t);
  for (const auto& s : slots)
    if (s->offloaded) n += bytesOf(s->t);
  return n;
}

Linear::Linear(std::string n, int64_t in, int64_t out, at::Generator& gen, const at::TensorOptions& opt)
    : name(std::move(n)), in_(in), out_(out) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(in));
  weight = at::randn({out, in}, gen, opt) * scale;
  bias = at::randn({out}, gen, opt) * 0.02;
  gradWeight = at::zeros_like(weight);
  gradBias = at::zeros_like(bias);
}

at::Tensor Linear::forward(const at::Tensor& x, ForwardCtx& ctx) {
  at::Tensor y = at::matmul(x, weight.t()) + bias;
  if (y.requires_grad()) {
    // Autograd sees a constant weight, so its backward computes dX only; the weight
    // gradient comes from (X, dY), taken here.
    auto slot = std::make_shared<Slot>();
    slot->t = x.detach();
    if (ctx.stash) ctx.stash->slots.push_back(slot);
    const int mb = ctx.microbatch;
    y.register_hook([this, slot, mb](at::Tensor dy) { onOutputGrad(slot, mb, dy); });
  }
  return y;
}

void Linear::onOutputGrad(const std::shared_ptr<Slot>& x, int microbatch, const at::Tensor& dy) {
  if (deferWeightGrad) {
    pending_[microbatch].emplace_back(x->t, dy);
  } else {
    accumulate(x->t, dy);
  }
  // The stash no longer needs X for this op once dY has arrived.
  x->t = at::Tensor();
}

void Linear::accumulate(const at::Tensor& x, const at::Tensor& dy) {
  at::Tensor x2 = x.reshape({-1, in_});
  at::Tensor dy2 = dy.reshape({-1, out_});
  if (x2.device() != gradWeight.device()) x2 = x2.to(gradWeight.device());
  gradWeight.addmm_(dy2.t(), x2);
  gradBias.add_(dy2.sum(0));
}

bool Linear::weightGrad(int microbatch) {
  auto it = pending_.find(microbatch);
  if (it == pending_.end()) return false;
  for (auto& [x, dy] : it->second) accumulate(x, dy);
  pending_.erase(it);
  return true;
}

std::int64_t Linear::pendingBytes() const {
  std::int64_t n = 0;
  for (const auto& [mb, list] : pending_)
    for (const auto& [x, dy] : list) n += bytesOf(x) + bytesOf(dy);
  return n;
}

void Linear::zeroGrad() {
  gradWeight.zero_();
  gradBias.zero_();
  pending_.clear();
}

Linear* Layer::addLinear(const std::string& n, int64_t in, int64_t out, at::Generator& gen,
                         const at::TensorOptions& opt) {
  owned.push_back(std::make_unique<Linear>(name + "." + n, in, out, gen, opt));
  linears.push_back(owned.back().get());
  return owned.back().get();
}

void Layer::to(const at::Device& device) {
  auto move = [&](at::Tensor& t) {
    if (t.defined() && t.device() != device) t.set_data(t.to(device));
  };
  for (auto* lin : linears) {
    move(lin->weight);
    move(lin->bias);
    move(lin->gradWeight);
    move(lin->gradBias);
  }
  for (auto& p : params) move(p.value);
}

void Model::to(const at::Device& device) {
  for (auto& l : layers) l->to(device);
  inputs = inputs.to(device);
  targets = targets.to(device);
  options = options.device(device);
}

namespace {

class MlpBlock : public Layer {
 public:
  MlpBlock(const std::string& n, int64_t hidden, at::Generator& gen, const at::TensorOptions& opt) {
    name = n;
    fc_ = addLinear("fc", hidden, hidden, gen, opt);
  }
  at::Tensor forward(const at::Tensor& x, ForwardCtx& ctx) override { return at::gelu(fc_->forward(x, ctx)); }

 private:
  Linear* fc_;
};

at::Tensor param(const at::Tensor& t) {
  return t.detach().requires_grad_(true);
}

class Embedding : public Layer {
 public:
  Embedding(const ModelSpec& s, at::Generator& gen, const at::TensorOptions& opt) {
    name = "embedding";
    tok_ = param(at::randn({s.vocab, s.hidden}, gen, opt) * 0.02);
    pos_ = param(at::randn({s.seq, s.hidden}, gen, opt) * 0.02);
    params = {{"embedding.token", tok_}, {"embedding.position", pos_}};
  }
  at::Tensor forward(const at::Tensor& tokens, ForwardCtx&) override {
    return at::embedding(tok_, tokens) + pos_;
  }

 private:
  at::Tensor tok_, pos_;
};

class DecoderBlock : public Layer {
 public:
  DecoderBlock(const std::string& n, const ModelSpec& s, at::Generator& gen, const at::TensorOptions& opt)
      : hidden_(s.hidden), heads_(s.heads) {
    name = n;
    ln1w_ = param(at::ones({s.hidden}, opt));
    ln1b_ = param(at::zeros({s.hidden}, opt));
    ln2w_ = param(at::ones({s.hidden}, opt));
    ln2b_ = param(at::zeros({s.hidden}, opt));
    params = {{n + ".ln1.weight", ln1w_},
              {n + ".ln1.bias", ln1b_},
              {n + ".ln2.weight", ln2w_},
              {n + ".ln2.bias", ln2b_}};
    qkv_ = addLinear("attn.qkv", s.hidden, 3 * s.hidden, gen, opt);
    proj_ = addLinear("attn.proj", s.hidden, s.hidden, gen, opt);
    fc1_ = addLinear("mlp.fc1", s.hidden, static_cast<int64_t>(s.ffn) * s.hidden, gen, opt);
    fc2_ = addLinear("mlp.fc2", static_cast<int64_t>(s.ffn) * s.hidden, s.hidden, gen, opt);
    causal_ = at::ones({s.seq, s.seq}, at::TensorOptions().dtype(at::kBool).device(opt.device())).triu(1);
  }

  void to(const at::Device& device) override {
    Layer::to(device);
    causal_ = causal_.to(device);
  }

  at::Tensor forward(const at::Tensor& x, ForwardCtx& ctx) override {
    const int64_t b = x.size(0), t = x.size(1), hd = hidden_ / heads_;
    at::Tensor h = at::layer_norm(x, {hidden_}, ln1w_, ln1b_);
    auto qkv = qkv_->forward(h, ctx).chunk(3, -1);
    auto split = [&](const at::Tensor& u) { return u.reshape({b, t, heads_, hd}).transpose(1, 2); };
    at::Tensor q = split(qkv[0]), k = split(qkv[1]), v = split(qkv[2]);
    at::Tensor att = at::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(hd)));
    att = att.masked_fill(causal_.narrow(0, 0, t).narrow(1, 0, t), -std::numeric_limits<double>::infinity());
    att = at::softmax(att, -1);
    at::Tensor y = at::matmul(att, v).transpose(1, 2).reshape({b, t, hidden_});
    at::Tensor r = x + proj_->forward(y, ctx);
    at::Tensor m = at::layer_norm(r, {hidden_}, ln2w_, ln2b_);
    return r + fc2_->forward(at::gelu(fc1_->forward(m, ctx)), ctx);
  }

 private:
  int64_t hidden_, heads_;
  at::Tensor ln1w_, ln1b_, ln2w_, ln2b_, causal_;
  Linear *qkv_, *proj_, *fc1_, *fc2_;
};

class LmHead : public Layer {
 public:
  LmHead(const ModelSpec& s, at::Generator& gen, const at::TensorOptions& opt) : hidden_(s.hidden) {
    name = "head";
    lnw_ = param(at::ones({s.hidden}, opt));
    lnb_ = param(at::zeros({s.hidden}, opt));
    params = {{"head.ln.weight", lnw_}, {"head.ln.bias", lnb_}};
    out_ = addLinear("lm", s.hidden, s.vocab, gen, opt);
  }
  at::Tensor forward(const at::Tensor& x, ForwardCtx& ctx) override {
    return out_->forward(at::layer_norm(x, {hidden_}, lnw_, lnb_), ctx);
  }

 private:
  int64_t hidden_;
  at::Tensor lnw_, lnb_;
  Linear* out_;
};

}  // namespace

std::unique_ptr<Model> Model::build(const ModelSpec& spec, std::uint64_t seed, int microbatchSize,
                                    int microbatches, const std::string& inputsPath, bool training) {
  if (spec.kind == ModelKind::TorchScript) {
    auto model = std::make_unique<Model>();
    model->spec = spec;
    model->microbatchSize = microbatchSize;
    model->microbatches = microbatches;
    model->options = at::TensorOptions().dtype(spec.dtype == DType::F64 ? at::kDouble : at::kFloat);
    model->training = training;
    buildTorchScript(*model, seed, inputsPath);
    return model;
  }
  auto model = std::make_unique<Model>();
  model->spec = spec;
  model->microbatchSize = microbatchSize;
  model->microbatches = microbatches;
  model->options = at::TensorOptions().dtype(spec.dtype == DType::F64 ? at::kDouble : at::kFloat);
  at::Generator gen = at::detail::createCPUGenerator(seed);
  const auto& opt = model->options;
  const int64_t n = static_cast<int64_t>(microbatchSize) * microbatches;
  if (spec.kind == ModelKind::Gpt) {
    model->layers.push_back(std::make_unique<Embedding>(spec, gen, opt));
    for (int i = 0; i < spec.layers; ++i)
      model->layers.push_back(std::make_unique<DecoderBlock>("block" + std::to_string(i), spec, gen, opt));
    model->layers.push_back(std::make_unique<LmHead>(spec, gen, opt));
    model->inputs = at::randint(spec.vocab, {n, spec.seq}, gen, at::TensorOptions().dtype(at::kLong));
    model->targets = at::randint(spec.vocab, {n, spec.seq}, gen, at::TensorOptions().dtype(at::kLong));
  } else {
    for (int i = 0; i < spec.layers; ++i)
      model->layers.push_back(std::make_unique<MlpBlock>("block" + std::to_string(i), spec.hidden, gen, opt));
    model->inputs = at::randn({n, spec.hidden}, gen, opt);
    model->targets = at::randn({n, spec.hidden}, gen, opt);
  }
  if (!inputsPath.empty()) {
    // The synthetic batch gives the shapes and dtypes the file's tensors must have.
    const DataFile file = loadDataFile(inputsPath);
    const bool tokens = spec.kind == ModelKind::Gpt;
    const std::string vocab = "the model (vocab=" + std::to_string(spec.vocab) + ")";
    model->inputs = takeSamples(file, file.inputs, "inputs", model->inputs, n, false);
    if (tokens) checkIds(file, model->inputs, "inputs", spec.vocab, vocab.c_str());
    if (file.targets.defined()) {
      model->targets = takeSamples(file, file.targets, "targets", model->targets, n, false);
      if (tokens) checkIds(file, model->targets, "targets", spec.vocab, vocab.c_str());
    }
    model->dataSource = describeDataSource(file);
    model->dataNote = describeDataUse(file, n, seed);
  } else {
    model->dataNote = "synthetic from seed " + std::to_string(seed);
  }
  return model;
}

at::Tensor Model::microInput(int m) const {
  return inputs.narrow(0, static_cast<int64_t>(m) * microbatchSize, microbatchSize);
}
at::Tensor Model::microTarget(int m) const {
  return targets.narrow(0, static_cast<int64_t>(m) * microbatchSize, microbatchSize);
}

at::Tensor Model::loss(const at::Tensor& output, const at::Tensor& target, double scale) const {
  at::Tensor l;
  if (spec.kind == ModelKind::Gpt) {
    l = at::cross_entropy_loss(output.reshape({-1, spec.vocab}), target.reshape({-1}));
  } else if (spec.kind == ModelKind::TorchScript && spec.loss == Loss::CrossEntropy) {
    l = at::cross_entropy_loss(output.reshape({-1, output.size(-1)}), target.reshape({-1}));
  } else {
    l = at::mse_loss(output, target);
  }
  return scale == 1.0 ? l : l * scale;
}

std::vector<int64_t> Model::boundaryShape(int b, int layer) const {
  if (spec.kind == ModelKind::TorchScript) {
    std::vector<int64_t> shape{b};
    const auto& per = layerOutputShapes.at(static_cast<size_t>(layer));
    shape.insert(shape.end(), per.begin(), per.end());
    return shape;
  }
  if (spec.kind == ModelKind::Gpt) return {b, spec.seq, spec.hidden};
  return {b, spec.hidden};
}

std::int64_t Model::parameterCount() const {
  std::int64_t n = 0;
  for (const auto& l : layers) {
    for (const auto* lin : l->linears) n += lin->weight.numel() + lin->bias.numel();
    for (const auto& p : l->params) n += p.value.numel();
  }
  return n;
}

std::vector<NamedParam> Model::gradients(int first, int last) const {
  std::vector<NamedParam> out;
  for (int i = first; i < last; ++i) {
    const auto& l = layers[static_cast<size_t>(i)];
    for (const auto* lin : l->linears) {
      out.push_back({lin->name + ".weight", lin->gradWeight});
      out.push_back({lin->name + ".bias", lin->gradBias});
    }
    for (const auto& p : l->params) {
      const at::Tensor& g = p.value.grad();
      out.push_back({p.name, g.defined() ? g : at::zeros_like(p.value)});
    }
  }
  return out;
}

at::Tensor Model::flatGradients(int first, int last) const {
  std::vector<at::Tensor> parts;
  for (const auto& p : gradients(first, last)) parts.push_back(p.value.reshape({-1}));
  return parts.empty() ? at::zeros({0}, options) : at::cat(parts);
}

void Model::setFlatGradients(int first, int last, const at::Tensor& flat) {
  int64_t offset = 0;
  auto next = [&](const at::Tensor& like) {
    at::Tensor part = flat.slice(0, offset, offset + like.numel()).view(like.sizes());
    offset += like.numel();
    return part;
  };
  for (int i = first; i < last; ++i) {
    const auto& l = layers[static_cast<size_t>(i)];
    for (auto* lin : l->linears) {
      lin->gradWeight.copy_(next(lin->gradWeight));
      lin->gradBias.copy_(next(lin->gradBias));
    }
    for (auto& p : l->params) p.value.mutable_grad() = next(p.value).clone();
  }
  if (offset != flat.numel())
    throw std::runtime_error("gradient sizes differ between copies of a block: " + std::to_string(offset) +
                             " values against " + std::to_string(flat.numel()));
}

void Model::zeroGrad() {
  for (auto& l : layers) {
    for (auto* lin : l->linears) lin->zeroGrad();
    for (auto& p : l->params) p.value.mutable_grad() = at::Tensor();
  }
}

}  // namespace ps::engine::detail
