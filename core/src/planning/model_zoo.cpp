#include "pipestudio/core/planning/model_zoo.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "planning/roofline.h"

namespace ps::core {

Result<int> dtypeBytesFromName(std::string_view name) {
  if (name == "bf16" || name == "fp16") return 2;
  if (name == "fp32") return 4;
  return makeError("zoo.dtype", "unknown dtype '" + std::string(name) + "' (expected bf16, fp16 or fp32)");
}

namespace {

// An H100 SXM 80 GB: 989 dense bf16 TFLOP/s, 3350 GB/s HBM3; stages on different nodes
// talk over 400 Gb/s InfiniBand (50 GB/s per direction).
TransformerConfig h100(TransformerConfig c) {
  c.gpuTflops = 989;
  c.hbmGBps = 3350;
  c.linkGBps = 50;
  c.memoryGiB = 80;
  return c;
}

}  // namespace

std::vector<std::string> transformerPresetNames() {
  return {"gpt3-1.3b", "llama2-7b", "llama2-70b"};
}

Result<TransformerConfig> transformerPreset(std::string_view name) {
  TransformerConfig c;
  c.name = std::string(name);
  if (name == "gpt3-1.3b") {
    // GPT-3 XL (Brown et al. 2020): 24 layers, d_model 2048, 128-wide heads, 2048 tokens.
    c.layers = 24, c.hidden = 2048, c.heads = 16, c.seqLength = 2048, c.vocab = 50257;
  } else if (name == "llama2-7b") {
    c.layers = 32, c.hidden = 4096, c.heads = 32, c.seqLength = 4096, c.vocab = 32000;
  } else if (name == "llama2-70b") {
    c.layers = 80, c.hidden = 8192, c.heads = 64, c.seqLength = 4096, c.vocab = 32000;
  } else {
    std::string known;
    for (const auto& n : transformerPresetNames()) known += (known.empty() ? "" : ", ") + n;
    return makeError("zoo.preset", "unknown preset '" + std::string(name) + "' (known: " + known + ")");
  }
  return h100(c);
}

std::vector<LayerEstimate> transformerLayerEstimates(const TransformerConfig& c) {
  const double b = c.microbatchSize, s = c.seqLength, h = c.hidden, a = c.heads, V = c.vocab;
  const double dt = c.dtypeBytes;
  const double halfScale = dt / 2.0;  // Korthikanti's byte counts assume 16-bit activations
  std::vector<LayerEstimate> out;

  LayerEstimate emb;
  emb.name = "embedding";
  emb.weightBytes = V * h * dt;
  emb.activationBytes = 4 * b * s + b * s * h;  // token ids (int32) + dropout mask
  emb.weightGradStashBytes = 4 * b * s;         // the ids drive the gradient scatter
  emb.outputBytes = b * s * h * dt;
  // A gather forward, nothing to propagate to the token ids, a scatter-add of the rows.
  emb.forwardTraffic = 2 * b * s * h * dt;
  emb.backwardInputTraffic = 0;
  emb.backwardWeightTraffic = 2 * b * s * h * dt;
  out.push_back(emb);

  for (int i = 0; i < c.layers; ++i) {
    LayerEstimate l;
    l.name = "block" + std::to_string(i);
    l.forwardFlops = 24 * b * s * h * h + 4 * b * s * s * h;
    // Backward ~2x forward: the matmuls' input gradients plus the attention core (scores and
    // values, both operands) are the input part; the matmuls' weight gradients the weight part.
    l.backwardInputFlops = 24 * b * s * h * h + 8 * b * s * s * h;
    l.backwardWeightFlops = 24 * b * s * h * h;
    l.weightBytes = (12 * h * h + 13 * h) * dt;
    l.activationBytes = s * b * h * (34 + (c.flashAttention ? 0 : 5 * a * s / h)) * halfScale;
    // Inputs of the QKV, output, and the two MLP matmuls (2 + 2 + 2 + 8 of the 34 sbh).
    l.weightGradStashBytes = 14 * s * b * h * halfScale;
    l.outputBytes = b * s * h * dt;
    l.forwardTraffic = l.weightBytes + l.activationBytes + l.outputBytes;
    l.backwardInputTraffic = l.weightBytes + l.activationBytes;
    l.backwardWeightTraffic = l.weightBytes + l.weightGradStashBytes;
    out.push_back(l);
  }

  LayerEstimate head;
  head.name = "lm_head";  // final norm, output projection, softmax cross-entropy (fp32 logits)
  head.forwardFlops = 2 * b * s * h * V;
  head.backwardInputFlops = 2 * b * s * h * V;
  head.backwardWeightFlops = 2 * b * s * h * V;
  head.weightBytes = (V * h + 2 * h) * dt;
  head.activationBytes = 2 * b * s * h * dt + 4 * b * s * V;
  head.weightGradStashBytes = b * s * h * dt;
  head.outputBytes = 4;  // the loss
  head.forwardTraffic = head.weightBytes + head.activationBytes;
  head.backwardInputTraffic = head.weightBytes + head.activationBytes;
  head.backwardWeightTraffic = head.weightBytes + head.weightGradStashBytes + 4 * b * s * V;
  out.push_back(head);
  return out;
}

Result<CostProfile> transformerProfile(const TransformerConfig& c) {
  auto positive = [&](double v, const char* what) -> std::optional<Diagnostic> {
    if (v > 0 && std::isfinite(v)) return std::nullopt;
    return makeError("zoo.config", std::string(what) + " must be positive");
  };
  for (auto [v, what] : {std::pair<double, const char*>{double(c.layers), "layers"},
                         {double(c.hidden), "hidden"},
                         {double(c.heads), "heads"},
                         {double(c.seqLength), "sequence length"},
                         {double(c.vocab), "vocabulary"},
                         {double(c.microbatchSize), "micro-batch size"},
                         {double(c.dtypeBytes), "dtype bytes"},
                         {c.gpuTflops, "GPU TFLOP/s"},
                         {c.computeEfficiency, "compute efficiency"},
                         {c.hbmGBps, "HBM bandwidth"},
                         {c.linkGBps, "link bandwidth"}})
    if (auto e = positive(v, what)) return *e;
  if (c.hidden % c.heads != 0) return makeError("zoo.config", "hidden must be a multiple of heads");

  const detail::Roofline roofline(c.gpuTflops, c.computeEfficiency, c.hbmGBps);
  auto time = [&](double flops, double bytes) { return roofline.ms(flops, bytes); };

  CostProfile p;
  p.name = c.name;
  p.deviceMemoryBytes = static_cast<std::int64_t>(std::llround(c.memoryGiB * 1073741824.0));
  p.link.latencyMs = c.linkLatencyUs / 1000.0;
  p.link.bandwidthBytesPerMs = c.linkGBps * 1e6;
  p.hostBandwidthBytesPerMs = c.hostGBps * 1e6;
  p.optimizerBytesPerWeightByte = 6;  // fp32 master weights, Adam m and v over 16-bit weights
  p.gradientBytesPerWeightByte = 1;
  for (const LayerEstimate& e : transformerLayerEstimates(c)) {
    LayerCost l;
    l.name = e.name;
    l.forwardMs = time(e.forwardFlops, e.forwardTraffic);
    l.backwardInputMs = time(e.backwardInputFlops, e.backwardInputTraffic);
    l.backwardWeightMs = time(e.backwardWeightFlops, e.backwardWeightTraffic);
    l.activationBytes = std::llround(e.activationBytes);
    l.weightGradStashBytes = std::llround(e.weightGradStashBytes);
    l.weightBytes = std::llround(e.weightBytes);
    l.outputBytes = std::llround(e.outputBytes);
    p.layers.push_back(std::move(l));
  }
  return p;
}

}  // namespace ps::core
