// pipestudio-cli convert IN OUT : between the .pipe DSL and PyTorch pipelining CSV, formats
// picked by extension (or --from / --to for stdin / stdout).
#include <filesystem>
#include <iostream>
#include <optional>

#include "common/command.h"
#include "common/flags.h"
#include "common/schedule_input.h"
#include "pipestudio/core/analysis/validator.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/io/pytorch_csv.h"
#include "pipestudio/core/io/torchtitan_export.h"

namespace {

using namespace ps::core;

const char* kUsage =
    "usage: pipestudio-cli convert IN OUT [--csv-format compute_only|compute_comms]\n"
    "                              [--pytorch VERSION] [--from pipe|csv] [--to pipe|csv]\n"
    "                              [--set name=value]... [--microbatches M]\n"
    "                              [--for pytorch|torchtitan] [--defer-recv pytorch|safe]\n\n"
    "Converts a schedule between the .pipe DSL and PyTorch pipelining CSV. Formats follow the\n"
    "extensions (.pipe, .csv); IN or OUT may be - (stdin / stdout) with --from / --to.\n"
    "A .pipe program is expanded first (--set overrides its 'let' values). --csv-format picks\n"
    "the CSV flavour written (default compute_only, which every PyTorch version loads);\n"
    "compute_comms is written as PyTorch VERSION lowers it (2.11 to 2.15, default 2.11: 2.15\n"
    "added WAIT_SEND/WAIT_REDUCE_GRAD actions). --microbatches fixes the micro-batch\n"
    "count read from a CSV (default: largest micro-batch + 1).\n"
    "--defer-recv places each RECV of a compute_comms CSV next to its consumer (PyTorch 2.13+):\n"
    "pytorch writes what _PipelineScheduleRuntime(defer_pp_recv=True) runs (its _defer_recv_ops,\n"
    "rank-parity rule included); safe writes PipeStudio's placement, the same wherever that order\n"
    "cannot hang on NCCL and posts each peer's messages in send order, else receives pulled\n"
    "earlier (docs/pytorch_csv.md). Every compute_comms file written is checked under nccl: one\n"
    "that would hang there is written with a warning naming the cycle.\n"
    "--for torchtitan writes the compute_only CSV torchtitan loads (pipeline_parallel_schedule_csv)\n"
    "and prints the [parallelism] settings that must go with it (schedule class for the stage\n"
    "placement, degree, num_pp_microbatches, the partition); a schedule torchtitan cannot build is\n"
    "refused with the reason. The schedule is validated first.\n"
    "Exit status: 0 ok, 1 the input has errors, 2 usage or unreadable file.\n";

int runConvert(const ps::cli::Args& args, const ps::cli::Reporter& rep) {
  const std::string in = args.positionals()[0], out = args.positionals()[1];
  // Both ends by extension or flag: an output has no content to go by, and a converter that
  // guessed its input would hide a misnamed file.
  const std::string from = args.value("--from", ps::cli::formatOfPath(in, ""));
  const std::string to = args.value("--to", ps::cli::formatOfPath(out, ""));
  if (from != "pipe" && from != "csv")
    return rep.usage(from.empty()
                         ? "cannot tell the format of '" + in + "': name it .pipe or .csv, or pass --from"
                         : "--from is pipe or csv, not '" + from + "'");
  if (to != "pipe" && to != "csv")
    return rep.usage(to.empty()
                         ? "cannot tell the format of '" + out + "': name it .pipe or .csv, or pass --to"
                         : "--to is pipe or csv, not '" + to + "'");
  const std::string csvFormat = args.value("--csv-format", "compute_only");
  if (csvFormat != "compute_only" && csvFormat != "compute_comms")
    return rep.usage("--csv-format is compute_only or compute_comms, not '" + csvFormat + "'");
  if (from == "csv" && !args.values("--set").empty()) return rep.usage("--set applies to .pipe input only");
  int code = ps::cli::kExitOk;
  const auto pytorch = ps::cli::pytorchTargetFlags(args, rep, code);
  if (!pytorch) return code;
  const PytorchTarget target = *pytorch;
  if (args.has("--defer-recv") && csvFormat != "compute_comms")
    return rep.usage("--defer-recv places receives: give --csv-format compute_comms");
  const std::string consumer = args.value("--for", "pytorch");
  if (consumer != "pytorch" && consumer != "torchtitan")
    return rep.usage("--for is pytorch or torchtitan, not '" + consumer + "'");
  const bool torchtitan = consumer == "torchtitan";
  if (torchtitan) {
    // torchtitan loads the file itself, with _load_csv's default format.
    if (to != "csv") return rep.usage("--for torchtitan writes a CSV: name OUT .csv");
    if (out == "-") return rep.usage("--for torchtitan reads the CSV from a file: give OUT a path");
    if (csvFormat != "compute_only")
      return rep.usage(
          "torchtitan loads compute_only CSVs (its lowering adds the communication); drop "
          "--csv-format " +
          csvFormat);
  }

  ScheduleLoadOptions options;
  options.format = scheduleFormatFromName(from);
  options.overrides = args.values("--set");
  if (args.has("--microbatches")) {
    if (from != "csv") return rep.usage("--microbatches applies to CSV input; use --set microbatches=M");
    auto m = ps::cli::parseInt(args.value("--microbatches"), 1);
    if (!m) return rep.usage("--microbatches needs a positive integer");
    options.csvMicrobatches = *m;
  }
  ps::cli::ScheduleInput input = ps::cli::readSchedule(rep, in, options);
  if (!input.schedule) return input.exitCode;
  Schedule* schedule = &*input.schedule;
  const CsvFormat csvForm = csvFormat == "compute_comms" ? CsvFormat::ComputeComms : CsvFormat::ComputeOnly;
  if (to == "pipe" && from == "pipe" && schedule->profile && out != "-" && in != "-") {
    // Keep the profile reachable from the new file's folder.
    std::filesystem::path p(*schedule->profile);
    if (p.is_relative()) p = std::filesystem::path(in).parent_path() / p;
    schedule->profile = profileReferenceFor(p.string(), out);
  }
  std::optional<TorchtitanSettings> titan;
  if (torchtitan) {
    ValidationReport report = validateSchedule(*schedule);
    if (!report.valid()) {
      locateScheduleDiagnostics(report.diagnostics, input.name, input.format, input.cells);
      return rep.invalid(report.diagnostics);
    }
    auto settings = torchtitanSettings(*schedule);
    if (!settings.ok()) return rep.invalid(settings.errors());
    titan = std::move(*settings);
  }
  std::string output;
  if (to == "pipe") {
    output = printDsl(*schedule);
  } else {
    auto csv = writePytorchCsv(*schedule, csvForm, target);
    if (!csv.ok()) return rep.fail(formatDiagnostics(csv.errors()));
    output = std::move(*csv);
    if (csvForm == CsvFormat::ComputeComms) {
      // What PyTorch runs on GPUs: a compute+comms order that hangs over NCCL is said so.
      auto written = readPytorchCsv(output);
      if (written.ok()) {
        ValidateOptions vo;
        vo.comm.semantics = CommSemantics::Nccl;
        for (const Diagnostic& d : validateSchedule(*written, vo).diagnostics)
          if (d.code == "validate.deadlock" || d.code == "validate.comm-order")
            std::cerr << "pipestudio-cli convert: warning: " << (out == "-" ? std::string("the CSV") : out)
                      << ": " << d.message << "\n";
      }
    }
  }
  if (to == "csv") {
    // A CSV holds the op orders only: say what the design loses, so that a simulation of the
    // CSV under the same profile is not taken for the design's.
    const std::vector<std::string> lost = csvExportLosses(*schedule, csvForm, target);
    if (!lost.empty()) {
      std::string list;
      for (size_t i = 0; i < lost.size(); ++i) list += (i ? "; " : "") + lost[i];
      std::cerr << "pipestudio-cli convert: note: " << (out == "-" ? std::string("the CSV") : out)
                << " does not carry " << list << ". The .pipe keeps them.\n";
    }
  }
  if (!rep.write(out, output)) return ps::cli::kExitUsage;
  if (titan) std::cout << torchtitanToml(*titan, out);
  return ps::cli::kExitOk;
}

const ps::cli::FlagCommandRegistrar kConvert({"convert",
                                              "convert a schedule between .pipe and PyTorch pipelining CSV",
                                              kUsage,
                                              {"--csv-format", "--pytorch", "--from", "--to", "--set",
                                               "--microbatches", "--for", "--defer-recv"},
                                              {},
                                              {2, 2, "expected IN and OUT"},
                                              runConvert});

}  // namespace
