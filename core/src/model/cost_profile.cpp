#include "pipestudio/core/model/cost_profile.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>

#include "model/json_locate.h"
#include "pipestudio/core/model/limits.h"

namespace ps::core {

namespace {

using nlohmann::json;

// Reads typed fields of one JSON object, collecting errors that name file and JSON path.
class FieldReader {
 public:
  FieldReader(const std::string& file, std::string_view text, Diagnostics& errors)
      : file_(file), text_(text), errors_(errors) {}

  // `value`, when given, finds the line of the offending number (the first of that key otherwise).
  void error(const std::string& path, const std::string& what, std::optional<double> value = std::nullopt) {
    auto dot = path.find_last_of('.');
    std::string key = dot == std::string::npos ? path : path.substr(dot + 1);
    SourceLocation loc =
        value ? detail::locateJsonKey(text_, key, value, file_) : SourceLocation{file_, 0, 0};
    errors_.push_back(makeError("profile.field", file_ + ": " + path + ": " + what, loc));
  }

  bool object(const json& j, const std::string& path) {
    if (j.is_object()) return true;
    error(path, "expected an object");
    return false;
  }

  // Optional non-negative number; leaves `out` untouched when absent.
  template <typename T>
  // `max` bounds the value (times, bytes and factors each have theirs in limits.h), so that
  // sums over layers and micro-batches stay finite and within int64.
  bool number(const json& obj, const char* key, const std::string& path, T& out, bool required = false,
              double max = limits::kMaxTimeMs) {
    auto it = obj.find(key);
    std::string p = path.empty() ? key : path + "." + key;
    if (it == obj.end()) {
      if (required) error(p, "missing (expected a number)");
      return false;
    }
    if (!it->is_number()) {
      error(p, "expected a number");
      return false;
    }
    double v = it->get<double>();
    if (!std::isfinite(v) || v < 0) {
      error(p, "expected a non-negative number", v);
      return false;
    }
    if constexpr (std::is_integral_v<T>) max = static_cast<double>(limits::kMaxBytes);
    if (v > max) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%g is too large (at most %g)", v, max);
      error(p, buf, v);
      return false;
    }
    if constexpr (std::is_integral_v<T>) {
      out = static_cast<T>(std::llround(v));
    } else {
      out = static_cast<T>(v);
    }
    return true;
  }

  bool string(const json& obj, const char* key, const std::string& path, std::string& out) {
    auto it = obj.find(key);
    if (it == obj.end()) return false;
    if (!it->is_string()) {
      error(path.empty() ? key : path + "." + key, "expected a string");
      return false;
    }
    out = it->get<std::string>();
    return true;
  }

 private:
  const std::string& file_;
  std::string_view text_;
  Diagnostics& errors_;
};

}  // namespace

