#include "pipestudio/core/io/run_events.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <tuple>

#include "pipestudio/core/model/limits.h"

namespace ps::core {

namespace {

using nlohmann::json;

// Lines longer than this without a newline are not protocol lines (the longest real event is
// `finished` with a loss per iteration); dropping them bounds memory on a runaway stream.
constexpr size_t kMaxLineBytes = 16u << 20;

// Typed field access that never throws: a wrong type is "missing".
// Numbers that do not fit the target type are "missing" too (never a wrapped or undefined cast).
bool getInt(const json& j, const char* key, int& out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return false;
  if (it->is_number_float()) {
    auto v = limits::wholeInRange(it->get<double>(), std::numeric_limits<int>::min(),
                                  std::numeric_limits<int>::max());
    if (!v) return false;
    out = static_cast<int>(*v);
    return true;
  }
  if (it->is_number_unsigned()) {
    auto u = it->get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) return false;
    out = static_cast<int>(u);
    return true;
  }
  auto v = it->get<std::int64_t>();
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) return false;
  out = static_cast<int>(v);
  return true;
}
bool getDouble(const json& j, const char* key, double& out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return false;
  out = it->get<double>();
  return true;
}
bool getInt64(const json& j, const char* key, std::int64_t& out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return false;
  if (it->is_number_float()) {
    auto v = limits::toInt64(it->get<double>());
    if (!v) return false;
    out = *v;
    return true;
  }
  if (it->is_number_unsigned() && it->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
    return false;
  out = it->get<std::int64_t>();
  return true;
}
std::string getString(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}
bool getBool(const json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}
std::vector<double> getDoubles(const json& j, const char* key) {
  std::vector<double> out;
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return out;
  for (const auto& v : *it)
    if (v.is_number()) out.push_back(v.get<double>());
  return out;
}

}  // namespace

RunEventReader::RunEventReader(std::string source) : source_(std::move(source)) {}

const std::vector<double>& RunEventReader::losses() const {
  static const std::vector<double> none;
  return finished_ ? finished_->losses : none;
}

void RunEventReader::warn(std::string code, std::string message) {
  ++warningCount_;
  if (warnings_.size() >= kMaxWarnings) return;
  warnings_.push_back(
      makeWarning(std::move(code), std::move(message), SourceLocation{source_, static_cast<int>(line_), 0}));
}

size_t RunEventReader::feed(std::string_view bytes) {
  size_t accepted = 0;
  while (!bytes.empty()) {
    const size_t nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      if (dropping_) break;
      if (partial_.size() + bytes.size() > kMaxLineBytes) {
        warn("run-events.line-too-long", "line " + std::to_string(line_ + 1) + " is longer than " +
                                             std::to_string(kMaxLineBytes) +
                                             " bytes without a newline; dropped");
        partial_.clear();
        dropping_ = true;  // swallow the rest of this line up to its newline
        break;
      }
      partial_.append(bytes);
      break;
    }
    std::string_view piece = bytes.substr(0, nl);
    bytes.remove_prefix(nl + 1);
    ++line_;
    if (dropping_) {
      dropping_ = false;
    } else if (!partial_.empty()) {
      partial_.append(piece);
      accepted += parseLine(partial_);
      partial_.clear();
    } else {
      accepted += parseLine(piece);
    }
  }
  return accepted;
}

size_t RunEventReader::end() {
  if (ended_) return 0;
  ended_ = true;
  size_t accepted = 0;
  if (!partial_.empty() && !dropping_) {
    ++line_;
    std::string last = std::move(partial_);
    partial_.clear();
    // A whole object without its newline is fine; anything else was cut off mid-line.
    bool whole = json::accept(last);
    if (whole) {
      accepted = parseLine(last);
    } else {
      std::string shown = last.substr(0, 60);
      warn("run-events.truncated", "line " + std::to_string(line_) +
                                       " is truncated (the stream ended mid-line): '" + shown +
                                       (last.size() > 60 ? "...'" : "'"));
    }
  }
  partial_.clear();
  return accepted;
}

std::optional<OpKind> RunEventReader::kindFromName(const std::string& name) {
  if (auto k = builtinKindFromName(name)) return k;
  // A user-declared kind: the stream does not carry the schedule's kind table.
  auto it = std::find(userKinds_.begin(), userKinds_.end(), name);
  if (it == userKinds_.end() && name == kOptimizerStepKind) {
    // `run --optimizer` declares the optimizer step after the schedule's own kinds.
    userKinds_.push_back(name);
    it = userKinds_.end() - 1;
  }
  if (it == userKinds_.end()) return std::nullopt;
  return static_cast<OpKind>(kFirstUserKind + static_cast<int>(it - userKinds_.begin()));
}

