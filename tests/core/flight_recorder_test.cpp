// PyTorch's flight-recorder dumps (io/flight_recorder.h, the pickle reader under it) and their
// reading against a plan (analysis/flight_recorder_hang.h). Real dumps: tests/data/flight-recorder/
// torch-2.11.0-gloo, written by PyTorch 2.11 (Gloo: collectives only). The NCCL dumps here are
// synthetic: built in this file in the format of PyTorch's recorder (version 2.10: one entry per
// send or receive, "nccl:send 0->1" / "nccl:recv 1<-0" in group ranks, each batch_isend_irecv
// closed by an "nccl:coalesced" entry with the batch's state), since no GPU wrote them.
#include "pipestudio/core/io/flight_recorder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "pipestudio/core/analysis/comm_semantics.h"
#include "pipestudio/core/analysis/pytorch_lowering.h"
#include "pipestudio/core/analysis/validator.h"
#include "pipestudio/core/io/flight_recorder_hang.h"
#include "pipestudio/core/io/pickle.h"
#include "pipestudio/core/io/pytorch_csv.h"
#include "pipestudio/core/planning/generators.h"

using namespace ps::core;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const fs::path kGloo = fs::path(PIPESTUDIO_TEST_DATA_DIR) / "flight-recorder" / "torch-2.11.0-gloo";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// --- The pickle reader -----------------------------------------------------------------------

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int c : b) s.push_back(static_cast<char>(c));
  return s;
}
std::string shortString(const std::string& s) {  // SHORT_BINUNICODE
  return bytes({0x8c, static_cast<int>(s.size())}) + s;
}

TEST(PickleReader, ReadsPlainDataOfProtocolFourWithSharedContainers) {
  // {"a": [1, -300, 2.5, True, None, (7, "x")], "b": <the same list>, "c": build_intlist([3, 4])}
  // The list is memoized empty and filled afterwards: "b" sees it filled, as Python would.
  std::string p = bytes({0x80, 4, 0x95, 0, 0, 0, 0, 0, 0, 0, 0});  // PROTO 4, FRAME
  p += "}" + bytes({0x94});                                        // EMPTY_DICT, MEMOIZE (0)
  p += "(";                                                        // MARK
  p += shortString("a") + bytes({0x94});                           // memo 1
  p += "]" + bytes({0x94});                                        // EMPTY_LIST, memo 2
  p += "(";
  p += bytes({'K', 1});                                                // BININT1 1
  p += bytes({0x8a, 2, 0xd4, 0xfe});                                   // LONG1 -300
  p += bytes({'G', 0x40, 0x04, 0, 0, 0, 0, 0, 0});                     // BINFLOAT 2.5
  p += bytes({0x88, 'N', 'K', 7}) + shortString("x") + bytes({0x86});  // True, None, (7, "x")
  p += "e";                                                            // APPENDS
  p += shortString("b") + bytes({'h', 2});                             // BINGET 2: the same list
  p += shortString("c");
  p += "ctorch.jit._pickle\nbuild_intlist\n";                                        // GLOBAL
  p += "]" + std::string("(") + bytes({'K', 3, 'K', 4}) + "e" + bytes({0x85, 'R'});  // ([3, 4],) REDUCE
  p += "u.";                                                                         // SETITEMS, STOP
  auto r = readPickle(p, "t");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const json want = json::parse(R"({"a": [1, -300, 2.5, true, null, [7, "x"]],
                                    "b": [1, -300, 2.5, true, null, [7, "x"]], "c": [3, 4]})");
  EXPECT_EQ(*r, want);
}

TEST(PickleReader, RefusesCodeTruncationAndBlowUpsNamingTheByte) {
  // A global that would run code.
  auto code =
      readPickle(bytes({0x80, 2}) + "cos\nsystem\n" + shortString("id") + bytes({0x85, 'R', '.'}), "evil");
  ASSERT_FALSE(code.ok());
  EXPECT_NE(code.error().message.find("evil: byte 2: the pickle names os.system"), std::string::npos)
      << code.error().message;
  // Cut inside a string.
  auto cut = readPickle(bytes({0x80, 2, 'X', 10, 0, 0, 0}) + "abc", "cut");
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.error().message.find("byte 2"), std::string::npos) << cut.error().message;
  // No STOP.
  EXPECT_FALSE(readPickle(bytes({0x80, 2, 'N'}), "nostop").ok());
  // A list that contains itself.
  auto self = readPickle(bytes({0x80, 2, ']', 'q', 0, 'h', 0, 'a', '.'}), "loop");
  ASSERT_FALSE(self.ok());
  EXPECT_NE(self.error().message.find("nested deeper"), std::string::npos) << self.error().message;
  // Forty levels of [x, x]: 2^40 values from ~200 bytes.
  std::string blow = bytes({0x80, 2, 'K', 1});
  for (int i = 0; i < 40; ++i) blow += bytes({'q', 0, 'h', 0, 0x86});
  blow += ".";
  auto big = readPickle(blow, "blow");
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.error().message.find("stands for more than"), std::string::npos) << big.error().message;
  // An opcode of objects.
  auto obj = readPickle(bytes({0x80, 2, 0x81, '.'}), "obj");
  ASSERT_FALSE(obj.ok());
  EXPECT_NE(obj.error().message.find("opcode 0x81"), std::string::npos) << obj.error().message;
}