Result<CostProfile> parseCostProfile(std::string_view text, const std::string& filename) {
  // A file that is no JSON object at all (a profile "/etc/passwd" named by a .pipe header) is
  // refused without a place, so that no line of it is quoted under the error.
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos ||
      (text[first] != '{' && !text.substr(first).starts_with("\xef\xbb\xbf{")))
    return makeError("profile.json",
                     filename + ": not a cost profile (a JSON object, starting with '{'; docs/formats.md)",
                     SourceLocation{filename, 0, 0});
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    // nlohmann reports the byte after the error; point at the last byte read.
    size_t at = e.byte > 0 ? e.byte - 1 : 0;
    std::string what = e.what();
    if (auto p = what.find("parse error"); p != std::string::npos) what = what.substr(p);
    return makeError("profile.json", filename + ": invalid JSON: " + what,
                     locationOfOffset(text, at, filename));
  } catch (const std::exception& e) {
    return makeError("profile.json", filename + ": invalid JSON: " + e.what(),
                     SourceLocation{filename, 0, 0});
  }

  Diagnostics errors;
  FieldReader r(filename, text, errors);
  CostProfile p;
  if (!r.object(root, "(root)")) return errors;
  r.string(root, "name", "", p.name);
  r.number(root, "optimizer_bytes_per_weight_byte", "", p.optimizerBytesPerWeightByte, false,
           limits::kMaxFactor);
  r.number(root, "gradient_bytes_per_weight_byte", "", p.gradientBytesPerWeightByte, false,
           limits::kMaxFactor);
  r.number(root, "overlap_factor", "", p.overlapFactor, false, limits::kMaxFactor);
  if (double c = 0; r.number(root, "fixed_comm_ms", "", c)) p.fixedCommMs = c;

  if (auto it = root.find("device"); it != root.end() && r.object(*it, "device"))
    r.number(*it, "memory_bytes", "device", p.deviceMemoryBytes);
  if (auto it = root.find("link"); it != root.end() && r.object(*it, "link")) {
    r.number(*it, "latency_ms", "link", p.link.latencyMs);
    r.number(*it, "bandwidth_bytes_per_ms", "link", p.link.bandwidthBytesPerMs, false, 1e18);
  }
  if (auto it = root.find("host"); it != root.end() && r.object(*it, "host"))
    r.number(*it, "bandwidth_bytes_per_ms", "host", p.hostBandwidthBytesPerMs, false, 1e18);
  if (auto it = root.find("data_parallel"); it != root.end() && r.object(*it, "data_parallel"))
    r.number(*it, "bandwidth_bytes_per_ms", "data_parallel", p.dataParallelBandwidthBytesPerMs, false, 1e18);

  auto layers = root.find("layers");
  if (layers == root.end()) {
    r.error("layers", "missing (expected an array of layers)");
  } else if (!layers->is_array()) {
    r.error("layers", "expected an array");
  } else if (layers->empty()) {
    r.error("layers", "expected at least one layer");
  } else if (layers->size() > static_cast<size_t>(limits::kMaxStages)) {
    r.error("layers", std::to_string(layers->size()) + " layers, more than the limit of " +
                          std::to_string(limits::kMaxStages));
  } else {
    for (size_t i = 0; i < layers->size(); ++i) {
      const json& lj = (*layers)[i];
      std::string path = "layers[" + std::to_string(i) + "]";
      if (!r.object(lj, path)) continue;
      LayerCost l;
      l.name = "layer" + std::to_string(i);
      r.string(lj, "name", path, l.name);
      r.number(lj, "forward_ms", path, l.forwardMs, true);
      bool hasI = r.number(lj, "backward_input_ms", path, l.backwardInputMs);
      bool hasW = r.number(lj, "backward_weight_ms", path, l.backwardWeightMs);
      double bwd = 0;
      if (r.number(lj, "backward_ms", path, bwd)) {
        // A full backward time alone splits evenly; with one part given, the other is the rest.
        if (!hasI && !hasW) {
          l.backwardInputMs = bwd / 2;
          l.backwardWeightMs = bwd / 2;
        } else if (hasI && !hasW) {
          l.backwardWeightMs = std::max(0.0, bwd - l.backwardInputMs);
        } else if (!hasI && hasW) {
          l.backwardInputMs = std::max(0.0, bwd - l.backwardWeightMs);
        }
      } else if (!hasI && !hasW) {
        r.error(path + ".backward_input_ms",
                "missing (give backward_input_ms and backward_weight_ms, or backward_ms)");
      }
      if (double rc = 0; r.number(lj, "recompute_ms", path, rc)) l.recomputeMs = rc;
      r.number(lj, "activation_bytes", path, l.activationBytes);
      r.number(lj, "weight_bytes", path, l.weightBytes);
      r.number(lj, "output_bytes", path, l.outputBytes);
      r.number(lj, "optimizer_step_ms", path, l.optimizerStepMs);
      if (std::int64_t ws = 0; r.number(lj, "weight_grad_stash_bytes", path, ws)) {
        if (ws > l.activationBytes)
          r.error(path + ".weight_grad_stash_bytes", "must not exceed activation_bytes");
        else
          l.weightGradStashBytes = ws;
      }
      p.layers.push_back(std::move(l));
    }
  }
  // A bandwidth so small that one byte count takes longer than any time the model can hold.
  for (auto [bw, path] :
       {std::pair{p.link.bandwidthBytesPerMs, "link.bandwidth_bytes_per_ms"},
        std::pair{p.hostBandwidthBytesPerMs, "host.bandwidth_bytes_per_ms"},
        std::pair{p.dataParallelBandwidthBytesPerMs, "data_parallel.bandwidth_bytes_per_ms"}})
    if (bw > 0 && bw < 1e-3) r.error(path, "must be 0 (unlimited) or at least 0.001 bytes/ms", bw);
  if (!errors.empty()) return errors;
  return p;
}

