// PipeStudio's generators and lowering against PyTorch's own orders (tests/data/pytorch/, written
// by torch 2.11's code, the pinned version, and tests/data/pytorch-2.15/, by torch 2.15's:
// tests/pytorch/make_golden_orders.py). Every generator that claims a
// PyTorch class gives that class's order action for action, for every case PyTorch's manifest
// lists (pipeline degree 2, 4, 8; micro-batches pp, 2pp, 3pp, pp + 1, 2pp + 1, pp / 2; stages per
// rank 1 to 3); PipeStudio's compute+comms lowering gives PyTorch's lowering action for action.
// Where PyTorch is wrong (Schedule1F1B's order IR), the test states the difference.
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "csv_cells.h"
#include "fixtures/files.h"
#include "pipestudio/core/analysis/validator.h"
#include "pipestudio/core/io/pytorch_csv.h"
#include "pipestudio/core/io/schedule_file.h"
#include "pipestudio/core/planning/generators.h"
#include "pipestudio/core/planning/search.h"

using namespace ps::core;
namespace fs = std::filesystem;

namespace {

// Each PyTorch whose orders are kept, with the target PipeStudio writes for it.
struct Golden {
  fs::path dir;
  PytorchTarget target;
};
const Golden kGoldens[] = {{fs::path(PIPESTUDIO_TEST_DATA_DIR) / "pytorch", PytorchTarget{2, 11}},
                           {fs::path(PIPESTUDIO_TEST_DATA_DIR) / "pytorch-2.15", PytorchTarget{2, 15}}};
const fs::path kDir = kGoldens[0].dir;

const std::map<std::string, ScheduleKind>& kindOfClass() {
  static const std::map<std::string, ScheduleKind> m = {{"GPipe", ScheduleKind::GPipe},
                                                        {"1F1B", ScheduleKind::OneFOneB},
                                                        {"Interleaved1F1B", ScheduleKind::Interleaved1F1B},
                                                        {"LoopedBFS", ScheduleKind::LoopedBFS},
                                                        {"InterleavedZeroBubble", ScheduleKind::ZBH1},
                                                        {"ZBVZeroBubble", ScheduleKind::ZBV},
                                                        {"DualPipeV", ScheduleKind::DualPipeV}};
  return m;
}

nlohmann::json manifestOf(const fs::path& dir) {
  return nlohmann::json::parse(ps::test::readFile(dir / "MANIFEST.json"));
}

const nlohmann::json& manifest() {
  static const nlohmann::json m = manifestOf(kDir);
  return m;
}

using Rows = std::vector<std::vector<std::string>>;

// The compute actions per rank (idle cells and stage actions dropped): what a compute-only
// order says.
Rows computeOnly(const Rows& rows) {
  Rows out;
  for (const auto& r : rows) {
    out.emplace_back();
    for (const auto& a : r)
      if (!a.empty() && a.find("REDUCE_GRAD") == std::string::npos && a.find("SHARD") == std::string::npos)
        out.back().push_back(a);
  }
  return out;
}

Rows fileRows(const std::string& name) {
  return ps::test::csvActions(ps::test::readFile(kDir / name));
}

std::string caseName(const nlohmann::json& c) {
  return c["name"].get<std::string>() + " pp=" + std::to_string(c["pp"].get<int>()) +
         " M=" + std::to_string(c["microbatches"].get<int>()) +
         " spr=" + std::to_string(c["stages_per_rank"].get<int>());
}

Result<Schedule> generateFor(const nlohmann::json& c) {
  return generateSchedule(
      kindOfClass().at(c["name"].get<std::string>()),
      GeneratorOptions{c["pp"].get<int>(), c["microbatches"].get<int>(), c["stages_per_rank"].get<int>()});
}

}  // namespace

TEST(PytorchOrders, ManifestIsPyTorchsAndCoversEveryClass) {
  const auto& m = manifest();
  EXPECT_EQ(m["torch"].get<std::string>().rfind("2.11.0", 0), 0u) << m["torch"];
  std::map<std::string, int> perClass;
  for (const auto& c : m["cases"]) ++perClass[c["name"].get<std::string>()];
  for (const auto& [cls, kind] : kindOfClass()) EXPECT_GE(perClass[cls], 18) << cls;
}

