#pragma once
// Text helpers of the trace readers (trace_import.cpp, trace_actions.cpp): action and op names
// as PyTorch's pipelining runtime and our own Chrome trace export write them.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "pipestudio/core/model/schedule.h"

namespace ps::core::detail {

std::string lower(std::string_view s);
std::string_view trim(std::string_view s);
// Reads a non-negative decimal number at `pos`; false when none or too large for an int.
bool readInt(std::string_view s, std::size_t& pos, int& out);
// Our DSL's op token with its stage, as our own Chrome trace export names slices: "F3@s1".
std::optional<Op> parseOpToken(std::string_view text);

}  // namespace ps::core::detail
