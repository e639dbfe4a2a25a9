#pragma once
// `fmt` and `expand` do the same work (parse, expand, print the canonical explicit form);
// they differ only in name and help text.
#include <string>
#include <vector>

namespace ps::cli {
int printExplicitSchedule(const std::string& command, const std::vector<std::string>& argv);
}
