// PyTorch's own schedules as PyTorch's runtime executes them: both CSV forms of the seven
// schedule classes, as torch 2.11 wrote them (tests/data/pytorch/), are valid, round-trip
// through .pipe, and simulate alike; explicit SEND/RECV are posted asynchronously (_batch_p2p) and waited at
// the consuming compute action (_wait_batch_p2p); UNSHARD / RESHARD / REDUCE_GRAD are checked and simulated.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "csv_cells.h"
#include "fixtures/files.h"
#include "fixtures/schedules.h"
#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/analysis/validator.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/io/pytorch_csv.h"
#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/core/planning/generators.h"

using namespace ps::core;
using ps::test::B;
using ps::test::F;
namespace fs = std::filesystem;

namespace {

const fs::path kDir = fs::path(PIPESTUDIO_TEST_DATA_DIR) / "pytorch";

using ps::test::readFile;

// PyTorch's files, but for the order IR of Schedule1F1B, which is wrong on its last rank and
// refused by PyTorch itself (tests/core/pytorch_orders_test.cpp states it).
std::vector<fs::path> csvFiles() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(kDir)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() != ".csv" ||
        (name.rfind("1F1B_", 0) == 0 && name.find("_compute_only") != std::string::npos))
      continue;
    out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The compute-only file of a PyTorch case: what its class runs (the executed order of the
// single-stage classes, the order IR of the others).
fs::path computeOnlyTwin(const std::string& commsName) {
  const std::string base = commsName.substr(0, commsName.find("_compute_comms.csv"));
  return fs::exists(kDir / (base + "_executed.csv")) ? kDir / (base + "_executed.csv")
                                                     : kDir / (base + "_compute_only.csv");
}

std::vector<std::vector<std::string>> actions(const std::string& csv) {
  return ps::test::csvActions(csv);
}

Schedule readCsv(const std::string& text) {
  auto r = readPytorchCsv(text);
  EXPECT_TRUE(r.ok()) << formatDiagnostics(r.errors());
  return r.ok() ? *r : Schedule{};
}

// Stages with different times so that a wrong wait shows: F = 1 + s/4, I = W = F.
CostProfile stagedProfile(int stages) {
  CostProfile p;
  for (int s = 0; s < stages; ++s) {
    LayerCost l;
    l.forwardMs = 1 + 0.25 * s;
    l.backwardInputMs = l.forwardMs;
    l.backwardWeightMs = l.forwardMs;
    l.outputBytes = 1000;
    l.weightBytes = 4000;
    p.layers.push_back(l);
  }
  return p;
}

Timeline run(const Schedule& s, const CostProfile& p) {
  auto m = makeSimulationModel(s, p);
  EXPECT_TRUE(m.ok()) << formatDiagnostics(m.errors());
  auto t = simulate(s, *m);
  EXPECT_TRUE(t.ok()) << formatDiagnostics(t.errors());
  return t.ok() ? *t : Timeline{};
}

const TimelineOp* find(const Timeline& t, Op op) {
  for (const auto& o : t.ops)
    if (o.op == op) return &o;
  return nullptr;
}

// F = 1, B = 2 (I = W = 1) on every stage, transfers of commMs.
CostProfile uniformFB(double commMs, int stages) {
  CostProfile p = uniformCostProfile("F=1,B=2", stages).value();
  p.fixedCommMs = commMs;
  return p;
}

// The start of each op in `t` (which must hold it).
void expectStarts(const Timeline& t, const std::vector<std::pair<Op, double>>& starts) {
  for (const auto& [op, start] : starts) {
    SCOPED_TRACE(std::string(builtinKindName(op.kind)) + std::to_string(op.microbatch) + "@s" +
                 std::to_string(op.stage));
    EXPECT_DOUBLE_EQ(find(t, op)->start, start);
  }
}

void expectValid(const Schedule& s) {
  auto rep = validateSchedule(s);
  EXPECT_TRUE(rep.valid()) << formatDiagnostics(rep.diagnostics);
}

bool hasCode(const ValidationReport& r, const std::string& code) {
  return std::any_of(r.diagnostics.begin(), r.diagnostics.end(),
                     [&](const Diagnostic& d) { return d.code == code; });
}

}  // namespace

