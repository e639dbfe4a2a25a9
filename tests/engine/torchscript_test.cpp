// User models: a TorchScript module built here (children defined from TorchScript source),
// saved to a temporary file, loaded through "torchscript:path=FILE" and split at its children.
// Gradients equal the unpipelined model's under B and split I/W schedules; bad files, a module
// without children and a failing child are refused with messages naming the file and child.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/version.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_runner.h"
#include "engine_checks.h"
#include "fixtures/schedules.h"
#include "pipestudio/core/analysis/validator.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/planning/generators.h"
#include "pipestudio/engine/engine.h"

using namespace ps::engine;
using ps::core::ScheduleKind;
using namespace ps::test;

namespace {

std::string tempPath(const std::string& tag) {
  return ::testing::TempDir() + "ps_torchscript_" + tag + "_" + std::to_string(::getpid()) + ".pt";
}

torch::jit::Module linear(const std::string& cls, int64_t in, int64_t out, int seed) {
  torch::jit::Module m(cls);
  at::Generator gen = at::detail::createCPUGenerator(static_cast<uint64_t>(seed));
  m.register_parameter("weight", at::randn({out, in}, gen) / std::sqrt(static_cast<double>(in)), false);
  m.register_parameter("bias", at::randn({out}, gen) * 0.1, false);
  m.define(R"(
def forward(self, x):
    return torch.matmul(x, self.weight.t()) + self.bias
)");
  return m;
}

torch::jit::Module activation(const std::string& cls, const std::string& fn) {
  torch::jit::Module m(cls);
  m.define("def forward(self, x):\n    return torch." + fn + "(x)\n");
  return m;
}

// fc0 (8->16), act0 (tanh), fc1 (16->12), norm (LayerNorm-like, own scale), act1 (sigmoid),
// fc2 (12->out): six children of mixed kinds, widths changing across boundaries.
std::string saveSequential(const std::string& tag, int64_t out) {
  torch::jit::Module top("SeqNet");
  top.register_module("fc0", linear("Lin0", 8, 16, 1));
  top.register_module("act0", activation("Tanh", "tanh"));
  top.register_module("fc1", linear("Lin1", 16, 12, 2));
  torch::jit::Module norm("Norm");
  norm.register_parameter("scale", at::ones({12}) * 1.5, false);
  norm.define(R"(
def forward(self, x):
    mu = x.mean(-1, keepdim=True)
    return (x - mu) * self.scale
)");
  top.register_module("norm", norm);
  top.register_module("act1", activation("Sigmoid", "sigmoid"));
  top.register_module("fc2", linear("Lin2", 12, out, 3));
  top.define(R"(
def forward(self, x):
    return self.fc2.forward(self.act1.forward(self.norm.forward(self.fc1.forward(self.act0.forward(self.fc0.forward(x))))))
)");
  std::string path = tempPath(tag);
  top.save(path);
  return path;
}

RunOptions optionsFor(const std::string& spec) {
  RunOptions o;
  auto m = parseModelSpec(spec);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : ps::core::formatDiagnostics(m.errors()));
  if (m.ok()) o.model = *m;
  o.microbatchSize = 3;
  o.checkGradients = true;
  o.timeoutSeconds = 20;
  o.threads = 1;
  return o;
}

void expectExact(const ps::core::Schedule& s, const RunOptions& o, size_t params = 7, int layersTotal = 6) {
  auto valid = ps::core::validateSchedule(s);
  ASSERT_TRUE(valid.valid()) << s.name << ": " << ps::core::formatDiagnostics(valid.diagnostics);
  RunReport r;
  ASSERT_NO_FATAL_FAILURE(runToTheEnd(s, o, r));
  ASSERT_TRUE(r.gradients.ran);
  expectGradientsPassed(s, r);
  // fc0, fc1, fc2 weight + bias and norm.scale: every parameter of the file is checked.
  EXPECT_EQ(r.gradients.parameters.size(), params);
  EXPECT_GT(r.gradients.lossReference, 0.0);
  EXPECT_EQ(r.timeline.ops.size(), s.opCount());
  int layers = 0;
  for (int n : r.partition) layers += n;
  EXPECT_EQ(layers, layersTotal);
}

class TorchScriptModel : public ::testing::Test {
 protected:
  void SetUp() override { path_ = saveSequential("seq", 5); }
  void TearDown() override { std::remove(path_.c_str()); }
  std::string path_;
};

}  // namespace