std::string costProfileToJson(const CostProfile& p) {
  using json = nlohmann::ordered_json;  // fields in the documented order
  json root = json::object();
  root["name"] = p.name;
  json layers = json::array();
  for (const LayerCost& l : p.layers) {
    json lj = json::object();
    lj["name"] = l.name;
    lj["forward_ms"] = l.forwardMs;
    lj["backward_input_ms"] = l.backwardInputMs;
    lj["backward_weight_ms"] = l.backwardWeightMs;
    if (l.recomputeMs) lj["recompute_ms"] = *l.recomputeMs;
    lj["activation_bytes"] = l.activationBytes;
    if (l.weightGradStashBytes) lj["weight_grad_stash_bytes"] = *l.weightGradStashBytes;
    lj["weight_bytes"] = l.weightBytes;
    lj["output_bytes"] = l.outputBytes;
    if (l.optimizerStepMs > 0) lj["optimizer_step_ms"] = l.optimizerStepMs;
    layers.push_back(std::move(lj));
  }
  root["layers"] = std::move(layers);
  root["optimizer_bytes_per_weight_byte"] = p.optimizerBytesPerWeightByte;
  root["gradient_bytes_per_weight_byte"] = p.gradientBytesPerWeightByte;
  root["device"] = json{{"memory_bytes", p.deviceMemoryBytes}};
  root["link"] =
      json{{"latency_ms", p.link.latencyMs}, {"bandwidth_bytes_per_ms", p.link.bandwidthBytesPerMs}};
  root["host"] = json{{"bandwidth_bytes_per_ms", p.hostBandwidthBytesPerMs}};
  if (p.dataParallelBandwidthBytesPerMs > 0)
    root["data_parallel"] = json{{"bandwidth_bytes_per_ms", p.dataParallelBandwidthBytesPerMs}};
  root["overlap_factor"] = p.overlapFactor;
  if (p.fixedCommMs) root["fixed_comm_ms"] = *p.fixedCommMs;
  return root.dump(2) + "\n";
}

