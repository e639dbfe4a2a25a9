#include "pipestudio/core/io/trace_import.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "io/json_locate.h"
#include "io/trace_text.h"
#include "pipestudio/core/model/limits.h"

namespace ps::core {

namespace {

using detail::lower;
using detail::parseOpToken;
using detail::readInt;
using detail::trim;
using nlohmann::json;

// "rank3", "rank_3", "rank-3", "Rank 3" anywhere in a string.
std::optional<int> rankIn(std::string_view s, std::string_view word) {
  std::string l = lower(s);
  size_t from = 0;
  while ((from = l.find(word, from)) != std::string::npos) {
    size_t pos = from + word.size();
    while (pos < l.size() &&
           (l[pos] == '_' || l[pos] == '-' || l[pos] == ' ' || l[pos] == ':' || l[pos] == '#'))
      ++pos;
    int r = 0;
    if (readInt(l, pos, r)) return r;
    from += word.size();
  }
  return std::nullopt;
}

std::string baseName(const std::string& path) {
  auto slash = path.find_last_of("/\\");
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::optional<double> number(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return std::nullopt;
  if (it->is_number()) return it->get<double>();
  if (it->is_string()) {
    try {
      size_t used = 0;
      const auto& s = it->get_ref<const std::string&>();
      double v = std::stod(s, &used);
      if (used == s.size()) return v;
    } catch (...) {
    }
  }
  return std::nullopt;
}

// A number outside int64 is "missing": the cast would be undefined.
std::optional<long long> integer(const json& j, const char* key) {
  auto v = number(j, key);
  if (!v) return std::nullopt;
  if (auto i = limits::toInt64(*v)) return static_cast<long long>(*i);
  return std::nullopt;
}

// Stage and micro-batch numbers of an op given in args: within the limits, else none.
std::optional<int> stageNumber(const json& j, const char* key) {
  auto v = integer(j, key);
  if (!v || *v < 0 || *v >= limits::kMaxStages) return std::nullopt;
  return static_cast<int>(*v);
}
std::optional<int> microbatchNumber(const json& j, const char* key) {
  auto v = integer(j, key);
  if (!v || *v < -1 || *v >= limits::kMaxMicrobatches) return std::nullopt;
  return static_cast<int>(*v);
}

std::string stringField(const json& j, const char* key) {
  auto it = j.find(key);
  if (it != j.end() && it->is_string()) return it->get<std::string>();
  return {};
}

// One pipeline action's range as found in a file, before ranks and iterations are resolved.
struct RawRange {
  size_t file = 0;
  long long pid = 0;
  bool gpu = false;
  std::string name;  // action text (without "PP:") or the op token
  PipelineAction action;
  double startUs = 0;
  double endUs = 0;
  int rank = -1;  // known from the event itself (own traces' args, args.rank)
};

// A transfer of our own export (cat "comm", with src/dst/producer_op/consumer_op args).
struct RawTransfer {
  Transfer transfer;  // times in us until resolved
};

// A memory sample: our own "memory" counter, or torch.profiler's "[memory]" instant events
// ("Total Allocated" after each allocation; Device Type 1 = CUDA).
struct RawMemory {
  size_t file = 0;
  long long pid = 0;
  bool gpu = false;
  int rank = -1;
  double timeUs = 0;
  std::int64_t bytes = 0;
};

struct FileScan {
  std::optional<int> fileRank;
  std::optional<bool> complete;  // our own traces say whether the timeline was complete
  std::string label;
  std::map<long long, int> pidRank;  // from process metadata
  std::optional<long long> baseTimeNs;
  bool own = false;
};

bool isGpuCategory(std::string_view cat) {
  std::string l = lower(cat);
  return l.find("gpu") != std::string::npos || l == "kernel" || l.find("cuda") != std::string::npos;
}

bool looksLikeOwnTrace(const json& top, const json& events) {
  if (top.is_object()) {
    auto od = top.find("otherData");
    if (od != top.end() && od->is_object()) {
      std::string gen = lower(stringField(*od, "generator"));
      if (gen.find("pipestudio") != std::string::npos) return true;
    }
    if (top.contains("pipestudio")) return true;
  }
  for (const auto& e : events) {
    if (!e.is_object() || stringField(e, "ph") != "M") continue;
    std::string name = lower(stringField(e, "name"));
    if (name.find("pipestudio") != std::string::npos) return true;
    auto args = e.find("args");
    if (args != e.end() && args->is_object()) {
      if (args->contains("pipestudio")) return true;
      if (lower(stringField(*args, "generator")).find("pipestudio") != std::string::npos) return true;
    }
  }
  return false;
}

struct Collector {
  std::vector<RawRange> ranges;
  std::vector<RawTransfer> transfers;
  std::vector<RawMemory> memory;
  Diagnostics diags;
  Diagnostics errors;  // values out of range: the import is refused
  size_t ignored = 0;
  size_t warnings = 0;

  void error(std::string code, std::string message, SourceLocation loc) {
    if (errors.size() < 20) errors.push_back(makeError(std::move(code), std::move(message), std::move(loc)));
  }

  void warn(std::string code, std::string message, const std::string& file) {
    // Keep the list readable for a trace with thousands of oddities.
    if (++warnings > 20) return;
    SourceLocation loc;
    loc.file = file;
    diags.push_back(makeWarning(std::move(code), std::move(message), loc));
  }
};

// Extracts the op(s) of a slice name; nullopt when the slice is no pipeline action.
std::optional<PipelineAction> actionOf(const json& e, const std::string& name, bool own, Collector& c,
                                       const std::string& file, std::string_view text) {
  std::string_view n = trim(name);
  if (n.size() > 3 && n.substr(0, 3) == "PP:") {
    auto a = parsePipelineAction(n.substr(3));
    if (!a && a.error().code == "trace.limit") {
      // The slice's name as written (when it needs no JSON escapes) gives the line and column.
      size_t at = text.find("\"" + name + "\"");
      c.error(
          "trace.limit", a.error().message,
          at == std::string_view::npos ? SourceLocation{file, 0, 0} : locationOfOffset(text, at + 1, file));
      return std::nullopt;
    }
    if (!a) {
      c.warn("trace.action", file + ": " + a.error().message + " (event ignored)", file);
      return std::nullopt;
    }
    return *a;
  }
  if (!own) return std::nullopt;
  // Our own export: the op in args (kind, stage, microbatch), or the slice named "F3@s1".
  auto args = e.find("args");
  if (args != e.end() && args->is_object()) {
    std::string kindName = stringField(*args, "kind");
    auto stage = stageNumber(*args, "stage");
    if (!kindName.empty() && stage) {
      if (auto k = builtinKindFromName(kindName)) {
        PipelineAction a;
        a.op.kind = *k;
        a.op.stage = *stage;
        auto mb = microbatchNumber(*args, "microbatch");
        if (!mb) mb = microbatchNumber(*args, "micro_batch");
        a.op.microbatch = mb ? *mb : -1;
        return a;
      }
    }
  }
  if (auto op = parseOpToken(n)) {
    PipelineAction a;
    a.op = *op;
    return a;
  }
  if (auto a = parsePipelineAction(n)) return *a;
  return std::nullopt;
}

std::optional<Op> opFromArgs(const json& j) {
  if (!j.is_object()) return std::nullopt;
  auto k = builtinKindFromName(stringField(j, "kind"));
  auto stage = stageNumber(j, "stage");
  if (!k || !stage) return std::nullopt;
  auto mb = microbatchNumber(j, "microbatch");
  if (!mb) mb = microbatchNumber(j, "mb");
  return Op{*k, *stage, mb ? *mb : -1};
}

std::string showNumber(double v) {
  if (std::isfinite(v) && std::trunc(v) == v && std::fabs(v) < 1e15)
    return std::to_string(static_cast<long long>(v));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string rankRange() {
  return "(ranks are 0.." + std::to_string(limits::kMaxRank) + ")";
}

Status scanFile(size_t index, const TraceFile& f, Collector& c, FileScan& scan) {
  // A rank read from the file: negative means "none"; anything else outside the limits refuses
  // the import (per-rank arrays are sized from the largest rank).
  auto rankValue = [&](const json& obj, const char* key, const std::string& what) -> std::optional<int> {
    auto v = number(obj, key);
    if (!v) return std::nullopt;
    if (std::isfinite(*v) && *v < 0) return std::nullopt;
    auto r = limits::wholeInRange(*v, 0, limits::kMaxRank);
    if (!r) {
      c.error("trace.rank", what + " " + showNumber(*v) + " is out of range " + rankRange(),
              detail::locateJsonKey(f.text, key, *v, f.name));
      return std::nullopt;
    }
    return static_cast<int>(*r);
  };
  auto checkedRank = [&](std::optional<int> r, const std::string& what) -> std::optional<int> {
    if (r && *r > limits::kMaxRank) {
      c.error("trace.rank",
              f.name + ": " + what + " names rank " + std::to_string(*r) + ", out of range " + rankRange(),
              SourceLocation{f.name, 0, 0});
      return std::nullopt;
    }
    return r;
  };
  if (f.rank && (*f.rank < 0 || *f.rank > limits::kMaxRank))
    return makeError("trace.rank",
                     f.name + ": rank " + std::to_string(*f.rank) + " is out of range " + rankRange(),
                     SourceLocation{f.name, 0, 0});
  json top;
  try {
    top = json::parse(f.text);
  } catch (const json::parse_error& e) {
    size_t byte = e.byte > 0 ? e.byte - 1 : 0;
    auto loc = locationOfOffset(f.text, byte, f.name);
    std::string what = e.what();
    // nlohmann's message starts with "[json.exception.parse_error.101] parse error at line ..."
    auto colon = what.find(": ");
    std::string detail = colon == std::string::npos ? what : what.substr(colon + 2);
    return makeError("trace.json", f.name + ": not valid JSON (byte " + std::to_string(byte) + "): " + detail,
                     loc);
  } catch (const std::exception& e) {
    return makeError("trace.json", f.name + ": cannot read JSON: " + e.what(), SourceLocation{f.name, 0, 0});
  }

  const json* events = nullptr;
  if (top.is_array()) {
    events = &top;
  } else if (top.is_object()) {
    auto it = top.find("traceEvents");
    if (it == top.end() || !it->is_array())
      return makeError("trace.format", f.name + ": not a Chrome trace: no \"traceEvents\" array",
                       SourceLocation{f.name, 0, 0});
    events = &*it;
  } else {
    return makeError("trace.format",
                     f.name + ": not a Chrome trace: expected an object or an array of events",
                     SourceLocation{f.name, 0, 0});
  }

  scan.own = looksLikeOwnTrace(top, *events);
  if (f.rank) scan.fileRank = *f.rank;
  if (top.is_object()) {
    auto di = top.find("distributedInfo");
    if (!scan.fileRank && di != top.end() && di->is_object())
      if (auto r = rankValue(*di, "rank", "distributedInfo.rank")) scan.fileRank = *r;
    // Base times of several files are subtracted: half the int64 range keeps that exact.
    if (auto b = number(top, "baseTimeNanoseconds")) {
      if (auto ns = limits::wholeInRange(*b, -(1LL << 62), 1LL << 62))
        scan.baseTimeNs = *ns;
      else
        c.error("trace.time", "baseTimeNanoseconds " + showNumber(*b) + " is out of range",
                detail::locateJsonKey(f.text, "baseTimeNanoseconds", *b, f.name));
    }
    auto od = top.find("otherData");
    if (scan.own && od != top.end() && od->is_object()) {
      if (auto c = od->find("complete"); c != od->end() && c->is_boolean()) scan.complete = c->get<bool>();
      scan.label = stringField(*od, "label");
    }
  }
  if (!scan.fileRank && !scan.own)
    if (auto r = checkedRank(rankIn(baseName(f.name), "rank"), "the file name")) scan.fileRank = *r;

  // Begin events waiting for their end, per (pid, tid).
  struct Open {
    std::string name;
    double ts;
    size_t event;
  };
  std::map<std::pair<long long, std::string>, std::vector<Open>> open;

  auto tidKey = [](const json& e) {
    auto it = e.find("tid");
    if (it == e.end()) return std::string();
    return it->is_string() ? it->get<std::string>() : it->dump();
  };

  auto addRange = [&](const json& e, const std::string& name, double startUs, double endUs) {
    auto a = actionOf(e, name, scan.own, c, f.name, f.text);
    if (!a) {
      ++c.ignored;
      return;
    }
    RawRange r;
    r.file = index;
    r.pid = integer(e, "pid").value_or(0);
    r.gpu = isGpuCategory(stringField(e, "cat"));
    r.name = std::string(trim(name));
    r.action = *a;
    r.startUs = startUs;
    r.endUs = endUs;
    auto args = e.find("args");
    if (args != e.end() && args->is_object()) {
      if (auto rk = rankValue(*args, "rank", "event " + name + ": args.rank")) r.rank = *rk;
      if (scan.own)
        if (auto d = rankValue(*args, "device", "event " + name + ": args.device")) r.rank = *d;
    }
    c.ranges.push_back(std::move(r));
  };

  for (size_t i = 0; i < events->size(); ++i) {
    const json& e = (*events)[i];
    if (!e.is_object()) {
      ++c.ignored;
      continue;
    }
    std::string ph = stringField(e, "ph");
    std::string name = stringField(e, "name");
    if (ph == "M") {
      auto args = e.find("args");
      auto pid = integer(e, "pid");
      if (!pid || args == e.end() || !args->is_object()) continue;
      if (name == "process_name" || name == "process_labels") {
        std::string label = stringField(*args, name == "process_name" ? "name" : "labels");
        std::optional<int> r = rankIn(label, "rank");
        if (!r && scan.own) r = rankIn(label, "device");
        if (auto ok = checkedRank(r, "process label '" + label.substr(0, 80) + "'")) scan.pidRank[*pid] = *ok;
      }
      if (auto r = rankValue(*args, "rank", "process metadata args.rank")) scan.pidRank[*pid] = *r;
      continue;
    }
    if (ph == "C" && scan.own && name == "memory") {
      auto ts = number(e, "ts");
      auto args = e.find("args");
      if (ts && args != e.end() && args->is_object())
        if (auto b = integer(*args, "bytes"); b && limits::validBytes(*b) && limits::validTimeMs(*ts / 1000))
          c.memory.push_back(RawMemory{index, integer(e, "pid").value_or(0), false, -1, *ts, *b});
      continue;
    }
    if ((ph == "i" || ph == "I") && name == "[memory]") {
      auto ts = number(e, "ts");
      auto args = e.find("args");
      if (ts && args != e.end() && args->is_object())
        if (auto b = integer(*args, "Total Allocated");
            b && limits::validBytes(*b) && limits::validTimeMs(*ts / 1000)) {
          bool gpu = integer(*args, "Device Type").value_or(0) == 1;
          c.memory.push_back(RawMemory{index, integer(e, "pid").value_or(0), gpu, -1, *ts, *b});
        }
      continue;
    }
    if (ph == "X" && scan.own && stringField(e, "cat") == "comm") {
      auto ts = number(e, "ts");
      auto dur = number(e, "dur");
      auto args = e.find("args");
      if (ts && dur && args != e.end() && args->is_object()) {
        auto src = integer(*args, "src");
        auto dst = integer(*args, "dst");
        auto prod = args->contains("producer_op") ? opFromArgs((*args)["producer_op"]) : std::nullopt;
        auto cons = args->contains("consumer_op") ? opFromArgs((*args)["consumer_op"]) : std::nullopt;
        bool inRange = src && dst && *src >= 0 && *dst >= 0 && *src <= limits::kMaxRank &&
                       *dst <= limits::kMaxRank && std::isfinite(*ts) && std::isfinite(*dur) &&
                       std::fabs(*ts) <= 1e18 && std::fabs(*dur) <= 1e18;
        if (inRange && prod && cons) {
          RawTransfer rt;
          rt.transfer.srcDevice = static_cast<int>(*src);
          rt.transfer.dstDevice = static_cast<int>(*dst);
          rt.transfer.producer = *prod;
          rt.transfer.consumer = *cons;
          rt.transfer.bytes =
              std::clamp<long long>(integer(*args, "bytes").value_or(0), 0, limits::kMaxBytes);
          rt.transfer.start = *ts;
          rt.transfer.end = *ts + *dur;
          c.transfers.push_back(rt);
          continue;
        }
      }
      ++c.ignored;
      continue;
    }
    if (ph == "X") {
      auto ts = number(e, "ts");
      auto dur = number(e, "dur");
      // Microseconds; 1e18 us keeps ts + dur finite and exact enough (absolute epoch times are ~1.7e15).
      if (!ts || !dur || !std::isfinite(*ts) || !std::isfinite(*dur) || *dur < 0 || std::fabs(*ts) > 1e18 ||
          *dur > 1e18) {
        if (name.rfind("PP:", 0) == 0)
          c.warn("trace.event",
                 f.name + ": event " + std::to_string(i) + " '" + name + "' has no valid ts/dur (ignored)",
                 f.name);
        ++c.ignored;
        continue;
      }
      addRange(e, name, *ts, *ts + *dur);
    } else if (ph == "B" || ph == "E") {
      auto ts = number(e, "ts");
      if (!ts || !std::isfinite(*ts) || std::fabs(*ts) > 1e18) {
        ++c.ignored;
        continue;
      }
      auto key = std::make_pair(integer(e, "pid").value_or(0), tidKey(e));
      auto& stack = open[key];
      if (ph == "B") {
        stack.push_back({name, *ts, i});
        continue;
      }
      // "E" closes the innermost open range (of the same name when it has one).
      auto it = stack.rbegin();
      if (!name.empty())
        it = std::find_if(stack.rbegin(), stack.rend(), [&](const Open& o) { return o.name == name; });
      if (it == stack.rend()) {
        if (name.rfind("PP:", 0) == 0)
          c.warn("trace.unmatched",
                 f.name + ": event " + std::to_string(i) + " ends a range that never began (ignored)",
                 f.name);
        ++c.ignored;
        continue;
      }
      Open o = *it;
      stack.erase(std::next(it).base());
      addRange((*events)[o.event], o.name, o.ts, std::max(o.ts, *ts));
    } else {
      ++c.ignored;
    }
  }
  for (auto& [key, stack] : open)
    for (auto& o : stack)
      if (o.name.rfind("PP:", 0) == 0)
        c.warn("trace.unmatched", f.name + ": range '" + o.name + "' begins but never ends (ignored)",
               f.name);
  if (!c.errors.empty()) {
    Diagnostics e = std::move(c.errors);
    c.errors.clear();
    return e;
  }
  return okStatus();
}

struct OpKey {
  OpKind kind;
  int stage;
  int mb;
  auto operator<=>(const OpKey&) const = default;  // NOLINT(modernize-use-nullptr): clang-tidy 14 misreads it
};
OpKey keyOf(const Op& op) {
  return {op.kind, op.stage, op.microbatch};
}

}  // namespace

Result<ImportedTrace> importChromeTraces(const std::vector<TraceFile>& files,
                                         const TraceImportOptions& options) {
  if (files.empty()) return makeError("trace.input", "no trace files given");
  // Without rank metadata a file's position is its rank.
  if (files.size() > static_cast<size_t>(limits::kMaxDevices))
    return makeError("trace.input", std::to_string(files.size()) + " trace files: more than the " +
                                        std::to_string(limits::kMaxDevices) + " ranks a pipeline may have");
  Collector c;
  std::vector<FileScan> scans(files.size());
  Diagnostics errors;
  for (size_t i = 0; i < files.size(); ++i) {
    auto st = scanFile(i, files[i], c, scans[i]);
    if (!st) errors.insert(errors.end(), st.errors().begin(), st.errors().end());
  }
  if (!errors.empty()) return errors;

  bool anyOwn = std::any_of(scans.begin(), scans.end(), [](const FileScan& s) { return s.own; });
  bool allOwn = std::all_of(scans.begin(), scans.end(), [](const FileScan& s) { return s.own; });

  // Ranks: the file's rank (forced, distributedInfo, file name), else the event's or its
  // process's metadata, else the file's position (several files) or the process id's
  // position per side (one merged file without rank metadata).
  std::vector<std::map<std::pair<bool, long long>, int>> ordinal(files.size());
  for (const auto& r : c.ranges) ordinal[r.file].emplace(std::make_pair(r.gpu, r.pid), 0);
  for (auto& m : ordinal) {
    std::map<bool, int> next;
    for (auto& [k, v] : m) v = next[k.first]++;
  }
  bool guessedByFile = false;
  bool guessedByPid = false;
  auto resolveRank = [&](size_t file, long long pid, bool gpu, int eventRank, bool guessing) {
    const FileScan& s = scans[file];
    if (s.fileRank) return *s.fileRank;
    if (eventRank >= 0) return eventRank;
    if (auto it = s.pidRank.find(pid); it != s.pidRank.end()) return it->second;
    if (files.size() > 1) {
      guessedByFile = guessedByFile || guessing;
      return static_cast<int>(file);
    }
    auto it = ordinal[file].find({gpu, pid});
    if (it == ordinal[file].end()) return -1;
    guessedByPid = guessedByPid || guessing;
    return it->second;
  };
  for (auto& r : c.ranges) r.rank = resolveRank(r.file, r.pid, r.gpu, r.rank, true);
  for (auto& m : c.memory) m.rank = resolveRank(m.file, m.pid, m.gpu, m.rank, false);
  if (guessedByFile)
    c.diags.push_back(makeWarning("trace.rank",
                                  "some files name no rank (no distributedInfo, no 'rank' in the "
                                  "file name): ranks taken from the order of the files"));
  if (guessedByPid)
    c.diags.push_back(makeWarning("trace.rank",
                                  "the trace names no ranks: ranks assigned to process ids in "
                                  "ascending order"));

  // Time base: torch.profiler writes ts relative to baseTimeNanoseconds; put all files on it.
  std::optional<long long> minBase;
  for (auto& s : scans)
    if (s.baseTimeNs) minBase = minBase ? std::min(*minBase, *s.baseTimeNs) : *s.baseTimeNs;
  for (auto& r : c.ranges) {
    const FileScan& s = scans[r.file];
    if (s.baseTimeNs && minBase) {
      double off = static_cast<double>(*s.baseTimeNs - *minBase) / 1000.0;
      r.startUs += off;
      r.endUs += off;
    }
  }
  for (auto& m : c.memory) {
    const FileScan& s = scans[m.file];
    if (s.baseTimeNs && minBase) m.timeUs += static_cast<double>(*s.baseTimeNs - *minBase) / 1000.0;
  }

  c.ranges.erase(
      std::remove_if(c.ranges.begin(), c.ranges.end(), [](const RawRange& r) { return r.rank < 0; }),
      c.ranges.end());
  int maxRank = -1;
  for (auto& r : c.ranges) maxRank = std::max(maxRank, r.rank);
  int devices = maxRank + 1;

  // Sides: with Auto, an action's GPU-side range when the rank has one for it (what the
  // device really did), else its CPU-side range (e.g. SEND/RECV, which only the host records).
  std::vector<TraceSide> sides(static_cast<size_t>(std::max(devices, 0)), TraceSide::Cpu);
  std::set<std::pair<int, std::string>> onGpu;
  for (auto& r : c.ranges)
    if (r.gpu) {
      sides[static_cast<size_t>(r.rank)] = TraceSide::Gpu;
      onGpu.insert({r.rank, r.name});
    }
  if (options.side != TraceSide::Auto) std::fill(sides.begin(), sides.end(), options.side);
  std::vector<RawRange> kept;
  kept.reserve(c.ranges.size());
  for (auto& r : c.ranges) {
    bool keep = false;
    switch (options.side) {
      case TraceSide::Auto:
        keep = r.gpu || !onGpu.count({r.rank, r.name});
        break;
      case TraceSide::Gpu:
        keep = r.gpu;
        break;
      case TraceSide::Cpu:
        keep = !r.gpu;
        break;
    }
    if (keep) kept.push_back(std::move(r));
  }

  // One action may appear as several overlapping ranges (a GPU annotation per stream, or
  // both an "X" and a "B"/"E" form): merge overlapping ranges of the same name per rank.
  std::sort(kept.begin(), kept.end(), [](const RawRange& a, const RawRange& b) {
    return std::tie(a.rank, a.name, a.startUs, a.endUs) < std::tie(b.rank, b.name, b.startUs, b.endUs);
  });
  std::vector<RawRange> merged;
  merged.reserve(kept.size());
  for (auto& r : kept) {
    if (!merged.empty() && merged.back().rank == r.rank && merged.back().name == r.name &&
        r.startUs < merged.back().endUs) {
      merged.back().endUs = std::max(merged.back().endUs, r.endUs);
      continue;
    }
    merged.push_back(std::move(r));
  }

  // Iterations: the k-th occurrence of an action on a rank belongs to iteration k.
  std::sort(merged.begin(), merged.end(), [](const RawRange& a, const RawRange& b) {
    return std::tie(a.rank, a.startUs, a.endUs) < std::tie(b.rank, b.startUs, b.endUs);
  });
  // Stage actions (UNSHARD, RESHARD, REDUCE_GRAD) are the exception: PyTorch's runtime
  // unshards and reshards a stage several times in one step as its window of stages moves, so
  // they go to the iteration whose span of micro-batch actions holds them; one between two
  // iterations goes to the later when it is an UNSHARD (a prefetch for the next step's first
  // ops) and to the earlier otherwise (a RESHARD or REDUCE_GRAD after a step's last ops).
  auto stageAction = [](const RawRange& r) {
    return !r.action.overlapped() && isStageLevelKind(r.action.op.kind);
  };
  std::map<std::pair<int, std::string>, int> seen;
  std::vector<int> iterOf(merged.size(), 0);
  int iterations = 0;
  std::map<int, std::vector<std::pair<double, double>>> spans;  // rank -> iteration -> span
  for (size_t i = 0; i < merged.size(); ++i) {
    if (stageAction(merged[i])) continue;
    iterOf[i] = seen[{merged[i].rank, merged[i].name}]++;
    iterations = std::max(iterations, iterOf[i] + 1);
    auto& s = spans[merged[i].rank];
    if (static_cast<int>(s.size()) <= iterOf[i])
      s.resize(static_cast<size_t>(iterOf[i]) + 1,
               {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()});
    auto& span = s[static_cast<size_t>(iterOf[i])];
    span.first = std::min(span.first, merged[i].startUs);
    span.second = std::max(span.second, merged[i].endUs);
  }
  for (size_t i = 0; i < merged.size(); ++i) {
    if (!stageAction(merged[i])) continue;
    auto it = spans.find(merged[i].rank);
    if (it == spans.end()) {  // a rank with stage actions only: one per iteration, as before
      iterOf[i] = seen[{merged[i].rank, merged[i].name}]++;
      iterations = std::max(iterations, iterOf[i] + 1);
      continue;
    }
    const auto& s = it->second;
    const double t = merged[i].startUs;
    int k = 0;
    while (k + 1 < static_cast<int>(s.size()) && t >= s[static_cast<size_t>(k)].second) {
      // Past iteration k's last action: the next one's, unless it sits in the gap before it.
      if (t < s[static_cast<size_t>(k) + 1].first && merged[i].action.op.kind != OpKind::Unshard) break;
      ++k;
    }
    iterOf[i] = k;
  }
  ImportedTrace out;
  out.format = allOwn ? TraceFormat::PipeStudio : TraceFormat::TorchProfiler;
  out.iterations = std::max(iterations, 1);
  out.ignoredEvents = c.ignored;
  if (merged.empty()) {
    return makeError("trace.empty",
                     std::string(files.size() == 1 ? files[0].name + ": " : "") +
                         "no pipeline actions found (torch.profiler ranges named 'PP:<action>'" +
                         (anyOwn ? ", or PipeStudio op slices" : "") + ")");
  }
  int iteration = options.iteration < 0 ? out.iterations - 1 : options.iteration;
  if (iteration >= out.iterations)
    return makeError("trace.iteration", "the trace holds " + std::to_string(out.iterations) +
                                            " iteration(s); iteration " + std::to_string(options.iteration) +
                                            " does not exist");
  out.iteration = iteration;
  if (out.iterations > 1)
    c.diags.push_back(makeWarning("trace.iterations", "the trace holds " + std::to_string(out.iterations) +
                                                          " iterations; imported iteration " +
                                                          std::to_string(iteration) + " (0-based)"));

  Timeline& t = out.timeline;
  t.source = TimelineSource::Imported;
  t.devices = devices;
  t.memory.resize(static_cast<size_t>(devices));
  if (!options.label.empty()) {
    t.label = options.label;
  } else {
    for (size_t i = 0; i < files.size(); ++i) t.label += (i ? ", " : "") + baseName(files[i].name);
  }
  double originUs = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < merged.size(); ++i)
    if (iterOf[i] == iteration) originUs = std::min(originUs, merged[i].startUs);
  // Our own traces keep their time axis (a simulated timeline starts at 0 by construction).
  if (allOwn) originUs = 0;
  double endUs = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < merged.size(); ++i)
    if (iterOf[i] == iteration) endUs = std::max(endUs, merged[i].endUs);
  for (size_t i = 0; i < merged.size(); ++i) {
    if (iterOf[i] != iteration) continue;
    const RawRange& r = merged[i];
    TimelineOp op;
    op.device = r.rank;
    op.step = -1;
    op.op = r.action.op;
    op.overlapped = r.action.overlapped();
    op.start = (r.startUs - originUs) / 1000.0;
    op.end = (r.endUs - originUs) / 1000.0;
    t.ops.push_back(op);
    if (r.action.second) {
      op.op = *r.action.second;
      t.ops.push_back(op);
    }
  }
  std::stable_sort(t.ops.begin(), t.ops.end(), [](const TimelineOp& a, const TimelineOp& b) {
    return std::tie(a.device, a.start) < std::tie(b.device, b.start);
  });