TEST(PytorchFidelity, TestFilesCoverEveryClassAndBothForms) {
  const auto files = csvFiles();
  for (const char* cls : {"GPipe", "1F1B", "Interleaved1F1B", "LoopedBFS", "InterleavedZeroBubble",
                          "ZBVZeroBubble", "DualPipeV"})
    for (const char* form : {"_compute_only", "_compute_comms"}) {
      const bool found = std::any_of(files.begin(), files.end(), [&](const fs::path& f) {
        const std::string n = f.filename().string();
        // 1F1B's compute-only order is the one it runs (its IR is left out, see csvFiles).
        const bool formOk = n.find(form) != std::string::npos || (std::string(form) == "_compute_only" &&
                                                                  n.find("_executed") != std::string::npos);
        return n.rfind(std::string(cls) + "_", 0) == 0 && formOk;
      });
      EXPECT_TRUE(found) << cls << " " << form;
    }
  // The vocabularies: pairs, split backwards, stage actions and communication all occur.
  std::string all;
  for (const auto& f : files) all += readFile(f);
  for (const char* token : {"OVERLAP_F_B", "I0", "W0", "B0", "UNSHARD", "RESHARD", "REDUCE_GRAD", "SEND_F",
                            "RECV_F", "SEND_B", "RECV_B", ",,"})
    EXPECT_NE(all.find(token), std::string::npos) << token;
}

TEST(PytorchFidelity, EveryFileIsValidAndRoundTripsThroughPipe) {
  for (const auto& f : csvFiles()) {
    SCOPED_TRACE(f.filename().string());
    const std::string in = readFile(f);
    CsvReadOptions o;
    o.filename = f.filename().string();
    auto s = readPytorchCsv(in, o);
    ASSERT_TRUE(s.ok()) << formatDiagnostics(s.errors());
    auto rep = validateSchedule(*s);
    EXPECT_TRUE(rep.valid()) << formatDiagnostics(rep.diagnostics);
    EXPECT_FALSE(hasCode(rep, "validate.unshard-unused")) << formatDiagnostics(rep.diagnostics);
    // CSV -> .pipe -> CSV in the same form keeps every action of every rank, in order.
    auto back = parseDsl(printDsl(*s));
    ASSERT_TRUE(back.ok()) << formatDiagnostics(back.errors());
    EXPECT_EQ(*back, *s);
    // compute_comms keeps them all; compute_only holds the compute actions only (PyTorch's
    // compute_only loader refuses REDUCE_GRAD, which the single-stage classes' IR carries).
    if (f.filename().string().find("comms") != std::string::npos) {
      // ... byte for byte: PyTorch's file has no idle cell in this form, and rows end in \r\n
      // as Python's csv module writes them.
      EXPECT_EQ(writePytorchCsv(*back, CsvFormat::ComputeComms).value(), in);
    } else {
      auto computeOnly = actions(in);
      for (auto& row : computeOnly)
        row.erase(std::remove_if(row.begin(), row.end(),
                                 [](const std::string& a) {
                                   return a.empty() || a.find("REDUCE_GRAD") != std::string::npos;
                                 }),
                  row.end());
      EXPECT_EQ(actions(writePytorchCsv(*back, CsvFormat::ComputeOnly).value()), computeOnly);
    }
  }
}