// --- Real dumps from PyTorch 2.11 (Gloo) -----------------------------------------------------

TEST(FlightRecorderDump, RealGlooDumpsReadAlikeFromPickleAndJson) {
  for (int rank : {0, 1}) {
    const std::string name = "fr_trace_rank_" + std::to_string(rank);
    auto pickled = readFlightRecorderDump(slurp(kGloo / name), name, rank);
    auto text = readFlightRecorderDump(slurp(kGloo / "json" / name), name, rank);
    ASSERT_TRUE(pickled.ok()) << pickled.error().message;
    ASSERT_TRUE(text.ok()) << text.error().message;
    EXPECT_EQ(pickled->version, "2.10");
    ASSERT_EQ(pickled->entries.size(), 1u);
    ASSERT_EQ(text->entries.size(), 1u);
    for (const FlightRecorderDump* d : {&*pickled, &*text}) {
      const FlightRecorderEntry& e = d->entries.front();
      EXPECT_EQ(e.profilingName, "gloo:all_reduce");
      EXPECT_EQ(e.backend, "gloo");
      EXPECT_EQ(e.op, "all_reduce");
      EXPECT_FALSE(e.isP2p);
      EXPECT_EQ(e.pgName, "0");
      EXPECT_EQ(e.pgDesc, "default_pg");
      EXPECT_EQ(e.collectiveSeq, 1);
      EXPECT_TRUE(e.completed());
      ASSERT_EQ(d->groups.size(), 1u);
      EXPECT_EQ(d->groups.front().ranks, (std::vector<int>{0, 1}));
    }
    EXPECT_EQ(pickled->entries.front().createdNs, text->entries.front().createdNs);
  }
}

TEST(FlightRecorderHang, RealGlooDumpsAreRefusedWithWhyTheyCannotLocateTheHang) {
  auto dumps = readFlightRecorderDumps({kGloo.string()});
  ASSERT_TRUE(dumps.ok()) << dumps.error().message;
  ASSERT_EQ(dumps->size(), 2u);
  EXPECT_EQ((*dumps)[1].rank, 1);
  auto plan = readPytorchCsv(slurp(kGloo / "plan.csv"));
  ASSERT_TRUE(plan.ok());
  auto r = readHangFromFlightRecorder(*plan, *dumps);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "flight-recorder.no-p2p");
  EXPECT_NE(r.error().message.find("backend gloo"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("Gloo backend records collectives only"), std::string::npos);
}

// --- Synthetic NCCL dumps --------------------------------------------------------------------

// One rank's recorder as an NCCL run under _PipelineScheduleRuntime fills it: each action a
// batch_isend_irecv of one op (its entry, then the batch's "nccl:coalesced" entry).
struct Recorder {
  int rank = 0;
  std::int64_t record = 0, seq = 0, time = 1'000'000;
  json entries = json::array();
  std::string pg = "1", desc = "pp";

  void entry(const std::string& name, bool p2p, const std::string& state, bool retired) {
    entries.push_back({{"record_id", record++},
                       {"pg_id", 1},
                       {"process_group", {pg, desc}},
                       {"collective_seq_id", 0},
                       {"p2p_seq_id", seq},
                       {"op_id", record},
                       {"profiling_name", name},
                       {"time_created_ns", time += 1000},
                       {"input_sizes", {{2, 8}}},
                       {"state", state},
                       {"retired", retired},
                       {"is_p2p", p2p},
                       {"timeout_ms", 600000}});
  }
  // One action: "send"/"recv" to/from `peer`; done: the batch completed.
  void op(const std::string& kind, int peer, bool done) {
    ++seq;
    entry(kind == "send" ? "nccl:send " + std::to_string(rank) + "->" + std::to_string(peer)
                         : "nccl:recv " + std::to_string(rank) + "<-" + std::to_string(peer),
          true, "scheduled", false);
    entry("nccl:coalesced", true, done ? "completed" : "scheduled", done);
  }
  std::string text() const {
    return json{{"version", "2.10"},
                {"pg_config", {{pg, {{"name", pg}, {"desc", desc}, {"ranks", "[0, 1]"}}}}},
                {"entries", entries}}
        .dump();
  }
};