TEST_F(TorchScriptModel, LayerNamesAreTheTopLevelChildren) {
  auto m = parseModelSpec("torchscript:path=" + path_);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->kind, ModelKind::TorchScript);
  EXPECT_EQ(m->path, path_);
  EXPECT_EQ(modelLayerNames(*m), (std::vector<std::string>{"fc0", "act0", "fc1", "norm", "act1", "fc2"}));
  EXPECT_EQ(modelLayerCount(*m), 6);
  EXPECT_TRUE(checkModel(*m).ok());
  auto costs = modelCostProfile(*m, 4);
  ASSERT_EQ(costs.layers.size(), 6u);
  // The parameter-free activation costs less than the 8x16 linear before it.
  EXPECT_LT(costs.layers[1].forwardMs, costs.layers[0].forwardMs);
  EXPECT_EQ(costs.layers[0].weightBytes, (16 * 8 + 16) * 4);
  EXPECT_EQ(parseModelSpec(modelSpecToString(*m))->path, path_);
}

TEST_F(TorchScriptModel, OneFOneBGradientsEqualUnpipelined) {
  expectExact(generated(ScheduleKind::OneFOneB, 2, 4), optionsFor("torchscript:path=" + path_));
}

TEST_F(TorchScriptModel, ZbH1SplitBackwardGradientsEqualUnpipelined) {
  auto s = generated(ScheduleKind::ZBH1, 2, 4);
  bool hasW = false;
  for (const auto& dev : s.devices)
    for (const auto& st : dev) hasW = hasW || st.first.kind == ps::core::OpKind::W;
  ASSERT_TRUE(hasW) << "ZB-H1 must split the backward";
  expectExact(s, optionsFor("torchscript:path=" + path_));
}

TEST_F(TorchScriptModel, EveryScheduleKindGradientsEqualUnpipelined) {
  for (ScheduleKind k : ps::core::allScheduleKinds()) {
    SCOPED_TRACE(std::string(ps::core::scheduleKindName(k)));
    const auto s = generated(k, 2, 4);
    // Schedules with two copies of the model (DualPipe) check every parameter of both.
    expectExact(s, optionsFor("torchscript:path=" + path_),
                7 * static_cast<size_t>(s.pipeline.stages / s.pipeline.blocks()));
  }
}

TEST_F(TorchScriptModel, FourStagesSplitBackwardRecomputeAndOffload) {
  auto o = optionsFor("torchscript:path=" + path_ + ",features=8");
  expectExact(ps::test::oneFOneB(4, 4, true), o);
  expectExact(ps::test::withRecompute(ps::test::oneFOneB(3, 4, true)), o);
  expectExact(ps::test::withOffload(ps::test::oneFOneB(2, 4)), o);
}

TEST_F(TorchScriptModel, InterleavedPlacementAndDoublePrecision) {
  auto o = optionsFor("torchscript:path=" + path_ + ",dtype=f64");
  expectExact(ps::test::loopedBfs(2, 4), o);
  auto r = runSchedule(ps::test::loopedBfs(2, 4), o);
  ASSERT_TRUE(r.ok());
  EXPECT_LE(r->gradients.maxRelativeError, 1e-10);
}

// Two Gloo processes: each rank loads the file; boundary widths differ per stage (16, 12, 5),
// so receives must use the shape of the sending stage's last child.
TEST_F(TorchScriptModel, TwoGlooProcessesThroughTheCli) {
  for (ScheduleKind k : {ScheduleKind::OneFOneB, ScheduleKind::ZBH1}) {
    auto s = generated(k, 2, 4);
    const std::string pipe = tempPath(std::string(ps::core::scheduleKindName(k))) + ".pipe";
    expectCliRunPassesGradientCheck(
        s, pipe,
        " --model torchscript:path=" + path_ +
            " --partition 2,4 --nproc 2 --threads 1 --check-gradients --timeout 30");
  }
}

TEST(TorchScriptLoss, CrossEntropyOnLogits) {
  const std::string path = saveSequential("ce", 7);  // 7 classes
  expectExact(generated(ScheduleKind::ZBH1, 2, 4), optionsFor("torchscript:path=" + path + ",loss=ce"));
  std::remove(path.c_str());
}