TEST(PytorchFidelity, ComputeOnlyAndComputeCommsSimulateAlike) {
  int pairs = 0;
  for (const auto& f : csvFiles()) {
    std::string name = f.filename().string();
    if (name.find("_compute_comms.csv") == std::string::npos) continue;
    SCOPED_TRACE(name);
    Schedule only = readCsv(readFile(computeOnlyTwin(name)));
    Schedule comms = readCsv(readFile(f));
    ASSERT_EQ(only.pipeline.stageToDevice, comms.pipeline.stageToDevice);
    CostProfile p = stagedProfile(only.pipeline.stages);
    // Free transfers, a fixed transfer time and the link model: the same makespan each time,
    // since PyTorch posts each SEND right after its producer and RECVs never wait.
    for (int variant = 0; variant < 3; ++variant) {
      if (variant == 1) p.fixedCommMs = 0.5;
      if (variant == 2) {
        p.fixedCommMs.reset();
        p.link = LinkCost{0.05, 2000};
      }
      Timeline a = run(only, p), b = run(comms, p);
      ASSERT_TRUE(a.complete && b.complete) << variant;
      EXPECT_DOUBLE_EQ(a.metrics.makespan, b.metrics.makespan) << "variant " << variant;
      // Every compute op starts at the same time in both forms.
      for (const auto& o : a.ops) {
        const TimelineOp* twin = find(b, o.op);
        ASSERT_NE(twin, nullptr) << only.opName(o.op);
        EXPECT_DOUBLE_EQ(o.start, twin->start) << only.opName(o.op) << " variant " << variant;
      }
    }
    ++pairs;
  }
  EXPECT_GE(pairs, 140);
}

TEST(PytorchFidelity, IssueExampleInterleavedTwoRanksTwoMicrobatches) {
  // PyTorch's Interleaved1F1B, 2 ranks x 2 stages, 2 micro-batches: rank 0's 0F1 must not
  // wait behind 2RECV_F0, which it does not depend on.
  Schedule only = readCsv(readFile(kDir / "Interleaved1F1B_pp2_mb2_spr2_compute_only.csv"));
  Schedule comms = readCsv(readFile(kDir / "Interleaved1F1B_pp2_mb2_spr2_compute_comms.csv"));
  CostProfile p = uniformFB(0, 4);
  Timeline a = run(only, p), b = run(comms, p);
  EXPECT_DOUBLE_EQ(a.metrics.makespan, b.metrics.makespan);
  ASSERT_NE(find(b, Op{OpKind::F, 0, 1}), nullptr);
  EXPECT_DOUBLE_EQ(find(b, Op{OpKind::F, 0, 1})->start, 1.0);
}

