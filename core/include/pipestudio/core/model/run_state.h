#pragma once
// The one vocabulary of a run's state, shared by the engine's report, the run-event stream,
// the session store, the CLI and the GUI. Names: "queued", "running", "succeeded", "failed",
// "cancelled". (The run-event protocol, a published format, spells Succeeded "finished" in its
// `finished` event: run_events.h translates, in one place.)
#include <cstdint>
#include <optional>
#include <string_view>

namespace ps::core {

enum class RunState : std::uint8_t { Queued, Running, Succeeded, Failed, Cancelled };

std::string_view runStateName(RunState s);
std::optional<RunState> parseRunState(std::string_view name);
// Succeeded, Failed or Cancelled: the run is over.
// The run-event protocol's `finished` status token of a terminal state: "finished"
// (Succeeded), "failed", "cancelled"; and back (nullopt: not a token of the protocol).
std::string_view runEventStatusToken(RunState s);
std::optional<RunState> runStateFromEventStatus(std::string_view token);
inline bool isTerminal(RunState s) {
  return s != RunState::Queued && s != RunState::Running;
}

}  // namespace ps::core