bool RunEventReader::enterIteration(int iteration) {
  if (iteration < iteration_) return false;
  if (iteration > iteration_) {
    // A new measured iteration: the timeline is the newest one.
    iteration_ = iteration;
    ops_.clear();
    transfers_.clear();
    for (auto& m : memory_) m.clear();
  }
  return true;
}

size_t RunEventReader::parseLine(std::string_view raw) {
  std::string_view line = raw;
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
    line.remove_suffix(1);
  while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
  if (line.empty()) return 0;
  const std::string where = "line " + std::to_string(line_);
  json j = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    std::string shown(line.substr(0, 60));
    warn("run-events.garbage",
         where + " is not a JSON object: '" + shown + (line.size() > 60 ? "...'" : "'"));
    return 0;
  }
  const std::string type = getString(j, "type");
  if (type.empty()) {
    warn("run-events.no-type", where + " has no \"type\"");
    return 0;
  }
  auto bad = [&](const std::string& what) {
    warn("run-events.bad-field", where + ": " + type + " event " + what + "; ignored");
    return size_t{0};
  };

  if (type == "op") {
    int device = 0, step = -1, stage = 0, microbatch = 0, iteration = 0;
    double start = 0, end = 0;
    if (!getInt(j, "device", device) || device < 0 || device > limits::kMaxRank)
      return bad("has no valid device");
    if (!getDouble(j, "start_ms", start) || !getDouble(j, "end_ms", end) || !limits::validTimeMs(start) ||
        !limits::validTimeMs(end))
      return bad("has no valid start_ms/end_ms");
    if (!getInt(j, "stage", stage) || stage < 0 || stage >= limits::kMaxStages)
      return bad("has no valid stage");
    getInt(j, "microbatch", microbatch);
    if (microbatch < -1 || microbatch >= limits::kMaxMicrobatches)
      return bad("has an out-of-range microbatch");
    if (ops_.size() >= static_cast<size_t>(limits::kMaxOps))
      return bad("is past the limit of " + std::to_string(limits::kMaxOps) + " ops per iteration");
    getInt(j, "step", step);
    getInt(j, "iteration", iteration);
    const std::string kindName = getString(j, "kind");
    auto kind = kindFromName(kindName);
    if (!kind) return bad("has kind '" + kindName + "' this reader does not know");
    if (!enterIteration(iteration))
      return bad("belongs to iteration " + std::to_string(iteration) + " after iteration " +
                 std::to_string(iteration_) + " began");
    TimelineOp op;
    op.device = device;
    op.step = step;
    op.op = Op{*kind, stage, microbatch};
    op.overlapped = getBool(j, "overlapped", false);
    op.start = start;
    op.end = std::max(start, end);
    ops_.push_back(op);
    maxDevice_ = std::max(maxDevice_, device);
    ++opEvents_;
  } else if (type == "memory") {
    int device = 0, iteration = 0;
    MemorySample s;
    if (!getInt(j, "device", device) || device < 0 || device > limits::kMaxRank)
      return bad("has no valid device");
    if (!getDouble(j, "time_ms", s.time) || !getInt64(j, "bytes", s.bytes) || !limits::validTimeMs(s.time) ||
        !limits::validBytes(s.bytes))
      return bad("has no valid time_ms/bytes");
    getInt(j, "iteration", iteration);
    if (!enterIteration(iteration)) return bad("belongs to an earlier iteration");
    if (memory_.size() <= static_cast<size_t>(device)) memory_.resize(static_cast<size_t>(device) + 1);
    auto& curve = memory_[static_cast<size_t>(device)];
    // Keep the curve time-ordered even if samples of one device arrive slightly out of order.
    auto pos = std::upper_bound(curve.begin(), curve.end(), s.time,
                                [](double t, const MemorySample& m) { return t < m.time; });
    curve.insert(pos, s);
    maxDevice_ = std::max(maxDevice_, device);
  } else if (type == "transfer") {
    Transfer t;
    int iteration = 0;
    if (!getInt(j, "src_device", t.srcDevice) || !getInt(j, "dst_device", t.dstDevice) || t.srcDevice < 0 ||
        t.dstDevice < 0 || t.srcDevice > limits::kMaxRank || t.dstDevice > limits::kMaxRank)
      return bad("has no valid src_device/dst_device");
    if (!getDouble(j, "start_ms", t.start) || !getDouble(j, "end_ms", t.end) ||
        !limits::validTimeMs(t.start) || !limits::validTimeMs(t.end))
      return bad("has no valid start_ms/end_ms");
    if (!getInt64(j, "bytes", t.bytes) || !limits::validBytes(t.bytes)) return bad("has no valid bytes");
    for (auto [key, op] : {std::pair{"producer", &t.producer}, std::pair{"consumer", &t.consumer}}) {
      auto it = j.find(key);
      if (it == j.end() || !it->is_object()) return bad(std::string("has no ") + key);
      const std::string kindName = getString(*it, "kind");
      auto kind = kindFromName(kindName);
      if (!kind)
        return bad(std::string("has a ") + key + " of kind '" + kindName + "' this reader does not know");
      if (!getInt(*it, "stage", op->stage) || op->stage < 0 || op->stage >= limits::kMaxStages)
        return bad(std::string("has no valid ") + key + " stage");
      getInt(*it, "microbatch", op->microbatch);
      if (op->microbatch < -1 || op->microbatch >= limits::kMaxMicrobatches)
        return bad(std::string("has an out-of-range ") + key + " microbatch");
      op->kind = *kind;
    }
    if (transfers_.size() >= static_cast<size_t>(limits::kMaxOps))
      return bad("is past the limit of " + std::to_string(limits::kMaxOps) + " transfers per iteration");
    getInt(j, "iteration", iteration);
    if (!enterIteration(iteration)) return bad("belongs to an earlier iteration");
    transfers_.push_back(t);
    maxDevice_ = std::max({maxDevice_, t.srcDevice, t.dstDevice});
  } else if (type == "progress") {
    RunProgress p;
    if (!getInt(j, "iteration", p.iteration) || !getInt(j, "iterations", p.iterations))
      return bad("has no iteration/iterations");
    p.warmup = getBool(j, "warmup", false);
    progress_ = p;
  } else if (type == "started") {
    RunStartedInfo s;
    if (!getInt(j, "protocol_version", s.protocolVersion)) return bad("has no protocol_version");
    s.schedule = getString(j, "schedule");
    s.model = getString(j, "model");
    s.device = getString(j, "device");
    getInt(j, "devices", s.devices);
    getInt(j, "stages", s.stages);
    getInt(j, "microbatches", s.microbatches);
    // The timeline sizes per-device arrays from `devices`.
    if (s.devices < 0 || s.devices > limits::kMaxDevices)
      return bad("has devices " + std::to_string(s.devices) + ", out of range (0.." +
                 std::to_string(limits::kMaxDevices) + ")");
    if (s.stages < 0 || s.stages > limits::kMaxStages)
      return bad("has stages " + std::to_string(s.stages) + ", out of range (0.." +
                 std::to_string(limits::kMaxStages) + ")");
    if (s.microbatches < 0 || s.microbatches > limits::kMaxMicrobatches)
      return bad("has microbatches " + std::to_string(s.microbatches) + ", out of range (0.." +
                 std::to_string(limits::kMaxMicrobatches) + ")");
    getInt(j, "microbatch_size", s.microbatchSize);
    getInt(j, "iterations", s.iterations);
    getInt(j, "warmup", s.warmup);
    getInt(j, "rank", s.rank);
    getInt(j, "world_size", s.worldSize);
    getInt(j, "threads", s.threads);
    if (auto o = getString(j, "optimizer"); !o.empty()) s.optimizer = o;
    getDouble(j, "lr", s.learningRate);
    getInt(j, "local_world_size", s.localWorldSize);
    getInt64(j, "parameters", s.parameters);
    getInt64(j, "seed", s.seed);
    getInt64(j, "started_ms", s.startedMs);
    for (double v : getDoubles(j, "partition")) {
      auto layers = limits::wholeInRange(v, 0, std::numeric_limits<int>::max());
      if (!layers) return bad("has a partition entry out of range");
      s.partition.push_back(static_cast<int>(*layers));
    }
    if (s.protocolVersion != kRunEventProtocolVersion)
      warn("run-events.protocol", where + ": the stream speaks run-event protocol " +
                                      std::to_string(s.protocolVersion) + ", this reader protocol " +
                                      std::to_string(kRunEventProtocolVersion));
    if (s.devices > 0) maxDevice_ = std::max(maxDevice_, s.devices - 1);
    started_ = std::move(s);
  } else if (type == "error") {
    RunErrorEvent e;
    e.code = getString(j, "code");
    e.message = getString(j, "message");
    getInt(j, "device", e.device);
    getInt(j, "step", e.step);
    e.stage = getString(j, "stage");
    getInt(j, "protocol_version", e.protocolVersion);
    if (auto it = j.find("related"); it != j.end() && it->is_array())
      for (const auto& r : *it)
        if (r.is_array() && r.size() == 2 && r[0].is_number_integer() && r[1].is_number_integer() &&
            r[0].get<std::int64_t>() >= 0 && r[0].get<std::int64_t>() <= limits::kMaxRank &&
            r[1].get<std::int64_t>() >= 0 && r[1].get<std::int64_t>() < limits::kMaxOps &&
            e.related.size() < static_cast<size_t>(limits::kMaxRank) + 1)
          e.related.push_back(OpRef{r[0].get<int>(), r[1].get<int>()});
    e.line = static_cast<int>(line_);
    if (e.message.empty() && e.code.empty()) return bad("has neither code nor message");
    errors_.push_back(std::move(e));
  } else if (type == "stuck") {
    StuckDevice d;
    if (!getInt(j, "device", d.device) || d.device < 0 || d.device > limits::kMaxRank)
      return bad("has no valid device");
    const auto state = stuckStateFromName(getString(j, "state"));
    if (!state) return bad("has an unknown state");
    d.state = *state;
    getInt(j, "step", d.step);
    d.action = getString(j, "action");
    getInt(j, "waits_on_device", d.waitsOnDevice);
    if (d.waitsOnDevice < -1 || d.waitsOnDevice > limits::kMaxRank)
      return bad("has no valid waits_on_device");
    d.waitsFor = getString(j, "waits_for");
    getInt(j, "waits_for_step", d.waitsForStep);
    getDouble(j, "seconds", d.seconds);
    d.note = getString(j, "note");
    if (static_cast<size_t>(d.device) >= stuck_.size()) stuck_.resize(static_cast<size_t>(d.device) + 1);
    stuck_[static_cast<size_t>(d.device)] = std::move(d);
  } else if (type == "finished") {
    RunFinishedInfo f;
    f.status = getString(j, "status");
    if (f.status.empty()) return bad("has no status");
    // A token this reader does not know (a newer writer) is not a success.
    f.state = runStateFromEventStatus(f.status).value_or(RunState::Failed);
    f.losses = getDoubles(j, "losses");
    f.iterationMs = getDoubles(j, "iteration_ms");
    getDouble(j, "makespan_ms", f.makespanMs);
    getDouble(j, "bubble_ratio", f.bubbleRatio);
    if (auto it = j.find("gradient_check"); it != j.end() && it->is_object()) {
      RunGradientCheck g;
      g.passed = getBool(*it, "passed", false);
      getDouble(*it, "max_relative_error", g.maxRelativeError);
      g.worstParameter = getString(*it, "worst_parameter");
      getDouble(*it, "loss_relative_error", g.lossRelativeError);
      getDouble(*it, "tolerance", g.tolerance);
      f.gradientCheck = g;
    }
    finished_ = std::move(f);
  } else {
    warn("run-events.unknown-type", where + ": unknown event type '" + type + "' (ignored)");
    return 0;
  }
  ++events_;
  return 1;
}

