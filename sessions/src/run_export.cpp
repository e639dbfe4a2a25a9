#include "pipestudio/sessions/run_export.h"

#include <nlohmann/json.hpp>

#include "json_codec.h"

namespace ps::sessions {

namespace {
nlohmann::json opJson(const core::Op& op) {
  nlohmann::json j = {
      {"kind", static_cast<int>(op.kind)}, {"stage", op.stage}, {"microbatch", op.microbatch}};
  // Built-in kinds carry their DSL token; user kinds are named by the run's schedule.
  if (!core::isUserKind(op.kind) && op.kind < core::OpKind::kBuiltinCount)
    j["kindName"] = std::string(core::builtinKindName(op.kind));
  return j;
}

template <typename T>
nlohmann::json optional(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace

std::string runToJson(const RunRecord& record, const core::Timeline& t) {
  const RunSummary& r = record.summary;
  nlohmann::json config = nlohmann::json::parse(record.configJson, nullptr, false);
  if (config.is_discarded()) config = record.configJson;
  nlohmann::json run = {{"id", r.id},
                        {"scheduleId", optional(r.scheduleId)},
                        {"profileId", optional(r.profileId)},
                        {"target", r.target},
                        {"devices", r.devices},
                        {"model", r.model},
                        {"label", r.label},
                        {"status", std::string(ps::core::runStateName(r.status))},
                        {"interrupted", r.interrupted},
                        {"startedMs", r.startedMs},
                        {"endedMs", optional(r.endedMs)},
                        {"error", r.error},
                        {"makespan", r.makespan},
                        {"bubbleRatio", r.bubbleRatio},
                        {"opCount", r.opCount},
                        {"config", config}};

  nlohmann::json ops = nlohmann::json::array();
  for (const auto& op : t.ops) {
    nlohmann::json j = opJson(op.op);
    j["device"] = op.device;
    j["step"] = op.step;
    j["overlapped"] = op.overlapped;
    j["start"] = op.start;
    j["end"] = op.end;
    ops.push_back(std::move(j));
  }
  nlohmann::json transfers = nlohmann::json::array();
  for (const auto& x : t.transfers)
    transfers.push_back({{"src", x.srcDevice},
                         {"dst", x.dstDevice},
                         {"producer", opJson(x.producer)},
                         {"consumer", opJson(x.consumer)},
                         {"bytes", x.bytes},
                         {"start", x.start},
                         {"end", x.end}});
  nlohmann::json memory = nlohmann::json::array();
  for (const auto& curve : t.memory) {
    nlohmann::json c = nlohmann::json::array();
    for (const auto& m : curve) c.push_back({{"time", m.time}, {"bytes", m.bytes}});
    memory.push_back(std::move(c));
  }
  nlohmann::json timeline = {{"source", core::timelineSourceName(t.source)},
                             {"label", t.label},
                             {"devices", t.devices},
                             {"complete", t.complete},
                             {"metrics", detail::metricsToJson(t.metrics)},
                             {"diagnostics", detail::diagnosticsToJson(t.diagnostics)},
                             {"ops", ops},
                             {"transfers", transfers},
                             {"memory", memory}};
  nlohmann::json out = {{"format", "pipestudio-run"}, {"version", 1}, {"run", run}, {"timeline", timeline}};
  // A label or message that is not UTF-8 (any file may hold one) must not throw out of here.
  return out.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace ps::sessions
