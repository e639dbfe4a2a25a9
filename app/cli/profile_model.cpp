// pipestudio-cli profile-model: analytic cost profile of a dense decoder transformer.
#include "common/command.h"
#include "common/flags.h"
#include "pipestudio/core/planning/model_zoo.h"

namespace ps::cli {
namespace {

using namespace ps::core;

const char* kUsage =
    "usage: pipestudio-cli profile-model [--preset gpt3-1.3b|llama2-7b|llama2-70b]\n"
    "           --layers L --hidden H --heads A --seq S --vocab V [--microbatch-size B]\n"
    "           [--dtype bf16|fp16|fp32] --gpu-tflops T --hbm-gbps X --link-gbps Y\n"
    "           [--memory-gb 80] [--efficiency 0.5] [--link-latency-us 10] [--host-gbps 25]\n"
    "           [--flash-attention] [--name N] [-o out.json]\n"
    "\n"
    "Writes a cost profile (docs/formats.md) with one layer per transformer block plus the\n"
    "embedding and the LM head: FLOPs per block 24bsh^2 + 4bs^2h forward, about twice that\n"
    "backward (split into input and weight parts), activations sbh(34 + 5as/h) bytes per\n"
    "block; times from a roofline of T TFLOP/s x efficiency and X GB/s of HBM. A preset fills\n"
    "the model and an 80 GB H100-class GPU; flags given with it override its values.\n"
    "Bandwidths are in GB/s (1e9 bytes/s), memory in GiB.\n";

int runProfileModel(const Args& args, const Reporter& rep) {
  auto usage = [&](const std::string& msg) { return rep.usage(msg); };
  if (!args.positionals().empty()) return usage("unexpected argument '" + args.positionals()[0] + "'");

  TransformerConfig c;
  if (args.has("--preset")) {
    auto p = transformerPreset(args.value("--preset"));
    if (!p) return usage(p.error().message);
    c = *p;
  }
  // Model sizes are whole numbers, rates and sizes of the hardware any positive number.
  struct NumberFlag {
    const char* flag;
    int* whole;
    double* real;
  };
  for (const NumberFlag& f : {NumberFlag{"--layers", &c.layers, nullptr},
                              {"--hidden", &c.hidden, nullptr},
                              {"--heads", &c.heads, nullptr},
                              {"--seq", &c.seqLength, nullptr},
                              {"--vocab", &c.vocab, nullptr},
                              {"--microbatch-size", &c.microbatchSize, nullptr},
                              {"--gpu-tflops", nullptr, &c.gpuTflops},
                              {"--hbm-gbps", nullptr, &c.hbmGBps},
                              {"--link-gbps", nullptr, &c.linkGBps},
                              {"--memory-gb", nullptr, &c.memoryGiB},
                              {"--efficiency", nullptr, &c.computeEfficiency},
                              {"--link-latency-us", nullptr, &c.linkLatencyUs},
                              {"--host-gbps", nullptr, &c.hostGBps}}) {
    if (!args.has(f.flag)) continue;
    const std::string v = args.value(f.flag);
    if (f.whole && !readInt(v, 1, *f.whole))
      return usage(std::string(f.flag) + ": expected a positive integer");
    if (f.real) {
      auto x = parseNumber(v);
      if (!x || !(*x > 0)) return usage(std::string(f.flag) + ": expected a positive number");
      *f.real = *x;
    }
  }
  if (c.computeEfficiency > 1) return usage("--efficiency: expected a fraction in (0, 1]");
  if (args.has("--dtype")) {
    auto b = dtypeBytesFromName(args.value("--dtype"));
    if (!b) return usage(b.error().message);
    c.dtypeBytes = *b;
  }
  if (args.has("--name")) c.name = args.value("--name");
  if (args.has("--flash-attention")) c.flashAttention = true;
  const char* required[] = {"--layers", "--hidden",     "--heads",    "--seq",
                            "--vocab",  "--gpu-tflops", "--hbm-gbps", "--link-gbps"};
  if (!args.has("--preset"))
    for (const char* r : required)
      if (!args.has(r)) return usage(std::string("missing ") + r + " (or give --preset)");
  if (c.name.empty())
    c.name = "decoder-L" + std::to_string(c.layers) + "-h" + std::to_string(c.hidden) + "-s" +
             std::to_string(c.seqLength);

  auto profile = transformerProfile(c);
  if (!profile) return usage(profile.error().message);
  const std::string out = args.has("-o") ? args.value("-o") : args.value("--output");
  return rep.write(out, costProfileToJson(*profile)) ? kExitOk : kExitUsage;
}

const FlagCommandRegistrar kRegister{
    {"profile-model",
     "write an analytic cost profile of a transformer model",
     kUsage,
     {"--preset", "--layers", "--hidden", "--heads", "--seq", "--vocab", "--microbatch-size", "--dtype",
      "--gpu-tflops", "--hbm-gbps", "--link-gbps", "--memory-gb", "--efficiency", "--link-latency-us",
      "--host-gbps", "--name", "-o", "--output"},
     {"--flash-attention"},
     {},
     runProfileModel}};

}  // namespace
}  // namespace ps::cli