  // Explicit SEND/RECV actions pair up into transfers: SEND_F(s, m) -> RECV_F(s+1, m) and
  // SEND_B(s, m) -> RECV_B(s-1, m). The transfer spans from the send's start to the later end.
  std::map<OpKey, size_t> index;
  for (size_t i = 0; i < t.ops.size(); ++i) index.emplace(keyOf(t.ops[i].op), i);
  auto find = [&](OpKind k, int s, int m) -> const TimelineOp* {
    auto it = index.find({k, s, m});
    return it == index.end() ? nullptr : &t.ops[it->second];
  };
  for (const auto& o : t.ops) {
    bool fwd = o.op.kind == OpKind::SendF;
    if (!fwd && o.op.kind != OpKind::SendB) continue;
    int peer = fwd ? o.op.stage + 1 : o.op.stage - 1;
    const TimelineOp* recv = find(fwd ? OpKind::RecvF : OpKind::RecvB, peer, o.op.microbatch);
    if (!recv) continue;
    Transfer tr;
    tr.srcDevice = o.device;
    tr.dstDevice = recv->device;
    if (fwd) {
      tr.producer = Op{OpKind::F, o.op.stage, o.op.microbatch};
      tr.consumer = Op{OpKind::F, peer, o.op.microbatch};
    } else {
      OpKind pk = find(OpKind::I, o.op.stage, o.op.microbatch) ? OpKind::I : OpKind::B;
      OpKind ck = find(OpKind::I, peer, o.op.microbatch) ? OpKind::I : OpKind::B;
      tr.producer = Op{pk, o.op.stage, o.op.microbatch};
      tr.consumer = Op{ck, peer, o.op.microbatch};
    }
    tr.start = o.start;
    tr.end = std::max(o.end, recv->end);
    t.transfers.push_back(tr);
  }
  for (const auto& rt : c.transfers) {
    Transfer tr = rt.transfer;
    if (tr.srcDevice < 0 || tr.dstDevice < 0 || tr.srcDevice >= devices || tr.dstDevice >= devices) continue;
    tr.start = (tr.start - originUs) / 1000.0;
    tr.end = (tr.end - originUs) / 1000.0;
    t.transfers.push_back(tr);
  }
  std::sort(t.transfers.begin(), t.transfers.end(),
            [](const Transfer& a, const Transfer& b) { return a.start < b.start; });

