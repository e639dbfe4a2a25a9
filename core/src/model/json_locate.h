#pragma once
// Where a value of a parsed JSON document sits in its text, for errors that name line:col.
// nlohmann::json keeps no positions, so this finds the first `"key": <number>` whose number
// equals the value (else the first `"key"`); good enough to point an editor at the culprit.
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "pipestudio/core/model/result.h"

namespace ps::core::detail {

inline SourceLocation locateJsonKey(std::string_view text, std::string_view key, std::optional<double> value,
                                    const std::string& file) {
  const std::string quoted = "\"" + std::string(key) + "\"";
  std::optional<size_t> firstKey;
  size_t from = 0;
  // Bounded: a hostile file may hold the key millions of times.
  for (int tries = 0; tries < 100000; ++tries) {
    size_t at = text.find(quoted, from);
    if (at == std::string_view::npos) break;
    from = at + quoted.size();
    size_t p = from;
    while (p < text.size() && (text[p] == ' ' || text[p] == '\t' || text[p] == '\n' || text[p] == '\r')) ++p;
    if (p >= text.size() || text[p] != ':') continue;
    ++p;
    while (p < text.size() && (text[p] == ' ' || text[p] == '\t' || text[p] == '\n' || text[p] == '\r')) ++p;
    if (!firstKey) firstKey = p;
    if (!value) break;
    size_t q = p < text.size() && text[p] == '"' ? p + 1 : p;
    std::string token(text.substr(q, std::min<size_t>(64, text.size() - q)));
    char* end = nullptr;
    double v = std::strtod(token.c_str(), &end);
    if (end != token.c_str() && v == *value) return locationOfOffset(text, p, file);
  }
  if (firstKey) return locationOfOffset(text, *firstKey, file);
  return SourceLocation{file, 0, 0};
}

}  // namespace ps::core::detail
