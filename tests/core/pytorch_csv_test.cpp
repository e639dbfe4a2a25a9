#include "pipestudio/core/io/pytorch_csv.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "csv_cells.h"
#include "pipestudio/core/analysis/validator.h"
#include "pipestudio/core/io/trace_import.h"
#include "pipestudio/core/planning/generators.h"

using namespace ps::core;

namespace {

std::string readData(const std::string& name) {
  std::ifstream in(std::string(PIPESTUDIO_TEST_DATA_DIR) + "/" + name, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::vector<std::string>> actions(const std::string& csv) {
  return ps::test::csvActions(csv);
}

std::string write(const Schedule& s, CsvFormat f = CsvFormat::ComputeOnly) {
  auto r = writePytorchCsv(s, f);
  EXPECT_TRUE(r.ok()) << formatDiagnostics(r.errors());
  return r.ok() ? *r : std::string();
}

}  // namespace

TEST(PytorchCsv, ReadsComputeOnlyOneFOneB) {
  auto r = readPytorchCsv(readData("synthetic_1f1b_compute_only.csv"));
  ASSERT_TRUE(r.ok()) << formatDiagnostics(r.errors());
  const Schedule& s = *r;
  EXPECT_EQ(s.pipeline.devices, 2);
  EXPECT_EQ(s.pipeline.stages, 2);
  EXPECT_EQ(s.pipeline.microbatches, 3);
  EXPECT_EQ(s.pipeline.placementKind, PlacementKind::Linear);
  // Same orders as our 1F1B generator for D=2, M=3.
  auto g = generateSchedule(ScheduleKind::OneFOneB, GeneratorOptions{2, 3});
  EXPECT_EQ(s.devices, g->devices);
  EXPECT_TRUE(validateSchedule(s).valid());
}

TEST(PytorchCsv, ReadsComputeCommsAndValidates) {
  auto r = readPytorchCsv(readData("synthetic_1f1b_compute_comms.csv"));
  ASSERT_TRUE(r.ok()) << formatDiagnostics(r.errors());
  EXPECT_EQ(r->devices[1][0].first, (Op{OpKind::RecvF, 1, 0}));
  EXPECT_EQ(r->devices[0][1].first, (Op{OpKind::SendF, 0, 0}));
  auto rep = validateSchedule(*r);
  EXPECT_TRUE(rep.valid()) << formatDiagnostics(rep.diagnostics);
}

TEST(PytorchCsv, SpacesEmptyCellsStageActionsAndOverlap) {
  std::string csv =
      " 0UNSHARD , 0F0,,  0F1 ,(0F2;3B0)OVERLAP_F_B\n"
      "1F0,\"1F1\",  ,1B0, 2F0\n";
  auto r = readPytorchCsv(csv);
  ASSERT_TRUE(r.ok()) << formatDiagnostics(r.errors());
  ASSERT_EQ(r->devices[0].size(), 4u);
  EXPECT_EQ(r->devices[0][0].first, (Op{OpKind::Unshard, 0, -1}));
  EXPECT_EQ(r->devices[0][2].first, (Op{OpKind::F, 0, 1}));
  ASSERT_TRUE(r->devices[0][3].overlapped());
  EXPECT_EQ(r->devices[0][3].first, (Op{OpKind::F, 0, 2}));
  EXPECT_EQ(*r->devices[0][3].second, (Op{OpKind::B, 3, 0}));
  EXPECT_EQ(r->devices[1][1].first, (Op{OpKind::F, 1, 1}));
  // Stages 0 and 3 on rank 0, 1 and 2 on rank 1: a V.
  EXPECT_EQ(r->pipeline.stages, 4);
  EXPECT_EQ(r->pipeline.placementKind, PlacementKind::VShape);
}

TEST(PytorchCsv, StageInNoRowIsAnError) {
  auto r2 = readPytorchCsv("0F0\n2F0\n");
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.error().message.find("stage 1 appears in no row"), std::string::npos) << r2.error().message;
}

TEST(PytorchCsv, InfersVShapeAndInterleavedPlacements) {
  for (ScheduleKind k : {ScheduleKind::ZBV, ScheduleKind::DualPipeV, ScheduleKind::Interleaved1F1B}) {
    auto g = generateSchedule(k, GeneratorOptions{4, 8});
    ASSERT_TRUE(g.ok());
    auto r = readPytorchCsv(write(*g));
    ASSERT_TRUE(r.ok()) << formatDiagnostics(r.errors());
    EXPECT_EQ(r->pipeline, g->pipeline) << scheduleKindName(k);
    EXPECT_EQ(r->devices, g->devices) << scheduleKindName(k);
  }
  // A placement that is none of the named ones stays explicit.
  auto r = readPytorchCsv("0F0,2F0,2B0,0B0\n1F0,1B0\n");
  ASSERT_TRUE(r.ok()) << formatDiagnostics(r.errors());
  EXPECT_EQ(r->pipeline.placementKind, PlacementKind::Explicit);
  EXPECT_EQ(r->pipeline.stageToDevice, (std::vector<int>{0, 1, 0}));
}

TEST(PytorchCsv, DiagnosticsPointAtRowAndCell) {
  CsvReadOptions o;
  o.filename = "bad.csv";
  auto r = readPytorchCsv(readData("synthetic_bad_action.csv"), o);
  ASSERT_FALSE(r.ok());
  const Diagnostic& d = r.error();
  EXPECT_EQ(d.location.file, "bad.csv");
  EXPECT_EQ(d.location.line, 1);
  EXPECT_EQ(d.location.column, 11);
  EXPECT_NE(d.message.find("'1X0'"), std::string::npos) << d.message;
  EXPECT_NE(d.message.find("unknown action type 'X'"), std::string::npos) << d.message;
  EXPECT_NE(formatDiagnostic(d).find("bad.csv:1:11: error:"), std::string::npos) << formatDiagnostic(d);

  auto lower = readPytorchCsv("0f0\n");
  ASSERT_FALSE(lower.ok());
  EXPECT_NE(lower.error().hint.find("did you mean F?"), std::string::npos);

  auto conflict = readPytorchCsv("0F0,1F0\n1B0\n", o);
  ASSERT_FALSE(conflict.ok());
  EXPECT_EQ(conflict.error().location.line, 2);
  EXPECT_NE(conflict.error().message.find("stage 1 appears on rank 1 but already on rank 0 (bad.csv:1:5)"),
            std::string::npos)
      << conflict.error().message;

  auto noMb = readPytorchCsv("0F\n");
  ASSERT_FALSE(noMb.ok());
  EXPECT_NE(noMb.error().message.find("needs a micro-batch number"), std::string::npos);
  auto mbOnStageAction = readPytorchCsv("0RESHARD1\n");
  ASSERT_FALSE(mbOnStageAction.ok());
  auto partial = readPytorchCsv("0F0x\n");  // matched in full, not by prefix
  ASSERT_FALSE(partial.ok());
  auto pair3 = readPytorchCsv("(0F0;0B1;0F2)OVERLAP_F_B\n");
  ASSERT_FALSE(pair3.ok());
  EXPECT_NE(pair3.error().message.find("exactly two actions"), std::string::npos);
  CsvReadOptions small;
  small.microbatches = 2;
  auto range = readPytorchCsv("0F0,0F5\n", small);
  ASSERT_FALSE(range.ok());
  EXPECT_EQ(range.error().location.column, 5);
  EXPECT_FALSE(readPytorchCsv("").ok());
  EXPECT_FALSE(readPytorchCsv(" , ,\n").ok());
}

TEST(PytorchCsv, ReportsEveryBadCellUpToTheLimit) {
  CsvReadOptions o;
  o.maxErrors = 3;
  auto r = readPytorchCsv("0Q0,0Q1,0Q2,0Q3,0Q4\n", o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.errors().size(), 3u);
  EXPECT_EQ(r.errors()[1].location.column, 5);
}

TEST(PytorchCsv, RoundTripKeepsEveryActionInOrder) {
  std::string in = readData("synthetic_1f1b_compute_only.csv");
  auto r = readPytorchCsv(in);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(actions(write(*r)), actions(in));
  std::string spaced = "0UNSHARD,0F0, ,(0F1;0B0)OVERLAP_F_B,0B1,0REDUCE_GRAD,0RESHARD\n";
  r = readPytorchCsv(spaced);
  ASSERT_TRUE(r.ok()) << formatDiagnostics(r.errors());
  EXPECT_EQ(actions(write(*r, CsvFormat::ComputeComms)), actions(spaced));
  // compute_only holds the compute actions only: PyTorch's compute_only loader refuses
  // UNSHARD, RESHARD and REDUCE_GRAD ("Expected compute-only schedule but found
  // communication action '0REDUCE_GRAD'"), and the export says it left them out.
  EXPECT_EQ(write(*r, CsvFormat::ComputeOnly), "0F0,(0F1;0B0)OVERLAP_F_B,0B1\r\n");
  const auto lost = csvExportLosses(*r, CsvFormat::ComputeOnly);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_NE(lost[0].find("3 UNSHARD/RESHARD/REDUCE_GRAD actions"), std::string::npos) << lost[0];
}

TEST(PytorchCsv, ComputeCommsOfExplicitCommsAddsTheMissingReduceGrad) {
  // A hand-written compute+comms file without REDUCE_GRAD: PyTorch's runtime divides the
  // gradients by the number of micro-batches only in REDUCE_GRAD, so without it every
  // gradient comes out M times too large. The export adds it after each stage's last backward.
  std::string in = readData("synthetic_1f1b_compute_comms.csv");
  auto r = readPytorchCsv(in);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(write(*r, CsvFormat::ComputeComms),
            "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1,0REDUCE_GRAD\r\n"
            "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1REDUCE_GRAD,1SEND_B1\r\n");
}

TEST(PytorchCsv, ComputeCommsIsPyTorchsLowering) {
  // What torch 2.11's _PipelineScheduleRuntime._prepare_schedule_with_comms makes of this
  // 1F1B order (tests/pytorch/make_golden_orders.py's lower_single): the RECV of F1 lands on
  // rank 1 when rank 0 runs F1, ahead of B0.
  auto g = generateSchedule(ScheduleKind::OneFOneB, GeneratorOptions{2, 2});
  EXPECT_EQ(write(*g, CsvFormat::ComputeComms),
            "0UNSHARD,0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1,0REDUCE_GRAD,0RESHARD\r\n"
            "1UNSHARD,1RECV_F0,1F0,1RECV_F1,1B0,1SEND_B0,1F1,1B1,1SEND_B1,1REDUCE_GRAD,1RESHARD\r\n");
  // Every generated schedule stays valid with explicit communication.
  for (ScheduleKind k : allScheduleKinds()) {
    auto s = generateSchedule(k, GeneratorOptions{3, 6});
    if (!s.ok() || s->pipeline.routed()) continue;  // DualPipe's routes have no CSV (routes_test.cpp)
    auto back = readPytorchCsv(write(*s, CsvFormat::ComputeComms));
    ASSERT_TRUE(back.ok()) << scheduleKindName(k) << formatDiagnostics(back.errors());
    auto rep = validateSchedule(*back);
    EXPECT_TRUE(rep.valid()) << scheduleKindName(k) << ": " << formatDiagnostics(rep.diagnostics);
    // V-shape keeps the turn (stages 2 and 3 on rank 2) on one rank: no send there.
    if (k == ScheduleKind::ZBV) {
      EXPECT_EQ(back->pipeline.placementKind, PlacementKind::VShape);
      EXPECT_EQ(write(*s, CsvFormat::ComputeComms).find("2SEND_F"), std::string::npos);
      EXPECT_NE(write(*s, CsvFormat::ComputeComms).find("1SEND_F"), std::string::npos);
    }
  }
}

TEST(PytorchCsv, GeneratedSchedulesRoundTripThroughComputeOnly) {
  for (ScheduleKind k : allScheduleKinds()) {
    for (int D = 1; D <= 4; ++D) {
      auto s = generateSchedule(k, GeneratorOptions{D, 4 * D});
      if (!s.ok() || s->pipeline.routed()) continue;  // no CSV for routes (routes_test.cpp)
      auto back = readPytorchCsv(write(*s));
      ASSERT_TRUE(back.ok()) << scheduleKindName(k) << " D=" << D;
      EXPECT_EQ(back->devices, s->devices) << scheduleKindName(k) << " D=" << D;
      EXPECT_EQ(back->pipeline.stageToDevice, s->pipeline.stageToDevice);
    }
  }
}

TEST(PytorchCsv, StepLocationsPointAtCells) {
  CsvReadOptions o;
  o.filename = "x.csv";
  CsvStepLocations where;
  auto r = readPytorchCsv("0F0, ,  0B0\n1F0,1B0\n", o, &where);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(where.size(), 2u);
  ASSERT_EQ(where[0].size(), 2u);  // the idle cell is no step
  EXPECT_EQ(where[0][1].file, "x.csv");
  EXPECT_EQ(where[0][1].line, 1);
  EXPECT_EQ(where[0][1].column, 9);
  EXPECT_EQ(where[1][1].line, 2);
  EXPECT_EQ(where[1][1].column, 5);
}

TEST(PytorchCsv, ActionTextIsPyTorchsAndTheTraceReaderReadsIt) {
  // _Action.__repr__'s spelling, which PyTorch's runtime also names its profiler ranges with
  // ("PP:" + it) and the engine its NVTX ranges: one trace reader reads both.
  Schedule s = generateSchedule(ScheduleKind::DualPipeV, GeneratorOptions{2, 4}).value();
  EXPECT_EQ(pytorchActionText(s, Op{OpKind::F, 1, 3}), "1F3");
  EXPECT_EQ(pytorchActionText(s, Op{OpKind::Unshard, 0, -1}), "0UNSHARD");
  EXPECT_EQ(pytorchActionText(s, Op{OpKind::SendB, 2, 0}), "2SEND_B0");
  EXPECT_EQ(pytorchActionText(s, Op{OpKind::R, 1, 2}), "1R2");
  EXPECT_EQ(pytorchStepText(s, Step{Op{OpKind::F, 0, 7}, Op{OpKind::B, 3, 3}}), "(0F7;3B3)OVERLAP_F_B");
  for (const auto& dev : s.devices)
    for (const Step& st : dev) {
      auto a = parsePipelineAction(pytorchStepText(s, st));
      ASSERT_TRUE(a.ok()) << pytorchStepText(s, st);
      EXPECT_EQ(a->op, st.first);
      EXPECT_EQ(a->second, st.second);
    }
}
