// Analytic per-layer costs of heterogeneous models (docs/search.md, "Model zoo"), on the dense
// generator's formulas (model_zoo.cpp, docs/formats.md): Korthikanti et al.'s activation
// bytes for 16-bit activations without flash attention, backward = input part (matmuls + 2x
// the attention core) + weight part (matmuls), and a roofline for times. Generalised to
// grouped-query attention, gated MLPs of any width, Mamba-2 mixers and MoE layers.
#include "pipestudio/core/planning/model_zoo_hetero.h"

#include <algorithm>
#include <cmath>

#include "pipestudio/core/planning/model_zoo.h"
#include "planning/roofline.h"

namespace ps::core {

namespace {

constexpr double kDt = 2;  // bf16

class Builder {
 public:
  Builder(const ZooHardware& hw, std::string name) : hw_(hw), b_(hw.microbatchSize), s_(hw.seqLength) {
    p_.name = std::move(name);
    p_.deviceMemoryBytes = static_cast<std::int64_t>(std::llround(hw.memoryGiB * 1073741824.0));
    p_.link.latencyMs = hw.linkLatencyUs / 1000.0;
    p_.link.bandwidthBytesPerMs = hw.linkGBps * 1e6;
    p_.hostBandwidthBytesPerMs = hw.hostGBps * 1e6;
    p_.optimizerBytesPerWeightByte = 6;
    p_.gradientBytesPerWeightByte = 1;
  }

  CostProfile take() { return std::move(p_); }

  // Token embedding, as the dense generator: ids (int32) and the dropout mask.
  void embedding(double vocab, double h) {
    LayerEstimate e;
    e.name = "embedding";
    e.weightBytes = vocab * h * kDt;
    e.activationBytes = 4 * b_ * s_ + b_ * s_ * h;
    e.weightGradStashBytes = 4 * b_ * s_;
    e.outputBytes = b_ * s_ * h * kDt;
    push(e);
  }

  // Attention sublayer with qDim query width and kvDim for each of K and V (GQA / MQA).
  LayerEstimate attention(const std::string& name, double h, double qDim, double kvDim, double heads) const {
    const double b = b_, s = s_;
    const double mm = 2 * b * s * (h * (qDim + 2 * kvDim) + qDim * h);
    const double core = 4 * b * s * s * qDim;  // QK^T and PV
    LayerEstimate e;
    e.name = name;
    e.forwardFlops = mm + core;
    e.backwardInputFlops = mm + 2 * core;
    e.backwardWeightFlops = mm;
    e.weightBytes = (h * (qDim + 2 * kvDim) + qDim * h + 2 * h) * kDt;
    // Korthikanti's 11sbh + 5as^2b with the projections' real widths, plus the 2sbh norm input.
    e.activationBytes =
        b * s * (2 * h + 2 * qDim + 4 * kvDim + 2 * qDim + h) + 5 * heads * s * s * b + 2 * b * s * h;
    e.weightGradStashBytes = 2 * b * s * h + 2 * b * s * qDim;
    e.outputBytes = b * s * h * kDt;
    return e;
  }

  // MLP sublayer: gated (SwiGLU / GeGLU, three matrices) or plain (two).
  LayerEstimate mlp(const std::string& name, double h, double ffn, bool gated) const {
    const double b = b_, s = s_;
    const double mats = gated ? 3 : 2;
    const double mm = 2 * b * s * h * ffn * mats;
    LayerEstimate e;
    e.name = name;
    e.forwardFlops = e.backwardInputFlops = e.backwardWeightFlops = mm;
    e.weightBytes = (mats * h * ffn + h) * kDt;
    // Korthikanti's 19sbh for ffn = 4h (input 2sbh, activation input 8sbh, down-projection
    // input 8sbh, dropout sbh) with the real width, the gate's extra input, the norm's 2sbh.
    e.activationBytes = b * s * (2 * h + 2 * ffn * (gated ? 2 : 1) + 2 * ffn + h) + 2 * b * s * h;
    e.weightGradStashBytes = 2 * b * s * h + 2 * b * s * ffn;
    e.outputBytes = b * s * h * kDt;
    return e;
  }