Timeline RunEventReader::timeline() const {
  Timeline t;
  t.source = TimelineSource::Measured;
  t.label = started_ && !started_->schedule.empty() ? started_->schedule : source_;
  t.devices = std::max(maxDevice_ + 1, started_ ? started_->devices : 0);
  t.ops = ops_;
  std::stable_sort(t.ops.begin(), t.ops.end(), [](const TimelineOp& a, const TimelineOp& b) {
    return a.device != b.device ? a.device < b.device : a.start < b.start;
  });
  t.transfers = transfers_;
  t.memory = memory_;
  t.memory.resize(static_cast<size_t>(t.devices));
  for (const auto& e : errors_) {
    Diagnostic d =
        makeError(e.code.empty() ? "engine.error" : e.code, e.message, SourceLocation{source_, e.line, 0});
    if (e.device >= 0 && e.step >= 0) d.related.push_back({e.device, e.step});
    for (const OpRef& r : e.related)
      if (r.device != e.device || r.step != e.step) d.related.push_back(r);
    t.diagnostics.push_back(std::move(d));
  }
  t.complete = finished_ && finished_->state == RunState::Succeeded;
  if (!t.complete && t.diagnostics.empty()) {
    std::string why = finished_ ? "the run ended " + finished_->status
                                : "the run-event stream ended before the run finished";
    t.diagnostics.push_back(
        makeError(finished_ && finished_->status == "cancelled" ? "engine.cancelled" : "run.incomplete", why,
                  SourceLocation{source_, 0, 0}));
  }
  // A hung run's post-mortem: where each device stood, one note each (hang_report.h).
  if (!t.complete)
    for (const StuckDevice& d : stuck_)
      if (d.device >= 0)
        t.diagnostics.push_back(stuckNote(d, started_ && started_->worldSize > 1 ? "rank" : "device"));
  t.metrics = computeMetrics(t);
  return t;
}

