#pragma once
// Test helper shared by the PyTorch CSV tests: the non-empty cells of each row, trimmed, in
// order (what must survive a round trip).
#include <sstream>
#include <string>
#include <vector>

namespace ps::test {

inline std::vector<std::vector<std::string>> csvActions(const std::string& csv) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(csv);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::vector<std::string> row;
    std::istringstream cells(line);
    std::string cell;
    while (std::getline(cells, cell, ',')) {
      auto b = cell.find_first_not_of(" \t");
      if (b == std::string::npos) continue;
      row.push_back(cell.substr(b, cell.find_last_not_of(" \t") - b + 1));
    }
    rows.push_back(row);
  }
  return rows;
}

}  // namespace ps::test
