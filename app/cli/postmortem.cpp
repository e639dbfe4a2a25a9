// pipestudio-cli postmortem PLAN DUMP... : where a hung PyTorch pipeline run stopped, from its
// ranks' flight-recorder dumps read against the schedule it ran (core/io/flight_recorder_hang.h).
#include <iostream>

#include "common/command.h"
#include "common/flags.h"
#include "common/schedule_input.h"
#include "pipestudio/core/analysis/pytorch_lowering.h"
#include "pipestudio/core/io/flight_recorder.h"
#include "pipestudio/core/io/flight_recorder_hang.h"

namespace {

using namespace ps::core;

const char* kUsage =
    "usage: pipestudio-cli postmortem PLAN DUMP... [--group NAME] [--prefix PREFIX]\n"
    "                                 [--pytorch VERSION] [--defer-recv pytorch|safe]\n"
    "                                 [--format pipe|csv] [--set name=value]...\n\n"
    "Reads the flight-recorder dumps of a hung PyTorch pipeline run (what each rank writes to\n"
    "TORCH_FR_DUMP_TEMP_FILE<rank> when its NCCL watchdog times out, with TORCH_FR_BUFFER_SIZE set;\n"
    "pickle or JSON) and maps each rank's sends and receives to PLAN's SEND/RECV actions: which\n"
    "action each rank's communication stream is stuck in, what it waits for on which rank, and\n"
    "the wait cycle (or chain) across ranks.\n"
    "PLAN is the schedule the run executed: a compute+comms CSV as given, else (a compute-only\n"
    "CSV, a .pipe) lowered as PyTorch VERSION's _PipelineScheduleRuntime lowers it (default 2.11;\n"
    "--defer-recv: with defer_pp_recv, as convert writes it). DUMP is a dump file (its name ends\n"
    "in the rank) or a folder of them (--prefix picks the files when several kinds are there).\n"
    "--group names the pipeline's process group (name or description) when sends and receives\n"
    "went through more than one.\n"
    "PyTorch records sends and receives for NCCL process groups; its Gloo backend records\n"
    "collectives only (checked on PyTorch 2.11), so a CPU run's dumps are refused with that reason.\n"
    "Exit status: 0 read (a hang named, or every recorded op completed), 1 the dumps cannot be\n"
    "mapped to PLAN (the reason printed), 2 usage or unreadable file.\n";

int runPostmortem(const ps::cli::Args& args, const ps::cli::Reporter& rep) {
  int code = ps::cli::kExitOk;
  const auto target = ps::cli::pytorchTargetFlags(args, rep, code);
  if (!target) return code;
  ScheduleLoadOptions options;
  if (args.has("--format")) {
    options.format = scheduleFormatFromName(args.value("--format"));
    if (!options.format) return rep.usage("--format is pipe or csv, not '" + args.value("--format") + "'");
  }
  options.overrides = args.values("--set");
  const std::vector<std::string>& pos = args.positionals();
  ps::cli::ScheduleInput in = ps::cli::readSchedule(rep, pos[0], options, false);
  if (!in.schedule) return in.exitCode;
  Schedule plan = std::move(*in.schedule);
  std::string form = "its SEND/RECV as given";
  if (!hasExplicitComms(plan)) {
    auto lowered = lowerToPytorchComms(plan, *target);
    if (!lowered.ok()) return rep.invalid(lowered.errors());
    plan = std::move(*lowered);
    form = "lowered as PyTorch " + target->name() + " lowers it" +
           (target->recv == RecvPlacement::Asap
                ? std::string()
                : std::string(", receives ") + std::string(recvPlacementName(target->recv)));
  }
  auto dumps = readFlightRecorderDumps({pos.begin() + 1, pos.end()}, args.value("--prefix"));
  if (!dumps.ok()) return rep.invalid(dumps.errors());
  FlightRecorderOptions fo;
  fo.group = args.value("--group");
  auto reading = readHangFromFlightRecorder(plan, *dumps, fo);
  if (!reading.ok()) return rep.invalid(reading.errors());
  const FlightRecorderReading& r = *reading;
  std::cout << in.name << ": " << dumps->size() << " flight-recorder dump(s) (format "
            << dumps->front().version << "), process group " << r.group << ", " << r.backend << ": "
            << r.opsMapped << " sends and receives mapped to the plan (" << form << ")\n";
  for (const StuckDevice& s : r.ranks) std::cout << "  " << describeStuckDevice(s) << "\n";
  if (r.hung())
    std::cout << hangClause(r.hang) << "\n";
  else
    std::cout << "no rank is stuck in a send or receive: every one recorded completed\n";
  return ps::cli::kExitOk;
}

const ps::cli::FlagCommandRegistrar kPostmortem(
    {"postmortem",
     "name where a hung PyTorch pipeline run stopped, from its "
     "flight-recorder dumps",
     kUsage,
     {"--group", "--prefix", "--pytorch", "--defer-recv", "--format", "--set"},
     {},
     {2, static_cast<std::size_t>(-1), "expected PLAN and at least one DUMP"},
     runPostmortem});

}  // namespace