FlightRecorderDump dumpOf(const Recorder& r) {
  auto d = readFlightRecorderDump(r.text(), "synthetic_rank" + std::to_string(r.rank), r.rank);
  EXPECT_TRUE(d.ok()) << d.error().message;
  return *d;
}

// PyTorch #172668's kind of order: each rank's second send is issued before the receive the peer
// needs first. Fine when posted (Gloo); over NCCL rank 0's stream sits in 0SEND_F1, which meets
// 1RECV_F1 only after rank 1's 1SEND_B0, which meets 0RECV_B0 only after 0SEND_F1.
const char* kCrossed =
    "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
    "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n";

std::vector<FlightRecorderDump> crossedDumps() {
  Recorder r0, r1;
  r0.rank = 0;
  r1.rank = 1;
  r0.op("send", 1, true);  // 0SEND_F0 met 1RECV_F0
  r1.op("recv", 0, true);
  r0.op("send", 1, false);  // 0SEND_F1: stuck
  r1.op("send", 0, false);  // 1SEND_B0: stuck
  r0.op("recv", 1, false);  // issued behind them
  r1.op("recv", 0, false);
  r0.op("recv", 1, false);
  r1.op("send", 0, false);
  return {dumpOf(r0), dumpOf(r1)};
}

TEST(FlightRecorderHang, SyntheticNcclDumpsOfCrossedSendsNameTheCycleValidateFinds) {
  auto plan = readPytorchCsv(kCrossed);
  ASSERT_TRUE(plan.ok());
  auto r = readHangFromFlightRecorder(*plan, crossedDumps());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->backend, "nccl");
  EXPECT_EQ(r->group, "1 (pp)");
  EXPECT_EQ(r->opsMapped, 8);
  ASSERT_EQ(r->ranks.size(), 2u);
  const StuckDevice& a = r->ranks[0];
  EXPECT_EQ(a.state, StuckDevice::State::Waiting);
  EXPECT_EQ(a.action, "0SEND_F1");
  EXPECT_EQ(a.step, 3);
  EXPECT_EQ(a.waitsOnDevice, 1);
  EXPECT_EQ(a.waitsFor, "1RECV_F1");
  EXPECT_EQ(a.waitsForStep, 4);
  const StuckDevice& b = r->ranks[1];
  EXPECT_EQ(b.action, "1SEND_B0");
  EXPECT_EQ(b.waitsFor, "0RECV_B0");
  ASSERT_TRUE(r->hung());
  EXPECT_TRUE(r->hang.cycle);
  EXPECT_EQ(
      r->hang.text,
      "rank 0 waits in 0SEND_F1 for 1RECV_F1 on rank 1, which waits in 1SEND_B0 for 0RECV_B0 on rank 0, "
      "which rank 0 reaches only after 0SEND_F1, closing the cycle");
  EXPECT_EQ(describeStuckDevice(a),
            "rank 0: waits in 0SEND_F1 for 1RECV_F1 on rank 1: 'nccl:send 0->1' scheduled, p2p_seq_id 2");
  // The same cycle as the validator's under nccl (and none under posted).
  ValidateOptions nccl;
  nccl.comm.semantics = CommSemantics::Nccl;
  const ValidationReport v = validateSchedule(*plan, nccl);
  ASSERT_FALSE(v.valid());
  std::string msg;
  for (const Diagnostic& d : v.diagnostics)
    if (d.code == "validate.deadlock") msg = d.message;
  EXPECT_NE(msg.find("0SEND_F1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1SEND_B0"), std::string::npos) << msg;
  EXPECT_TRUE(validateSchedule(*plan).valid());
}

TEST(FlightRecorderHang, AMissingDumpEndsTheChainAtASilentRank) {
  auto plan = readPytorchCsv(kCrossed);
  ASSERT_TRUE(plan.ok());
  auto dumps = crossedDumps();
  dumps.pop_back();
  auto r = readHangFromFlightRecorder(*plan, dumps);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->ranks[1].state, StuckDevice::State::Silent);
  EXPECT_FALSE(r->hang.cycle);
  EXPECT_EQ(r->hang.text,
            "rank 0 waits in 0SEND_F1 for 1RECV_F1 on rank 1, which is silent (no flight-recorder dump)");
}

