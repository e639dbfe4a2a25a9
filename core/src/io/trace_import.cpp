#include "pipestudio/core/io/trace_import.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "io/input_source.h"
#include "io/json_stream.h"
#include "io/trace_text.h"
#include "pipestudio/core/model/limits.h"

namespace ps::core {

namespace {

using detail::lower;
using detail::parseOpToken;
using detail::readInt;
using detail::trim;
using nlohmann::json;

// "rank3", "rank_3", "rank-3", "Rank 3" anywhere in a string, but not inside a word ("frank-3").
std::optional<int> rankIn(std::string_view s, std::string_view word) {
  std::string l = lower(s);
  size_t from = 0;
  while ((from = l.find(word, from)) != std::string::npos) {
    if (from > 0 && std::isalpha(static_cast<unsigned char>(l[from - 1]))) {
      from += word.size();
      continue;
    }
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

std::string tidKey(const json& e) {
  auto it = e.find("tid");
  if (it == e.end()) return std::string();
  return it->is_string() ? it->get<std::string>() : it->dump();
}

// Where a pipeline action's range came from.
enum class RangeSource : std::uint8_t {
  Pipelining,  // "PP:<action>" (PyTorch's runtime, pipestudio.trace_ranges, the engine)
  StepName,    // "Forward i" / "Backward i" (ScheduleGPipe): the stage is the rank's
  Own,         // a slice of PipeStudio's own export (used only when the file is one)
};

// One pipeline action's range as found in a file, before ranks and iterations are resolved.
struct RawRange {
  size_t file = 0;
  long long pid = 0;
  std::string tid;
  bool gpu = false;
  bool commStream = false;  // GPU side, on a stream that ran only communication kernels
  RangeSource source = RangeSource::Pipelining;
  std::string name;  // action text (without "PP:") or the op token
  PipelineAction action;
  double startUs = 0;
  double endUs = 0;
  int rank = -1;     // known from the event itself (args.rank)
  int ownRank = -1;  // own traces: args.device
};

// A transfer of our own export (cat "comm", with src/dst/producer_op/consumer_op args).
struct RawTransfer {
  size_t file = 0;
  Transfer transfer;  // times in us until resolved
};

// A memory sample: our own "memory" counter, or torch.profiler's "[memory]" instant events
// ("Total Allocated" after each allocation; Device Type 1 = CUDA).
struct RawMemory {
  std::uint32_t file = 0;
  bool gpu = false;
  bool own = false;  // our own counter: used only when the file is ours
  long long pid = 0;
  int rank = -1;
  double timeUs = 0;
  std::int64_t bytes = 0;
};

// Kernels seen on one GPU stream (pid = device, tid = stream, as Kineto writes them).
struct StreamKernels {
  size_t communication = 0;  // NCCL kernels
  size_t other = 0;
};

struct FileScan {
  std::optional<int> forcedRank;
  std::optional<int> tracedRank;  // distributedInfo.rank
  SourceLocation tracedRankAt;
  std::optional<int> nameRank;   // from the file name
  std::optional<int> fileRank;   // resolved
  std::optional<bool> complete;  // our own traces say whether the timeline was complete
  std::string label;
  std::map<long long, int> pidRank;     // from process metadata ("rank N", args.rank)
  std::map<long long, int> pidOwnRank;  // our own export's "device N" processes
  std::map<std::pair<long long, std::string>, StreamKernels> streams;
  std::optional<long long> baseTimeNs;
  bool own = false;
};

bool isGpuCategory(std::string_view cat) {
  std::string l = lower(cat);
  return l.find("gpu") != std::string::npos || l == "kernel" || l.find("cuda") != std::string::npos;
}

// GPU activity Kineto writes on a stream's track: kernels, copies, memsets.
bool isKernelCategory(std::string_view cat) {
  return cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset" || cat == "Kernel" ||
         cat == "Memcpy" || cat == "Memset";
}

// NCCL's (and RCCL's) kernels: ncclDevKernel_SendRecv, ncclKernel_AllReduce_RING_LL_Sum_float, ...
bool isCommunicationKernel(std::string_view name) {
  std::string l = lower(name.substr(0, 64));
  return l.rfind("nccl", 0) == 0 || l.rfind("rccl", 0) == 0 || l.find("ncclkernel") != std::string::npos ||
         l.find("nccldevkernel") != std::string::npos;
}

// Actions that are communication themselves: their GPU side is their NCCL kernels.
bool isCommunicationKind(OpKind k) {
  switch (k) {
    case OpKind::SendF:
    case OpKind::RecvF:
    case OpKind::SendB:
    case OpKind::RecvB:
    case OpKind::Unshard:
    case OpKind::Reshard:
    case OpKind::ReduceGrad:
    case OpKind::WaitSendF:
    case OpKind::WaitSendB:
    case OpKind::WaitReduceGrad:
    case OpKind::Offload:
    case OpKind::Reload:
      return true;
    default:
      return false;
  }
}

// "Forward 3" / "Backward 3": ScheduleGPipe's (and _ScheduleForwardOnly's) record_function names.
std::optional<std::pair<OpKind, int>> stepRange(std::string_view name) {
  OpKind kind = OpKind::F;
  if (name.rfind("Forward ", 0) == 0) {
    name.remove_prefix(8);
  } else if (name.rfind("Backward ", 0) == 0) {
    kind = OpKind::B;
    name.remove_prefix(9);
  } else {
    return std::nullopt;
  }
  size_t pos = 0;
  int mb = 0;
  if (!readInt(name, pos, mb) || pos != name.size() || mb >= limits::kMaxMicrobatches) return std::nullopt;
  return std::make_pair(kind, mb);
}

// Whether a name may be a slice of our own export ("0F1", "F3@s1", "(0F7;7B3)OVERLAP_F_B").
bool ownOpLike(std::string_view name) {
  name = trim(name);
  if (name.empty()) return false;
  if (name.find("@s") != std::string_view::npos) return true;
  return std::isdigit(static_cast<unsigned char>(name.front())) || name.front() == '(';
}

struct Collector {
  std::vector<RawRange> ranges;
  std::vector<RawTransfer> transfers;  // own traces only
  std::vector<RawMemory> memory;
  Diagnostics diags;
  Diagnostics errors;  // values out of range: the import is refused
  size_t ignored = 0;
  size_t warnings = 0;
  size_t commKernels = 0;

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

// Our own export's op in a slice: from args (kind, stage, microbatch), or its name ("F3@s1",
// "0F1"). Used only when the whole file turns out to be ours.
std::optional<PipelineAction> ownAction(const json& e, std::string_view n) {
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

// Reads one file's events as they stream by (json_stream.h) into the collector.
class FileScanner : public detail::TraceStreamSink {
 public:
  FileScanner(size_t index, const std::string& name, Collector& c, FileScan& scan,
              std::function<bool(std::uint64_t, std::uint64_t)> progress)
      : index_(index), name_(name), c_(c), scan_(scan), progress_(std::move(progress)) {}

  bool wantMember(std::string_view key) const override {
    return key == "distributedInfo" || key == "baseTimeNanoseconds" || key == "otherData" ||
           key == "pipestudio";
  }

  void member(const std::string& key, json value, const detail::StreamMarks& marks) override {
    if (key == "pipestudio") {
      scan_.own = true;
    } else if (key == "distributedInfo" && value.is_object()) {
      if (auto r = rankValue(value, "rank", "distributedInfo.rank", marks)) {
        scan_.tracedRank = *r;
        scan_.tracedRankAt = marks.at("rank");
      }
    } else if (key == "baseTimeNanoseconds") {
      json holder{{"v", value}};
      // Base times of several files are subtracted: half the int64 range keeps that exact.
      if (auto b = number(holder, "v")) {
        if (auto ns = limits::wholeInRange(*b, -(1LL << 62), 1LL << 62))
          scan_.baseTimeNs = *ns;
        else
          c_.error("trace.time", "baseTimeNanoseconds " + showNumber(*b) + " is out of range",
                   marks.at("baseTimeNanoseconds"));
      }
    } else if (key == "otherData" && value.is_object()) {
      if (lower(stringField(value, "generator")).find("pipestudio") != std::string::npos) scan_.own = true;
      if (auto c = value.find("complete"); c != value.end() && c->is_boolean())
        scan_.complete = c->get<bool>();
      scan_.label = stringField(value, "label");
    }
  }

  std::optional<detail::EventWant> want(const std::string* ph, const std::string* cat,
                                        const std::string* name) const override {
    using W = detail::EventWant;
    if (!ph) return std::nullopt;
    const std::string& p = *ph;
    if (p == "M" || p == "B" || p == "E") return W::Whole;
    if (p == "i" || p == "I") {
      if (!name) return std::nullopt;
      return *name == "[memory]" ? W::Whole : W::Skip;
    }
    if (p == "C") {
      if (!name) return std::nullopt;
      return *name == "memory" ? W::Whole : W::Skip;
    }
    if (p != "X") return W::Skip;
    // Kernels: their track and name and time tell communication streams; args are not read.
    if (cat && isKernelCategory(*cat)) return W::NoArgs;
    if (!name) return std::nullopt;
    std::string_view n = trim(*name);
    if (n.rfind("PP:", 0) == 0 || stepRange(n) || ownOpLike(n)) return W::Whole;
    if (!cat) return std::nullopt;
    if (*cat == "compute" || *cat == "copy" || *cat == "comm") return W::Whole;
    return W::Skip;
  }

  void skipped() override { ++c_.ignored; }

  bool progress(std::uint64_t consumed, std::uint64_t size) override {
    return !progress_ || progress_(consumed, size);
  }

  void event(json& e, const detail::StreamMarks& marks) override {
    ++eventIndex_;
    std::string ph = stringField(e, "ph");
    std::string name = stringField(e, "name");
    if (ph == "M") {
      metadata(e, name, marks);
      return;
    }
    if (ph == "C" && name == "memory") {
      auto ts = number(e, "ts");
      auto args = e.find("args");
      if (ts && args != e.end() && args->is_object())
        if (auto b = integer(*args, "bytes");
            b && limits::validBytes(*b) && limits::validTimeMs(*ts / 1000)) {
          c_.memory.push_back(RawMemory{static_cast<std::uint32_t>(index_), false, true,
                                        integer(e, "pid").value_or(0), -1, *ts, *b});
          return;
        }
      ++c_.ignored;
      return;
    }
    if ((ph == "i" || ph == "I") && name == "[memory]") {
      auto ts = number(e, "ts");
      auto args = e.find("args");
      if (ts && args != e.end() && args->is_object())
        if (auto b = integer(*args, "Total Allocated");
            b && limits::validBytes(*b) && limits::validTimeMs(*ts / 1000)) {
          bool gpu = integer(*args, "Device Type").value_or(0) == 1;
          c_.memory.push_back(RawMemory{static_cast<std::uint32_t>(index_), gpu, false,
                                        integer(e, "pid").value_or(0), -1, *ts, *b});
          return;
        }
      ++c_.ignored;
      return;
    }
    const std::string cat = stringField(e, "cat");
    if (ph == "X" && isKernelCategory(cat)) {
      auto& s = scan_.streams[{integer(e, "pid").value_or(0), tidKey(e)}];
      if (isCommunicationKernel(name)) {
        ++s.communication;
        ++c_.commKernels;
      } else {
        ++s.other;
      }
      ++c_.ignored;
      return;
    }
    if (ph == "X" && cat == "comm") {
      ownTransfer(e);
      return;
    }
    if (ph == "X") {
      auto ts = number(e, "ts");
      auto dur = number(e, "dur");
      // Microseconds; 1e18 us keeps ts + dur finite and exact enough (absolute epoch times are ~1.7e15).
      if (!ts || !dur || !std::isfinite(*ts) || !std::isfinite(*dur) || *dur < 0 || std::fabs(*ts) > 1e18 ||
          *dur > 1e18) {
        if (name.rfind("PP:", 0) == 0)
          c_.warn("trace.event",
                  name_ + ": event " + std::to_string(eventIndex_ - 1) + " '" + name +
                      "' has no valid ts/dur (ignored)",
                  name_);
        ++c_.ignored;
        return;
      }
      addRange(e, name, *ts, *ts + *dur, marks);
      return;
    }
    if (ph == "B" || ph == "E") {
      beginEnd(e, ph, name, marks);
      return;
    }
    ++c_.ignored;
  }

  // After the last event: ranges still open, and what only the whole file tells.
  void finish() {
    for (auto& [key, stack] : open_)
      for (auto& o : stack)
        if (o.name.rfind("PP:", 0) == 0)
          c_.warn("trace.unmatched", name_ + ": range '" + o.name + "' begins but never ends (ignored)",
                  name_);
    open_.clear();
  }

 private:
  // A rank read from the file: negative means "none"; anything else outside the limits refuses
  // the import (per-rank arrays are sized from the largest rank).
  std::optional<int> rankValue(const json& obj, const char* key, const std::string& what,
                               const detail::StreamMarks& marks) {
    auto v = number(obj, key);
    if (!v) return std::nullopt;
    if (std::isfinite(*v) && *v < 0) return std::nullopt;
    auto r = limits::wholeInRange(*v, 0, limits::kMaxRank);
    if (!r) {
      c_.error("trace.rank", what + " " + showNumber(*v) + " is out of range " + rankRange(), marks.at(key));
      return std::nullopt;
    }
    return static_cast<int>(*r);
  }

  std::optional<int> checkedRank(std::optional<int> r, const std::string& what) {
    if (r && *r > limits::kMaxRank) {
      c_.error("trace.rank",
               name_ + ": " + what + " names rank " + std::to_string(*r) + ", out of range " + rankRange(),
               SourceLocation{name_, 0, 0});
      return std::nullopt;
    }
    return r;
  }

  void metadata(const json& e, const std::string& name, const detail::StreamMarks& marks) {
    std::string lname = lower(name);
    auto args = e.find("args");
    if (lname.find("pipestudio") != std::string::npos) scan_.own = true;
    if (args != e.end() && args->is_object()) {
      if (args->contains("pipestudio")) scan_.own = true;
      if (lower(stringField(*args, "generator")).find("pipestudio") != std::string::npos) scan_.own = true;
    }
    auto pid = integer(e, "pid");
    if (!pid || args == e.end() || !args->is_object()) return;
    if (name == "process_name" || name == "process_labels") {
      std::string label = stringField(*args, name == "process_name" ? "name" : "labels");
      if (auto ok = checkedRank(rankIn(label, "rank"), "process label '" + label.substr(0, 80) + "'"))
        scan_.pidRank[*pid] = *ok;
      else if (auto dev = checkedRank(rankIn(label, "device"), "process label '" + label.substr(0, 80) + "'"))
        scan_.pidOwnRank[*pid] = *dev;
    }
    if (auto r = rankValue(*args, "rank", "process metadata args.rank", marks)) scan_.pidRank[*pid] = *r;
  }

  void ownTransfer(const json& e) {
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
        rt.file = index_;
        rt.transfer.srcDevice = static_cast<int>(*src);
        rt.transfer.dstDevice = static_cast<int>(*dst);
        rt.transfer.producer = *prod;
        rt.transfer.consumer = *cons;
        rt.transfer.bytes = std::clamp<long long>(integer(*args, "bytes").value_or(0), 0, limits::kMaxBytes);
        rt.transfer.start = *ts;
        rt.transfer.end = *ts + *dur;
        c_.transfers.push_back(rt);
        return;
      }
    }
    ++c_.ignored;
  }

  void addRange(const json& e, const std::string& name, double startUs, double endUs,
                const detail::StreamMarks& marks) {
    std::string_view n = trim(name);
    RawRange r;
    if (n.size() > 3 && n.substr(0, 3) == "PP:") {
      auto a = parsePipelineAction(n.substr(3));
      if (!a && a.error().code == "trace.limit") {
        c_.error("trace.limit", a.error().message, marks.at("name"));
        return;
      }
      if (!a) {
        c_.warn("trace.action", name_ + ": " + a.error().message + " (event ignored)", name_);
        ++c_.ignored;
        return;
      }
      r.action = *a;
      r.name = std::string(n.substr(3));
      r.name = std::string(trim(r.name));
    } else if (auto step = stepRange(n)) {
      r.source = RangeSource::StepName;
      r.action.op = Op{step->first, -1, step->second};  // the stage is the rank's, once known
      r.name = std::string(n);
    } else if (auto own = ownAction(e, n)) {
      r.source = RangeSource::Own;
      r.action = *own;
      r.name = std::string(n);
    } else {
      ++c_.ignored;
      return;
    }
    r.file = index_;
    r.pid = integer(e, "pid").value_or(0);
    r.tid = tidKey(e);
    r.gpu = isGpuCategory(stringField(e, "cat"));
    r.startUs = startUs;
    r.endUs = endUs;
    auto args = e.find("args");
    if (args != e.end() && args->is_object()) {
      if (auto rk = rankValue(*args, "rank", "event " + name + ": args.rank", marks)) r.rank = *rk;
      if (r.source == RangeSource::Own)
        if (auto d = rankValue(*args, "device", "event " + name + ": args.device", marks)) r.ownRank = *d;
    }
    c_.ranges.push_back(std::move(r));
  }

  void beginEnd(const json& e, const std::string& ph, const std::string& name,
                const detail::StreamMarks& marks) {
    auto ts = number(e, "ts");
    if (!ts || !std::isfinite(*ts) || std::fabs(*ts) > 1e18) {
      ++c_.ignored;
      return;
    }
    auto& stack = open_[std::make_pair(integer(e, "pid").value_or(0), tidKey(e))];
    if (ph == "B") {
      stack.push_back(Open{name, *ts, e, marks});
      return;
    }
    // "E" closes the innermost open range (of the same name when it has one).
    auto it = stack.rbegin();
    if (!name.empty())
      it = std::find_if(stack.rbegin(), stack.rend(), [&](const Open& o) { return o.name == name; });
    if (it == stack.rend()) {
      if (name.rfind("PP:", 0) == 0)
        c_.warn(
            "trace.unmatched",
            name_ + ": event " + std::to_string(eventIndex_ - 1) + " ends a range that never began (ignored)",
            name_);
      ++c_.ignored;
      return;
    }
    Open o = std::move(*it);
    stack.erase(std::next(it).base());
    addRange(o.event, o.name, o.ts, std::max(o.ts, *ts), o.marks);
  }

  struct Open {
    std::string name;
    double ts;
    json event;
    detail::StreamMarks marks;
  };

  size_t index_;
  const std::string& name_;
  Collector& c_;
  FileScan& scan_;
  std::function<bool(std::uint64_t, std::uint64_t)> progress_;
  size_t eventIndex_ = 0;
  // Begin events waiting for their end, per (pid, tid).
  std::map<std::pair<long long, std::string>, std::vector<Open>> open_;
};

// Streams one file (from its path, or its text) through a scanner.
Result<std::uint64_t> scanFile(size_t index, const TraceFile& f, Collector& c, FileScan& scan,
                               const std::function<bool(std::uint64_t, std::uint64_t)>& progress,
                               bool& cancelled) {
  if (f.rank && (*f.rank < 0 || *f.rank > limits::kMaxRank))
    return makeError("trace.rank",
                     f.name + ": rank " + std::to_string(*f.rank) + " is out of range " + rankRange(),
                     SourceLocation{f.name, 0, 0});
  if (f.rank) scan.forcedRank = *f.rank;
  std::unique_ptr<detail::InputSource> in;
  if (!f.path.empty()) {
    auto opened = detail::openInputFile(f.path, f.name);
    if (!opened) return opened.errors();
    in = std::move(*opened);
  } else {
    in = detail::inputFromText(f.text, f.name);
  }
  FileScanner scanner(index, f.name, c, scan, progress);
  auto outcome = detail::streamChromeTrace(*in, f.name, scanner);
  if (!outcome) return outcome.errors();
  if (outcome->cancelled) {
    cancelled = true;
    return std::uint64_t{0};
  }
  scanner.finish();
  if (!scan.own)
    if (auto r = rankIn(baseName(f.name), "rank")) {
      if (*r > limits::kMaxRank)
        c.error("trace.rank",
                f.name + ": the file name names rank " + std::to_string(*r) + ", out of range " + rankRange(),
                SourceLocation{f.name, 0, 0});
      else
        scan.nameRank = *r;
    }
  if (!c.errors.empty()) {
    Diagnostics e = std::move(c.errors);
    c.errors.clear();
    return e;
  }
  return outcome->bytes;
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

// Explicit SEND/RECV actions pair up into transfers: SEND_F(s, m) -> RECV_F(s+1, m) and
// SEND_B(s, m) -> RECV_B(s-1, m). The transfer spans from the send's start to the later end.
void pairSendRecvTransfers(Timeline& t) {
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
}

// Memory curves: per rank, GPU samples when there are any, else host samples; for a trace
// of several iterations, those of the imported one (the value before it starts at 0).
void importMemoryCurves(const std::vector<RawMemory>& memory, int devices, bool allOwn, double originUs,
                        double endUs, Timeline& t) {
  std::vector<bool> gpuMem(static_cast<size_t>(devices), false);
  for (const auto& m : memory)
    if (m.rank >= 0 && m.rank < devices && m.gpu) gpuMem[static_cast<size_t>(m.rank)] = true;
  std::vector<std::vector<RawMemory>> per(static_cast<size_t>(devices));
  for (const auto& m : memory)
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

// Communication ranges of compute actions: the k-th of an action on a rank belongs to
// iteration k, as the actions themselves. Joined where one action's ranges overlap; sorted by
// device and start.
std::vector<CommunicationRange> communicationOfIteration(std::vector<RawRange> commRanges, int devices,
                                                         int iteration, double originUs) {
  std::vector<CommunicationRange> out;
  std::sort(commRanges.begin(), commRanges.end(), [](const RawRange& a, const RawRange& b) {
    return std::tie(a.rank, a.name, a.startUs, a.endUs) < std::tie(b.rank, b.name, b.startUs, b.endUs);
  });
  std::vector<RawRange> joined;
  for (auto& r : commRanges) {
    if (r.rank < 0 || r.rank >= devices) continue;
    if (!joined.empty() && joined.back().rank == r.rank && joined.back().name == r.name &&
        r.startUs < joined.back().endUs) {
      joined.back().endUs = std::max(joined.back().endUs, r.endUs);
      continue;
    }
    joined.push_back(std::move(r));
  }
  std::map<std::pair<int, std::string>, int> occurrence;
  for (const auto& r : joined) {
    if (occurrence[{r.rank, r.name}]++ != iteration) continue;
    out.push_back(CommunicationRange{r.rank, r.action.op, (r.startUs - originUs) / 1000.0,
                                     (r.endUs - originUs) / 1000.0});
  }
  std::sort(out.begin(), out.end(), [](const CommunicationRange& a, const CommunicationRange& b) {
    return std::tie(a.device, a.start) < std::tie(b.device, b.start);
  });
  return out;
}

// Reads every file into `c` and `scans` (one per file), reporting progress over all of them;
// the bytes of text read.
Result<std::uint64_t> scanFiles(const std::vector<TraceFile>& files, const TraceImportOptions& options,
                                Collector& c, std::vector<FileScan>& scans) {
  // Sizes up front, for progress over all files.
  std::vector<std::uint64_t> sizes(files.size(), 0);
  std::uint64_t total = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    std::error_code ec;
    sizes[i] = files[i].path.empty() ? files[i].text.size() : std::filesystem::file_size(files[i].path, ec);
    if (ec) sizes[i] = 0;
    total += sizes[i];
  }
  Diagnostics errors;
  std::uint64_t before = 0;
  std::uint64_t textBytes = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    auto progress = [&](std::uint64_t consumed, std::uint64_t) {
      if (!options.progress) return true;
      TraceProgress p;
      p.file = i;
      p.files = files.size();
      p.bytesRead = before + std::min(consumed, sizes[i]);
      p.bytesTotal = total;
      return options.progress(p);
    };
    bool cancelled = false;
    auto st = scanFile(i, files[i], c, scans[i], progress, cancelled);
    if (cancelled) return makeError("trace.cancelled", "import cancelled while reading " + files[i].name);
    if (!st)
      errors.insert(errors.end(), st.errors().begin(), st.errors().end());
    else
      textBytes += *st;
    before += sizes[i];
  }
  if (!errors.empty()) return errors;
  return textBytes;
}

void keepOwnExportOfOwnFiles(std::vector<FileScan>& scans, Collector& c) {
  // What only our own export means (op slices without "PP:", "device N" processes, its
  // transfers and memory counter) is kept for the files that turned out to be ours.
  c.ranges.erase(std::remove_if(c.ranges.begin(), c.ranges.end(),
                                [&](const RawRange& r) {
                                  bool drop = r.source == RangeSource::Own && !scans[r.file].own;
                                  if (drop) ++c.ignored;
                                  return drop;
                                }),
                 c.ranges.end());
  for (auto& r : c.ranges)
    if (scans[r.file].own && r.ownRank >= 0) r.rank = r.ownRank;
  for (auto& s : scans)
    if (s.own)
      for (const auto& [pid, rank] : s.pidOwnRank) s.pidRank.emplace(pid, rank);
  c.memory.erase(std::remove_if(c.memory.begin(), c.memory.end(),
                                [&](const RawMemory& m) { return m.own && !scans[m.file].own; }),
                 c.memory.end());
  c.transfers.erase(std::remove_if(c.transfers.begin(), c.transfers.end(),
                                   [&](const RawTransfer& t) { return !scans[t.file].own; }),
                    c.transfers.end());
}

Status assignFileRanks(const std::vector<TraceFile>& files, std::vector<FileScan>& scans) {
  Diagnostics errors;
  // A file's rank: forced, else what the trace says (distributedInfo), else its name; the trace
  // and the name disagreeing, or two files of one rank, is an error naming both.
  std::map<int, size_t> fileOfRank;
  for (size_t i = 0; i < files.size(); ++i) {
    FileScan& s = scans[i];
    if (s.forcedRank) {
      s.fileRank = s.forcedRank;
    } else if (s.tracedRank) {
      if (s.nameRank && *s.nameRank != *s.tracedRank)
        errors.push_back(makeError(
            "trace.rank",
            files[i].name + ": the trace says rank " + std::to_string(*s.tracedRank) +
                " (distributedInfo.rank) but its file name says rank " + std::to_string(*s.nameRank),
            s.tracedRankAt.file.empty() ? SourceLocation{files[i].name, 0, 0} : s.tracedRankAt));
      s.fileRank = s.tracedRank;
    } else {
      s.fileRank = s.nameRank;
    }
    if (!s.fileRank) continue;
    auto [it, fresh] = fileOfRank.emplace(*s.fileRank, i);
    if (!fresh)
      errors.push_back(makeError("trace.rank",
                                 "rank " + std::to_string(*s.fileRank) +
                                     " is in two files: " + files[it->second].name + " and " + files[i].name,
                                 SourceLocation{files[i].name, 0, 0}));
  }
  if (!errors.empty()) return errors;
  return okStatus();
}

void assignRanks(size_t fileCount, const std::vector<FileScan>& scans, Collector& c) {
  // Ranks: the file's rank (forced, distributedInfo, file name), else the event's or its
  // process's metadata, else the file's position (several files) or the process id's
  // position per side (one merged file without rank metadata).
  std::vector<std::map<std::pair<bool, long long>, int>> ordinal(fileCount);
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
    if (fileCount > 1) {
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
  // "Forward i" / "Backward i" name no stage: a single-stage schedule's stage is its rank. A
  // rank that also has PP: ranges of its computation (pipestudio.trace_ranges inside
  // ScheduleGPipe) is read from those.
  std::set<int> ranksWithActions;
  for (const auto& r : c.ranges)
    if (r.source == RangeSource::Pipelining && r.rank >= 0 && !isCommunicationKind(r.action.op.kind))
      ranksWithActions.insert(r.rank);
  c.ranges.erase(std::remove_if(c.ranges.begin(), c.ranges.end(),
                                [&](const RawRange& r) {
                                  bool drop = r.source == RangeSource::StepName &&
                                              (r.rank < 0 || ranksWithActions.count(r.rank) > 0);
                                  if (drop) ++c.ignored;
                                  return drop;
                                }),
                 c.ranges.end());
  for (auto& r : c.ranges) {
    if (r.source != RangeSource::StepName) continue;
    if (r.rank >= limits::kMaxStages) continue;
    r.action.op.stage = r.rank;
    r.name = std::to_string(r.rank) + std::string(builtinKindName(r.action.op.kind)) +
             std::to_string(r.action.op.microbatch);
  }
  if (guessedByFile)
    c.diags.push_back(makeWarning("trace.rank",
                                  "some files name no rank (no distributedInfo, no 'rank' in the "
                                  "file name): ranks taken from the order of the files"));
  if (guessedByPid)
    c.diags.push_back(makeWarning("trace.rank",
                                  "the trace names no ranks: ranks assigned to process ids in "
                                  "ascending order"));
}

void alignTimeBases(const std::vector<FileScan>& scans, Collector& c) {
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
}

// Iterations: the k-th occurrence of an action on a rank belongs to iteration k (`merged`
// sorted by rank and time; iterOf: each range's iteration); how many there are.
int assignIterations(std::vector<RawRange>& merged, std::vector<int>& iterOf) {
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
  iterOf.assign(merged.size(), 0);
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
  return iterations;
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
  PS_ASSIGN_OR_RETURN(const std::uint64_t textBytes, scanFiles(files, options, c, scans));

  bool anyOwn = std::any_of(scans.begin(), scans.end(), [](const FileScan& s) { return s.own; });
  bool allOwn = std::all_of(scans.begin(), scans.end(), [](const FileScan& s) { return s.own; });

  keepOwnExportOfOwnFiles(scans, c);

  PS_TRY(assignFileRanks(files, scans));

  assignRanks(files.size(), scans, c);

  alignTimeBases(scans, c);

  c.ranges.erase(
      std::remove_if(c.ranges.begin(), c.ranges.end(), [](const RawRange& r) { return r.rank < 0; }),
      c.ranges.end());
  int maxRank = -1;
  for (auto& r : c.ranges) maxRank = std::max(maxRank, r.rank);
  int devices = maxRank + 1;

  // GPU-side ranges of compute actions on communication streams (streams that ran only NCCL
  // kernels) are the communication the action launched, not its compute: they are set apart.
  std::vector<RawRange> commRanges;
  for (auto& r : c.ranges) {
    if (!r.gpu) continue;
    const auto& streams = scans[r.file].streams;
    auto it = streams.find({r.pid, r.tid});
    r.commStream = it != streams.end() && it->second.communication > 0 && it->second.other == 0;
  }
  if (options.side != TraceSide::Cpu) {
    auto isCommOfCompute = [](const RawRange& r) {
      return r.gpu && r.commStream && (r.action.overlapped() || !isCommunicationKind(r.action.op.kind));
    };
    for (auto& r : c.ranges)
      if (isCommOfCompute(r)) commRanges.push_back(r);
    c.ranges.erase(std::remove_if(c.ranges.begin(), c.ranges.end(), isCommOfCompute), c.ranges.end());
  }

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
  // An action inside an overlapped pair's range that is one of the pair's two is the same work
  // seen twice (pipestudio.trace_ranges' ranges inside the runtime's OVERLAP_F_B): the pair's
  // range stands for it.
  {
    std::map<std::tuple<int, OpKind, int, int>, std::vector<std::pair<double, double>>> pairs;
    for (const auto& r : merged)
      if (r.action.overlapped())
        for (const Op& op : {r.action.op, *r.action.second})
          pairs[{r.rank, op.kind, op.stage, op.microbatch}].emplace_back(r.startUs, r.endUs);
    if (!pairs.empty())
      merged.erase(std::remove_if(merged.begin(), merged.end(),
                                  [&](const RawRange& r) {
                                    if (r.action.overlapped()) return false;
                                    const Op& op = r.action.op;
                                    auto it = pairs.find({r.rank, op.kind, op.stage, op.microbatch});
                                    if (it == pairs.end()) return false;
                                    return std::any_of(it->second.begin(), it->second.end(),
                                                       [&](const auto& p) {
                                                         return r.startUs >= p.first && r.endUs <= p.second;
                                                       });
                                  }),
                   merged.end());
  }

  // Iterations: the k-th occurrence of an action on a rank belongs to iteration k.
  std::vector<int> iterOf;
  const int iterations = assignIterations(merged, iterOf);
  ImportedTrace out;
  out.format = allOwn ? TraceFormat::PipeStudio : TraceFormat::TorchProfiler;
  out.iterations = std::max(iterations, 1);
  out.ignoredEvents = c.ignored;
  if (merged.empty()) {
    Diagnostic d = makeError("trace.empty", std::string(files.size() == 1 ? files[0].name + ": " : "") +
                                                "no pipeline actions found (torch.profiler ranges named "
                                                "'PP:<action>', 'Forward i' or 'Backward i'" +
                                                (anyOwn ? ", or PipeStudio op slices" : "") + ")");
    d.hint =
        "PyTorch's Schedule1F1B and Megatron-LM record no range per micro-batch: import "
        "pipestudio.trace_ranges in the training script (docs/debugger.md)";
    return d;
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

  pairSendRecvTransfers(t);
  for (const auto& rt : c.transfers) {
    Transfer tr = rt.transfer;
    if (tr.srcDevice < 0 || tr.dstDevice < 0 || tr.srcDevice >= devices || tr.dstDevice >= devices) continue;
    tr.start = (tr.start - originUs) / 1000.0;
    tr.end = (tr.end - originUs) / 1000.0;
    t.transfers.push_back(tr);
  }
  std::sort(t.transfers.begin(), t.transfers.end(),
            [](const Transfer& a, const Transfer& b) { return a.start < b.start; });

  importMemoryCurves(c.memory, devices, allOwn, originUs, endUs, t);
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

  out.communication = communicationOfIteration(std::move(commRanges), devices, iteration, originUs);
  out.communicationKernels = c.commKernels;
  out.bytesRead = textBytes;

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