std::string cliVersionLine(std::string_view programVersion) {
  return "pipestudio-cli " + std::string(programVersion) + " (run-event protocol " +
         std::to_string(kRunEventProtocolVersion) + ")";
}

std::optional<CliVersion> parseVersionLine(std::string_view output, std::string_view programName) {
  std::string_view line = output.substr(0, output.find('\n'));
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\0'))
    line.remove_suffix(1);
  if (line.size() <= programName.size() || line.substr(0, programName.size()) != programName ||
      line[programName.size()] != ' ')
    return std::nullopt;
  line.remove_prefix(programName.size() + 1);
  CliVersion v;
  const size_t sp = line.find(' ');
  v.program = std::string(line.substr(0, sp));
  if (v.program.empty()) return std::nullopt;
  if (sp == std::string_view::npos) return v;
  std::string_view rest = line.substr(sp + 1);
  constexpr std::string_view proto = "(run-event protocol ";
  if (rest.substr(0, proto.size()) != proto || rest.back() != ')') return v;
  rest = rest.substr(proto.size(), rest.size() - proto.size() - 1);
  int n = 0;
  if (rest.empty() || rest.size() > 6) return v;
  for (char c : rest) {
    if (c < '0' || c > '9') return v;
    n = n * 10 + (c - '0');
  }
  v.protocol = n;
  return v;
}

