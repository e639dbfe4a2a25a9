#include "run/rank_report.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "pipestudio/core/io/run_events.h"

namespace ps::engine::detail {

namespace {

using nlohmann::json;

json opJson(const core::Op& op) {
  return {{"kind", static_cast<int>(op.kind)}, {"stage", op.stage}, {"microbatch", op.microbatch}};
}

core::Op opFrom(const json& j) {
  return core::Op{static_cast<core::OpKind>(j.at("kind").get<int>()), j.at("stage").get<int>(),
                  j.at("microbatch").get<int>()};
}

// Stuck devices travel as the run-event stream's own `stuck` events (core::run_event::stuck):
// one writer and one reader for where a device stood, in the stream and in the report.
json stuckJson(const core::StuckDevice& d) {
  return json::parse(core::run_event::stuck(d));
}

core::Result<std::vector<core::StuckDevice>> stuckFrom(const json& list) {
  core::RunEventReader reader("stuck devices");
  if (!list.is_array()) return core::makeError("engine.rank-report", "not a list");
  for (const auto& d : list) {
    if (!d.is_object() || d.value("type", std::string()) != "stuck")
      return core::makeError("engine.rank-report",
                             "an entry is not a stuck event: " + d.dump().substr(0, 120));
    reader.feed(d.dump() + "\n");
  }
  if (!reader.warnings().empty())
    return core::makeError("engine.rank-report", reader.warnings().front().message);
  std::vector<core::StuckDevice> out;
  for (const auto& d : reader.stuck())
    if (d.device >= 0) out.push_back(d);  // the reader's list has a place for every device up to the last
  return out;
}

}  // namespace

std::string rankReportToJson(const RankReport& r) {
  json ops = json::array(), transfers = json::array(), memory = json::array(), params = json::array();
  for (const auto& o : r.ops)
    ops.push_back({{"device", o.device},
                   {"step", o.step},
                   {"op", opJson(o.op)},
                   {"overlapped", o.overlapped},
                   {"start_ms", o.start},
                   {"end_ms", o.end}});
  for (const auto& t : r.transfers)
    transfers.push_back({{"src_device", t.srcDevice},
                         {"dst_device", t.dstDevice},
                         {"producer", opJson(t.producer)},
                         {"consumer", opJson(t.consumer)},
                         {"bytes", t.bytes},
                         {"start_ms", t.start},
                         {"end_ms", t.end}});
  for (const auto& m : r.memory)
    memory.push_back({{"device", m.device}, {"time_ms", m.sample.time}, {"bytes", m.sample.bytes}});
  for (const auto& p : r.parameters)
    params.push_back({{"name", p.name}, {"relative_error", p.relativeError}});
  json j{{"ops", ops},         {"transfers", transfers},        {"memory", memory},
         {"losses", r.losses}, {"iteration_ms", r.iterationMs}, {"parameters", params}};
  if (r.error)
    j["error"] = {
        {"code", r.error->code}, {"message", r.error->message},      {"device", r.error->device},
        {"step", r.error->step}, {"wait_start", r.error->waitStart}, {"lost_rank", r.error->lostRank}};
  if (!r.stuck.empty()) {
    json a = json::array();
    for (const auto& d : r.stuck) a.push_back(stuckJson(d));
    j["stuck"] = std::move(a);
  }
  return j.dump();
}

core::Result<RankReport> rankReportFromJson(std::string_view text, int rank) {
  const std::string who = "rank " + std::to_string(rank) + "'s report";
  const json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return core::makeError("engine.rank-report", who + " is not a JSON object");
  RankReport r;
  std::string field;  // what is being read, for the error
  try {
    field = "ops";
    for (const auto& o : j.at("ops"))
      r.ops.push_back({o.at("device").get<int>(), o.at("step").get<int>(), opFrom(o.at("op")),
                       o.at("overlapped").get<bool>(), o.at("start_ms").get<double>(),
                       o.at("end_ms").get<double>()});
    field = "transfers";
    for (const auto& t : j.at("transfers"))
      r.transfers.push_back({t.at("src_device").get<int>(), t.at("dst_device").get<int>(),
                             opFrom(t.at("producer")), opFrom(t.at("consumer")),
                             t.at("bytes").get<std::int64_t>(), t.at("start_ms").get<double>(),
                             t.at("end_ms").get<double>()});
    field = "memory";
    for (const auto& m : j.at("memory"))
      r.memory.push_back(
          {m.at("device").get<int>(), {m.at("time_ms").get<double>(), m.at("bytes").get<std::int64_t>()}});
    field = "losses";
    r.losses = j.at("losses").get<std::vector<double>>();
    field = "iteration_ms";
    r.iterationMs = j.at("iteration_ms").get<std::vector<double>>();
    field = "parameters";
    for (const auto& p : j.at("parameters"))
      r.parameters.push_back({p.at("name").get<std::string>(), p.at("relative_error").get<double>()});
    if (auto e = j.find("error"); e != j.end()) {
      field = "error";
      r.error = ErrorInfo{e->at("code").get<std::string>(), e->at("message").get<std::string>(),
                          e->value("device", -1),           e->value("step", -1),
                          e->value("wait_start", -1.0),     e->value("lost_rank", -1)};
    }
    if (auto s = j.find("stuck"); s != j.end()) {
      field = "stuck";
      auto stuck = stuckFrom(*s);
      if (!stuck)
        return core::makeError("engine.rank-report", who + ": field 'stuck': " + stuck.error().message);
      r.stuck = std::move(stuck).value();
    }
  } catch (const json::exception& e) {
    return core::makeError("engine.rank-report", who + ": field '" + field + "': " + e.what());
  }
  return r;
}

size_t rootCause(const std::vector<ErrorInfo>& errors, const std::optional<std::string>& abortMessage) {
  auto at = [&](auto it) { return static_cast<size_t>(it - errors.begin()); };
  auto cancel = std::find_if(errors.begin(), errors.end(),
                             [](const ErrorInfo& e) { return e.code == "engine.cancelled"; });
  if (cancel != errors.end()) return at(cancel);
  auto aborted = std::find_if(errors.begin(), errors.end(), [&](const ErrorInfo& e) {
    return abortMessage && e.message == *abortMessage && e.code != "engine.timeout";
  });
  if (aborted != errors.end()) return at(aborted);
  auto first = errors.end();
  for (auto it = errors.begin(); it != errors.end(); ++it)
    if (it->code == "engine.timeout" && (first == errors.end() || it->waitStart < first->waitStart))
      first = it;
  return first != errors.end() ? at(first) : 0;
}

}  // namespace ps::engine::detail