// A compute-only 1F1B plan lowered as PyTorch 2.11 does, run for a whole step and stuck in the
// second: ops are counted per kind and peer, modulo the plan's per step.
TEST(FlightRecorderHang, CountsOpsAcrossStepsOfALoweredPlan) {
  GeneratorOptions o;
  o.devices = 2;
  o.microbatches = 2;
  auto compute = generateSchedule(ScheduleKind::OneFOneB, o);
  ASSERT_TRUE(compute.ok());
  auto plan = lowerToPytorchComms(*compute);
  ASSERT_TRUE(plan.ok());
  // The lowered order's sends and receives per rank, then the same again up to a stuck op.
  Recorder r0, r1;
  r0.rank = 0;
  r1.rank = 1;
  auto replay = [](Recorder& rec, const std::vector<Step>& steps, int stopAfter) {
    int n = 0;
    for (const Step& s : steps) {
      const Op& op = s.first;
      const bool send = op.kind == OpKind::SendF || op.kind == OpKind::SendB;
      if (!send && op.kind != OpKind::RecvF && op.kind != OpKind::RecvB) continue;
      rec.op(send ? "send" : "recv", 1 - rec.rank, n < stopAfter);
      ++n;
    }
  };
  replay(r0, plan->devices[0], 1000);
  replay(r1, plan->devices[1], 1000);
  replay(r0, plan->devices[0], 1);  // step 1: the second op does not complete
  replay(r1, plan->devices[1], 1);
  auto r = readHangFromFlightRecorder(*plan, {dumpOf(r0), dumpOf(r1)});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->iteration, 1);
  std::vector<std::string> p2p0;
  for (const Step& s : plan->devices[0])
    if (isPointToPointKind(s.first.kind)) p2p0.push_back(pytorchActionText(*plan, s.first));
  ASSERT_GE(p2p0.size(), 2u);
  EXPECT_EQ(r->ranks[0].action, p2p0[1]);
  EXPECT_NE(r->ranks[0].note.find("in step 1 of the run"), std::string::npos) << r->ranks[0].note;
  // Every op issued: two steps' worth on each rank.
  EXPECT_EQ(r->opsMapped, static_cast<int>(r0.seq + r1.seq));
}

TEST(FlightRecorderHang, AnOverwrittenRingBufferPlacesOpsByTheirSequenceNumber) {
  auto plan = readPytorchCsv(kCrossed);
  ASSERT_TRUE(plan.ok());
  // Rank 0's recorder lost its first op (record 0, 1): what is left starts at record 2.
  auto dumps = crossedDumps();
  Recorder r0;
  r0.record = 2;
  r0.seq = 1;
  r0.op("send", 1, false);
  r0.op("recv", 1, false);
  r0.op("recv", 1, false);
  dumps[0] = dumpOf(r0);
  auto r = readHangFromFlightRecorder(*plan, dumps);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->ranks[0].action, "0SEND_F1");
  EXPECT_TRUE(r->hang.cycle);
  // Sequence numbers that put a receive where the plan sends: refused, naming the entry.
  Recorder bad;
  bad.record = 2;
  bad.seq = 1;
  bad.op("recv", 1, false);
  dumps[0] = dumpOf(bad);
  auto refused = readHangFromFlightRecorder(*plan, dumps);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, "flight-recorder.mismatch");
  EXPECT_NE(refused.error().message.find("'nccl:recv 0<-1' (p2p_seq_id 2) falls on 0SEND_F1"),
            std::string::npos)
      << refused.error().message;
  EXPECT_NE(refused.error().message.find("TORCH_FR_BUFFER_SIZE"), std::string::npos);
}

TEST(FlightRecorderHang, DumpsOfAnotherScheduleAreRefusedNamingTheEntry) {
  // A plan on one rank pair where rank 0 only sends: a receive on rank 0 is not of this plan.
  auto plan = readPytorchCsv("0F0,0SEND_F0,0B0\n1RECV_F0,1F0,1B0\n");
  ASSERT_TRUE(plan.ok());
  Recorder r0;
  r0.op("recv", 1, false);
  auto r = readHangFromFlightRecorder(*plan, {dumpOf(r0)});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(
      r.error().message,
      "synthetic_rank0: record_id 0 'nccl:recv 0<-1' is a receive from rank 1, and rank 0 of the plan has "
      "none: these dumps are not of this plan's run");
  // A group rank past the plan's ranks.
  Recorder far;
  far.rank = 3;
  far.op("send", 0, false);
  auto out = readHangFromFlightRecorder(*plan, {dumpOf(far)});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message.find("pipeline rank 3, and the plan has 2 ranks"), std::string::npos)
      << out.error().message;
}

