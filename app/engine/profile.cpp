// pipestudio-cli profile --model SPEC: measures a built-in model layer by layer through the
// engine and writes the cost profile (docs/formats.md) that simulate, search and compare load.
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/command.h"
#include "common/engine_commands.h"
#include "common/flags.h"
#include "pipestudio/core/model/cost_profile.h"
#include "pipestudio/engine/engine.h"

namespace {

const char* kUsage =
    "usage: pipestudio-cli profile --model SPEC [--microbatch-size B]\n"
    "           [--repetitions N] [--warmup K] [--threads T] [--workers D] [--seed S] [-o profile.json]\n"
    "           [--optimizer sgd|adamw]\n\n"
    "Runs every layer of the built-in model (SPEC as for `run`, e.g.\n"
    "'gpt:layers=8,hidden=256,heads=4,seq=128,vocab=1000') on one micro-batch of B samples\n"
    "(default 2), the way the engine runs it: forward (F), backward for the input with the\n"
    "weight gradients deferred (I), then the deferred weight gradients (W); the last layer's F\n"
    "and I include the loss. Each time is the median of N repetitions (default 10) after K\n"
    "warm-up ones (default 3). Bytes: weights, what F stashes, what W holds after I, output.\n"
    "Threads: as a run sets them per worker, T when given, else cores / D (D = devices the run\n"
    "will have on this host, default 1); ops are timed on D worker threads at once, as the\n"
    "workers of a run share the cores. Profile with the run's setting.\n"
    "--optimizer sgd|adamw also times each layer's optimizer step (libtorch's, as `run\n"
    "--optimizer` takes it) as optimizer_step_ms, which predictions of such runs use.\n"
    "Writes the cost-profile JSON (stdout without -o) with \"source\": \"profiled\" and the\n"
    "settings under \"profiler\"; with -o, prints a table of the layers.\n"
    "Layers are profiled on the CPU (GPU profiling is not implemented; on a GPU, measure a run:\n"
    "`run --device cuda --trace`).\n"
    "Exit status: 0 ok, 1 the model cannot be profiled, 2 usage.\n";

std::string hostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

int runProfile(const ps::cli::Args& args, const ps::cli::Reporter& reporter) {
  using namespace ps::engine;
  auto usage = [&](const std::string& message) { return reporter.usage(message); };
  if (!args.positionals().empty()) return usage("unexpected argument '" + args.positionals()[0] + "'");
  if (!args.has("--model"))
    return usage("--model SPEC is required (e.g. gpt:layers=8,hidden=256,heads=4,seq=128,vocab=1000)");
  auto model = parseModelSpec(args.value("--model"));
  if (!model) return usage(model.error().message);
  ProfileOptions o;
  if (args.has("--device") && args.value("--device") != "cpu")
    return usage("--device " + args.value("--device") +
                 ": layers are profiled on the CPU only (GPU profiling is not implemented); on a GPU, "
                 "measure a run instead: run --device cuda --trace");
  struct IntFlag {
    const char* flag;
    int minimum;
    int* out;
    const char* need;
  };
  int seed = 1;
  for (const IntFlag& f : {IntFlag{"--microbatch-size", 1, &o.microbatchSize, "a positive integer"},
                           IntFlag{"--repetitions", 1, &o.repetitions, "a positive integer"},
                           IntFlag{"--warmup", 0, &o.warmup, "an integer >= 0"},
                           IntFlag{"--threads", 0, &o.threads, "an integer >= 0"},
                           IntFlag{"--workers", 1, &o.workers, "a positive integer"},
                           IntFlag{"--seed", 0, &seed, "an integer >= 0"}})
    if (args.has(f.flag)) {
      auto v = ps::cli::parseInt(args.value(f.flag), f.minimum, std::numeric_limits<int>::max());
      if (!v) return usage(std::string(f.flag) + " needs " + f.need);
      *f.out = *v;
    }
  o.seed = static_cast<std::uint64_t>(seed);
  if (args.has("--optimizer")) {
    const auto optimizer = optimizerFromName(args.value("--optimizer"));
    if (!optimizer) return usage("--optimizer takes sgd or adamw, not '" + args.value("--optimizer") + "'");
    o.optimizer = *optimizer;
  }

  auto profile = profileModel(*model, o);
  if (!profile) return reporter.invalid(profile.errors());
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(ps::core::costProfileToJson(*profile));
  char date[32] = {};
  std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  // Fields the loader ignores (docs/formats.md): where the numbers came from.
  j["source"] = "profiled";
  j["profiler"] = {{"model", modelSpecToString(*model)},
                   {"device", "cpu"},
                   {"microbatch_size", o.microbatchSize},
                   {"threads", intraOpThreads(o.threads, o.workers)},
                   {"workers", o.workers},
                   {"repetitions", o.repetitions},
                   {"warmup", o.warmup},
                   {"optimizer", optimizerName(o.optimizer)},
                   {"statistic", "median"},
                   {"host", hostName()},
                   {"cores", std::thread::hardware_concurrency()},
                   {"date", date}};
  const std::string out = args.has("-o") ? args.value("-o") : args.value("--output");
  if (!reporter.write(out, j.dump(2) + "\n")) return ps::cli::kExitUsage;
  if (!out.empty() && out != "-") {
    std::printf("%s: %zu layers, micro-batch %d, %d thread(s), median of %d after %d warm-up\n", out.c_str(),
                profile->layers.size(), o.microbatchSize, intraOpThreads(o.threads, o.workers), o.repetitions,
                o.warmup);
    std::printf("  %-12s %10s %10s %10s %12s %12s %12s\n", "layer", "F ms", "I ms", "W ms", "activation",
                "weights", "output");
    double f = 0, i = 0, w = 0;
    for (const auto& c : profile->layers) {
      std::printf("  %-12s %10.3f %10.3f %10.3f %12lld %12lld %12lld\n", c.name.c_str(), c.forwardMs,
                  c.backwardInputMs, c.backwardWeightMs, static_cast<long long>(c.activationBytes),
                  static_cast<long long>(c.weightBytes), static_cast<long long>(c.outputBytes));
      f += c.forwardMs;
      i += c.backwardInputMs;
      w += c.backwardWeightMs;
    }
    std::printf("  %-12s %10.3f %10.3f %10.3f\n", "total", f, i, w);
  }
  return ps::cli::kExitOk;
}

const ps::cli::FlagCommandRegistrar kRegister{
    {"profile",
     ps::cli::engineCommandSummary("profile"),
     kUsage,
     {"--model", "--device", "--microbatch-size", "--repetitions", "--warmup", "--threads", "--workers",
      "--seed", "-o", "--output", "--optimizer"},
     {},
     {},
     runProfile}};

}  // namespace
