// `run --inputs BATCH.pt`: a batch saved by PyTorch's own torch.save (tests/data/inputs,
// made by make_inputs.py with python3-torch) replaces the synthetic data. The loss of a
// TorchScript model on it equals the loss PyTorch computed for the same model and batch;
// files the model cannot take are refused naming the file and what is wrong.
#include <gtest/gtest.h>
#include <torch/version.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "background_process.h"
#include "cli/cli_runner.h"
#include "pipestudio/core/io/cluster.h"
#include "pipestudio/core/planning/generators.h"

namespace {

using namespace ps::test;

std::string data(const std::string& file) {
  return std::string(PIPESTUDIO_TEST_DATA_DIR) + "/" + file;
}

double pytorchLoss(const std::string& batch) {
  std::ifstream in(data("inputs/expected_losses.json"));
  return nlohmann::json::parse(in).at(batch).get<double>();
}

// The "loss: X" line of a run's summary (NaN when missing).
double printedLoss(const std::string& out) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("\n  loss: ([-0-9.e+]+)"))) return std::nan("");
  return std::stod(m[1]);
}

std::string schedule() {
  return writeSchedule(ps::core::ScheduleKind::OneFOneB, 2, 4, "inputs_1f1b");
}

}  // namespace

TEST(InputsFile, TorchScriptLossEqualsPyTorchsOnTheSameBatch) {
  const std::string s = schedule();
  struct Case {
    std::string model, batch;
  };
  for (const Case& c :
       {Case{"torchscript:path=" + data("torchscript/chain.pt"), "chain_batch.pt"},
        Case{"torchscript:path=" + data("torchscript/tokens.pt") + ",loss=ce", "tokens_batch.pt"}}) {
    auto r = runCli("run " + s + " --model " + c.model + " --inputs " + data("inputs/" + c.batch) +
                    " --threads 1 --check-gradients --timeout 30");
    ASSERT_EQ(r.exitCode, 0) << r.out;
    const double expected = pytorchLoss(c.batch);
    EXPECT_NEAR(printedLoss(r.out), expected, 1e-5 * expected) << c.batch << "\n" << r.out;
    EXPECT_NE(r.out.find("gradient check: passed"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("samples 0..7 of 8, targets from the file"), std::string::npos) << r.out;
  }
}

TEST(InputsFile, InputsOnlyTakeTheFirstSamplesAndTargetsFromTheSeed) {
  const std::string s = schedule();
  const std::string base = "run " + s + " --model mlp:layers=4,hidden=16 --threads 1 --timeout 30";
  auto file = runCli(base + " --inputs " + data("inputs/mlp_inputs.pt") + " --check-gradients");
  auto synthetic = runCli(base);
  ASSERT_EQ(file.exitCode, 0) << file.out;
  ASSERT_EQ(synthetic.exitCode, 0) << synthetic.out;
  EXPECT_NE(
      file.out.find("data: " + data("inputs/mlp_inputs.pt") + ": samples 0..7 of 12, targets from seed 1"),
      std::string::npos)
      << file.out;
  EXPECT_NE(synthetic.out.find("data: synthetic from seed 1"), std::string::npos) << synthetic.out;
  EXPECT_NE(file.out.find("gradient check: passed"), std::string::npos) << file.out;
  // The file's inputs are used: the loss is another one than the synthetic batch's.
  EXPECT_NE(printedLoss(file.out), printedLoss(synthetic.out));
}

TEST(InputsFile, FilesTheModelCannotTakeAreRefusedNamingTheFileAndWhy) {
  const std::string s = schedule();
  const std::string tokens = "torchscript:path=" + data("torchscript/tokens.pt") + ",loss=ce";
  const std::string chain = "torchscript:path=" + data("torchscript/chain.pt");
  struct Case {
    std::string model, file, why;
  };
  for (const Case& c : {
           Case{tokens, data("inputs/tokens_float.pt"), "inputs are Float; the model takes integer ids"},
           Case{tokens, data("inputs/tokens_out_of_range.pt"), "embedding table (20 rows) takes 0..19"},
           Case{chain, data("inputs/legacy.pt"), "not a torch.save file in the zip format"},
           // libtorch 1.13's unpickler lacks SETITEM (a dict of one entry); 2.x reads the file
           // and the three samples are too few.
           Case{chain, data("inputs/chain_short.pt"),
                TORCH_VERSION_MAJOR >= 2 ? "inputs hold 3 samples; the run needs 8" : "dict of one entry"},
           Case{chain, data("inputs/mlp_inputs.pt"), "mat1 and mat2 shapes cannot be multiplied"},
           Case{"mlp:layers=4,hidden=8", data("inputs/mlp_inputs.pt"),
                "inputs have shape [12, 16]; the model takes [N, 8]"},
           Case{"mlp:layers=4,hidden=16", data("inputs/no_such_file.pt"), "cannot open the file"},
           Case{"mlp:layers=4,hidden=16", s, "not a torch.save file"},
           // Checked before anything runs, not at the first op that meets it.
           Case{chain, data("inputs/chain_nan.pt"),
                "inputs hold NaN or Inf values (sample 5 of the 8 the run takes)"},
           Case{chain, data("inputs/chain_numpy.pt"), "holds a Python object libtorch cannot read"},
       }) {
    auto r = runCli("run " + s + " --model " + c.model + " --inputs " + c.file + " --threads 1 --timeout 30");
    EXPECT_EQ(r.exitCode, 1) << c.file << "\n" << r.out;
    EXPECT_NE(r.out.find("--inputs " + c.file + ": "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(c.why), std::string::npos) << c.file << "\n" << r.out;
    EXPECT_EQ(r.out.find("loss:"), std::string::npos) << r.out;
  }
}

// libtorch 1.13's unpickler lacks APPEND, which pickle writes for a list of one item: said so,
// not as the unpickler's "Unknown opcode for unpickling at 0x61".
TEST(InputsFile, ListOfOneItemIsRefusedSayingWhatToSaveInstead) {
  auto r = runCli("run " + schedule() + " --model torchscript:path=" + data("torchscript/chain.pt") +
                  " --inputs " + data("inputs/chain_list.pt") + " --threads 1");
  if (TORCH_VERSION_MAJOR >= 2) {
    // 2.x reads it: the inputs, targets from the seed.
    EXPECT_EQ(r.exitCode, 0) << r.out;
    EXPECT_NE(r.out.find("samples 0..7 of 8, targets from seed 1"), std::string::npos) << r.out;
    return;
  }
  EXPECT_EQ(r.exitCode, 1) << r.out;
  EXPECT_NE(r.out.find("cannot read a list of one item (pickle opcode APPEND)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("a tuple, (inputs,) or (inputs, targets)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("Unknown opcode"), std::string::npos) << r.out;
}

TEST(InputsFile, TooFewSamplesForTheMicroBatchesAreRefused) {
  // 8 samples: 4 micro-batches of 3 need 12.
  auto r = runCli("run " + schedule() + " --model torchscript:path=" + data("torchscript/chain.pt") +
                  " --inputs " + data("inputs/chain_batch.pt") + " --microbatch-size 3 --threads 1");
  EXPECT_EQ(r.exitCode, 1) << r.out;
  EXPECT_NE(r.out.find("inputs hold 8 samples; the run needs 12"), std::string::npos) << r.out;
}

TEST(InputsFile, RanksReadingDifferentDataAreRefusedAtTheRendezvous) {
  const std::string s = schedule();
  const int port = ps::core::pickRendezvousPort();
  auto env = [&](int rank) {
    return std::vector<std::pair<std::string, std::string>>{{"RANK", std::to_string(rank)},
                                                            {"WORLD_SIZE", "2"},
                                                            {"MASTER_ADDR", "127.0.0.1"},
                                                            {"MASTER_PORT", std::to_string(port)}};
  };
  const std::string args =
      "run " + s + " --model mlp:layers=4,hidden=16 --threads 1 --timeout 30 --connect-timeout 30";
  auto r0 = Background::start(args + " --inputs " + data("inputs/mlp_inputs.pt"), "inputs_r0", env(0));
  auto r1 = Background::start(args, "inputs_r1", env(1));
  const bool done = r0.waitFor(std::chrono::seconds(60)) && r1.waitFor(std::chrono::seconds(30));
  if (!done) {
    r0.killTree();
    r1.killTree();
  }
  ASSERT_TRUE(done);
  EXPECT_EQ(r0.exitCode(), 1);
  EXPECT_NE(r0.stderrText().find("data differs"), std::string::npos) << r0.stderrText();
}
