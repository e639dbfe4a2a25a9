#pragma once
// The .pipe DSL (docs/dsl.md): explicit form (header + one op list per device) and the
// programmable form (variables, arithmetic, loops, conditionals, templates, cursors) that
// expands to it.
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "pipestudio/core/model/limits.h"
#include "pipestudio/core/model/schedule.h"

namespace ps::core {

struct DslOptions {
  std::string filename = "<input>";            // used in diagnostics
  std::map<std::string, long long> overrides;  // --set name=value, replaces `let` defaults
  int maxErrors = 50;
  // Guards against runaway programs: expansion stops with an error past these.
  long long maxOps = limits::kMaxOps;  // ops in the expanded schedule
  long long maxSteps = 50'000'000;     // statements and loop iterations executed
  // Called once, while expanding, when the schedule passes largeOps ops (with the place of the
  // statement that crossed it): a front end tells the user before a long simulate or draw.
  long long largeOps = limits::kLargeExpansionOps;
  std::function<void(const Diagnostic&)> onLargeExpansion;
};

// Parses either form and returns the explicit schedule, or every error found (up to
// maxErrors), each with file:line:col. Never throws.
Result<Schedule> parseDsl(std::string_view text, const DslOptions& options = {});

// Canonical explicit form; parseDsl(printDsl(s)) == s.
std::string printDsl(const Schedule& s);

// How a .pipe written to `pipePath` names its cost profile at `profilePath`: relative to the
// .pipe's folder where both are on one file system root (so the pair can move together), else
// `profilePath` unchanged. Lexical only: nothing is read.
std::string profileReferenceFor(std::string_view profilePath, std::string_view pipePath);
// The inverse, as the CLI and the GUI both look a .pipe header's `profile NAME` up: beside the
// schedule at `pipePath` (unless it is stdin, "-", or NAME is absolute), else NAME as given,
// else in `dataDir` (the bundled data: NAME, profiles/NAME, profiles/NAME.json). The first
// file that exists; when none does, the path beside the schedule, for the error to name.
std::string resolveProfileReference(std::string_view name, std::string_view pipePath,
                                    std::string_view dataDir);

// Parses "name=value" (as given to --set) into options.overrides.
Status parseOverride(std::string_view assignment, DslOptions& options);

}  // namespace ps::core
