#pragma once
// `fmt` and `expand` do the same work (parse, expand, print the canonical explicit form);
// they differ only in name and help text.
#include <string>

#include "common/command.h"

namespace ps::cli {

// Registers `name` (fmt, expand): parse, expand, print the canonical explicit form.
FlagCommand explicitScheduleCommand(std::string name, std::string summary, std::string usage);

}  // namespace ps::cli