TEST(TorchScriptSpec, ParsingErrors) {
  EXPECT_FALSE(parseModelSpec("torchscript").ok());  // no path
  EXPECT_FALSE(parseModelSpec("torchscript:path=").ok());
  EXPECT_FALSE(parseModelSpec("torchscript:path=a.pt,loss=l1").ok());
  EXPECT_FALSE(parseModelSpec("torchscript:path=a.pt,layers=3").ok());
  EXPECT_FALSE(parseModelSpec("torchscript:path=a.pt,features=0").ok());
  auto m = parseModelSpec("torchscript:path=/tmp/x=1.pt,features=8,loss=ce,dtype=f64");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->path, "/tmp/x=1.pt");
  EXPECT_EQ(m->features, 8);
  EXPECT_EQ(m->loss, Loss::CrossEntropy);
  EXPECT_EQ(m->dtype, DType::F64);
}

namespace {
std::string refusal(const std::string& spec) {
  auto o = optionsFor(spec);
  auto r = runSchedule(ps::test::oneFOneB(2, 2), o);
  EXPECT_FALSE(r.ok()) << spec << " should be refused";
  return r.ok() ? std::string() : ps::core::formatDiagnostics(r.errors());
}

// The refusal of the TorchScript file `path`, which names the file.
std::string refusalOf(const std::string& path) {
  const std::string msg = refusal("torchscript:path=" + path);
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  return msg;
}

// ... which also says `says`; the file is removed.
void expectRefusedSaying(const std::string& path, const std::string& says) {
  const std::string msg = refusalOf(path);
  EXPECT_NE(msg.find(says), std::string::npos) << msg;
  std::remove(path.c_str());
}
}  // namespace

TEST(TorchScriptErrors, MissingFileIsNamed) {
  const std::string path = tempPath("missing");
  const std::string msg = refusalOf(path);
  EXPECT_NE(msg.find("cannot open"), std::string::npos) << msg;
  EXPECT_FALSE(checkModel(parseModelSpec("torchscript:path=" + path).value()).ok());
  EXPECT_EQ(modelLayerCount(parseModelSpec("torchscript:path=" + path).value()), 0);
}

TEST(TorchScriptErrors, CorruptFileIsNamed) {
  const std::string path = tempPath("corrupt");
  std::ofstream(path) << "this is not a zip archive";
  expectRefusedSaying(path, "not a loadable TorchScript module");
}

TEST(TorchScriptErrors, ModuleWithoutChildren) {
  const std::string path = tempPath("flat");
  torch::jit::Module flat("Flat");
  flat.register_parameter("weight", at::randn({4, 4}), false);
  flat.define("def forward(self, x):\n    return torch.matmul(x, self.weight)\n");
  flat.save(path);
  expectRefusedSaying(path, "no child modules");
}