TEST(PytorchOrders, GeneratorsGivePyTorchsOrderActionForAction) {
  int compared = 0;
  for (const auto& c : manifest()["cases"]) {
    SCOPED_TRACE(caseName(c));
    const std::string cls = c["name"];
    auto s = generateFor(c);
    if (c.contains("error")) {
      // PyTorch refuses these sizes; PipeStudio refuses them too, except where the order is
      // well defined and valid: its 1F1B also serves fewer micro-batches than stages (which
      // Schedule1F1B rejects), and its ZB-H1 with one stage per rank any count (with one
      // stage per rank PyTorch's rounds do not change the order, yet its class requires them
      // to divide the micro-batches).
      const bool pipestudioServes =
          cls == "1F1B" || (cls == "InterleavedZeroBubble" && c["stages_per_rank"] == 1);
      if (pipestudioServes) {
        ASSERT_TRUE(s.ok());
        EXPECT_TRUE(validateSchedule(*s).valid());
      } else {
        EXPECT_FALSE(s.ok()) << c["error"];
      }
      continue;
    }
    ASSERT_TRUE(s.ok()) << formatDiagnostics(s.errors());
    // What PyTorch runs: the executed order of the single-stage classes, the IR otherwise.
    const std::string file =
        c["files"].contains("executed") ? c["files"]["executed"] : c["files"]["compute_only"];
    EXPECT_EQ(computeOnly(ps::test::csvActions(writePytorchCsv(*s).value())), computeOnly(fileRows(file)));
    ++compared;
  }
  EXPECT_GE(compared, 140);
}

TEST(PytorchOrders, LoweringIsPyTorchsActionForAction) {
  int compared = 0;
  for (const auto& c : manifest()["cases"]) {
    if (!c["files"].contains("compute_comms")) continue;
    SCOPED_TRACE(caseName(c));
    auto s = generateFor(c);
    ASSERT_TRUE(s.ok()) << formatDiagnostics(s.errors());
    auto lowered = writePytorchCsv(*s, CsvFormat::ComputeComms);
    ASSERT_TRUE(lowered.ok()) << formatDiagnostics(lowered.errors());
    EXPECT_EQ(ps::test::csvActions(*lowered), fileRows(c["files"]["compute_comms"]));
    // Lowering PyTorch's own compute-only file gives the same (reading keeps the order).
    const std::string only =
        c["files"].contains("executed") ? c["files"]["executed"] : c["files"]["compute_only"];
    auto read = readPytorchCsv(ps::test::readFile(kDir / only));
    ASSERT_TRUE(read.ok()) << formatDiagnostics(read.errors());
    EXPECT_EQ(ps::test::csvActions(writePytorchCsv(*read, CsvFormat::ComputeComms).value()),
              fileRows(c["files"]["compute_comms"]));
    ++compared;
  }
  EXPECT_GE(compared, 140);
}

TEST(PytorchOrders, LoweringForPyTorch215IsItsActionForAction) {
  // 2.15 changed the compute+comms form (WAIT_SEND_F/B, WAIT_REDUCE_GRAD, UNSHARD eviction in
  // gathering order): --pytorch 2.15 writes 2.15's form, and reading 2.15's files back and
  // writing them keeps every action, the waits included. Its compute-only orders are 2.11's.
  const Golden& g = kGoldens[1];
  const nlohmann::json m = manifestOf(g.dir);
  int compared = 0;
  for (const auto& c : m["cases"]) {
    if (!c["files"].contains("compute_comms")) continue;
    SCOPED_TRACE(caseName(c));
    auto s = generateFor(c);
    ASSERT_TRUE(s.ok()) << formatDiagnostics(s.errors());
    const Rows golden =
        ps::test::csvActions(ps::test::readFile(g.dir / c["files"]["compute_comms"].get<std::string>()));
    EXPECT_EQ(ps::test::csvActions(writePytorchCsv(*s, CsvFormat::ComputeComms, g.target).value()), golden);
    auto read = readPytorchCsv(ps::test::readFile(g.dir / c["files"]["compute_comms"].get<std::string>()));
    ASSERT_TRUE(read.ok()) << formatDiagnostics(read.errors());
    EXPECT_TRUE(validateSchedule(*read).valid()) << formatDiagnostics(validateSchedule(*read).diagnostics);
    EXPECT_EQ(ps::test::csvActions(writePytorchCsv(*read, CsvFormat::ComputeComms, g.target).value()),
              golden);
    // Written for 2.11, the waits 2.11 cannot read are left out, and the export says so.
    EXPECT_EQ(writePytorchCsv(*read, CsvFormat::ComputeComms).value().find("WAIT"), std::string::npos);
    const auto lost = csvExportLosses(*read, CsvFormat::ComputeComms);
    ASSERT_FALSE(lost.empty());
    EXPECT_NE(lost.back().find("WAIT_SEND/WAIT_REDUCE_GRAD actions, which PyTorch 2.11 does not have"),
              std::string::npos)
        << lost.back();
    const std::string only =
        c["files"].contains("executed") ? c["files"]["executed"] : c["files"]["compute_only"];
    if (c["name"] != "GPipe" && c["name"] != "1F1B") {
      EXPECT_EQ(computeOnly(fileRows(only)),
                computeOnly(ps::test::csvActions(ps::test::readFile(g.dir / only))));
    }
    ++compared;
  }
  EXPECT_GE(compared, 90);
}

