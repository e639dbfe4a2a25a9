#include "common/flags.h"

#include <charconv>
#include <cmath>

#include "pipestudio/core/io/schedule_file.h"
#include "pipestudio/core/io/units.h"

namespace ps::cli {

std::optional<int> parseInt(std::string_view text, int min, int max) {
  long long v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty() || v < min || v > max)
    return std::nullopt;
  return static_cast<int>(v);
}

bool readInt(std::string_view text, int min, int& out) {
  auto v = parseInt(text, min);
  if (v) out = *v;
  return v.has_value();
}

std::optional<double> parseNumber(std::string_view text, double min) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty() || !std::isfinite(v) || v < min)
    return std::nullopt;
  return v;
}

std::optional<std::vector<int>> parseIntList(std::string_view text, int min) {
  std::vector<int> out;
  while (true) {
    const size_t comma = text.find(',');
    auto v = parseInt(text.substr(0, comma), min);
    if (!v) return std::nullopt;
    out.push_back(*v);
    if (comma == std::string_view::npos) return out;
    text.remove_prefix(comma + 1);
  }
}

std::optional<std::int64_t> parseBytes(std::string_view text) {
  auto r = core::parseByteSize(text);
  if (!r) return std::nullopt;
  return *r;
}

std::optional<double> parseMs(std::string_view text) {
  auto r = core::parseDurationMs(text);
  if (!r) return std::nullopt;
  return *r;
}

std::string formatOfPath(const std::string& path, const std::string& fallback) {
  auto f = core::scheduleFormatFromPath(path);
  return f ? std::string(core::scheduleFormatName(*f)) : fallback;
}

bool memoryLimitFlag(const Args& args, const Reporter& reporter, std::optional<std::int64_t>& out) {
  if (!args.has("--memory-limit")) return true;
  auto b = parseBytes(args.value("--memory-limit"));
  if (!b) {
    reporter.fail("--memory-limit takes bytes (e.g. 85899345920, 80GiB, 40GB)");
    return false;
  }
  out = *b;
  return true;
}

core::CommOptions CommFlags::optionsFor(const core::Schedule& s, bool fromPytorchCsv) const {
  core::CommOptions o;
  o.semantics = semantics.value_or(core::defaultCommSemantics(s, fromPytorchCsv));
  o.batchConsecutive = batchConsecutive;
  return o;
}

std::string CommFlags::lineFor(const core::Schedule& s, bool fromPytorchCsv) const {
  const core::CommOptions o = optionsFor(s, fromPytorchCsv);
  std::string line = "communication: " + std::string(core::commSemanticsName(o.semantics));
  if (o.batchConsecutive) line += ", consecutive SEND/RECV batched";
  const bool explicitComms = core::commSemanticsApplies(s, {core::CommSemantics::Nccl});
  if (semantics && explicitComms)
    line += " (--comm: " + std::string(core::commSemanticsDescription(o.semantics)) + ")";
  else
    line += " (" + core::defaultCommReason(s, fromPytorchCsv) + ")";
  return line;
}

std::optional<CommFlags> commFlags(const Args& args, const Reporter& reporter, int& code) {
  CommFlags f;
  f.batchConsecutive = args.has("--batch-p2p");
  for (const std::string& v : args.values("--comm")) {
    if (auto c = core::commSemanticsFromName(v)) {
      f.semantics = *c;
    } else if (auto ms = parseMs(v)) {
      f.fixedMs = *ms;
    } else {
      code = reporter.usage(
          "--comm takes posted, nccl or dualpipe (how SEND/RECV behave), or a fixed time per "
          "transfer in ms, not '" +
          v + "'");
      return std::nullopt;
    }
  }
  return f;
}

std::optional<core::PytorchTarget> pytorchTargetFlags(const Args& args, const Reporter& reporter, int& code) {
  core::PytorchTarget target;
  if (args.has("--pytorch")) {
    auto t = core::parsePytorchTarget(args.value("--pytorch"));
    if (!t) {
      code = reporter.usage(t.error().message);
      return std::nullopt;
    }
    target = *t;
  }
  if (args.has("--defer-recv")) {
    const std::string v = args.value("--defer-recv");
    if (v != "pytorch" && v != "safe") {
      code = reporter.usage("--defer-recv is pytorch or safe, not '" + v + "'");
      return std::nullopt;
    }
    if (!args.has("--pytorch")) target.major = 2, target.minor = 15;
    if (!target.atLeast(2, 13)) {
      code = reporter.usage("--defer-recv: PyTorch " + target.name() +
                            " has no defer_pp_recv (2.13 and later do)");
      return std::nullopt;
    }
    target.recv = v == "pytorch" ? core::RecvPlacement::Deferred : core::RecvPlacement::DeferredSafe;
  }
  return target;
}

}  // namespace ps::cli
