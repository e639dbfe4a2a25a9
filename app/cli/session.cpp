// pipestudio-cli session list|show|export: read a session file (docs/sessions.md).
#include <cstdio>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/command.h"
#include "common/flags.h"
#include "common/text.h"
#include "pipestudio/core/io/chrome_trace.h"
#include "pipestudio/core/io/schedule_file.h"
#include "pipestudio/sessions/run_export.h"
#include "pipestudio/sessions/session_store.h"

namespace {

using ps::sessions::Id;
using ps::sessions::SessionStore;

const char* kUsage =
    "usage: pipestudio-cli session list FILE [--json]\n"
    "       pipestudio-cli session show FILE ITEM [--json]\n"
    "       pipestudio-cli session export FILE (--schedule ID | --run ID | --profile ID)\n"
    "                                     [--format json|chrome] [-o OUT]\n"
    "       pipestudio-cli session note FILE (--run ID | --schedule ID) [--time MS] [--device D] TEXT\n"
    "\n"
    "Reads a session file (schedule versions, cost profiles, runs with their timelines, notes);\n"
    "list, show and export open the file read-only. `simulate --session FILE` records runs\n"
    "into one.\n"
    "\n"
    "  list      schedule versions, cost profiles and runs, newest runs first\n"
    "  show      one item: ITEM is run:N, schedule:N or profile:N (r3, s2, p1 for short;\n"
    "            a bare number is a run)\n"
    "  export    --schedule ID: the version's .pipe text\n"
    "            --run ID: the run and its full timeline as JSON (--format json), or as a\n"
    "            Chrome trace for Perfetto / chrome://tracing (--format chrome; the default\n"
    "            when OUT ends in trace.json)\n"
    "            --profile ID: the cost profile JSON\n"
    "            written to OUT, or stdout when -o is missing or '-'\n"
    "  note      adds a note to a run (optionally at a time in ms and a device) or to a\n"
    "            schedule version\n"
    "  --json    machine-readable output for list and show\n"
    "\n"
    "Exit status: 0 ok, 1 no such item or a value out of range in the file, 2 usage error or\n"
    "unreadable (missing, damaged, locked) session file.\n";

std::string isoTime(std::int64_t ms) {
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

using ps::cli::fixed;

std::string optId(const std::optional<Id>& id) {
  return id ? std::to_string(*id) : "-";
}

// Prints rows as aligned columns.
void printTable(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) {
      if (widths.size() <= i) widths.push_back(0);
      widths[i] = std::max(widths[i], r[i].size());
    }
  for (const auto& r : rows) {
    out << "  ";
    for (size_t i = 0; i < r.size(); ++i) {
      out << r[i];
      if (i + 1 < r.size()) out << std::string(widths[i] - r[i].size() + 2, ' ');
    }
    out << "\n";
  }
}

std::string statusText(const ps::sessions::RunSummary& r) {
  std::string s(ps::core::runStateName(r.status));
  if (r.interrupted) s += " (interrupted)";
  return s;
}

// A run's row as the run JSON export writes it (docs/sessions.md), without its configuration.
nlohmann::json runJson(const ps::sessions::RunSummary& r) {
  ps::sessions::RunRecord record;
  record.summary = r;
  nlohmann::json row = nlohmann::json::parse(ps::sessions::runToJson(record, {}))["run"];
  row.erase("config");
  return row;
}

int reportErrors(const ps::core::Diagnostics& ds, int code) {
  std::cerr << ps::core::formatDiagnostics(ds);
  if (!ds.empty() && ds.back().message.back() != '\n') std::cerr << "\n";
  return code;
}

// The exit code for a store error: values out of range make an invalid file (1); a file that
// cannot be read (damaged, locked, not a session) is a usage error (2), as an unreadable file is.
int errorExit(const ps::core::Diagnostics& ds) {
  return !ds.empty() && ds.front().code == "session.invalid-value" ? ps::cli::kExitInvalid
                                                                   : ps::cli::kExitUsage;
}

ps::core::Result<SessionStore> openForReading(const std::string& path) {
  auto store = SessionStore::open(path, {ps::sessions::OpenMode::ReadOnly});
  if (store)
    for (const auto& n : store->notes()) std::cerr << ps::core::formatDiagnostic(n) << "\n";
  return store;
}

int listCommand(SessionStore& store, bool json) {
  auto schedules = store.listSchedules();
  if (!schedules) return reportErrors(schedules.errors(), ps::cli::kExitUsage);
  auto profiles = store.listProfiles();
  if (!profiles) return reportErrors(profiles.errors(), ps::cli::kExitUsage);
  auto runs = store.listRuns();
  if (!runs) return reportErrors(runs.errors(), errorExit(runs.errors()));

  if (json) {
    nlohmann::json j = {{"file", store.path()}, {"schemaVersion", store.schemaVersion()}};
    j["schedules"] = nlohmann::json::array();
    for (const auto& s : *schedules)
      j["schedules"].push_back(
          {{"id", s.id},
           {"name", s.name},
           {"parentId", s.parentId ? nlohmann::json(*s.parentId) : nlohmann::json(nullptr)},
           {"createdMs", s.createdMs}});
    j["profiles"] = nlohmann::json::array();
    for (const auto& p : *profiles)
      j["profiles"].push_back({{"id", p.id},
                               {"name", p.name},
                               {"source", std::string(ps::sessions::profileSourceName(p.source))},
                               {"runId", p.runId ? nlohmann::json(*p.runId) : nlohmann::json(nullptr)},
                               {"createdMs", p.createdMs}});
    j["runs"] = nlohmann::json::array();
    for (const auto& r : *runs) j["runs"].push_back(runJson(r));
    std::cout << j.dump(2) << "\n";
    return ps::cli::kExitOk;
  }

  std::cout << "session " << store.path() << " (schema version " << store.schemaVersion() << ")\n";
  std::cout << "\nschedule versions: " << schedules->size() << "\n";
  if (!schedules->empty()) {
    std::vector<std::vector<std::string>> rows = {{"ID", "NAME", "PARENT", "CREATED"}};
    for (const auto& s : *schedules)
      rows.push_back({std::to_string(s.id), s.name, optId(s.parentId), isoTime(s.createdMs)});
    printTable(std::cout, rows);
  }
  std::cout << "\ncost profiles: " << profiles->size() << "\n";
  if (!profiles->empty()) {
    std::vector<std::vector<std::string>> rows = {{"ID", "NAME", "SOURCE", "FROM RUN", "CREATED"}};
    for (const auto& p : *profiles)
      rows.push_back({std::to_string(p.id), p.name, std::string(ps::sessions::profileSourceName(p.source)),
                      optId(p.runId), isoTime(p.createdMs)});
    printTable(std::cout, rows);
  }
  std::cout << "\nruns: " << runs->size() << "\n";
  if (!runs->empty()) {
    std::vector<std::vector<std::string>> rows = {{"ID", "STATUS", "SCHEDULE", "TARGET", "DEVICES", "OPS",
                                                   "MAKESPAN_MS", "BUBBLE", "STARTED", "WALL_S", "LABEL"}};
    for (const auto& r : *runs) {
      auto d = r.durationMs();
      rows.push_back({std::to_string(r.id), statusText(r), optId(r.scheduleId), r.target,
                      std::to_string(r.devices), std::to_string(r.opCount), fixed(r.makespan, 3),
                      fixed(r.bubbleRatio, 3), isoTime(r.startedMs),
                      d ? fixed(static_cast<double>(*d) / 1000.0, 3) : "-", r.label});
    }
    printTable(std::cout, rows);
  }
  return ps::cli::kExitOk;
}

struct ItemRef {
  enum Kind { Run, Schedule, Profile } kind = Run;
  Id id = 0;
};

bool parseItem(const std::string& text, ItemRef& out) {
  std::string number = text;
  auto take = [&](const std::string& prefix, ItemRef::Kind k) {
    if (text.rfind(prefix, 0) != 0) return false;
    number = text.substr(prefix.size());
    out.kind = k;
    return true;
  };
  take("run:", ItemRef::Run) || take("schedule:", ItemRef::Schedule) || take("profile:", ItemRef::Profile) ||
      take("r", ItemRef::Run) || take("s", ItemRef::Schedule) || take("p", ItemRef::Profile);
  if (number.empty() || number.size() > 18 || number.find_first_not_of("0123456789") != std::string::npos)
    return false;
  out.id = std::stoll(number);
  return true;
}

// The item's notes; notes that cannot be read (a damaged page, values out of range) fail the
// command rather than vanish from the output: the exit code, or nothing when all went well.
std::optional<int> printNotes(SessionStore& store, std::optional<Id> scheduleId, std::optional<Id> runId) {
  auto notes = store.annotations(scheduleId, runId);
  if (!notes) return reportErrors(notes.errors(), errorExit(notes.errors()));
  if (notes->empty()) return std::nullopt;
  std::cout << "notes:\n";
  for (const auto& n : *notes) {
    std::cout << "  [" << n.id << "]";
    if (n.time) std::cout << " t=" << fixed(*n.time, 3) << "ms";
    if (n.device) std::cout << " device " << *n.device;
    std::cout << ": " << n.text << "\n";
  }
  return std::nullopt;
}

int showCommand(SessionStore& store, const ItemRef& item, bool json) {
  if (item.kind == ItemRef::Schedule) {
    auto s = store.schedule(item.id);
    if (!s) return reportErrors(s.errors(), ps::cli::kExitInvalid);
    ps::sessions::RunFilter filter;
    filter.scheduleId = item.id;
    auto runs = store.listRuns(filter);
    if (!runs) return reportErrors(runs.errors(), errorExit(runs.errors()));
    if (json) {
      nlohmann::json j = {
          {"id", s->info.id},
          {"name", s->info.name},
          {"parentId", s->info.parentId ? nlohmann::json(*s->info.parentId) : nlohmann::json(nullptr)},
          {"createdMs", s->info.createdMs},
          {"pipe", s->pipeText},
          {"runs", nlohmann::json::array()}};
      for (const auto& r : *runs) j["runs"].push_back(runJson(r));
      std::cout << j.dump(2) << "\n";
      return ps::cli::kExitOk;
    }
    std::cout << "schedule version " << s->info.id << ": " << s->info.name << "\n"
              << "  parent: " << optId(s->info.parentId) << "\n"
              << "  created: " << isoTime(s->info.createdMs) << "\n"
              << "  runs: " << runs->size() << "\n";
    for (const auto& r : *runs)
      std::cout << "    run " << r.id << "  " << statusText(r) << "  makespan " << fixed(r.makespan, 3)
                << " ms  bubble " << fixed(r.bubbleRatio, 3) << "\n";
    if (auto failed = printNotes(store, item.id, std::nullopt)) return *failed;
    std::cout << "--- .pipe\n" << s->pipeText;
    if (!s->pipeText.empty() && s->pipeText.back() != '\n') std::cout << "\n";
    return ps::cli::kExitOk;
  }
  if (item.kind == ItemRef::Profile) {
    auto p = store.profile(item.id);
    if (!p) return reportErrors(p.errors(), ps::cli::kExitInvalid);
    if (json) {
      nlohmann::json body = nlohmann::json::parse(p->json, nullptr, false);
      nlohmann::json j = {{"id", p->info.id},
                          {"name", p->info.name},
                          {"source", std::string(ps::sessions::profileSourceName(p->info.source))},
                          {"runId", p->info.runId ? nlohmann::json(*p->info.runId) : nlohmann::json(nullptr)},
                          {"createdMs", p->info.createdMs},
                          {"profile", body.is_discarded() ? nlohmann::json(p->json) : body}};
      std::cout << j.dump(2) << "\n";
      return ps::cli::kExitOk;
    }
    std::cout << "cost profile " << p->info.id << ": " << p->info.name << "\n"
              << "  source: " << ps::sessions::profileSourceName(p->info.source) << "\n"
              << "  from run: " << optId(p->info.runId) << "\n"
              << "  created: " << isoTime(p->info.createdMs) << "\n"
              << "--- json\n"
              << p->json << "\n";
    return ps::cli::kExitOk;
  }

  auto rec = store.run(item.id);
  if (!rec)
    return reportErrors(rec.errors(), rec.error().code == "session.not-found" ? ps::cli::kExitInvalid
                                                                              : errorExit(rec.errors()));
  const auto& r = rec->summary;
  if (json) {
    nlohmann::json j = runJson(r);
    nlohmann::json config = nlohmann::json::parse(rec->configJson, nullptr, false);
    j["config"] = config.is_discarded() ? nlohmann::json(rec->configJson) : config;
    std::cout << j.dump(2) << "\n";
    return ps::cli::kExitOk;
  }
  std::cout << "run " << r.id << ": " << statusText(r) << "\n";
  if (!r.label.empty()) std::cout << "  label: " << r.label << "\n";
  std::cout << "  schedule version: " << optId(r.scheduleId);
  if (r.scheduleId)
    if (auto s = store.schedule(*r.scheduleId)) std::cout << " (" << s->info.name << ")";
  std::cout << "\n  cost profile: " << optId(r.profileId);
  // A prediction from the engine's analytic profile is no measurement of any machine.
  bool uncalibrated = false;
  if (r.profileId)
    if (auto p = store.profile(*r.profileId)) {
      std::cout << " (" << p->info.name << ")";
      uncalibrated = p->info.source == ps::sessions::ProfileSource::Analytic && r.target == "simulator";
      if (uncalibrated) std::cout << " " << ps::cli::kUncalibratedMark;
    }
  std::cout << "\n  target: " << r.target << ", " << r.devices << " device(s)";
  if (!r.model.empty()) std::cout << ", model " << r.model;
  std::cout << "\n  started: " << isoTime(r.startedMs);
  if (r.endedMs)
    std::cout << "  ended: " << isoTime(*r.endedMs) << "  wall "
              << fixed(static_cast<double>(*r.durationMs()) / 1000.0, 3) << " s";
  std::cout << "\n  ops: " << r.opCount << "  makespan: " << fixed(r.makespan, 3) << " ms"
            << (uncalibrated ? std::string(" ") + ps::cli::kUncalibratedMark : std::string())
            << "  bubble ratio: " << fixed(r.bubbleRatio, 3) << "\n";
  if (uncalibrated) std::cout << "  " << ps::cli::kUncalibratedExplanation << "\n";
  if (r.interrupted)
    std::cout << "  the process writing this run is gone: the run was interrupted and is incomplete\n";
  if (!r.error.empty()) std::cout << "  error: " << r.error << "\n";
  std::cout << "  config: " << rec->configJson << "\n";
  auto t = store.loadTimeline(r.id);
  if (!t) return reportErrors(t.errors(), errorExit(t.errors()));
  if (!t->metrics.devices.empty()) {
    std::vector<std::vector<std::string>> rows = {
        {"DEVICE", "BUSY_MS", "SPAN_MS", "PEAK_MEMORY_B", "PEAK_INFLIGHT"}};
    for (const auto& d : t->metrics.devices)
      rows.push_back({std::to_string(d.device), fixed(d.busy, 3), fixed(d.span(), 3),
                      std::to_string(d.peakMemoryBytes), std::to_string(d.peakInflightMicrobatches)});
    printTable(std::cout, rows);
  }
  if (auto failed = printNotes(store, std::nullopt, r.id)) return *failed;
  return ps::cli::kExitOk;
}

int exportCommand(SessionStore& store, const ps::cli::Args& args) {
  int picked = args.has("--schedule") + args.has("--run") + args.has("--profile");
  if (picked != 1) {
    std::cerr << "pipestudio-cli session export: give exactly one of --schedule, --run, --profile\n";
    return ps::cli::kExitUsage;
  }
  auto idOf = [&](const std::string& flag, Id& out) {
    ItemRef ref;
    if (!parseItem(args.value(flag), ref)) {
      std::cerr << "pipestudio-cli session export: " << flag << " needs a number, got '" << args.value(flag)
                << "'\n";
      return false;
    }
    out = ref.id;
    return true;
  };
  std::string out = args.value("-o");
  bool traceName = out.size() >= 10 && out.compare(out.size() - 10, 10, "trace.json") == 0;
  std::string format = args.value("--format", traceName ? "chrome" : "json");
  std::string text;
  Id id = 0;
  if (args.has("--schedule")) {
    if (!idOf("--schedule", id)) return ps::cli::kExitUsage;
    auto s = store.schedule(id);
    if (!s) return reportErrors(s.errors(), ps::cli::kExitInvalid);
    text = s->pipeText;
  } else if (args.has("--profile")) {
    if (!idOf("--profile", id)) return ps::cli::kExitUsage;
    auto p = store.profile(id);
    if (!p) return reportErrors(p.errors(), ps::cli::kExitInvalid);
    text = p->json;
    if (text.empty() || text.back() != '\n') text += "\n";
  } else {
    if (!idOf("--run", id)) return ps::cli::kExitUsage;
    if (format != "json" && format != "chrome") {
      std::cerr << "pipestudio-cli session export: unknown --format '" << format << "' (json, chrome)\n";
      return ps::cli::kExitUsage;
    }
    auto rec = store.run(id);
    if (!rec) return reportErrors(rec.errors(), ps::cli::kExitInvalid);
    auto t = store.loadTimeline(id);
    // A run whose stored numbers are out of range is an invalid file (1), not an unreadable one.
    if (!t)
      return reportErrors(t.errors(), t.error().code == "session.invalid-value" ? ps::cli::kExitInvalid
                                                                                : ps::cli::kExitUsage);
    if (format == "json") {
      text = ps::sessions::runToJson(*rec, *t);
    } else {
      // The run's schedule version names user-declared kinds in the trace.
      std::optional<ps::core::Schedule> schedule;
      ps::core::ScheduleLoadOptions pipe;
      pipe.format = ps::core::ScheduleFormat::Pipe;  // a session stores .pipe text
      if (rec->summary.scheduleId)
        if (auto v = store.schedule(*rec->summary.scheduleId))
          if (auto parsed = ps::core::loadSchedule(v->pipeText, pipe)) schedule = std::move(parsed).value();
      text = ps::core::exportChromeTrace(*t, schedule ? &*schedule : nullptr);
    }
  }
  std::string error;
  if (!ps::cli::writeOutput(out, text, error)) {
    std::cerr << "pipestudio-cli session export: " << error << "\n";
    return ps::cli::kExitUsage;
  }
  return ps::cli::kExitOk;
}

int noteCommand(const std::string& path, const std::string& text, const ps::cli::Args& args) {
  if (args.has("--run") == args.has("--schedule")) {
    std::cerr << "pipestudio-cli session note: give one of --run ID or --schedule ID\n";
    return ps::cli::kExitUsage;
  }
  ps::sessions::Annotation note;
  note.text = text;
  ItemRef ref;
  const std::string flag = args.has("--run") ? "--run" : "--schedule";
  if (!parseItem(args.value(flag), ref)) {
    std::cerr << "pipestudio-cli session note: " << flag << " needs a number, got '" << args.value(flag)
              << "'\n";
    return ps::cli::kExitUsage;
  }
  (flag == "--run" ? note.runId : note.scheduleId) = ref.id;
  if (args.has("--time")) {
    auto t = ps::cli::parseNumber(args.value("--time"));
    if (!t) {
      std::cerr << "pipestudio-cli session note: --time needs a number of ms\n";
      return ps::cli::kExitUsage;
    }
    note.time = *t;
  }
  if (args.has("--device")) {
    auto d = ps::cli::parseInt(args.value("--device"), 0);
    if (!d) {
      std::cerr << "pipestudio-cli session note: --device needs a device number\n";
      return ps::cli::kExitUsage;
    }
    note.device = *d;
  }
  auto store = SessionStore::open(path);
  if (!store) return reportErrors(store.errors(), ps::cli::kExitUsage);
  auto id = store->addAnnotation(note);
  if (!id) {
    int code = id.error().code == "session.missing-reference" ? ps::cli::kExitInvalid : ps::cli::kExitUsage;
    return reportErrors(id.errors(), code);
  }
  std::cout << "note " << *id << " added\n";
  return ps::cli::kExitOk;
}

int runSession(const std::vector<std::string>& argv) {
  const ps::cli::Reporter reporter("session", kUsage);
  if (argv.empty()) return reporter.usage("expected list, show, export or note");
  const std::string& action = argv[0];
  std::vector<std::string> rest(argv.begin() + 1, argv.end());
  ps::cli::Args args(rest, {"--schedule", "--run", "--profile", "--format", "-o", "--time", "--device"},
                     {"--json"});
  if (!args.ok()) return reporter.usage(args.error());
  const auto& pos = args.positionals();
  size_t wanted = (action == "show" || action == "note") ? 2 : 1;
  if (action != "list" && action != "show" && action != "export" && action != "note")
    return reporter.usage("unknown action '" + action + "' (list, show, export or note)");
  if (pos.size() != wanted)
    return reporter.usage("session " + action + " takes " +
                          (action == "show"   ? std::string("FILE ITEM")
                           : action == "note" ? "FILE TEXT"
                                              : "FILE"));
  ItemRef item;
  if (action == "show" && !parseItem(pos[1], item)) {
    std::cerr << "pipestudio-cli session show: '" << pos[1]
              << "' is not an item (run:N, schedule:N, profile:N, or a run number)\n";
    return ps::cli::kExitUsage;
  }
  if (action == "note") return noteCommand(pos[0], pos[1], args);
  auto store = openForReading(pos[0]);
  if (!store) return reportErrors(store.errors(), ps::cli::kExitUsage);
  if (action == "list") return listCommand(*store, args.has("--json"));
  if (action == "show") return showCommand(*store, item, args.has("--json"));
  return exportCommand(*store, args);
}

}  // namespace

static ps::cli::CommandRegistrar sessionCommand({
    "session",
    "list, show and export the schedules, profiles and runs of a session file",
    kUsage,
    runSession,
});