TEST(PytorchFidelity, ReceivePostedEarlyDoesNotBlockTheRank) {
  // Rank 0 posts RECV_B0 before F1, rank 1 posts both RECV_F before F0. With blocking
  // receives this deadlocks (rank 0 would wait at RECV_B0 for a gradient behind rank 1's
  // RECV_F1, which waits for the SEND_F1 behind RECV_B0); posted asynchronously it runs.
  // F = 1, B = 2, each transfer 0.5:
  //   rank 0: F0 [0,1], F1 [1,2], B0 waits for the gradient sent at 4.5: [5,7], B1 [8,10]
  //   rank 1: F0 [1.5,2.5], B0 [2.5,4.5], F1 [4.5,5.5], B1 [5.5,7.5]
  Schedule s = readCsv(
      "0F0,0SEND_F0,0RECV_B0,0F1,0SEND_F1,0RECV_B1,0B0,0B1\n"
      "1RECV_F0,1RECV_F1,1F0,1B0,1SEND_B0,1F1,1B1,1SEND_B1\n");
  expectValid(s);
  Timeline t = run(s, uniformFB(0.5, 2));
  ASSERT_TRUE(t.complete) << formatDiagnostics(t.diagnostics);
  EXPECT_DOUBLE_EQ(t.metrics.makespan, 10.0);
  expectStarts(t, {{F(0, 1), 1.0}, {F(1, 0), 1.5}, {F(1, 1), 4.5}, {B(0, 0), 5.0}, {B(0, 1), 8.0}});
  // A RECV takes no time and is drawn where it is posted.
  EXPECT_DOUBLE_EQ(find(t, Op{OpKind::RecvB, 0, 0})->start, 1.0);
  EXPECT_DOUBLE_EQ(find(t, Op{OpKind::RecvB, 0, 0})->end, 1.0);
  // The compute-only form of the same orders takes the same time.
  Schedule only = readCsv("0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
  EXPECT_DOUBLE_EQ(run(only, uniformFB(0.5, 2)).metrics.makespan, 10.0);
}

TEST(PytorchFidelity, OverlappedPairOnAVShape) {
  // V-shape over 2 ranks: stages 0 and 3 on rank 0, 1 and 2 on rank 1 (the turn 1 -> 2 stays
  // on rank 1: no SEND/RECV). Rank 0 overlaps F of micro-batch 1 with B of micro-batch 0 on
  // stage 3. F = 1, B = 2, pair = F + B = 3, transfers 0.5, one channel per direction:
  //   r0: 0F0 [0,1]; 3F0 [4,5] (2F0 sent at 3.5); pair [5,8] sends F1 [8,8.5] then B0 [8.5,9];
  //       3F1 [11,12]; 3B1 [12,14] (sent [14,14.5]); 0B0 [15,17]; 0B1 [19,21]
  //   r1: 1F0 [1.5,2.5]; 2F0 [2.5,3.5]; 1F1 [8.5,9.5]; 2F1 [9.5,10.5] (sent [10.5,11]);
  //       2B0 [10.5,12.5]; 1B0 [12.5,14.5] (sent [14.5,15]); 2B1 [14.5,16.5]; 1B1 [16.5,18.5]
  const char* comms =
      "0F0,0SEND_F0,3RECV_F0,3F0,(0F1;3B0)OVERLAP_F_B,0SEND_F1,3SEND_B0,3RECV_F1,3F1,3B1,3SEND_B1,0RECV_B0,"
      "0B0,"
      "0RECV_B1,0B1\n"
      "1RECV_F0,1F0,2F0,2SEND_F0,1RECV_F1,1F1,2F1,2SEND_F1,2RECV_B0,2B0,1B0,1SEND_B0,2RECV_B1,2B1,1B1,1SEND_"
      "B1\n";
  Schedule s = readCsv(comms);
  EXPECT_EQ(s.pipeline.placementKind, PlacementKind::VShape);
  expectValid(s);
  Timeline t = run(s, uniformFB(0.5, 4));
  ASSERT_TRUE(t.complete) << formatDiagnostics(t.diagnostics);
  EXPECT_DOUBLE_EQ(t.metrics.makespan, 21.0);
  expectStarts(t, {{F(3, 0), 4.0},
                   {F(0, 1), 5.0},
                   {F(1, 1), 8.5},
                   {B(2, 0), 10.5},
                   {F(3, 1), 11.0},
                   {B(0, 0), 15.0},
                   {B(0, 1), 19.0}});
  Schedule only = readCsv("0F0,3F0,(0F1;3B0)OVERLAP_F_B,3F1,3B1,0B0,0B1\n1F0,2F0,1F1,2F1,2B0,1B0,2B1,1B1\n");
  EXPECT_EQ(actions(writePytorchCsv(only, CsvFormat::ComputeOnly).value()),
            actions(writePytorchCsv(s, CsvFormat::ComputeOnly).value()));
  EXPECT_DOUBLE_EQ(run(only, uniformFB(0.5, 4)).metrics.makespan, 21.0);
  EXPECT_DOUBLE_EQ(run(only, uniformFB(0, 4)).metrics.makespan, run(s, uniformFB(0, 4)).metrics.makespan);
}

TEST(PytorchFidelity, DataNeverSentIsStillADeadlock) {
  // Rank 0's B0 waits for the gradient that rank 1 sends after its F0, which waits for the
  // activation rank 0 sends only after B0.
  Schedule s = readCsv("0F0,0RECV_B0,0B0,0SEND_F0\n1RECV_F0,1F0,1B0,1SEND_B0\n");
  auto rep = validateSchedule(s);
  ASSERT_TRUE(hasCode(rep, "validate.deadlock")) << formatDiagnostics(rep.diagnostics);
  Timeline t = run(s, uniformFB(0, 2));
  EXPECT_FALSE(t.complete);
  // A receive posted after the op that consumes it: the runtime raises "Computing ... before
  // receiving input"; here the op waits for its own later RECV.
  Schedule late = readCsv("0F0,0SEND_F0,0RECV_B0,0B0\n1F0,1RECV_F0,1B0,1SEND_B0\n");
  auto rep2 = validateSchedule(late);
  ASSERT_TRUE(hasCode(rep2, "validate.deadlock")) << formatDiagnostics(rep2.diagnostics);
  EXPECT_NE(formatDiagnostics(rep2.diagnostics).find("F0@s1 for RECV_F0@s1 on device 1"), std::string::npos)
      << formatDiagnostics(rep2.diagnostics);
}

TEST(PytorchFidelity, StageActionsTakeTimeAndHoldMemory) {
  // One stage, 1000 weight bytes, data-parallel bandwidth 100 B/ms: UNSHARD 10 ms (on the copy
  // stream; F waits for it), F [10,11], B [11,13], REDUCE_GRAD 10 ms after B: [13,23].
  // Memory: static 1000 x (1 + 1 + 6) = 8000, + 1000 gathered from UNSHARD to RESHARD.
  Schedule s = readCsv("0UNSHARD,0F0,0B0,0REDUCE_GRAD,0RESHARD\n");
  CostProfile p = uniformCostProfile("F=1,B=2,weight=1000", 1).value();
  p.dataParallelBandwidthBytesPerMs = 100;
  auto rep = validateSchedule(s);
  EXPECT_TRUE(rep.valid()) << formatDiagnostics(rep.diagnostics);
  Timeline t = run(s, p);
  ASSERT_TRUE(t.complete);
  EXPECT_DOUBLE_EQ(find(t, Op{OpKind::Unshard, 0, -1})->end, 10.0);
  EXPECT_DOUBLE_EQ(find(t, Op{OpKind::F, 0, 0})->start, 10.0);
  EXPECT_DOUBLE_EQ(find(t, Op{OpKind::ReduceGrad, 0, -1})->start, 13.0);
  EXPECT_DOUBLE_EQ(find(t, Op{OpKind::ReduceGrad, 0, -1})->end, 23.0);
  EXPECT_DOUBLE_EQ(t.metrics.makespan, 23.0);
  EXPECT_DOUBLE_EQ(t.metrics.devices[0].busy, 3.0);  // the collectives are not compute
  EXPECT_EQ(t.metrics.devices[0].staticBytes, 8000);
  EXPECT_EQ(t.metrics.devices[0].peakMemoryBytes, 9000);
  ASSERT_FALSE(t.memory[0].empty());
  EXPECT_EQ(t.memory[0].back().bytes, 8000);
  // Without a data-parallel bandwidth they take no time: the schedule runs as without them.
  p.dataParallelBandwidthBytesPerMs = 0;
  EXPECT_DOUBLE_EQ(run(s, p).metrics.makespan, 3.0);
  // The bandwidth field reads and writes back.
  auto parsed = parseCostProfile(
      R"({"layers":[{"forward_ms":1,"backward_ms":2}],"data_parallel":{"bandwidth_bytes_per_ms":250}})");
  ASSERT_TRUE(parsed.ok()) << formatDiagnostics(parsed.errors());
  EXPECT_DOUBLE_EQ(parsed->dataParallelBandwidthBytesPerMs, 250);
  EXPECT_DOUBLE_EQ(parseCostProfile(costProfileToJson(*parsed))->dataParallelBandwidthBytesPerMs, 250);
}

TEST(PytorchFidelity, StageActionsAreValidatedInDeviceOrder) {
  struct Case {
    const char* csv;
    const char* code;
    const char* text;
  };
  const Case cases[] = {
      {"0F0,0UNSHARD,0B0,0RESHARD\n", "validate.sharded", "device 0 step 0: F0@s0 runs before UNSHARD@s0"},
      {"0UNSHARD,0F0,0RESHARD,0B0\n", "validate.sharded", "B0@s0 runs after RESHARD@s0 (device 0 step 2)"},
      {"0UNSHARD,0UNSHARD,0F0,0B0,0RESHARD\n", "validate.unshard", "UNSHARD@s0 unshards stage 0 again"},
      {"0RESHARD,0UNSHARD,0F0,0B0\n", "validate.reshard",
       "RESHARD@s0 reshards stage 0, which is not unsharded"},
      {"0F0,0F1,0B0,0REDUCE_GRAD,0B1\n", "validate.reduce-grad",
       "REDUCE_GRAD@s0 comes before B1@s0 (device 0 step 4), the stage's last backward"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.csv);
    auto rep = validateSchedule(readCsv(c.csv));
    EXPECT_TRUE(hasCode(rep, c.code)) << formatDiagnostics(rep.diagnostics);
    EXPECT_NE(formatDiagnostics(rep.diagnostics).find(c.text), std::string::npos)
        << formatDiagnostics(rep.diagnostics);
  }
  // A gathered stage nobody uses is a warning only.
  auto rep = validateSchedule(readCsv("0UNSHARD,0RESHARD,0UNSHARD,0F0,0B0,0RESHARD\n"));
  EXPECT_TRUE(rep.valid());
  EXPECT_TRUE(hasCode(rep, "validate.unshard-unused")) << formatDiagnostics(rep.diagnostics);
}

TEST(PytorchFidelity, ProfileReferenceIsRelativeToThePipe) {
  EXPECT_EQ(profileReferenceFor("/a/b/p.json", "/a/c/x.pipe"), "../b/p.json");
  EXPECT_EQ(profileReferenceFor("/a/p.json", "/a/x.pipe"), "p.json");
  EXPECT_EQ(profileReferenceFor("/a/p.json", "-"), "/a/p.json");
  EXPECT_EQ(profileReferenceFor("", "/a/x.pipe"), "");
}

TEST(PytorchFidelity, ReceivesPostedInAnotherOrderThanSentAreRefused) {
  // PyTorch's own ZB-V lowering, 2 ranks x 4 micro-batches, with rank 1's 1RECV_F2 and 2RECV_B0
  // swapped: rank 0 sends 0SEND_F2 before 3SEND_B0 while rank 1 posts 2RECV_B0 before 1RECV_F2.
  // Gloo (and NCCL) pair a rank's receives with its peer's sends in posting order, so stage 2
  // would take micro-batch 2's activation as micro-batch 0's gradient, silently.
  const std::string good = readFile(kDir / "ZBVZeroBubble_pp2_mb4_spr2_compute_comms.csv");
  // Swaps two cells of rank 1's row (the second line).
  auto swap = [](std::string text, const std::string& a, const std::string& b) {
    const size_t row1 = text.find('\n') + 1, pa = text.find(a, row1), pb = text.find(b, row1);
    text.replace(pb, b.size(), a);
    text.replace(pa, a.size(), b);
    return text;
  };
  const std::string bad = swap(good, "1RECV_F2", "2RECV_B0");
  ASSERT_NE(bad, good);
  expectValid(readCsv(good));
  auto rep = validateSchedule(readCsv(bad));
  ASSERT_TRUE(hasCode(rep, "validate.comm-order")) << formatDiagnostics(rep.diagnostics);
  EXPECT_NE(
      formatDiagnostics(rep.diagnostics)
          .find("device 0's 3rd message to device 1 is SEND_F2@s0 (device 0 step 8), but the 3rd receive "
                "device 1 posts from it is RECV_B0@s2"),
      std::string::npos)
      << formatDiagnostics(rep.diagnostics);
  // Every lowering PipeStudio writes posts receives in its peers' send order.
  for (ScheduleKind k : allScheduleKinds())
    for (int D : {2, 3, 4}) {
      auto g = generateSchedule(k, GeneratorOptions{D, 3 * D});
      if (!g.ok() || g->pipeline.routed()) continue;  // no CSV for routes (routes_test.cpp)
      SCOPED_TRACE(std::string(scheduleKindName(k)) + " D=" + std::to_string(D));
      auto lowered = readCsv(writePytorchCsv(*g, CsvFormat::ComputeComms).value());
      EXPECT_FALSE(hasCode(validateSchedule(lowered), "validate.comm-order"));
    }
}
