// User models: a TorchScript module loaded with torch::jit::load and split at its top-level
// children, which run one after the other (nn.Sequential semantics). The parent's forward is
// inspected first: only a plain chain of its children is accepted, anything else (a residual,
// reordered or reused children, extra computation) is refused, since the engine would run a
// different network. Synthetic data come from the seed; the loss is MSE against random targets
// or cross-entropy against random classes when the model ends in logits (loss=ce).
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/version.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "common/data_file.h"
#include "common/error_text.h"
#include "model/model.h"

namespace ps::engine::detail {

namespace {

std::string shapeText(at::IntArrayRef s) {
  std::ostringstream o;
  o << '[';
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << ']';
  return o.str();
}

[[noreturn]] void modelError(const ModelSpec& spec, const std::string& msg) {
  throw std::runtime_error("torchscript model " + spec.path + ": " + msg);
}

// Why torch::jit::load refused a file. A module scripted by a newer PyTorch can call operators
// this libtorch does not have (torch 2.x's nn.MultiheadAttention calls
// aten::scaled_dot_product_attention, which 1.13 lacks): say that, not the interpreter's trace.
std::string loadFailure(const std::string& what) {
  const std::string unknown = "Unknown builtin op: ";
  if (const size_t at = what.find(unknown); at != std::string::npos) {
    const size_t begin = at + unknown.size();
    std::string op = what.substr(begin, what.find_first_of(".\n;", begin + 6) - begin);
    return "it calls " + op + ", an operator this engine's libtorch " + TORCH_VERSION +
           " does not have: it was scripted by a newer PyTorch. Script and save it with PyTorch " +
           TORCH_VERSION +
           ", or run it with an engine built against the newer PyTorch (docs/engine.md, \"Builds\")";
  }
  return "not a loadable TorchScript module: " + what;
}

torch::jit::Module loadModule(const ModelSpec& spec) {
  {
    std::ifstream probe(spec.path, std::ios::binary);
    if (!probe) modelError(spec, "cannot open the file (missing or unreadable)");
  }
  try {
    torch::jit::Module m = torch::jit::load(spec.path);
    // Eval mode for the probe forward (batch norm's running statistics stay as saved); a
    // training run switches to train mode afterwards (buildTorchScript).
    m.eval();
    m.to(spec.dtype == DType::F64 ? at::kDouble : at::kFloat);
    return m;
  } catch (const c10::Error& e) {
    modelError(spec, loadFailure(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    modelError(spec, loadFailure(e.what()));
  }
}

class TorchScriptLayer : public Layer {
 public:
  TorchScriptLayer(std::string childName, torch::jit::Module m, std::string file)
      : module_(std::move(m)), file_(std::move(file)) {
    name = std::move(childName);
    for (const auto& p : module_.named_parameters(/*recurse=*/true)) {
      at::Tensor t = p.value;
      t.requires_grad_(true);
      params.push_back({name + "." + p.name, t});
    }
  }

  at::Tensor forward(const at::Tensor& x, ForwardCtx&) override {
    c10::IValue out;
    try {
      std::vector<c10::IValue> args{x};
      args.insert(args.end(), extraArgs_.begin(), extraArgs_.end());
      out = module_.forward(std::move(args));
    } catch (const c10::Error& e) {
      throw std::runtime_error("child '" + name + "' of " + file_ + " failed on an input of shape " +
                               shapeText(x.sizes()) + ": " +
                               std::string(core::lastLine(e.what_without_backtrace())));
    } catch (const std::exception& e) {
      // The TorchScript interpreter's errors carry a traceback; its last line is the cause.
      throw std::runtime_error("child '" + name + "' of " + file_ + " failed on an input of shape " +
                               shapeText(x.sizes()) + ": " + std::string(core::lastLine(e.what())));
    }
    if (!out.isTensor())
      throw std::runtime_error("child '" + name + "' of " + file_ + " returned a " + out.tagKind() +
                               ", not a tensor (children must map one tensor to one tensor)");
    return out.toTensor();
  }

  // Module::to moves parameters with set_data, so `params` keeps aliasing them.
  void to(const at::Device& device) override { module_.to(device); }
  void setTraining(bool on) override { module_.train(on); }

  // The constants the parent's forward passes after the input (nn.Sequential passes an
  // nn.TransformerEncoderLayer's optional masks as None): the child gets them as it would there.
  void setExtraArguments(std::vector<c10::IValue> args) { extraArgs_ = std::move(args); }
  // Batch norm's running statistics and other buffers (the probe for randomness restores them).
  std::vector<at::Tensor> buffers() const {
    std::vector<at::Tensor> out;
    for (const auto& b : module_.named_buffers(/*recurse=*/true)) out.push_back(b.value);
    return out;
  }

 private:
  torch::jit::Module module_;
  std::string file_;
  std::vector<c10::IValue> extraArgs_;
};

const char* const kChainForm =
    "the engine accepts a forward that only calls the top-level children once each, in the order "
    "they are registered, each on the previous child's output, and returns the last one's output "
    "(nn.Sequential, or `def forward(self, x): return self.c(self.b(self.a(x)))`); put residuals "
    "and other computation inside a child";

// Where a node of the parent's forward comes from, for messages: "line N: CODE".
std::string nodePlace(const torch::jit::Node* n) {
  const auto& range = n->sourceRange();
  if (!range.source()) return n->kind().toQualString();
  std::string text = range.text().str();
  if (const auto nl = text.find('\n'); nl != std::string::npos) text = text.substr(0, nl) + " ...";
  std::string where;
  if (auto flc = range.file_line_col()) where = "line " + std::to_string(std::get<1>(*flc)) + ": ";
  return where + "`" + text + "`";
}

// The parent's forward must be the plain chain of its children (addLayers' order). Returns, per
// child, the constant arguments the parent passes after the input (None masks, False flags).
std::vector<std::vector<c10::IValue>> checkPlainChain(const torch::jit::Module& root, const ModelSpec& spec,
                                                      const std::vector<std::string>& children) {
  auto refuse = [&](const std::string& why) {
    modelError(spec, "its forward is not a plain chain of its children: " + why + "; " + kChainForm);
  };
  auto forward = root.find_method("forward");
  if (!forward) modelError(spec, "the module has no forward method");
  std::shared_ptr<torch::jit::Graph> graph = forward->graph();
  const auto inputs = graph->inputs();
  if (inputs.size() != 2)
    refuse("forward takes " + std::to_string(inputs.size() - 1) + " inputs, the engine feeds one tensor");
  const torch::jit::Value* self = inputs[0];
  torch::jit::Value* current = inputs[1];
  std::string producer = "the input";
  size_t next = 0;
  std::set<std::string> called;
  std::vector<std::vector<c10::IValue>> extra(children.size());
  for (torch::jit::Node* n : graph->nodes()) {
    const auto kind = n->kind();
    if (kind == c10::prim::Constant) continue;                        // judged by what uses it
    if (kind == c10::prim::GetAttr && n->input(0) == self) continue;  // judged where it is used
    const bool childCall = kind == c10::prim::CallMethod && n->inputs().size() >= 2 &&
                           n->input(0)->node()->kind() == c10::prim::GetAttr &&
                           n->input(0)->node()->input(0) == self;
    if (!childCall)
      refuse("it computes " + nodePlace(n) + " (" + kind.toQualString() + ") besides calling children");
    const std::string child = n->input(0)->node()->s(c10::attr::name);
    const std::string method = n->s(c10::attr::name);
    // Arguments after the input must be constants (the engine passes them on as they are):
    // nn.Sequential calls an nn.TransformerEncoderLayer as forward(x, None, None[, False]).
    std::vector<c10::IValue> constants;
    for (size_t a = 2; a < n->inputs().size(); ++a) {
      std::optional<c10::IValue> value;
      if (n->input(a)->node()->kind() == c10::prim::Constant)
        if (auto v = torch::jit::toIValue(n->input(a))) value = *v;
      if (!value)
        refuse("it passes child '" + child + "' argument " + std::to_string(a - 1) +
               " computed in the parent (" + nodePlace(n) +
               "); the engine passes each child the previous "
               "child's output and constants only");
      constants.push_back(*value);
    }
    if (std::find(children.begin(), children.end(), child) == children.end())
      refuse("it calls '" + child + "', which is not a child module");
    if (method != "forward")
      refuse("it calls " + child + "." + method + " rather than " + child + "'s forward");
    if (called.count(child)) refuse("it calls child '" + child + "' twice (" + nodePlace(n) + ")");
    if (next >= children.size() || children[next] != child)
      refuse("it calls child '" + child + "' where child '" +
             (next < children.size() ? children[next] : child) + "' comes next in registration order (" +
             nodePlace(n) + ")");
    if (n->input(1) != current)
      refuse("child '" + child + "' does not take " + producer + " as its input (" + nodePlace(n) + ")");
    if (current->uses().size() != 1)
      refuse(producer + " is used " + std::to_string(current->uses().size()) +
             " times (a residual connection or a branch); each value may feed only the next child");
    called.insert(child);
    current = n->output();
    producer = "the output of child '" + child + "'";
    extra[next] = std::move(constants);
    ++next;
  }
  if (next < children.size()) refuse("it never calls child '" + children[next] + "'");
  const auto outputs = graph->outputs();
  if (outputs.size() != 1 || outputs[0] != current || current->uses().size() != 1)
    refuse("it does not return " + producer + " alone");
  return extra;
}

// Children of the module as layers, without data (names, parameters). Returns the number of
// embeddings when the first child is an nn.Embedding (its input is token ids), else 0.
int64_t addLayers(Model& model, const ModelSpec& spec) {
  int64_t embeddings = 0;
  torch::jit::Module root = loadModule(spec);
  std::vector<std::string> names;
  for (const auto& child : root.named_children()) {
    if (!child.value.find_method("forward")) {
      // nn.LSTM / GRU / RNN script to overloads (forward__0, forward__1) returning tuples.
      std::string overloads;
      for (const auto& m : child.value.get_methods())
        if (m.name().rfind("forward__", 0) == 0) overloads += (overloads.empty() ? "" : ", ") + m.name();
      const std::string type = child.value.type()->name() ? child.value.type()->name()->name() : "module";
      if (!overloads.empty())
        modelError(spec,
                   "child '" + child.name + "' (" + type + ") has only overloaded forwards (" + overloads +
                       "), as a scripted nn.LSTM, nn.GRU or nn.RNN has: they take and return tuples (output, "
                       "hidden state), and the engine needs children that map one tensor to one tensor; wrap "
                       "it in a module whose forward returns only the output tensor");
      modelError(spec, "child '" + child.name + "' (" + type +
                           ") has no forward method; children must map one "
                           "tensor to one tensor");
    }
    // torch.nn.modules.sparse.Embedding, or ...sparse.___torch_mangle_N.Embedding when the
    // same process scripted another Embedding before.
    const auto& typeName = child.value.type()->name();
    if (names.empty() && typeName && typeName->name() == "Embedding" &&
        typeName->qualifiedName().find("torch.nn.modules.sparse.") != std::string::npos)
      for (const auto& p : child.value.named_parameters(/*recurse=*/false))
        if (p.name == "weight" && p.value.dim() == 2) embeddings = p.value.size(0);
    names.push_back(child.name);
    model.layers.push_back(std::make_unique<TorchScriptLayer>(child.name, child.value, spec.path));
  }
  if (model.layers.empty())
    modelError(spec,
               "the module has no child modules; the engine splits a model at its top-level children "
               "(script an nn.Sequential-like module)");
  auto extra = checkPlainChain(root, spec, names);
  for (size_t i = 0; i < extra.size(); ++i)
    static_cast<TorchScriptLayer&>(*model.layers[i]).setExtraArguments(std::move(extra[i]));
  return embeddings;
}

std::string fileHash(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::uint64_t h = 1469598103934665603ull;
  for (std::istreambuf_iterator<char> it(in), end; it != end; ++it)
    h = (h ^ static_cast<unsigned char>(*it)) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

// Whether the forward of the whole batch draws random numbers in the model's mode: two
// forwards from differently seeded generators give different outputs. Buffers the forwards
// update (batch norm's running statistics in train mode) are put back.
bool forwardIsStochastic(Model& model) {
  std::vector<std::pair<at::Tensor, at::Tensor>> saved;
  for (const auto& l : model.layers)
    for (const at::Tensor& b : static_cast<TorchScriptLayer&>(*l).buffers()) saved.emplace_back(b, b.clone());
  at::NoGradGuard noGrad;
  auto run = [&](std::uint64_t seed) {
    seedGlobalGenerators(seed);
    ForwardCtx ctx{-1, nullptr};
    at::Tensor out = model.inputs;
    for (const auto& l : model.layers) out = l->forward(out, ctx);
    return out;
  };
  const at::Tensor a = run(1), b = run(2);
  for (auto& [buffer, copy] : saved) buffer.copy_(copy);
  return !at::equal(a, b);
}

int64_t inferFeatures(const Model& model, const ModelSpec& spec) {
  if (spec.features > 0) return spec.features;
  // nn.Linear-like first layer: weight is [out, in].
  for (const auto& p : model.layers.front()->params)
    if (p.value.dim() == 2) return p.value.size(1);
  modelError(spec, "cannot infer the input width (the first child '" + model.layers.front()->name +
                       "' has no 2-D weight): give features=N");
}

}  // namespace

void buildTorchScript(Model& model, std::uint64_t seed, const std::string& inputsPath) {
  const ModelSpec& spec = model.spec;
  const int64_t embeddings = addLayers(model, spec);
  model.weightGradByGraph = true;
  model.modelSource = "torchscript " + fileHash(spec.path);
  at::Generator gen = at::detail::createCPUGenerator(seed);
  const int64_t n = static_cast<int64_t>(model.microbatchSize) * model.microbatches;
  std::optional<DataFile> file;
  if (!inputsPath.empty()) {
    // Any per-sample shape: the probe forward below says whether the model takes it.
    file = loadDataFile(inputsPath);
    const at::Tensor like =
        embeddings > 0 ? at::empty({n}, at::TensorOptions().dtype(at::kLong)) : at::empty({n}, model.options);
    model.inputs = takeSamples(*file, file->inputs, "inputs", like, n, true);
    if (embeddings > 0)
      checkIds(*file, model.inputs, "inputs", embeddings,
               ("the first child's embedding table (" + std::to_string(embeddings) + " rows)").c_str());
    model.dataSource = describeDataSource(*file);
    model.dataNote = describeDataUse(*file, n, seed);
  } else if (embeddings > 0) {
    // An nn.Embedding first: token ids, uniform over its table, `seq` per sample.
    model.inputs = at::randint(embeddings, {n, spec.seq}, gen, at::TensorOptions().dtype(at::kLong));
  } else {
    const int64_t features = inferFeatures(model, spec);
    model.inputs = at::randn({n, features}, gen, model.options);
  }
  // Probe: one forward of the whole batch without autograd names the child that fails and
  // gives every boundary's shape.
  at::Tensor out = model.inputs;
  {
    at::NoGradGuard noGrad;
    ForwardCtx ctx{-1, nullptr};
    for (size_t i = 0; i < model.layers.size(); ++i) {
      auto& layer = *model.layers[i];
      try {
        out = layer.forward(out, ctx);
      } catch (const std::exception& e) {
        const std::string what = std::string("layer ") + std::to_string(i) + " of " +
                                 std::to_string(model.layers.size()) + ": " + e.what();
        // The batch of --inputs is the likelier culprit than the model: name the file first.
        if (file && i == 0)
          throw std::runtime_error("--inputs " + file->path +
                                   ": the model does not take its inputs (torchscript model " + spec.path +
                                   ", " + what + ")");
        modelError(spec, what);
      }
      if (!out.is_floating_point() || out.dim() < 1 || out.size(0) != n)
        modelError(spec, "child '" + layer.name + "' returned shape " + shapeText(out.sizes()) + " of " +
                             std::string(c10::toString(out.scalar_type())) +
                             "; the engine needs floating-point tensors with the batch as first dimension (" +
                             std::to_string(n) + ")");
      model.layerOutputShapes.emplace_back(out.sizes().begin() + 1, out.sizes().end());
    }
  }
  if (spec.loss == Loss::CrossEntropy) {
    if (out.dim() < 2)
      modelError(spec, "loss=ce needs logits [batch, ..., classes], got " + shapeText(out.sizes()));
    std::vector<int64_t> targetShape(out.sizes().begin(), out.sizes().end() - 1);
    model.targets = at::randint(out.size(-1), targetShape, gen, at::TensorOptions().dtype(at::kLong));
  } else {
    model.targets = at::randn(out.sizes(), gen, model.options);
  }
  if (!file) model.dataNote = "synthetic from seed " + std::to_string(seed);
  if (file && file->targets.defined()) {
    model.targets = takeSamples(*file, file->targets, "targets", model.targets, n, false);
    if (spec.loss == Loss::CrossEntropy)
      checkIds(*file, model.targets, "targets", out.size(-1),
               ("loss=ce over the output's " + std::to_string(out.size(-1)) + " classes").c_str());
  }
  if (model.training) {
    for (auto& l : model.layers) l->setTraining(true);
    try {
      model.stochastic = forwardIsStochastic(model);
    } catch (const std::exception& e) {
      // Eval mode ran; train mode does not (batch norm on micro-batches of one sample, ...).
      modelError(spec, std::string("the forward fails in train mode: ") + e.what());
    }
  }
}

std::uint64_t forwardSeed(std::uint64_t runSeed, int iteration, int stage, int microbatch) {
  // splitmix64 over the four numbers: neighbouring ops get unrelated streams.
  std::uint64_t h = runSeed;
  for (std::uint64_t v : {static_cast<std::uint64_t>(iteration), static_cast<std::uint64_t>(stage),
                          static_cast<std::uint64_t>(microbatch)}) {
    h += 0x9e3779b97f4a7c15ull + v;
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    h ^= h >> 31;
  }
  return h;
}

void seedGlobalGenerators(std::uint64_t seed) {
  at::manual_seed(seed);
}

std::vector<std::string> torchScriptLayerNames(const ModelSpec& spec) {
  std::vector<std::string> names;
  try {
    Model m;
    m.spec = spec;
    (void)addLayers(m, spec);
    for (const auto& l : m.layers) names.push_back(l->name);
  } catch (const std::exception&) {
    names.clear();  // checkModel() says why
  }
  return names;
}

core::Status checkTorchScript(const ModelSpec& spec) {
  try {
    Model::build(spec, 1, 1, 1);
  } catch (const std::exception& e) {
    return core::makeError("engine.model", e.what());
  }
  return core::okStatus();
}

core::CostProfile torchScriptCostProfile(const Model& model, int b) {
  // No FLOP count of arbitrary TorchScript: like a dense layer, 2 FLOPs per parameter and
  // sample forward (and again for the weight gradient), plus one per output element, at the
  // nominal 50 GFLOP/s of the built-in models.
  core::CostProfile p;
  p.name = modelSpecToString(model.spec);
  constexpr double kFlopsPerMs = 50e9 / 1e3;
  const double elem = model.spec.dtype == DType::F64 ? 8 : 4;
  double inElems = static_cast<double>(model.inputs.numel()) / std::max<int64_t>(1, model.inputs.size(0));
  for (size_t i = 0; i < model.layers.size(); ++i) {
    double params = 0;
    for (const auto& q : model.layers[i]->params) params += static_cast<double>(q.value.numel());
    double outElems = 1;
    for (int64_t d : model.layerOutputShapes[i]) outElems *= static_cast<double>(d);
    core::LayerCost c;
    c.name = model.layers[i]->name;
    c.forwardMs = (2 * b * params + b * outElems) / kFlopsPerMs;
    c.backwardInputMs = c.forwardMs;
    c.backwardWeightMs = 2 * b * params / kFlopsPerMs;
    c.weightBytes = static_cast<std::int64_t>(params * elem);
    c.activationBytes = static_cast<std::int64_t>(b * (inElems + outElems) * elem);
    c.outputBytes = static_cast<std::int64_t>(b * outElems * elem);
    p.layers.push_back(c);
    inElems = outElems;
  }
  return p;
}

core::CostProfile torchScriptCostProfile(const ModelSpec& spec, int microbatchSize) {
  try {
    auto m = Model::build(spec, 1, microbatchSize, 1);
    return torchScriptCostProfile(*m, microbatchSize);
  } catch (const std::exception&) {
    core::CostProfile p;  // no layers: partitioning fails; checkModel() says why
    p.name = modelSpecToString(spec);
    return p;
  }
}

}  // namespace ps::engine::detail
