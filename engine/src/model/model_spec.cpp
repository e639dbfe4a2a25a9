// Model spec strings and fault-injection strings: plain parsing, no torch.
#include <charconv>
#include <string>

#include "pipestudio/core/model/enum_names.h"
#include "pipestudio/engine/engine.h"

namespace ps::engine {

namespace detail {
// Defined in model_torchscript.cpp (the one file that loads modules).
std::vector<std::string> torchScriptLayerNames(const ModelSpec& m);
core::CostProfile torchScriptCostProfile(const ModelSpec& m, int microbatchSize);
core::Status checkTorchScript(const ModelSpec& m);
}  // namespace detail

namespace {
core::Diagnostic specError(const std::string& msg) {
  return core::makeError("engine.model-spec", msg);
}

bool parseInt(std::string_view s, int& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}
}  // namespace

constexpr core::EnumName<ModelKind> kModelKindNames[] = {
    {ModelKind::Mlp, "mlp"}, {ModelKind::Gpt, "gpt"}, {ModelKind::TorchScript, "torchscript"}};
PS_ENUM_NAME_FUNCTION(ModelKind, kModelKindNames, modelKindName);

core::Result<ModelSpec> parseModelSpec(std::string_view spec) {
  ModelSpec m;
  std::string_view kind = spec;
  std::string_view rest;
  if (auto colon = spec.find(':'); colon != std::string_view::npos) {
    kind = spec.substr(0, colon);
    rest = spec.substr(colon + 1);
  }
  const auto known = core::enumFromName(kind, kModelKindNames);
  if (!known)
    return specError("unknown model '" + std::string(kind) +
                     "' (built-in models: mlp, gpt; or torchscript:path=FILE)");
  m.kind = *known;
  if (m.kind == ModelKind::Mlp) m.hidden = 64;
  while (!rest.empty()) {
    auto comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    if (item.empty()) continue;
    auto eq = item.find('=');
    if (eq == std::string_view::npos)
      return specError("model option '" + std::string(item) + "' needs a value (key=value)");
    std::string key(item.substr(0, eq));
    std::string_view val = item.substr(eq + 1);
    if (m.kind == ModelKind::TorchScript && key == "path") {
      // The rest of the spec is not split at '=' again, so paths may contain it (not ',').
      if (val.empty()) return specError("torchscript path is empty");
      m.path = std::string(val);
      continue;
    }
    if (m.kind == ModelKind::TorchScript && key == "loss") {
      if (val != "mse" && val != "ce")
        return specError("loss must be mse or ce, got '" + std::string(val) + "'");
      m.loss = val == "ce" ? Loss::CrossEntropy : Loss::Mse;
      continue;
    }
    if (key == "dtype") {
      if (val != "f32" && val != "f64")
        return specError("dtype must be f32 or f64, got '" + std::string(val) + "'");
      m.dtype = val == "f64" ? DType::F64 : DType::F32;
      continue;
    }
    int v = 0;
    if (!parseInt(val, v) || v < 1)
      return specError("model option " + key + " needs a positive integer, got '" + std::string(val) + "'");
    if (m.kind == ModelKind::TorchScript) {
      if (key == "features")
        m.features = v;
      else if (key == "seq")
        m.seq = v;  // tokens per sample when the first child is an nn.Embedding
      else
        return specError("unknown option '" + key +
                         "' for model torchscript (path, features, seq, loss, dtype)");
      continue;
    }
    if (key == "layers")
      m.layers = v;
    else if (key == "hidden")
      m.hidden = v;
    else if (key == "heads" && m.kind == ModelKind::Gpt)
      m.heads = v;
    else if (key == "seq" && m.kind == ModelKind::Gpt)
      m.seq = v;
    else if (key == "vocab" && m.kind == ModelKind::Gpt)
      m.vocab = v;
    else if (key == "ffn" && m.kind == ModelKind::Gpt)
      m.ffn = v;
    else
      return specError("unknown option '" + key + "' for model " + std::string(modelKindName(m.kind)));
  }
  if (m.kind == ModelKind::TorchScript && m.path.empty())
    return specError("torchscript model needs path=FILE (torchscript:path=model.pt)");
  if (m.kind == ModelKind::Gpt && m.hidden % m.heads != 0)
    return specError("gpt hidden (" + std::to_string(m.hidden) + ") must be a multiple of heads (" +
                     std::to_string(m.heads) + ")");
  return m;
}

std::string modelSpecToString(const ModelSpec& m) {
  if (m.kind == ModelKind::TorchScript) {
    std::string s = "torchscript:path=" + m.path;
    if (m.features > 0) s += ",features=" + std::to_string(m.features);
    if (m.seq != ModelSpec{}.seq) s += ",seq=" + std::to_string(m.seq);
    if (m.loss == Loss::CrossEntropy) s += ",loss=ce";
    if (m.dtype == DType::F64) s += ",dtype=f64";
    return s;
  }
  std::string s = std::string(modelKindName(m.kind)) + ":layers=" + std::to_string(m.layers) +
                  ",hidden=" + std::to_string(m.hidden);
  if (m.kind == ModelKind::Gpt)
    s += ",heads=" + std::to_string(m.heads) + ",seq=" + std::to_string(m.seq) +
         ",vocab=" + std::to_string(m.vocab) + ",ffn=" + std::to_string(m.ffn);
  if (m.dtype == DType::F64) s += ",dtype=f64";
  return s;
}

int modelLayerCount(const ModelSpec& m) {
  if (m.kind == ModelKind::TorchScript) return static_cast<int>(detail::torchScriptLayerNames(m).size());
  return m.kind == ModelKind::Gpt ? m.layers + 2 : m.layers;
}

std::vector<std::string> modelLayerNames(const ModelSpec& m) {
  if (m.kind == ModelKind::TorchScript) return detail::torchScriptLayerNames(m);
  std::vector<std::string> names;
  if (m.kind == ModelKind::Gpt) names.emplace_back("embedding");
  for (int i = 0; i < m.layers; ++i) names.push_back("block" + std::to_string(i));
  if (m.kind == ModelKind::Gpt) names.emplace_back("head");
  return names;
}

core::Status checkModel(const ModelSpec& m) {
  if (m.kind == ModelKind::TorchScript) return detail::checkTorchScript(m);
  return core::okStatus();
}

core::CostProfile modelCostProfile(const ModelSpec& m, int microbatchSize) {
  if (m.kind == ModelKind::TorchScript) return detail::torchScriptCostProfile(m, microbatchSize);
  core::CostProfile p;
  p.name = modelSpecToString(m);
  const double b = microbatchSize, H = m.hidden, elem = m.dtype == DType::F64 ? 8 : 4;
  constexpr double kFlopsPerMs = 50e9 / 1e3;
  auto layer = [&](std::string name, double fwdFlops, double linearFlops, double weights, double activations,
                   double output) {
    core::LayerCost c;
    c.name = std::move(name);
    c.forwardMs = fwdFlops / kFlopsPerMs;
    // I: as much again as F except the weight-gradient matmuls, which W does.
    c.backwardInputMs = fwdFlops / kFlopsPerMs;
    c.backwardWeightMs = linearFlops / kFlopsPerMs;
    c.weightBytes = static_cast<std::int64_t>(weights * elem);
    c.activationBytes = static_cast<std::int64_t>(activations * elem);
    c.outputBytes = static_cast<std::int64_t>(output * elem);
    p.layers.push_back(c);
  };
  if (m.kind == ModelKind::Gpt) {
    const double T = m.seq, V = m.vocab, F = m.ffn;
    const double tokens = b * T;
    layer("embedding", tokens * H, 0, (V + T) * H, 0, tokens * H);
    const double linear = 2 * tokens * H * H * (4 + 2 * F);
    const double attention = 4 * b * T * T * H;
    for (int i = 0; i < m.layers; ++i)
      layer("block" + std::to_string(i), linear + attention, linear, H * H * (4 + 2 * F),
            tokens * H * (8 + 2 * F) + b * m.heads * T * T, tokens * H);
    layer("head", 2 * tokens * H * V, 2 * tokens * H * V, H * V, tokens * (H + V), 1);
  } else {
    for (int i = 0; i < m.layers; ++i)
      layer("block" + std::to_string(i), 2 * b * H * H, 2 * b * H * H, H * H + H, 2 * b * H, b * H);
  }
  return p;
}

core::Result<FaultInjection> parseFaultInjection(std::string_view text) {
  auto colon = text.find(':');
  if (colon == std::string_view::npos)
    return core::makeError("engine.fault", "fault must look like KIND:OP, e.g. throw:B1@s1");
  FaultInjection f{std::string(text.substr(0, colon)), std::string(text.substr(colon + 1))};
  if (f.kind != "throw" && f.kind != "nan" && f.kind != "drop" && f.kind != "grad")
    return core::makeError("engine.fault",
                           "fault kind must be throw, nan, drop or grad, got '" + f.kind + "'");
  if (f.op.empty()) return core::makeError("engine.fault", "fault names no op");
  return f;
}

core::Status checkFaultInjection(const core::Schedule& schedule, const FaultInjection& fault) {
  if (!fault.active()) return core::okStatus();
  for (const auto& device : schedule.devices)
    for (const auto& step : device)
      for (const core::Op* op : {&step.first, step.second ? &*step.second : nullptr}) {
        if (!op || schedule.opName(*op) != fault.op) continue;
        // grad: a wrong input gradient, which only a B or I of a stage after the first sends.
        if (fault.kind == "grad" &&
            ((op->kind != core::OpKind::B && op->kind != core::OpKind::I) || op->stage == 0))
          return core::makeError("engine.fault",
                                 "--inject-fault grad:" + fault.op +
                                     ": only a B or I of a stage after the first sends an input "
                                     "gradient to perturb");
        return core::okStatus();
      }
  std::string example;
  if (!schedule.devices.empty() && !schedule.devices.front().empty())
    example = " (ops are named like " + schedule.opName(schedule.devices.front().front().first) + ")";
  return core::makeError("engine.fault", "--inject-fault " + fault.kind + ":" + fault.op +
                                             ": the schedule has no op " + fault.op + example +
                                             ", so the fault would never fire");
}

}  // namespace ps::engine