TEST(PytorchOrders, TargetVersionsAreNamedAndChecked) {
  EXPECT_EQ(parsePytorchTarget("2.11")->name(), "2.11");
  EXPECT_EQ(parsePytorchTarget("2.12.1")->name(), "2.12");
  EXPECT_TRUE(parsePytorchTarget("2.15")->atLeast(2, 15));
  for (const char* bad : {"2.10", "2.16", "3.0", "2", "2.x", "", "2.11.0.1", "2.11 "}) {
    auto t = parsePytorchTarget(bad);
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_NE(t.error().message.find("2.11 to 2.15"), std::string::npos) << t.error().message;
  }
}

TEST(PytorchOrders, ReadingPyTorchsFilesKeepsEveryAction) {
  int files = 0;
  for (const Golden& g : kGoldens) {
    const nlohmann::json m = manifestOf(g.dir);
    for (const auto& c : m["cases"]) {
      if (!c["files"].contains("compute_comms")) continue;
      SCOPED_TRACE(caseName(c) + " " + g.target.name());
      const std::string text = ps::test::readFile(g.dir / c["files"]["compute_comms"].get<std::string>());
      auto read = readPytorchCsv(text);
      ASSERT_TRUE(read.ok()) << formatDiagnostics(read.errors());
      EXPECT_EQ(ps::test::csvActions(writePytorchCsv(*read, CsvFormat::ComputeComms, g.target).value()),
                ps::test::csvActions(text));
      ++files;
    }
  }
  EXPECT_GE(files, 230);
}

TEST(PytorchOrders, OneFOneBsOrderIrIsWrongOnItsLastRank) {
  // PyTorch's Schedule1F1B._get_pipeline_order (what get_schedule_ops and the visualizer show)
  // starts its last rank at F1 and ends it at F(M): micro-batch 0 is never run forward, one that
  // does not exist is. PyTorch's own _validate_schedule refuses it; what Schedule1F1B actually
  // runs (_step_microbatches) is correct, and is what PipeStudio's 1f1b generates.
  int cases = 0;
  for (const auto& c : manifest()["cases"]) {
    if (c["name"] != "1F1B" || c.contains("error")) continue;
    SCOPED_TRACE(caseName(c));
    const int pp = c["pp"], M = c["microbatches"];
    EXPECT_NE(c["ir_validation_error"].get<std::string>().find("without first running Forward"),
              std::string::npos);
    const Rows ir = computeOnly(fileRows(c["files"]["compute_only"]));
    const Rows executed = computeOnly(fileRows(c["files"]["executed"]));
    for (int r = 0; r + 1 < pp; ++r) EXPECT_EQ(ir[static_cast<size_t>(r)], executed[static_cast<size_t>(r)]);
    const auto& last = ir.back();
    EXPECT_EQ(last.front(), std::to_string(pp - 1) + "F1");
    EXPECT_NE(std::find(last.begin(), last.end(), std::to_string(pp - 1) + "F" + std::to_string(M)),
              last.end());
    EXPECT_NE(ir.back(), executed.back());
    // PipeStudio reads the IR and its validator refuses it too, naming the missing forward.
    auto s = readPytorchCsv(ps::test::readFile(kDir / c["files"]["compute_only"].get<std::string>()));
    if (s.ok()) {
      auto rep = validateSchedule(*s);
      EXPECT_FALSE(rep.valid());
      EXPECT_NE(formatDiagnostics(rep.diagnostics).find("F0@s" + std::to_string(pp - 1) + " is missing"),
                std::string::npos)
          << formatDiagnostics(rep.diagnostics);
    } else {
      // The IR names micro-batch M, one past the last: with the count given, a reading error.
      EXPECT_NE(formatDiagnostics(s.errors()).find("micro-batch"), std::string::npos);
    }
    ++cases;
  }
  EXPECT_GE(cases, 15);
}