  // Memory curves: per rank, GPU samples when there are any, else host samples; for a trace
  // of several iterations, those of the imported one (the value before it starts at 0).
  {
    std::vector<bool> gpuMem(static_cast<size_t>(devices), false);
    for (const auto& m : c.memory)
      if (m.rank >= 0 && m.rank < devices && m.gpu) gpuMem[static_cast<size_t>(m.rank)] = true;
    std::vector<std::vector<RawMemory>> per(static_cast<size_t>(devices));
    for (const auto& m : c.memory)
      if (m.rank >= 0 && m.rank < devices && m.gpu == gpuMem[static_cast<size_t>(m.rank)])
        per[static_cast<size_t>(m.rank)].push_back(m);
    for (size_t d = 0; d < per.size(); ++d) {
      auto& v = per[d];
      std::stable_sort(v.begin(), v.end(),
                       [](const RawMemory& a, const RawMemory& b) { return a.timeUs < b.timeUs; });
      auto& curve = t.memory[d];
      std::optional<std::int64_t> before;
      for (const auto& m : v) {
        if (!allOwn && m.timeUs < originUs) {
          before = m.bytes;
          continue;
        }
        if (!allOwn && m.timeUs > endUs) break;
        if (before && (curve.empty())) curve.push_back(MemorySample{0, *before});
        curve.push_back(MemorySample{(m.timeUs - originUs) / 1000.0, m.bytes});
      }
      if (curve.empty() && before) curve.push_back(MemorySample{0, *before});
    }
  }
  if (allOwn) {
    bool complete = true;
    std::string label;
    for (const auto& s : scans) {
      if (s.complete && !*s.complete) complete = false;
      if (label.empty()) label = s.label;
    }
    t.complete = complete;
    if (options.label.empty() && !label.empty() && files.size() == 1) t.label = label;
  }

  t.metrics = computeMetrics(t);
  out.deviceSides = sides;
  t.diagnostics = std::move(c.diags);
  if (c.warnings > 20)
    t.diagnostics.push_back(
        makeWarning("trace.warnings", std::to_string(c.warnings - 20) + " more warning(s) not shown"));
  return out;
}

Result<ImportedTrace> importChromeTrace(std::string_view text, const std::string& filename,
                                        const TraceImportOptions& options) {
  return importChromeTraces({TraceFile{filename, std::string(text), std::nullopt}}, options);
}

}  // namespace ps::core