TEST(FlightRecorderDump, BadDumpsAreErrorsNamingTheFileAndEntry) {
  auto notJson = readFlightRecorderDump("{\"version\": \"2.10\",\n \"entries\": [ oops ]}", "d/rank0", 0);
  ASSERT_FALSE(notJson.ok());
  EXPECT_EQ(notJson.error().location.line, 2);
  auto v1 = readFlightRecorderDump(R"({"version": "1.5", "entries": []})", "d/rank0", 0);
  ASSERT_FALSE(v1.ok());
  EXPECT_NE(v1.error().message.find("version 2.x"), std::string::npos);
  auto noName = readFlightRecorderDump(
      R"({"version": "2.10", "entries": [{"record_id": 0, "state": "scheduled", "process_group": ["0", "x"]}]})",
      "d/rank0", 0);
  ASSERT_FALSE(noName.ok());
  EXPECT_EQ(noName.error().message, "d/rank0: entry 0: no 'profiling_name'");
  auto badPeer = readFlightRecorderDump(
      R"({"version": "2.10", "entries": [{"record_id": 0, "state": "scheduled", "process_group": ["0", "x"],
          "profiling_name": "nccl:send 0-1"}]})",
      "d/rank0", 0);
  ASSERT_FALSE(badPeer.ok());
  EXPECT_NE(badPeer.error().message.find("does not name its ranks"), std::string::npos);
  // Found by fuzz_flight_recorder: a number out of range, nesting that would exhaust the stack.
  auto huge = readFlightRecorderDump(
      R"({"version": "2.10", "entries": [{"time_created_ns": 1e30284703416384}]})", "d/rank0", 0);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.error().message.find("d/rank0: not a flight-recorder dump"), std::string::npos);
  auto floatTime = readFlightRecorderDump(
      R"({"version": "2.10", "entries": [{"record_id": 0, "state": "scheduled", "process_group": ["0", "x"],
          "profiling_name": "nccl:send 0->1", "time_created_ns": 1.79e25}]})",
      "d/rank0", 0);
  ASSERT_FALSE(floatTime.ok());
  EXPECT_EQ(floatTime.error().message, "d/rank0: entry 0: 'time_created_ns' is not a whole number in range");
  auto deep = readFlightRecorderDump(
      "{\"entries\": " + std::string(100000, '[') + std::string(100000, ']') + "}", "d/rank0", 0);
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.error().message.find("nested deeper than 64"), std::string::npos);
  // A pickled dict whose tuple key holds bytes that are not UTF-8.
  const std::string badKey = std::string("\x80\x02}(") + "C\x01\xff" + "\x85" + "N" + "u.";
  auto key = readPickle(badKey, "k");
  ASSERT_TRUE(key.ok()) << key.error().message;
  EXPECT_EQ(key->size(), 1u);
  EXPECT_EQ(flightRecorderRankOf("nccl_trace_rank_12"), 12);
  EXPECT_FALSE(flightRecorderRankOf("trace.json").has_value());
}

TEST(FlightRecorderDump, AFolderWithTwoKindsOfRankFilesNeedsAPrefix) {
  const fs::path dir = fs::temp_directory_path() / ("ps_fr_prefix_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* name : {"nccl_trace_rank_0", "nccl_trace_rank_1", "other_0"}) {
    std::ofstream(dir / name) << R"({"version": "2.10", "entries": []})";
  }
  auto both = readFlightRecorderDumps({dir.string()});
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.error().message.find("'nccl_trace_rank_<rank>' (2), 'other_<rank>' (1)"), std::string::npos)
      << both.error().message;
  auto picked = readFlightRecorderDumps({dir.string()}, "nccl_trace_rank_");
  ASSERT_TRUE(picked.ok()) << picked.error().message;
  EXPECT_EQ(picked->size(), 2u);
  auto twice =
      readFlightRecorderDumps({(dir / "nccl_trace_rank_0").string(), (dir / "nccl_trace_rank_0").string()});
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.error().code, "flight-recorder.duplicate-rank");
  fs::remove_all(dir);
}

}  // namespace
