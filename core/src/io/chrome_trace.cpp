#include "pipestudio/core/io/chrome_trace.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

namespace ps::core {

namespace {

using nlohmann::json;

constexpr int kComputeTid = 0;
constexpr int kCopyTid = 1;
constexpr int kLinkTidBase = 100;  // + destination device: transfers leaving on that link

std::string kindToken(OpKind k, const Schedule* s) {
  if (s) return s->kindName(k);
  if (isUserKind(k)) return "K" + std::to_string(static_cast<int>(k));
  return std::string(builtinKindName(k));
}

// PyTorch's action notation: stage, kind, micro-batch ("0F1"); stage-level ops have no
// micro-batch ("1UNSHARD").
std::string actionName(const Op& op, const Schedule* s) {
  std::string n = std::to_string(op.stage) + kindToken(op.kind, s);
  if (op.microbatch >= 0) n += std::to_string(op.microbatch);
  return n;
}

double us(double ms) {
  return ms * 1000.0;
}

// "mb" and "microbatch" both: the short name for people reading the trace, the long one for
// trace_import.h, which reads our traces back.
json opArgs(const Op& op, const Schedule* s) {
  return json{{"stage", op.stage},
              {"mb", op.microbatch},
              {"microbatch", op.microbatch},
              {"kind", kindToken(op.kind, s)}};
}

}  // namespace

std::string exportChromeTrace(const Timeline& t, const Schedule* schedule) {
  json events = json::array();
  int devices = t.devices;
  for (const TimelineOp& op : t.ops) devices = std::max(devices, op.device + 1);
  std::set<std::pair<int, int>> links;
  for (const Transfer& tr : t.transfers) links.insert({tr.srcDevice, tr.dstDevice});
  std::vector<char> hasCopy(static_cast<size_t>(std::max(devices, 0)), 0);
  for (const TimelineOp& op : t.ops)
    if (runsOnCopyStream(op.op.kind)) hasCopy[static_cast<size_t>(op.device)] = 1;

  for (int d = 0; d < devices; ++d) {
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", d},
                      {"args", {{"name", "device " + std::to_string(d)}}}});
    events.push_back(
        {{"name", "process_sort_index"}, {"ph", "M"}, {"pid", d}, {"args", {{"sort_index", d}}}});
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", d},
                      {"tid", kComputeTid},
                      {"args", {{"name", "compute"}}}});
    if (hasCopy[static_cast<size_t>(d)])
      events.push_back({{"name", "thread_name"},
                        {"ph", "M"},
                        {"pid", d},
                        {"tid", kCopyTid},
                        {"args", {{"name", "copy (offload/reload)"}}}});
  }
  for (auto [src, dst] : links)
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", src},
                      {"tid", kLinkTidBase + dst},
                      {"args", {{"name", "send to device " + std::to_string(dst)}}}});

  for (const TimelineOp& op : t.ops) {
    json args = opArgs(op.op, schedule);
    args["step"] = op.step;
    args["device"] = op.device;
    if (op.overlapped) args["overlapped"] = true;
    events.push_back({{"name", actionName(op.op, schedule)},
                      {"cat", runsOnCopyStream(op.op.kind) ? "copy" : "compute"},
                      {"ph", "X"},
                      {"pid", op.device},
                      {"tid", runsOnCopyStream(op.op.kind) ? kCopyTid : kComputeTid},
                      {"ts", us(op.start)},
                      {"dur", us(op.duration())},
                      {"args", std::move(args)}});
  }
  for (const Transfer& tr : t.transfers) {
    events.push_back({{"name", actionName(tr.producer, schedule) + "->" + std::to_string(tr.dstDevice)},
                      {"cat", "comm"},
                      {"ph", "X"},
                      {"pid", tr.srcDevice},
                      {"tid", kLinkTidBase + tr.dstDevice},
                      {"ts", us(tr.start)},
                      {"dur", us(tr.end - tr.start)},
                      {"args",
                       {{"bytes", tr.bytes},
                        {"src", tr.srcDevice},
                        {"dst", tr.dstDevice},
                        {"producer", actionName(tr.producer, schedule)},
                        {"consumer", actionName(tr.consumer, schedule)},
                        {"producer_op", opArgs(tr.producer, schedule)},
                        {"consumer_op", opArgs(tr.consumer, schedule)}}}});
  }
  for (size_t d = 0; d < t.memory.size(); ++d)
    for (const MemorySample& m : t.memory[d])
      events.push_back({{"name", "memory"},
                        {"ph", "C"},
                        {"pid", static_cast<int>(d)},
                        {"ts", us(m.time)},
                        {"args", {{"bytes", m.bytes}}}});

  json root = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  json meta = {{"generator", "PipeStudio"}, {"label", t.label},
               {"devices", devices},        {"source", timelineSourceName(t.source)},
               {"complete", t.complete},    {"makespan_ms", t.metrics.makespan}};
  if (schedule && !schedule->name.empty()) meta["schedule"] = schedule->name;
  root["otherData"] = std::move(meta);
  return root.dump() + "\n";
}

}  // namespace ps::core