// --- Receives and NCCL -------------------------------------------------------------------------

namespace {

ValidationReport underNccl(const Schedule& s) {
  ValidateOptions o;
  o.comm.semantics = CommSemantics::Nccl;
  return validateSchedule(s, o);
}

bool hasCode(const ValidationReport& r, const std::string& code) {
  for (const Diagnostic& d : r.diagnostics)
    if (d.code == code) return true;
  return false;
}

PytorchTarget target(int minor, RecvPlacement recv) {
  PytorchTarget t{2, minor};
  t.recv = recv;
  return t;
}

}  // namespace

TEST(PytorchOrders, DeferredReceivesArePyTorchsActionForAction) {
  // --defer-recv pytorch is what _PipelineScheduleRuntime(defer_pp_recv=True) of PyTorch 2.15
  // runs (its _defer_recv_ops after _add_wait_send), for every class and size of the manifest.
  const Golden& g = kGoldens[1];
  const nlohmann::json m = manifestOf(g.dir);
  int compared = 0;
  for (const auto& c : m["cases"]) {
    if (!c["files"].contains("compute_comms_deferred")) continue;
    SCOPED_TRACE(caseName(c));
    auto s = generateFor(c);
    ASSERT_TRUE(s.ok()) << formatDiagnostics(s.errors());
    const Rows golden = ps::test::csvActions(
        ps::test::readFile(g.dir / c["files"]["compute_comms_deferred"].get<std::string>()));
    auto written = writePytorchCsv(*s, CsvFormat::ComputeComms, target(15, RecvPlacement::Deferred));
    ASSERT_TRUE(written.ok()) << formatDiagnostics(written.errors());
    EXPECT_EQ(ps::test::csvActions(*written), golden);
    // The pass alone over PyTorch's own undeferred lowering gives the same.
    auto asap = readPytorchCsv(ps::test::readFile(g.dir / c["files"]["compute_comms"].get<std::string>()));
    ASSERT_TRUE(asap.ok());
    auto deferred = deferRecvOps(*asap);
    ASSERT_TRUE(deferred.ok()) << formatDiagnostics(deferred.errors());
    EXPECT_EQ(ps::test::csvActions(writePytorchCsv(*deferred, CsvFormat::ComputeComms, g.target).value()),
              golden);
    ++compared;
  }
  EXPECT_GE(compared, 100);
  // defer_pp_recv came with PyTorch 2.13.
  auto s = generateSchedule(ScheduleKind::Interleaved1F1B, {2, 4});
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(lowerToPytorchComms(*s, target(12, RecvPlacement::Deferred)).ok());
  EXPECT_TRUE(lowerToPytorchComms(*s, target(13, RecvPlacement::Deferred)).ok());
}