  // Mamba-2 (SSD) mixer: in_proj to (z, x, B, C, dt), depthwise conv, chunked scan, gated
  // norm, out_proj. The scan: intra-chunk 2bsQ·dInner + chunk states 4bs·dInner·N.
  LayerEstimate mamba2(const std::string& name, double h, double dInner, double dState, double groups,
                       double ssmHeads, double chunk) const {
    const double b = b_, s = s_;
    const double inDim = 2 * dInner + 2 * groups * dState + ssmHeads;
    const double convDim = dInner + 2 * groups * dState;
    const double mm = 2 * b * s * h * inDim + 2 * b * s * dInner * h;
    const double scan = 2 * b * s * chunk * dInner + 4 * b * s * dInner * dState;
    LayerEstimate e;
    e.name = name;
    e.forwardFlops = mm + scan;
    e.backwardInputFlops = mm + 2 * scan;
    e.backwardWeightFlops = mm;
    e.weightBytes = (h * inDim + dInner * h + convDim * 4 + 2 * ssmHeads + dInner + h) * kDt;
    e.activationBytes = kDt * b * s * (h + inDim + convDim + 3 * dInner) +
                        4 * (s / chunk) * b * dInner * dState + 2 * b * s * h;
    e.weightGradStashBytes = kDt * b * s * (h + dInner);
    e.outputBytes = b * s * h * kDt;
    return e;
  }

  // Routed experts (top-`active` of `experts`, sharded over an expert-parallel group of
  // epDegree devices beside the pipeline) plus `shared` experts, each a gated MLP of width
  // expertFfn, and the router. Returns the estimate and the all-to-all time (dispatch and
  // combine of top-k token copies) that F and I each pay.
  std::pair<LayerEstimate, double> experts(const std::string& name, double h, double experts, double active,
                                           double shared, double expertFfn, double epDegree) const {
    const double b = b_, s = s_;
    const double copies = active + shared;
    const double mm = 2 * b * s * h * expertFfn * 3 * copies / hw_.expertEfficiency + 2 * b * s * h * experts;
    LayerEstimate e;
    e.name = name;
    e.forwardFlops = e.backwardInputFlops = e.backwardWeightFlops = mm;
    e.weightBytes = ((experts / epDegree + shared) * 3 * h * expertFfn + h * experts + h) * kDt;
    e.activationBytes = b * s * copies * (2 * h + 6 * expertFfn) + 4 * b * s * experts + 2 * b * s * h;
    e.weightGradStashBytes = b * s * copies * (2 * h + 2 * expertFfn);
    e.outputBytes = b * s * h * kDt;
    const double a2a = 2 * b * s * active * h * kDt / (hw_.expertLinkGBps * 1e6);
    return {e, a2a};
  }

  static LayerEstimate combine(std::string name, const LayerEstimate& a, const LayerEstimate& m) {
    LayerEstimate e = a;
    e.name = std::move(name);
    e.forwardFlops += m.forwardFlops;
    e.backwardInputFlops += m.backwardInputFlops;
    e.backwardWeightFlops += m.backwardWeightFlops;
    e.weightBytes += m.weightBytes;
    e.activationBytes += m.activationBytes;
    e.weightGradStashBytes += m.weightGradStashBytes;
    return e;
  }

  // The dense generator's LM head: final norm, output projection, fp32 logits for the loss.
  void lmHead(double vocab, double h) {
    const double b = b_, s = s_;
    LayerEstimate e;
    e.name = "lm_head";
    e.forwardFlops = e.backwardInputFlops = e.backwardWeightFlops = 2 * b * s * h * vocab;
    e.weightBytes = (vocab * h + 2 * h) * kDt;
    e.activationBytes = 2 * b * s * h * kDt + 4 * b * s * vocab;
    e.weightGradStashBytes = b * s * h * kDt;
    e.outputBytes = 4;
    push(e);
  }

  // The dense generator's roofline (roofline.h). `extraMs` (all-to-all) is added to F and I.
  void push(const LayerEstimate& e, double extraMs = 0) {
    const detail::Roofline roofline(hw_.gpuTflops, hw_.computeEfficiency, hw_.hbmGBps);
    auto time = [&](double flops, double bytes) { return roofline.ms(flops, bytes); };
    LayerCost l;
    l.name = e.name;
    l.forwardMs = time(e.forwardFlops, e.weightBytes + e.activationBytes + e.outputBytes) + extraMs;
    l.backwardInputMs = time(e.backwardInputFlops, e.weightBytes + e.activationBytes) + extraMs;
    l.backwardWeightMs = time(e.backwardWeightFlops, e.weightBytes + e.weightGradStashBytes);
    l.activationBytes = std::llround(e.activationBytes);
    l.weightGradStashBytes = std::llround(e.weightGradStashBytes);
    l.weightBytes = std::llround(e.weightBytes);
    l.outputBytes = std::llround(e.outputBytes);
    p_.layers.push_back(std::move(l));
  }