std::optional<CliVersion> parseCliVersion(std::string_view output) {
  return parseVersionLine(output, "pipestudio-cli");
}

Timeline partialTimelineFromRanks(const std::vector<RunEventReader>& readers, int devices,
                                  std::string label) {
  Timeline tl;
  tl.source = TimelineSource::Measured;
  tl.label = std::move(label);
  tl.devices = devices;
  tl.memory.resize(static_cast<size_t>(std::max(0, devices)));
  int newest = -1;
  for (const auto& r : readers) newest = std::max(newest, r.timelineIteration());
  for (int rank = 0; rank < static_cast<int>(readers.size()); ++rank) {
    const auto& reader = readers[static_cast<size_t>(rank)];
    if (newest < 0 || reader.timelineIteration() != newest) continue;
    Timeline part = reader.timeline();
    for (const auto& op : part.ops)
      if (op.device == rank) tl.ops.push_back(op);
    for (const auto& t : part.transfers)
      if (t.dstDevice == rank) tl.transfers.push_back(t);
    if (rank < devices && static_cast<size_t>(rank) < part.memory.size())
      tl.memory[static_cast<size_t>(rank)] = part.memory[static_cast<size_t>(rank)];
  }
  std::sort(tl.ops.begin(), tl.ops.end(), [](const auto& a, const auto& b) {
    return std::tie(a.device, a.start) < std::tie(b.device, b.start);
  });
  tl.complete = false;
  return tl;
}

