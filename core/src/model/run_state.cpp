#include "pipestudio/core/model/run_state.h"

#include <array>
#include <utility>

namespace ps::core {

namespace {
constexpr std::array<std::pair<RunState, std::string_view>, 5> kNames{{
    {RunState::Queued, "queued"},
    {RunState::Running, "running"},
    {RunState::Succeeded, "succeeded"},
    {RunState::Failed, "failed"},
    {RunState::Cancelled, "cancelled"},
}};
}  // namespace

std::string_view runStateName(RunState s) {
  for (const auto& [state, name] : kNames)
    if (state == s) return name;
  return "unknown";
}

std::optional<RunState> parseRunState(std::string_view name) {
  for (const auto& [state, n] : kNames)
    if (n == name) return state;
  return std::nullopt;
}

}  // namespace ps::core