 private:
  const ZooHardware& hw_;
  double b_, s_;
  CostProfile p_;
};

}  // namespace

CostProfile gemmaStyleProfile(const std::string& variant, const ZooHardware& hw) {
  // Gemma: 256k vocabulary, GeGLU MLP, head dim 256 (2b: multi-query; 7b: multi-head).
  const bool big = variant == "gemma-7b";
  Builder b(hw, big ? "gemma-7b" : "gemma-2b");
  const double h = big ? 3072 : 2048, heads = big ? 16 : 8;
  const double qDim = heads * 256, kvDim = big ? 16 * 256 : 256, ffn = big ? 24576 : 16384;
  const int layers = big ? 28 : 18;
  const double vocab = 256000;
  b.embedding(vocab, h);
  for (int i = 0; i < layers; ++i) {
    const std::string n = "block" + std::to_string(i);
    b.push(Builder::combine(n, b.attention(n, h, qDim, kvDim, heads), b.mlp(n, h, ffn, true)));
  }
  b.lmHead(vocab, h);
  return b.take();
}

CostProfile deepseekStyleProfile(const ZooHardware& hw) {
  // DeepSeek-V2-Lite shape: 27 layers, the first dense (SwiGLU 10944), then MoE layers with
  // 64 routed experts (top-6) and 2 shared experts of width 1408, experts sharded 8 ways;
  // 102400-token vocabulary. Attention as 16 heads with 192-wide queries and 128-wide values
  // (MLA's compression changes weights, not this shape).
  Builder b(hw, "deepseek-v2-lite");
  const double h = 2048, heads = 16, qDim = 16 * 192, kvDim = 16 * 128;
  b.embedding(102400, h);
  b.push(Builder::combine("dense0", b.attention("dense0", h, qDim, kvDim, heads),
                          b.mlp("dense0", h, 10944, true)));
  for (int i = 1; i < 27; ++i) {
    const std::string n = "moe" + std::to_string(i);
    auto [ex, a2a] = b.experts(n, h, 64, 6, 2, 1408, 8);
    b.push(Builder::combine(n, b.attention(n, h, qDim, kvDim, heads), ex), a2a);
  }
  b.lmHead(102400, h);
  return b.take();
}

CostProfile nemotronHStyleProfile(const ZooHardware& hw) {
  // Nemotron-H-8B shape: 52 layers of three kinds in its published pattern, Mamba-2 (M:
  // d_inner 8192, state 128, 8 groups, 128 heads, chunk 256), self-attention (*: 32 query
  // heads, 8 KV heads of 128) and squared-ReLU MLP (-: width 21504); 131072-token vocabulary.
  Builder b(hw, "nemotron-h-8b");
  const std::string pattern = "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-";
  const double h = 4096;
  b.embedding(131072, h);
  for (size_t i = 0; i < pattern.size(); ++i) {
    const std::string idx = std::to_string(i);
    switch (pattern[i]) {
      case 'M':
        b.push(b.mamba2("mamba" + idx, h, 8192, 128, 8, 128, 256));
        break;
      case '*':
        b.push(b.attention("attn" + idx, h, 4096, 8 * 128, 32));
        break;
      default:
        b.push(b.mlp("mlp" + idx, h, 21504, false));
        break;
    }
  }
  b.lmHead(131072, h);
  return b.take();
}

CostProfile llama2Profile(const ZooHardware& hw) {
  // The homogeneous reference comes from the dense generator itself.
  auto c = transformerPreset("llama2-7b");
  if (c) {
    c->seqLength = hw.seqLength;
    c->microbatchSize = hw.microbatchSize;
    if (auto p = transformerProfile(*c)) return std::move(p).value();
  }
  // Unreachable with the built-in preset; a same-shape fallback keeps the zoo total.
  Builder b(hw, "llama2-7b");
  b.embedding(32000, 4096);
  for (int i = 0; i < 32; ++i) {
    const std::string n = "block" + std::to_string(i);
    b.push(Builder::combine(n, b.attention(n, 4096, 4096, 4096, 32), b.mlp(n, 4096, 11008, true)));
  }
  b.lmHead(32000, 4096);
  return b.take();
}

std::vector<CostProfile> heterogeneousZoo(const ZooHardware& hw) {
  return {gemmaStyleProfile("gemma-2b", hw), gemmaStyleProfile("gemma-7b", hw), deepseekStyleProfile(hw),
          nemotronHStyleProfile(hw), llama2Profile(hw)};
}

}  // namespace ps::core
