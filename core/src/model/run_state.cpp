#include "pipestudio/core/model/run_state.h"

#include "pipestudio/core/model/enum_names.h"

namespace ps::core {

constexpr EnumName<RunState> kRunStateNames[] = {
    {RunState::Failed, "failed"},       {RunState::Queued, "queued"},       {RunState::Running, "running"},
    {RunState::Succeeded, "succeeded"}, {RunState::Cancelled, "cancelled"},
};
// The run-event protocol's words for the terminal states (Succeeded is "finished").
constexpr EnumName<RunState> kEventStatusTokens[] = {
    {RunState::Failed, "failed"}, {RunState::Succeeded, "finished"}, {RunState::Cancelled, "cancelled"}};

std::string_view runStateName(RunState s) {
  return enumName(s, kRunStateNames);
}

std::optional<RunState> parseRunState(std::string_view name) {
  return enumFromName(name, kRunStateNames);
}

std::string_view runEventStatusToken(RunState s) {
  return enumName(s, kEventStatusTokens);
}

std::optional<RunState> runStateFromEventStatus(std::string_view token) {
  return enumFromName(token, kEventStatusTokens);
}

}  // namespace ps::core