namespace run_event {

namespace {
std::string line(const nlohmann::json& j) {
  return j.dump();
}
}  // namespace

std::string started(const RunStartedInfo& s) {
  return line({{"type", "started"},
               {"protocol_version", s.protocolVersion},
               {"schedule", s.schedule},
               {"model", s.model},
               {"device", s.device},
               {"devices", s.devices},
               {"stages", s.stages},
               {"microbatches", s.microbatches},
               {"microbatch_size", s.microbatchSize},
               {"iterations", s.iterations},
               {"warmup", s.warmup},
               {"partition", s.partition},
               {"rank", s.rank},
               {"world_size", s.worldSize},
               {"threads", s.threads},
               {"optimizer", s.optimizer},
               {"lr", s.learningRate},
               {"local_world_size", s.localWorldSize},
               {"parameters", s.parameters},
               {"seed", s.seed},
               {"started_ms", s.startedMs}});
}

std::string progress(const RunProgress& p) {
  return line(
      {{"type", "progress"}, {"iteration", p.iteration}, {"iterations", p.iterations}, {"warmup", p.warmup}});
}

std::string op(int iteration, const TimelineOp& r, std::string_view opName, std::string_view kindName) {
  return line({{"type", "op"},
               {"iteration", iteration},
               {"device", r.device},
               {"step", r.step},
               {"op", opName},
               {"kind", kindName},
               {"stage", r.op.stage},
               {"microbatch", r.op.microbatch},
               {"overlapped", r.overlapped},
               {"start_ms", r.start},
               {"end_ms", r.end}});
}

std::string memory(int iteration, int device, double timeMs, std::int64_t bytes) {
  return line({{"type", "memory"},
               {"iteration", iteration},
               {"device", device},
               {"time_ms", timeMs},
               {"bytes", bytes}});
}

std::string transfer(int iteration, const Transfer& t, std::string_view producerName,
                     std::string_view consumerName) {
  return line({{"type", "transfer"},
               {"iteration", iteration},
               {"src_device", t.srcDevice},
               {"dst_device", t.dstDevice},
               {"producer",
                {{"kind", producerName}, {"stage", t.producer.stage}, {"microbatch", t.producer.microbatch}}},
               {"consumer",
                {{"kind", consumerName}, {"stage", t.consumer.stage}, {"microbatch", t.consumer.microbatch}}},
               {"bytes", t.bytes},
               {"start_ms", t.start},
               {"end_ms", t.end}});
}

std::string error(const RunErrorEvent& e) {
  nlohmann::json j{
      {"type", "error"}, {"code", e.code}, {"message", e.message}, {"device", e.device}, {"step", e.step}};
  if (!e.stage.empty()) j["stage"] = e.stage;
  if (e.protocolVersion > 0) j["protocol_version"] = e.protocolVersion;
  if (!e.related.empty()) {
    nlohmann::json rel = nlohmann::json::array();
    for (const OpRef& r : e.related) rel.push_back({r.device, r.step});
    j["related"] = std::move(rel);
  }
  return line(j);
}

std::string stuck(const StuckDevice& d) {
  nlohmann::json j{
      {"type", "stuck"}, {"device", d.device}, {"state", stuckStateName(d.state)}, {"step", d.step}};
  if (!d.action.empty()) j["action"] = d.action;
  if (d.state == StuckDevice::State::Waiting) {
    j["waits_on_device"] = d.waitsOnDevice;
    j["waits_for"] = d.waitsFor;
    j["waits_for_step"] = d.waitsForStep;
    j["seconds"] = d.seconds;
  }
  if (!d.note.empty()) j["note"] = d.note;
  return line(j);
}

std::string finished(const RunFinishedInfo& f) {
  nlohmann::json j{{"type", "finished"},          {"status", runEventStatusToken(f.state)},
                   {"losses", f.losses},          {"iteration_ms", f.iterationMs},
                   {"makespan_ms", f.makespanMs}, {"bubble_ratio", f.bubbleRatio}};
  if (f.gradientCheck)
    j["gradient_check"] = {{"passed", f.gradientCheck->passed},
                           {"max_relative_error", f.gradientCheck->maxRelativeError},
                           {"worst_parameter", f.gradientCheck->worstParameter},
                           {"loss_relative_error", f.gradientCheck->lossRelativeError},
                           {"tolerance", f.gradientCheck->tolerance}};
  return line(j);
}

std::string refused(const std::string& code, const std::string& message) {
  RunErrorEvent e;
  e.code = code;
  e.message = message;
  e.stage = "refused";
  e.protocolVersion = kRunEventProtocolVersion;
  return error(e);
}

std::string endedEarly(RunState state, const Timeline& partial) {
  RunFinishedInfo f;
  f.state = state;
  f.makespanMs = partial.metrics.makespan;
  f.bubbleRatio = partial.metrics.bubbleRatio;
  return finished(f);
}

}  // namespace run_event

}  // namespace ps::core
