// pipestudio-cli generate KIND --devices D --microbatches M [--chunks V] [-o FILE]
// Writes a built-in schedule as .pipe (explicit form) or PyTorch CSV (by -o's extension or
// --format).
#include <iostream>

#include "common/command.h"
#include "common/flags.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/io/pytorch_csv.h"
#include "pipestudio/core/planning/generators.h"

namespace {

const char* kUsage =
    "usage: pipestudio-cli generate KIND --devices D --microbatches M [--chunks V] [-o FILE]\n"
    "                               [--format pipe|csv] [--csv-format compute_only|compute_comms]\n"
    "                               [--pytorch VERSION]\n\n"
    "KIND: gpipe, 1f1b, interleaved-1f1b, looped-bfs, zb-h1, zb-h2, zb-v, dualpipe-v, dualpipe.\n"
    "Stages = devices x chunks; chunks default to 2 for interleaved-1f1b, looped-bfs, zb-v,\n"
    "dualpipe-v and dualpipe, 1 otherwise. dualpipe routes micro-batches 0..M/2-1 down and the\n"
    "rest up (docs/dsl.md) and has no PyTorch CSV. The output format follows -o's extension (.pipe or .csv), "
    "else\n"
    "--format (default pipe); stdout when -o is absent or -. A compute_comms CSV is written as\n"
    "PyTorch VERSION lowers it (2.11 to 2.15, default 2.11).\n"
    "Exit status: 0 ok, 2 usage or sizes the kind cannot serve.\n";

int runGenerate(const ps::cli::Args& args, const ps::cli::Reporter& rep) {
  using namespace ps::core;
  using ps::cli::readInt;
  auto usage = [&](const std::string& message) { return rep.usage(message); };
  auto kind = scheduleKindFromName(args.positionals()[0]);
  if (!kind) {
    std::string names;
    for (ScheduleKind k : allScheduleKinds())
      names += (names.empty() ? "" : ", ") + std::string(scheduleKindName(k));
    return usage("unknown schedule kind '" + args.positionals()[0] + "' (kinds: " + names + ")");
  }
  GeneratorOptions o;
  if (!args.has("--devices") || !readInt(args.value("--devices"), 0, o.devices))
    return usage("--devices needs a number");
  if (!args.has("--microbatches") || !readInt(args.value("--microbatches"), 0, o.microbatches))
    return usage("--microbatches needs a number");
  if (args.has("--chunks") && !readInt(args.value("--chunks"), 0, o.chunks))
    return usage("--chunks needs a number");

  const std::string out = args.value("-o");
  const std::string format = ps::cli::formatOfPath(out, args.value("--format", "pipe"));
  if (format != "pipe" && format != "csv") return usage("--format is pipe or csv, not '" + format + "'");
  const std::string csvFormat = args.value("--csv-format", "compute_only");
  if (csvFormat != "compute_only" && csvFormat != "compute_comms")
    return usage("--csv-format is compute_only or compute_comms, not '" + csvFormat + "'");

  int code = ps::cli::kExitOk;
  const auto target = ps::cli::pytorchTargetFlags(args, rep, code);
  if (!target) return code;
  auto schedule = generateSchedule(*kind, o);
  if (!schedule.ok()) return rep.fail(formatDiagnostics(schedule.errors()));
  std::string text;
  if (format == "csv") {
    auto csv = writePytorchCsv(
        *schedule, csvFormat == "compute_comms" ? CsvFormat::ComputeComms : CsvFormat::ComputeOnly, *target);
    if (!csv.ok()) return rep.fail(formatDiagnostics(csv.errors()));
    text = std::move(*csv);
  } else {
    text = printDsl(*schedule);
  }
  return rep.write(out, text) ? ps::cli::kExitOk : ps::cli::kExitUsage;
}

const ps::cli::FlagCommandRegistrar kGenerate({"generate",
                                               "write a built-in schedule (gpipe, 1f1b, zb-h1, ...)",
                                               kUsage,
                                               {"--devices", "--microbatches", "--chunks", "-o", "--format",
                                                "--csv-format", "--pytorch"},
                                               {},
                                               {1, 1, "expected one KIND"},
                                               runGenerate});

}  // namespace
