#include "pipestudio/core/io/chrome_trace.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/io/trace_import.h"

using namespace ps::core;
using nlohmann::json;

namespace {

// Two devices, two micro-batches, with a link and an offload so that every track appears.
Schedule sample() {
  Schedule s;
  s.name = "sample";
  s.pipeline = Pipeline::make(2, 2, 2, PlacementKind::Linear).value();
  auto F = [](int st, int m) { return Step{Op{OpKind::F, st, m}, {}}; };
  auto B = [](int st, int m) { return Step{Op{OpKind::B, st, m}, {}}; };
  s.devices = {{F(0, 0), Step{Op{OpKind::Offload, 0, 0}, {}}, F(0, 1), B(0, 1),
                Step{Op{OpKind::Reload, 0, 0}, {}}, B(0, 0)},
               {F(1, 0), F(1, 1), B(1, 1), B(1, 0)}};
  return s;
}

Timeline simulated(const Schedule& s) {
  CostProfile p = uniformCostProfile("F=1,B=2,act=1000,out=100", 2).value();
  p.link = LinkCost{0.5, 100};
  p.hostBandwidthBytesPerMs = 1000;
  return simulate(s, makeSimulationModel(s, p).value()).value();
}

}  // namespace

TEST(ChromeTrace, ProcessPerDeviceWithComputeCopyAndLinkTracks) {
  Schedule s = sample();
  Timeline t = simulated(s);
  ASSERT_TRUE(t.complete);
  json j = json::parse(exportChromeTrace(t, &s));
  ASSERT_TRUE(j["traceEvents"].is_array());
  std::map<int, std::string> processes;
  std::set<std::tuple<int, int, std::string>> threads;
  size_t slices = 0, counters = 0, comm = 0;
  for (const json& e : j["traceEvents"]) {
    std::string ph = e["ph"];
    if (ph == "M" && e["name"] == "process_name")
      processes[e["pid"].get<int>()] = e["args"]["name"].get<std::string>();
    if (ph == "M" && e["name"] == "thread_name")
      threads.insert({e["pid"].get<int>(), e["tid"].get<int>(), e["args"]["name"].get<std::string>()});
    if (ph == "X") {
      ++slices;
      if (e.value("cat", "") == "comm") ++comm;
    }
    if (ph == "C") {
      ++counters;
      EXPECT_EQ(e["name"], "memory");
      EXPECT_TRUE(e["args"]["bytes"].is_number_integer());
    }
  }
  EXPECT_EQ(processes, (std::map<int, std::string>{{0, "device 0"}, {1, "device 1"}}));
  EXPECT_TRUE(threads.count({0, 0, "compute"}));
  EXPECT_TRUE(threads.count({0, 1, "copy (offload/reload)"}));
  EXPECT_TRUE(threads.count({0, 101, "send to device 1"}));
  EXPECT_TRUE(threads.count({1, 100, "send to device 0"}));
  EXPECT_EQ(slices, t.ops.size() + t.transfers.size());
  EXPECT_EQ(comm, t.transfers.size());
  EXPECT_EQ(comm, 4u);
  EXPECT_EQ(counters, t.memory[0].size() + t.memory[1].size());
  EXPECT_EQ(j["otherData"]["generator"], "PipeStudio");
}

TEST(ChromeTrace, SlicesNamedLikePyTorchActionsInMicroseconds) {
  Schedule s = sample();
  Timeline t = simulated(s);
  json j = json::parse(exportChromeTrace(t, &s));
  bool found = false;
  for (const json& e : j["traceEvents"]) {
    if (e["ph"] != "X" || e["name"] != "1F1") continue;
    found = true;
    EXPECT_EQ(e["pid"], 1);
    EXPECT_EQ(e["tid"], 0);
    EXPECT_EQ(e["args"]["stage"], 1);
    EXPECT_EQ(e["args"]["mb"], 1);
    EXPECT_EQ(e["args"]["kind"], "F");
    EXPECT_EQ(e["args"]["step"], 1);
    // F1@s0 ends at 2, but the link is busy with F0's output until 2.5; 0.5 + 100/100 ms more.
    EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 4000.0);
    EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 1000.0);
  }
  EXPECT_TRUE(found);
}

TEST(ChromeTrace, UserKindsNamedFromTheSchedule) {
  Schedule s;
  s.pipeline = Pipeline::make(1, 1, 1, PlacementKind::Linear).value();
  UserKind k;
  k.name = "ALLREDUCE";
  k.stageLevel = true;
  k.durationExpr = "W";
  k.after = {"W"};
  s.userKinds = {k};
  s.devices = {{Step{Op{OpKind::F, 0, 0}, {}}, Step{Op{OpKind::I, 0, 0}, {}}, Step{Op{OpKind::W, 0, 0}, {}},
                Step{Op{static_cast<OpKind>(kFirstUserKind), 0, -1}, {}}}};
  Timeline t = simulate(s, makeSimulationModel(s, uniformCostProfile("F=1", 1).value()).value()).value();
  std::string text = exportChromeTrace(t, &s);
  EXPECT_NE(text.find("\"0ALLREDUCE\""), std::string::npos);
  EXPECT_NE(exportChromeTrace(t).find("\"0K64\""), std::string::npos);  // without the schedule
}

TEST(ChromeTrace, ImportsBackIntoTheSameTimeline) {
  Schedule s = sample();
  Timeline t = simulated(s);
  auto back = importChromeTrace(exportChromeTrace(t, &s), "sample.json");
  ASSERT_TRUE(back.ok()) << formatDiagnostics(back.errors());
  EXPECT_EQ(back->format, TraceFormat::PipeStudio);
  const Timeline& u = back->timeline;
  ASSERT_EQ(u.ops.size(), t.ops.size());
  std::multiset<std::tuple<int, int, int, int, double, double>> a, b;
  for (const auto& o : t.ops)
    a.insert({o.device, static_cast<int>(o.op.kind), o.op.stage, o.op.microbatch, o.start, o.end});
  // The importer measures from the first op; ours starts at 0 already.
  for (const auto& o : u.ops)
    b.insert({o.device, static_cast<int>(o.op.kind), o.op.stage, o.op.microbatch, o.start, o.end});
  EXPECT_EQ(a, b);
}
