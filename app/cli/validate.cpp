// pipestudio-cli validate FILE|- : structural and deadlock checks of a .pipe or PyTorch CSV
// schedule. Exit 0 valid, 1 invalid (diagnostics on stderr), 2 usage.
#include <iostream>

#include "common/command.h"
#include "common/flags.h"
#include "common/schedule_input.h"
#include "pipestudio/core/analysis/validator.h"

namespace {

using namespace ps::core;

const char* kUsage =
    "usage: pipestudio-cli validate FILE|- [--format pipe|csv] [--set name=value]...\n"
    "                                [--comm posted|nccl|dualpipe] [--batch-p2p]\n\n"
    "Checks a schedule: each (stage, micro-batch) has one F and one B or one I and one W, ops\n"
    "sit on their stage's device, ranges, duplicates, declared kinds' rules, then runs the\n"
    "device orders and reports a deadlock as the cycle of waiting ops and devices.\n"
    "--comm says how explicit SEND/RECV behave: posted (PyTorch's runtime over Gloo: posted, a\n"
    "consumer waits for its data), nccl (over NCCL: each rank's SEND/RECV run in order on one\n"
    "stream, a send completes when the peer's receive runs, so an order fine when posted can\n"
    "hang; the deadlock is named rank by rank, e.g. 'rank 1 waits in 3SEND_B0 for 2RECV_B0 on\n"
    "rank 0, ...'), dualpipe (every compute waits for the transfers posted before it). Default:\n"
    "nccl for a compute+comms CSV (what PyTorch runs on GPUs), else posted; the line\n"
    "'communication: ...' says which applied. --batch-p2p: consecutive SEND/RECV of a rank are\n"
    "one batch_isend_irecv (nccl).\n"
    "FILE is .pipe (the DSL) or .csv (PyTorch pipelining); stdin (-) and other names are read\n"
    "as --format says, else as their content looks. --set overrides a .pipe program's 'let' values.\n"
    "Exit status: 0 valid, 1 invalid (diagnostics on stderr), 2 usage or unreadable file.\n";

int runValidate(const ps::cli::Args& args, const ps::cli::Reporter& rep) {
  ScheduleLoadOptions options;
  if (args.has("--format")) {
    options.format = scheduleFormatFromName(args.value("--format"));
    if (!options.format) return rep.usage("--format is pipe or csv, not '" + args.value("--format") + "'");
  }
  options.overrides = args.values("--set");
  ps::cli::ScheduleInput in = ps::cli::readSchedule(rep, args.positionals()[0], options);
  if (!in.schedule) return in.exitCode;
  const Schedule& schedule = *in.schedule;
  int code = ps::cli::kExitOk;
  const auto comm = ps::cli::commFlags(args, rep, code);
  if (!comm) return code;
  if (comm->fixedMs)
    return rep.usage("--comm takes posted, nccl or dualpipe here (a transfer time is simulate's)");
  const bool csv = in.format == ScheduleFormat::Csv;
  ValidateOptions vo;
  vo.comm = comm->optionsFor(schedule, csv);
  ValidationReport report = validateSchedule(schedule, vo);
  // CSV: point at the cell of the first op the diagnostic is about, or at the rank's row.
  locateScheduleDiagnostics(report.diagnostics, in.name, in.format, in.cells);
  if (!report.diagnostics.empty()) std::cerr << formatDiagnostics(report.diagnostics, &in.text);
  if (!report.valid()) {
    std::cerr << in.name << ": " << comm->lineFor(schedule, csv) << "\n";
    return ps::cli::kExitInvalid;
  }
  const Pipeline& p = schedule.pipeline;
  std::cout << in.name << ": valid (" << p.devices << " devices, " << p.stages << " stages, "
            << p.microbatches << " micro-batches, " << schedule.opCount() << " ops, "
            << placementKindName(p.placementKind) << " placement)\n";
  std::cout << "  " << comm->lineFor(schedule, csv) << "\n";
  return ps::cli::kExitOk;
}

const ps::cli::FlagCommandRegistrar kValidate(
    {"validate",
     "check a .pipe or PyTorch CSV schedule for errors and deadlocks",
     kUsage,
     {"--format", "--set", "--comm"},
     {"--batch-p2p"},
     {1, 1, "expected one FILE (or -)"},
     runValidate});

}  // namespace