Result<CostProfile> uniformCostProfile(std::string_view spec, int stages) {
  if (stages < 1) return makeError("profile.uniform", "uniform cost profile needs at least one stage");
  std::optional<double> F, B, I, W, R;
  double overlap = 1.0;
  std::int64_t act = 0, out = 0, weight = 0, mem = 0;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    std::string_view item =
        spec.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    pos = comma == std::string_view::npos ? spec.size() + 1 : comma + 1;
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      return makeError("profile.uniform", "--cost: expected KEY=VALUE, got '" + std::string(item) + "'");
    std::string key(item.substr(0, eq));
    std::string val(item.substr(eq + 1));
    double v = 0;
    auto [ptr, ec] = std::from_chars(val.data(), val.data() + val.size(), v);
    if (ec != std::errc() || ptr != val.data() + val.size() || !std::isfinite(v) || v < 0)
      return makeError("profile.uniform", std::string("--cost: ")
                                              .append(key)
                                              .append(": expected a non-negative number, got '")
                                              .append(val)
                                              .append("'"));
    const bool bytesKey = key == "act" || key == "out" || key == "weight" || key == "mem";
    const double max = bytesKey           ? static_cast<double>(limits::kMaxBytes)
                       : key == "overlap" ? limits::kMaxFactor
                                          : limits::kMaxTimeMs;
    if (v > max)
      return makeError("profile.uniform", std::string("--cost: ")
                                              .append(key)
                                              .append("=")
                                              .append(val)
                                              .append(" is too large (at most ")
                                              .append(bytesKey ? std::to_string(limits::kMaxBytes)
                                                               : std::to_string(static_cast<long long>(max)))
                                              .append(")"));
    if (key == "F")
      F = v;
    else if (key == "B")
      B = v;
    else if (key == "I")
      I = v;
    else if (key == "W")
      W = v;
    else if (key == "R")
      R = v;
    else if (key == "overlap")
      overlap = v;
    else if (key == "act")
      act = static_cast<std::int64_t>(v);
    else if (key == "out")
      out = static_cast<std::int64_t>(v);
    else if (key == "weight")
      weight = static_cast<std::int64_t>(v);
    else if (key == "mem")
      mem = static_cast<std::int64_t>(v);
    else
      return makeError("profile.uniform", "--cost: unknown key '" + key +
                                              "' (expected F, B, I, W, R, act, out, weight, mem, overlap)");
  }
  if (!F) return makeError("profile.uniform", "--cost: F is required, e.g. F=1,I=1,W=1");
  double i = 0, w = 0;
  if (I && W) {
    i = *I, w = *W;
  } else if (B && I) {
    i = *I, w = std::max(0.0, *B - *I);
  } else if (B && W) {
    w = *W, i = std::max(0.0, *B - *W);
  } else if (B) {
    i = *B / 2, w = *B / 2;
  } else if (I) {
    i = *I;  // no W: the backward is the input part only
  } else {
    // Nothing about the backward: the usual 2x forward, split evenly.
    i = *F, w = *F;
  }
  CostProfile p;
  p.name = "uniform " + std::string(spec);
  p.overlapFactor = overlap;
  p.deviceMemoryBytes = mem;
  for (int s = 0; s < stages; ++s) {
    LayerCost l;
    l.name = "stage" + std::to_string(s);
    l.forwardMs = *F;
    l.backwardInputMs = i;
    l.backwardWeightMs = w;
    if (R) l.recomputeMs = *R;
    l.activationBytes = act;
    l.outputBytes = out;
    l.weightBytes = weight;
    p.layers.push_back(std::move(l));
  }
  return p;
}

namespace {

double layerTime(const LayerCost& l) {
  return l.forwardMs + l.backwardInputMs + l.backwardWeightMs;
}

// Contiguous partition of `costs` into exactly `parts` non-empty groups minimising the largest
// group sum: bisection on the bound with a greedy feasibility check.
std::vector<int> balancedPartition(const std::vector<double>& costs, int parts) {
  const int L = static_cast<int>(costs.size());
  auto groupsNeeded = [&](double bound) {
    int groups = 1;
    double sum = 0;
    for (double c : costs) {
      if (c > bound) return L + 1;
      if (sum + c > bound) {
        ++groups;
        sum = 0;
      }
      sum += c;
    }
    return groups;
  };
  double lo = *std::max_element(costs.begin(), costs.end());
  double hi = std::accumulate(costs.begin(), costs.end(), 0.0);
  for (int it = 0; it < 100 && hi - lo > 1e-12 * std::max(1.0, hi); ++it) {
    double mid = (lo + hi) / 2;
    if (groupsNeeded(mid) <= parts)
      hi = mid;
    else
      lo = mid;
  }
  const double bound = hi * (1 + 1e-12);
  std::vector<int> out;
  int count = 0;
  double sum = 0;
  for (int i = 0; i < L; ++i) {
    int stagesLeftAfter = parts - static_cast<int>(out.size()) - 1;
    bool mustSplit = count > 0 && (sum + costs[static_cast<size_t>(i)] > bound || L - i == stagesLeftAfter);
    if (mustSplit && stagesLeftAfter > 0) {
      out.push_back(count);
      count = 0;
      sum = 0;
    }
    ++count;
    sum += costs[static_cast<size_t>(i)];
  }
  out.push_back(count);
  return out;
}

}  // namespace

