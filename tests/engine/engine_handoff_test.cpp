// pipestudio-cli hands `run` to pipestudio-engine: through the CLI a run has the engine's own
// exit code and event stream, and `pipestudio-cli --version` reports the engine beside it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_runner.h"
#include "pipestudio/core/io/run_events.h"

namespace fs = std::filesystem;
using ps::test::runCommand;
using ps::test::Stderr;

namespace {

const std::string kCli = std::string("'") + PIPESTUDIO_CLI + "'";
const std::string kEngine = std::string("'") + PIPESTUDIO_ENGINE + "'";

fs::path schedule() {
  static const fs::path p = [] {
    fs::path d = fs::temp_directory_path() / ("ps_engine_handoff_" + std::to_string(::getpid()));
    fs::create_directories(d);
    auto r = runCommand(kCli + " generate 1f1b --devices 2 --microbatches 3 -o '" +
                        (d / "1f1b.pipe").string() + "'");
    EXPECT_EQ(r.exitCode, 0) << r.out;
    return d / "1f1b.pipe";
  }();
  return p;
}

struct Stream {
  std::vector<std::string> types;  // event types in order
  std::vector<std::string> ops;    // "device/step/op" of every op event, sorted
  std::string status;              // of `finished`
  std::vector<double> losses;
  std::vector<std::string> errorCodes;
};

Stream parse(const std::string& out) {
  Stream s;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object()) {
      ADD_FAILURE() << "not an event: " << line;
      continue;
    }
    const std::string type = j.value("type", "");
    s.types.push_back(type);
    if (type == "op")
      s.ops.push_back(std::to_string(j.value("device", -1)) + "/" + std::to_string(j.value("step", -1)) +
                      "/" + j.value("op", ""));
    if (type == "finished") {
      s.status = j.value("status", "");
      if (j.contains("losses")) s.losses = j["losses"].get<std::vector<double>>();
    }
    if (type == "error") s.errorCodes.push_back(j.value("code", ""));
  }
  std::sort(s.ops.begin(), s.ops.end());
  return s;
}

// Types with the measurements (op, transfer and memory events) left out: their interleaving
// across devices varies, and how many a failed run sends before it stops depends on timing.
std::vector<std::string> skeleton(const std::vector<std::string>& types) {
  std::vector<std::string> out;
  for (const auto& t : types)
    if (t != "op" && t != "memory" && t != "transfer") out.push_back(t);
  return out;
}

}  // namespace

TEST(EngineHandoff, VersionReportsCliEngineAndProtocol) {
  auto engine = runCommand(kEngine + " --version", Stderr::Separate);
  ASSERT_EQ(engine.exitCode, 0) << engine.err;
  const std::string engineLine = engine.out.substr(0, engine.out.find('\n'));
  EXPECT_EQ(engineLine.rfind("pipestudio-engine ", 0), 0u) << engineLine;
  EXPECT_NE(
      engineLine.find("(run-event protocol " + std::to_string(ps::core::kRunEventProtocolVersion) + ")"),
      std::string::npos);

  auto r = runCommand("env -u PIPESTUDIO_ENGINE " + kCli + " --version", Stderr::Separate);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto cli = ps::core::parseCliVersion(r.out);
  ASSERT_TRUE(cli) << r.out;
  EXPECT_EQ(cli->protocol, ps::core::kRunEventProtocolVersion);
  // Second line: what the engine itself says, and where it is (beside the CLI in the build).
  const std::string second = r.out.substr(r.out.find('\n') + 1);
  EXPECT_EQ(second, engineLine + " at " + fs::path(PIPESTUDIO_ENGINE).string() + "\n") << r.out;
  // The CLI read the engine's stamp rather than starting libtorch: well under the engine's own start.
  EXPECT_LT(r.seconds, engine.seconds) << "cli " << r.seconds << " s, engine " << engine.seconds << " s";
}

TEST(EngineHandoff, RunThroughCliHasTheEnginesExitCodeAndEvents) {
  const std::string args =
      " run '" + schedule().string() +
      "' --model mlp:layers=4,hidden=16 --partition 2,2 --seed 3 --threads 1 --events jsonl";
  auto viaCli = runCommand("env -u PIPESTUDIO_ENGINE " + kCli + args, Stderr::Separate);
  auto direct = runCommand(kEngine + args, Stderr::Separate);
  ASSERT_EQ(direct.exitCode, 0) << direct.err;
  EXPECT_EQ(viaCli.exitCode, direct.exitCode) << viaCli.err;
  Stream a = parse(viaCli.out), b = parse(direct.out);
  EXPECT_EQ(skeleton(a.types), skeleton(b.types));
  EXPECT_EQ(a.types.front(), "started");
  EXPECT_EQ(a.ops, b.ops);
  EXPECT_EQ(a.ops.size(), 12u);  // 2 devices x 3 micro-batches x (F, B)
  EXPECT_EQ(a.status, "finished");
  EXPECT_EQ(a.status, b.status);
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t i = 0; i < a.losses.size(); ++i)
    EXPECT_NEAR(a.losses[i], b.losses[i], 1e-5 * std::abs(b.losses[i]));
}

TEST(EngineHandoff, FailuresAndUsageErrorsKeepTheirExitCodes) {
  const std::string failing =
      " run '" + schedule().string() +
      "' --model mlp:layers=4,hidden=16 --threads 1 --events jsonl --inject-fault throw:B1@s1";
  auto viaCli = runCommand("env -u PIPESTUDIO_ENGINE " + kCli + failing, Stderr::Drop);
  auto direct = runCommand(kEngine + failing, Stderr::Drop);
  EXPECT_EQ(direct.exitCode, 1);
  EXPECT_EQ(viaCli.exitCode, direct.exitCode);
  Stream a = parse(viaCli.out), b = parse(direct.out);
  EXPECT_EQ(a.status, "failed");
  EXPECT_EQ(a.errorCodes, b.errorCodes);
  EXPECT_EQ(skeleton(a.types), skeleton(b.types));

  auto usage =
      runCommand("env -u PIPESTUDIO_ENGINE " + kCli + " run '" + schedule().string() + "'", Stderr::Separate);
  EXPECT_EQ(usage.exitCode, 2);
  EXPECT_NE(usage.err.find("--model SPEC is required"), std::string::npos) << usage.err;
}

TEST(EngineHandoff, EngineRefusesACliOfAnotherProtocol) {
  auto r = runCommand("PIPESTUDIO_CLI_PROTOCOL=99 " + kEngine + " run '" + schedule().string() +
                          "' --model mlp:layers=2,hidden=8 --events jsonl",
                      Stderr::Separate);
  EXPECT_EQ(r.exitCode, 4);
  EXPECT_NE(r.err.find("version mismatch"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}