namespace {

// Every schedule PipeStudio makes: each generator kind over ranks and micro-batches (and two and
// three stages per rank where the kind takes them), a searched schedule, the hand-edited designs.
std::vector<std::pair<std::string, Schedule>> everySchedule() {
  std::vector<std::pair<std::string, Schedule>> out;
  for (ScheduleKind k : allScheduleKinds())
    for (int d : {2, 3, 4, 8})
      for (int m : {1, 2, d - 1, d, d + 1, 2 * d, 2 * d + 1, 3 * d})
        for (int chunks : {0, 3}) {
          if (m < 1 || (chunks == 3 && defaultChunks(k) == 1 && k != ScheduleKind::ZBH1)) continue;
          if (chunks == 3 && (k == ScheduleKind::ZBV || k == ScheduleKind::DualPipeV)) continue;
          auto s = generateSchedule(k, GeneratorOptions{d, m, chunks});
          if (!s.ok() || !validateSchedule(*s).valid()) continue;  // sizes the kind does not serve
          if (s->pipeline.routed()) continue;  // DualPipe's routes have no PyTorch form (refused)
          out.emplace_back(std::string(scheduleKindName(k)) + " d=" + std::to_string(d) +
                               " m=" + std::to_string(m) + (chunks ? " chunks=3" : ""),
                           std::move(*s));
        }
  CostProfile p;
  for (int i = 0; i < 8; ++i) {
    LayerCost l;
    l.name = "L" + std::to_string(i);
    l.forwardMs = 1 + (i == 7 ? 2 : 0);
    l.backwardInputMs = l.backwardWeightMs = 1;
    l.activationBytes = 100;
    l.outputBytes = 10;
    p.layers.push_back(l);
  }
  SearchOptions so;
  so.devices = 4;
  so.microbatches = 8;
  so.maxEvaluations = 60;
  so.timeLimitSeconds = 30;
  so.randomSamples = 10;
  so.localImprovementRounds = 20;
  so.allowRoutes = false;  // a schedule for PyTorch: DualPipe's routes have none
  if (auto r = searchSchedule(p, so); r.ok()) out.emplace_back("searched d=4 m=8", r->best);
  for (const auto& e : fs::directory_iterator(fs::path(PIPESTUDIO_TEST_DATA_DIR) / "designs")) {
    ScheduleLoadOptions lo;
    lo.path = e.path().string();
    if (auto s = loadScheduleFile(lo); s.ok()) out.emplace_back(e.path().filename().string(), std::move(*s));
  }
  return out;
}

}  // namespace

TEST(PytorchOrders, EveryExportRunsUnderNccl) {
  // The compute+comms export cannot hang: PyTorch's own lowering (SEND right after the producer,
  // RECV at the moment the peer sends, so each rank's stream meets its peers' in one global
  // order) and PipeStudio's deferred placement run to their end under nccl and post every
  // peer's messages in its send order, for every schedule PipeStudio makes. PyTorch's
  // defer_pp_recv order is PipeStudio's wherever it runs; where it does not, it is said why.
  const auto schedules = everySchedule();
  int checked = 0, pytorchHangs = 0, pytorchReorders = 0, designs = 0, searched = 0;
  std::string firstHang, firstReorder;
  for (const auto& [name, s] : schedules) {
    SCOPED_TRACE(name);
    designs += name.find(".pipe") != std::string::npos;
    searched += name.rfind("searched", 0) == 0;
    for (const PytorchTarget& t :
         {target(11, RecvPlacement::Asap), target(15, RecvPlacement::Asap),
          target(15, RecvPlacement::DeferredSafe), target(13, RecvPlacement::DeferredSafe)}) {
      auto lowered = lowerToPytorchComms(s, t);
      ASSERT_TRUE(lowered.ok()) << formatDiagnostics(lowered.errors());
      const ValidationReport r = underNccl(*lowered);
      EXPECT_TRUE(r.valid()) << recvPlacementName(t.recv) << " " << t.name() << ": "
                             << formatDiagnostics(r.diagnostics);
    }
    auto pytorch = lowerToPytorchComms(s, target(15, RecvPlacement::Deferred));
    ASSERT_TRUE(pytorch.ok()) << formatDiagnostics(pytorch.errors());
    const ValidationReport pr = underNccl(*pytorch);
    if (pr.valid()) {
      EXPECT_EQ(*lowerToPytorchComms(s, target(15, RecvPlacement::DeferredSafe)), *pytorch);
    } else {
      const bool hang = hasCode(pr, "validate.deadlock"), reorder = hasCode(pr, "validate.comm-order");
      EXPECT_TRUE(hang || reorder) << formatDiagnostics(pr.diagnostics);
      if (hang && firstHang.empty()) firstHang = name;
      if (reorder && firstReorder.empty()) firstReorder = name;
      pytorchHangs += hang;
      pytorchReorders += reorder;
    }
    ++checked;
  }
  EXPECT_GE(checked, 150);
  EXPECT_EQ(designs, 2);
  EXPECT_EQ(searched, 1);
  std::cout << "[ info ] " << checked << " schedules; PyTorch's defer_pp_recv hangs under nccl for "
            << pytorchHangs << " (first: " << firstHang << ") and posts a peer's messages out of order for "
            << pytorchReorders << " (first: " << firstReorder << ")\n";
}