Result<std::vector<int>> partitionLayers(const CostProfile& p, int stages,
                                         const std::vector<int>& layersPerStage, std::string_view unit) {
  const int L = static_cast<int>(p.layers.size());
  const std::string what(unit);
  const std::string one = what == "stages" ? "stage" : "block";
  if (stages < 1) return makeError("profile.partition", "the schedule has no " + what);
  if (!layersPerStage.empty()) {
    if (static_cast<int>(layersPerStage.size()) != stages)
      return makeError("profile.partition", "partition lists " + std::to_string(layersPerStage.size()) + " " +
                                                what + " but the schedule has " + std::to_string(stages));
    long long sum = 0;
    for (size_t s = 0; s < layersPerStage.size(); ++s) {
      if (layersPerStage[s] < 1)
        return makeError("profile.partition", "partition gives " + one + " " + std::to_string(s) + " " +
                                                  std::to_string(layersPerStage[s]) +
                                                  " layers (need at least 1)");
      sum += layersPerStage[s];
    }
    if (sum != L)
      return makeError("profile.partition", "partition covers " + std::to_string(sum) +
                                                " layers but profile '" + p.name + "' has " +
                                                std::to_string(L));
    return layersPerStage;
  }
  if (L < stages)
    return makeError("profile.partition", "profile '" + p.name + "' has " + std::to_string(L) +
                                              " layers, fewer than the schedule's " + std::to_string(stages) +
                                              " " + what);
  if (L == stages) return std::vector<int>(static_cast<size_t>(stages), 1);
  std::vector<double> costs;
  costs.reserve(p.layers.size());
  for (const LayerCost& l : p.layers) costs.push_back(layerTime(l));
  return balancedPartition(costs, stages);
}

Result<std::vector<StageCost>> stageCosts(const CostProfile& p, int stages,
                                          const std::vector<int>& layersPerStage, std::string_view unit) {
  auto part = partitionLayers(p, stages, layersPerStage, unit);
  PS_TRY(part);
  std::vector<StageCost> out(static_cast<size_t>(stages));
  const double staticFactor = 1.0 + p.gradientBytesPerWeightByte + p.optimizerBytesPerWeightByte;
  // A profile built in code may hold any values: sums that leave int64 or turn inf are refused.
  auto overflow = [&](int s, const char* what) {
    return makeError("profile.overflow",
                     "profile '" + p.name + "': stage " + std::to_string(s) + ": the sum of " + what +
                         " over its layers is too large (limits: " + std::to_string(limits::kMaxBytes) +
                         " bytes, " + std::to_string(static_cast<long long>(limits::kMaxTimeMs)) +
                         " ms per value)");
  };
  int layer = 0;
  for (int s = 0; s < stages; ++s) {
    StageCost& c = out[static_cast<size_t>(s)];
    c.firstLayer = layer;
    c.layerCount = (*part)[static_cast<size_t>(s)];
    c.inputBytes = layer > 0 ? p.layers[static_cast<size_t>(layer - 1)].outputBytes : 0;
    for (int k = 0; k < c.layerCount; ++k, ++layer) {
      const LayerCost& l = p.layers[static_cast<size_t>(layer)];
      if (!limits::addTime(c.F, l.forwardMs) || !limits::addTime(c.I, l.backwardInputMs) ||
          !limits::addTime(c.W, l.backwardWeightMs) ||
          !limits::addTime(c.R, l.recomputeMs.value_or(l.forwardMs)) ||
          !limits::addTime(c.O, l.optimizerStepMs))
        return overflow(s, "times");
      if (!limits::addBytes(c.activationBytes, l.activationBytes) ||
          !limits::addBytes(c.weightGradStashBytes, l.weightGradStashBytes.value_or(l.activationBytes / 2)) ||
          !limits::addBytes(c.weightBytes, l.weightBytes))
        return overflow(s, "bytes");
      c.outputBytes = l.outputBytes;
    }
    c.B = c.I + c.W;
    if (!std::isfinite(c.B) || !std::isfinite(c.F) || c.F < 0 || c.I < 0 || c.W < 0 || c.R < 0 || c.O < 0)
      return overflow(s, "times");
    auto st = limits::scaleBytes(c.weightBytes, staticFactor);
    if (!st || !std::isfinite(staticFactor)) return overflow(s, "weight, gradient and optimizer bytes");
    c.staticBytes = *st;
  }
  return out;
}

}  // namespace ps::core