TEST(TorchScriptErrors, FailingChildIsNamed) {
  const std::string path = tempPath("badchild");
  torch::jit::Module top("Broken");
  top.register_module("first", linear("LinA", 8, 16, 1));
  top.register_module("mismatch", linear("LinB", 10, 4, 2));  // expects width 10, gets 16
  top.define("def forward(self, x):\n    return self.mismatch.forward(self.first.forward(x))\n");
  top.save(path);
  const std::string msg = refusalOf(path);
  EXPECT_NE(msg.find("child 'mismatch'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("layer 1 of 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cannot be multiplied"), std::string::npos) << msg;  // the cause, without the traceback
  EXPECT_EQ(msg.find("Traceback"), std::string::npos) << msg;
  std::remove(path.c_str());
}

TEST(TorchScriptErrors, FirstLayerWidthMustBeGivenWhenItCannotBeInferred) {
  const std::string path = tempPath("noweight");
  torch::jit::Module top("ActFirst");
  top.register_module("act", activation("TanhF", "tanh"));
  top.register_module("fc", linear("LinC", 6, 3, 1));
  top.define("def forward(self, x):\n    return self.fc.forward(self.act.forward(x))\n");
  top.save(path);
  const std::string msg = refusal("torchscript:path=" + path);
  EXPECT_NE(msg.find("features=N"), std::string::npos) << msg;
  expectExact(ps::test::oneFOneB(2, 2, true), optionsFor("torchscript:path=" + path + ",features=6"), 2, 2);
  std::remove(path.c_str());
}

// Modules scripted by PyTorch itself (tests/data/torchscript/make_models.py), by torch 1.13 (the
// folder itself) and by torch 2.11 (torch-2.11/): the engine runs the children in order, so
// the parent's forward must be exactly that chain, whichever PyTorch scripted it and whichever
// libtorch the engine was built against.
namespace {
const char* const kScriptedBy[] = {"", "torch-2.11/"};

std::string pytorchModel(const std::string& dir, const std::string& file) {
  return std::string(PIPESTUDIO_TEST_DATA_DIR) + "/torchscript/" + dir + file;
}
}  // namespace

TEST(TorchScriptChain, PyTorchSequentialAndPlainChainModuleAreAccepted) {
  for (const char* dir : kScriptedBy) {
    SCOPED_TRACE(std::string("scripted by ") + (*dir ? dir : "torch 1.13"));
    // nn.Sequential(Linear, ReLU, Linear, Tanh, Linear): 5 children, 3 weights and 3 biases.
    expectExact(generated(ScheduleKind::OneFOneB, 2, 4),
                optionsFor("torchscript:path=" + pytorchModel(dir, "sequential.pt")), 6, 5);
    // fc2(act(fc1(x))) in a Module of its own.
    expectExact(generated(ScheduleKind::ZBH1, 2, 4),
                optionsFor("torchscript:path=" + pytorchModel(dir, "chain.pt")), 4, 3);
  }
}

TEST(TorchScriptChain, ResidualConnectionIsRefusedSayingWhy) {
  for (const char* dir : kScriptedBy) {
    SCOPED_TRACE(dir);
    const std::string path = pytorchModel(dir, "residual.pt");
    const std::string msg = refusalOf(path);
    EXPECT_NE(msg.find("not a plain chain of its children"), std::string::npos) << msg;
    EXPECT_NE(msg.find("the input is used 2 times (a residual connection or a branch)"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("nn.Sequential"), std::string::npos) << msg;  // the form that is accepted
    EXPECT_FALSE(checkModel(parseModelSpec("torchscript:path=" + path).value()).ok());
  }
}

TEST(TorchScriptChain, ReorderedAndReusedChildrenAreRefused) {
  for (const char* dir : kScriptedBy) {
    SCOPED_TRACE(dir);
    const std::string reordered = refusal("torchscript:path=" + pytorchModel(dir, "reordered.pt"));
    EXPECT_NE(reordered.find("calls child 'fc2' where child 'fc1' comes next in registration order"),
              std::string::npos)
        << reordered;
    const std::string reused = refusal("torchscript:path=" + pytorchModel(dir, "reused.pt"));
    EXPECT_NE(reused.find("calls child 'fc' twice"), std::string::npos) << reused;
  }
}

TEST(TorchScriptChain, LstmChildSaysWhatIsUnsupported) {
  for (const char* dir : kScriptedBy) {
    SCOPED_TRACE(dir);
    const std::string msg = refusal("torchscript:path=" + pytorchModel(dir, "lstm.pt"));
    EXPECT_NE(msg.find("child 'lstm' (LSTM) has only overloaded forwards"), std::string::npos) << msg;
    EXPECT_NE(msg.find("nn.LSTM"), std::string::npos) << msg;
    EXPECT_NE(msg.find("one tensor to one tensor"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("has no forward method"), std::string::npos) << msg;
  }
}

TEST(TorchScriptTokens, EmbeddingFirstModelGetsTokenIds) {
  for (const char* dir : kScriptedBy) {
    SCOPED_TRACE(dir);
    // nn.Embedding(20, 8) -> Linear -> GELU -> Linear(8, 20): token ids in [0, 20), 5 per
    // sample, cross-entropy on the logits; the embedding's gradient is checked like any other.
    const std::string spec = "torchscript:path=" + pytorchModel(dir, "tokens.pt") + ",seq=5,loss=ce";
    auto m = parseModelSpec(spec);
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(m->seq, 5);
    EXPECT_TRUE(checkModel(*m).ok()) << ps::core::formatDiagnostics(checkModel(*m).errors());
    expectExact(generated(ScheduleKind::ZBH1, 2, 4), optionsFor(spec), 5, 4);
  }
}

// nn.Sequential of nn.TransformerEncoderLayer (and of an nn.TransformerEncoder): the commonest
// PyTorch model shape. Sequential calls each encoder layer as forward(x, None, None[, False]);
// the engine passes the child those constants as the parent does.
TEST(TorchScriptChain, SequentialOfTransformerEncoderLayersRunsWithExactGradients) {
  for (const char* dir : kScriptedBy) {
    SCOPED_TRACE(std::string("scripted by ") + (*dir ? dir : "torch 1.13"));
    // Embedding, 2 encoder layers (12 parameter tensors each), Linear head: 27 tensors.
    const std::string layers = "torchscript:path=" + pytorchModel(dir, "transformer.pt") + ",seq=6,loss=ce";
    if (*dir && TORCH_VERSION_MAJOR < 2) {
      // torch 2.x's attention calls an operator libtorch 1.13 lacks: refused saying so.
      for (const char* file : {"transformer.pt", "encoder.pt"}) {
        const std::string msg = refusalOf(pytorchModel(dir, file));
        EXPECT_NE(
            msg.find("it calls aten::scaled_dot_product_attention, an operator this engine's libtorch 1.13"),
            std::string::npos)
            << msg;
        EXPECT_NE(msg.find("scripted by a newer PyTorch"), std::string::npos) << msg;
        EXPECT_EQ(msg.find("<--- HERE"), std::string::npos) << msg;
      }
      continue;
    }
    auto m = parseModelSpec(layers);
    ASSERT_TRUE(m.ok());
    EXPECT_TRUE(checkModel(*m).ok()) << ps::core::formatDiagnostics(checkModel(*m).errors());
    EXPECT_EQ(modelLayerCount(*m), 4);
    expectExact(generated(ScheduleKind::OneFOneB, 2, 4), optionsFor(layers), 27, 4);
    expectExact(generated(ScheduleKind::ZBH1, 2, 4), optionsFor(layers), 27, 4);
    expectExact(ps::test::withRecompute(ps::test::oneFOneB(2, 4)), optionsFor(layers), 27, 4);
    // One nn.TransformerEncoder child of 2 layers: Sequential passes its mask, key padding mask
    // (and is_causal) as None.
    const std::string encoder = "torchscript:path=" + pytorchModel(dir, "encoder.pt") + ",seq=6,loss=ce";
    expectExact(generated(ScheduleKind::ZBH1, 2, 4), optionsFor(encoder), 27, 3);
  }
}

// Only constants go along with the input: a child given the parent's input besides the
// previous child's output is a branch, refused.
TEST(TorchScriptChain, ChildGivenAValueBesidesItsInputIsRefused) {
  const std::string path = tempPath("extra_arg");
  torch::jit::Module pair("PairArg");
  pair.define("def forward(self, x, y: Tensor):\n    return x * y\n");
  torch::jit::Module top("PassesInput");
  top.register_module("fc", linear("LinE", 8, 8, 1));
  top.register_module("mix", pair);
  // mix gets fc's output and the parent's own input: another network than the chain of children.
  top.define("def forward(self, x):\n    return self.mix.forward(self.fc.forward(x), x)\n");
  top.save(path);
  const std::string msg = refusalOf(path);
  EXPECT_NE(msg.find("the input is used 2 times (a residual connection or a branch)"), std::string::npos)
      << msg;
  std::remove(path.c_str());
}

// Training (--optimizer) runs TorchScript modules in train mode: dropout is on, batch norm
// normalises each micro-batch by its own statistics. Dropout draws are seeded per stage,
// micro-batch and iteration, so the gradient check compares the same masks.
namespace {
RunOptions training(const std::string& spec) {
  RunOptions o = optionsFor(spec);
  o.optimizer = Optimizer::Sgd;
  o.learningRate = 0.01;
  return o;
}

// runSchedule adds the OPTIMIZER steps itself.
RunReport runTraining(const ps::core::Schedule& s, const RunOptions& o) {
  RunReport r;
  runToTheEnd(s, o, r);
  return r;
}
}  // namespace

TEST(TorchScriptTraining, DropoutIsOnWhenTrainingAndTheGradientCheckComparesTheSameMasks) {
  for (const char* dir : kScriptedBy) {
    SCOPED_TRACE(std::string("scripted by ") + (*dir ? dir : "torch 1.13"));
    const std::string spec = "torchscript:path=" + pytorchModel(dir, "dropout.pt");
    // Without an optimizer: eval mode, as before.
    RunReport eval;
    ASSERT_NO_FATAL_FAILURE(runToTheEnd(generated(ScheduleKind::OneFOneB, 2, 4), optionsFor(spec), eval));
    EXPECT_EQ(eval.modelMode.rfind("eval", 0), 0u) << eval.modelMode;
    for (const auto& s : {generated(ScheduleKind::OneFOneB, 2, 4), generated(ScheduleKind::ZBH1, 2, 4),
                          ps::test::withRecompute(ps::test::oneFOneB(2, 4))}) {
      SCOPED_TRACE(s.name);
      RunOptions o = training(spec);
      o.iterations = 2;
      const RunReport a = runTraining(s, o);
      EXPECT_EQ(a.modelMode.rfind("train", 0), 0u) << a.modelMode;
      EXPECT_NE(a.modelMode.find("seeded"), std::string::npos) << a.modelMode;
      ASSERT_TRUE(a.gradients.ran);
      expectGradientsPassed(s, a);
      // Half the hidden units dropped: the loss is not the eval-mode loss.
      ASSERT_EQ(a.losses.size(), 2u);
      EXPECT_GT(std::abs(a.losses[0] - eval.losses.back()), 1e-3 * eval.losses.back());
      // Seeded: a second run draws the same masks, every iteration.
      const RunReport b = runTraining(s, o);
      EXPECT_EQ(a.losses, b.losses);
    }
  }
}

TEST(TorchScriptTraining, BatchNormTrainsOnMicroBatchStatisticsAsPyTorchDoes) {
  // tests/data/inputs/make_inputs.py: PyTorch's loss of batchnorm.pt on chain_batch.pt, in train
  // mode over micro-batches of 2 (the mean of their losses) and in eval mode.
  std::ifstream in(std::string(PIPESTUDIO_TEST_DATA_DIR) + "/inputs/expected_losses.json");
  const auto expected = nlohmann::json::parse(in);
  RunOptions o = training("torchscript:path=" + pytorchModel("", "batchnorm.pt"));
  o.microbatchSize = 2;
  o.inputsPath = std::string(PIPESTUDIO_TEST_DATA_DIR) + "/inputs/chain_batch.pt";
  for (const auto& s : {generated(ScheduleKind::OneFOneB, 2, 4), generated(ScheduleKind::ZBH1, 2, 4)}) {
    SCOPED_TRACE(s.name);
    const RunReport trained = runTraining(s, o);
    ASSERT_FALSE(trained.losses.empty());
    const double want = expected.at("batchnorm.pt train, micro-batches of 2").get<double>();
    EXPECT_NEAR(trained.losses.front(), want, 1e-5 * want);
    EXPECT_EQ(trained.modelMode.find("seeded"), std::string::npos) << "batch norm draws nothing";
    expectGradientsPassed(s, trained);
  }
  RunOptions e = optionsFor("torchscript:path=" + pytorchModel("", "batchnorm.pt"));
  e.microbatchSize = 2;
  e.inputsPath = o.inputsPath;
  RunReport eval;
  ASSERT_NO_FATAL_FAILURE(runToTheEnd(generated(ScheduleKind::OneFOneB, 2, 4), e, eval));
  const double want = expected.at("batchnorm.pt eval").get<double>();
  EXPECT_NEAR(eval.losses.back(), want, 1e-5 * want);
}

// Two Gloo processes train a dropout model: each rank seeds its own stages' forwards alike, so
// the check (each rank its own stages, against the seeded micro-batch reference) passes.
TEST(TorchScriptTraining, TwoGlooProcessesTrainWithDropout) {
  auto s = generated(ScheduleKind::OneFOneB, 2, 4);
  const std::string pipe = tempPath("dropout_gloo") + ".pipe";
  std::ofstream(pipe) << ps::core::printDsl(s);
  const auto r =
      runCommand(std::string(PIPESTUDIO_CLI) + " run " + pipe +
                 " --model torchscript:path=" + pytorchModel("", "dropout.pt") +
                 " --nproc 2 --threads 1 --optimizer sgd --iterations 2 --check-gradients --timeout 30");
  std::remove(pipe.c_str());
  EXPECT_EQ(r.exitCode, 0) << r.out;
  EXPECT_NE(r.out.find("gradient check: passed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("model mode: train (dropout on"), std::string::npos) << r.out;
}
