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

PS_ENUM_NAME_FUNCTION(RunState, kRunStateNames, runStateName);

PS_ENUM_FROM_NAME_FUNCTION(RunState, kRunStateNames, parseRunState);

PS_ENUM_NAME_FUNCTION(RunState, kEventStatusTokens, runEventStatusToken);

PS_ENUM_FROM_NAME_FUNCTION(RunState, kEventStatusTokens, runStateFromEventStatus);

}  // namespace ps::core
