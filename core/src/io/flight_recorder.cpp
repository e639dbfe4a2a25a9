// PyTorch's flight-recorder dumps (flight_recorder.h).
#include "pipestudio/core/io/flight_recorder.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <system_error>
#include <type_traits>

#include "pipestudio/core/io/input_limits.h"
#include "pipestudio/core/io/pickle.h"

namespace ps::core {

namespace {

using nlohmann::json;

// A dump nests four levels (entries, an entry, its sizes, a size); nlohmann::json frees nested
// values recursively, so a hostile file of a million '[' must be refused before it is parsed.
constexpr int kMaxJsonDepth = 64;

// The offset where the nesting first passes kMaxJsonDepth, else npos (strings skipped).
size_t tooDeep(std::string_view text) {
  int depth = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::string_view::npos;
}

// Where the digits a file name ends in begin (its size when it ends in none).
size_t rankDigits(std::string_view name) {
  size_t begin = name.size();
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(name[begin - 1]))) --begin;
  return begin;
}

Diagnostic dumpError(const std::string& source, const std::string& what) {
  return makeError("flight-recorder.invalid", source + ": " + what);
}

// A field of an entry: absent or of another type is an error naming the entry and the field.
template <typename T>
bool field(const json& e, const char* key, T& out, bool required, const std::string& where,
           Diagnostics& errors) {
  auto it = e.find(key);
  if (it == e.end() || it->is_null()) {
    if (required) errors.push_back(makeError("flight-recorder.invalid", where + ": no '" + key + "'"));
    return !required;
  }
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    // A whole number only: a float (or one past the type's range) is not a count or a time.
    const bool fits = it->is_number_integer() &&
                      (it->is_number_unsigned()
                           ? it->get<std::uint64_t>() <= std::uint64_t{std::numeric_limits<T>::max()}
                           : it->get<std::int64_t>() >= std::int64_t{std::numeric_limits<T>::min()} &&
                                 it->get<std::int64_t>() <= std::int64_t{std::numeric_limits<T>::max()});
    if (!fits) {
      errors.push_back(
          makeError("flight-recorder.invalid", where + ": '" + key + "' is not a whole number in range"));
      return false;
    }
  }
  try {
    out = it->get<T>();
    return true;
  } catch (const json::exception&) {
    errors.push_back(makeError("flight-recorder.invalid", where + ": '" + key + "' is " + it->type_name()));
    return false;
  }
}

// "0->1" (send) or "1<-0" (recv): this rank and the peer.
bool parsePeers(std::string_view text, std::string_view arrow, int& self, int& peer) {
  const size_t at = text.find(arrow);
  if (at == std::string_view::npos || at == 0 || at + arrow.size() >= text.size()) return false;
  auto number = [](std::string_view s, int& out) {
    if (s.empty() || s.size() > 9) return false;
    int v = 0;
    for (char c : s) {
      if (c < '0' || c > '9') return false;
      v = v * 10 + (c - '0');
    }
    out = v;
    return true;
  };
  return number(text.substr(0, at), self) && number(text.substr(at + arrow.size()), peer);
}

std::vector<int> parseRankList(const json& v) {
  std::vector<int> out;
  if (v.is_array()) {
    for (const json& r : v)
      if (r.is_number_integer()) out.push_back(r.get<int>());
    return out;
  }
  if (!v.is_string()) return out;
  int cur = -1;
  for (char c : v.get<std::string>()) {
    if (c >= '0' && c <= '9') {
      cur = (cur < 0 ? 0 : cur * 10) + (c - '0');
      if (cur > 100'000'000) return {};
    } else if (cur >= 0) {
      out.push_back(cur);
      cur = -1;
    }
  }
  if (cur >= 0) out.push_back(cur);
  return out;
}

Result<FlightRecorderEntry> readEntry(const json& e, const std::string& where) {
  if (!e.is_object()) return makeError("flight-recorder.invalid", where + ": not a record");
  Diagnostics errors;
  FlightRecorderEntry out;
  field(e, "record_id", out.recordId, true, where, errors);
  field(e, "collective_seq_id", out.collectiveSeq, false, where, errors);
  field(e, "p2p_seq_id", out.p2pSeq, false, where, errors);
  // Dumps before format 2.2 number every op of a group with one "seq_id".
  if (!e.contains("p2p_seq_id") && !e.contains("collective_seq_id")) {
    std::int64_t seq = 0;
    field(e, "seq_id", seq, false, where, errors);
    out.p2pSeq = out.collectiveSeq = seq;
  }
  field(e, "profiling_name", out.profilingName, true, where, errors);
  field(e, "state", out.state, true, where, errors);
  field(e, "retired", out.retired, false, where, errors);
  field(e, "is_p2p", out.isP2p, false, where, errors);
  field(e, "time_created_ns", out.createdNs, false, where, errors);
  field(e, "timeout_ms", out.timeoutMs, false, where, errors);
  if (auto pg = e.find("process_group");
      pg != e.end() && pg->is_array() && pg->size() == 2 && (*pg)[0].is_string() && (*pg)[1].is_string()) {
    out.pgName = (*pg)[0].get<std::string>();
    out.pgDesc = (*pg)[1].get<std::string>();
  } else {
    errors.push_back(
        makeError("flight-recorder.invalid", where + ": 'process_group' is not (name, description)"));
  }
  if (!errors.empty()) return errors;
  const std::string_view name = out.profilingName;
  const size_t colon = name.find(':');
  if (colon == std::string_view::npos)
    return makeError(
        "flight-recorder.invalid",
        where + ": profiling_name '" + out.profilingName.substr(0, 80) + "' is not backend:operation");
  out.backend = std::string(name.substr(0, colon));
  const std::string_view rest = name.substr(colon + 1);
  const size_t space = rest.find(' ');
  out.op = std::string(rest.substr(0, space));
  const std::string_view peers =
      space == std::string_view::npos ? std::string_view{} : rest.substr(space + 1);
  if ((out.isSend() && !parsePeers(peers, "->", out.self, out.peer)) ||
      (out.isRecv() && !parsePeers(peers, "<-", out.self, out.peer)))
    return makeError("flight-recorder.invalid",
                     where + ": profiling_name '" + out.profilingName.substr(0, 80) +
                         "' does not name its ranks as PyTorch does ('nccl:send 0->1', "
                         "'nccl:recv 1<-0')");
  if (out.isSend() || out.isRecv()) out.isP2p = true;
  return out;
}

}  // namespace

const FlightRecorderGroup* FlightRecorderDump::group(std::string_view name) const {
  for (const FlightRecorderGroup& g : groups)
    if (g.name == name) return &g;
  return nullptr;
}

Result<FlightRecorderDump> readFlightRecorderDump(std::string_view bytes, const std::string& source,
                                                  int rank) {
  json doc;
  if (!bytes.empty() && static_cast<unsigned char>(bytes.front()) == 0x80) {
    PS_ASSIGN_OR_RETURN(doc, readPickle(bytes, source));
  } else {
    if (const size_t at = tooDeep(bytes); at != std::string_view::npos) {
      Diagnostic d = dumpError(source, "JSON nested deeper than " + std::to_string(kMaxJsonDepth) +
                                           " levels: not a flight-recorder dump");
      d.location = locationOfOffset(bytes, at, source);
      return d;
    }
    try {
      doc = json::parse(bytes);
    } catch (const json::parse_error& e) {
      Diagnostic d = dumpError(source, std::string("neither a pickle nor JSON: ") + e.what());
      d.location = locationOfOffset(bytes, e.byte == 0 ? 0 : e.byte - 1, source);
      return d;
    } catch (const json::exception& e) {  // a number out of range
      return dumpError(source, std::string("not a flight-recorder dump: ") + e.what());
    }
  }
  if (!doc.is_object() || (!doc.contains("entries") && !doc.contains("version")))
    return dumpError(source, "not a flight-recorder dump (no 'version', no 'entries')");
  FlightRecorderDump out;
  out.source = source;
  out.rank = rank;
  if (auto v = doc.find("version"); v != doc.end() && v->is_string()) out.version = v->get<std::string>();
  if (out.version.empty() || out.version[0] != '2')
    return dumpError(source, "flight-recorder format '" + out.version.substr(0, 20) +
                                 "': PipeStudio reads version 2.x (PyTorch 2.4 and later)");
  if (auto pgs = doc.find("pg_config"); pgs != doc.end() && pgs->is_object()) {
    for (const auto& [key, g] : pgs->items()) {
      FlightRecorderGroup group;
      group.name = key;
      if (g.is_object()) {
        if (auto d = g.find("desc"); d != g.end() && d->is_string()) group.desc = d->get<std::string>();
        if (auto r = g.find("ranks"); r != g.end()) group.ranks = parseRankList(*r);
      }
      out.groups.push_back(std::move(group));
    }
  }
  auto entries = doc.find("entries");
  if (entries == doc.end()) return out;  // PyTorch leaves the key out when nothing was recorded
  if (!entries->is_array()) return dumpError(source, "'entries' is not a list");
  Diagnostics errors;
  out.entries.reserve(entries->size());
  for (size_t i = 0; i < entries->size(); ++i) {
    auto e = readEntry((*entries)[i], source + ": entry " + std::to_string(i));
    if (!e.ok()) {
      errors.insert(errors.end(), e.errors().begin(), e.errors().end());
      if (errors.size() >= 20) break;
      continue;
    }
    out.entries.push_back(std::move(*e));
  }
  if (!errors.empty()) return errors;
  return out;
}

std::optional<int> flightRecorderRankOf(std::string_view fileName) {
  const size_t begin = rankDigits(fileName);
  if (begin == fileName.size() || fileName.size() - begin > 7) return std::nullopt;
  return std::stoi(std::string(fileName.substr(begin)));
}

Result<std::vector<FlightRecorderDump>> readFlightRecorderDumps(const std::vector<std::string>& paths,
                                                                const std::string& prefix) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  Diagnostics errors;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (!fs::is_directory(p, ec)) {
      files.push_back(p);
      continue;
    }
    // A folder: its files that end in a rank, grouped by what comes before the rank.
    std::map<std::string, std::vector<std::string>> byPrefix;
    for (fs::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code fe;
      if (!it->is_regular_file(fe)) continue;
      const std::string name = it->path().filename().string();
      if (!flightRecorderRankOf(name)) continue;
      byPrefix[name.substr(0, rankDigits(name))].push_back(it->path().string());
    }
    if (ec) errors.push_back(makeError("io.read", p + ": " + ec.message()));
    if (!prefix.empty()) {
      auto it = byPrefix.find(prefix);
      if (it == byPrefix.end()) {
        std::string what = p;
        what += ": no file named ";
        what += prefix;
        what += "<rank>";
        errors.push_back(makeError("flight-recorder.no-dumps", what));
        continue;
      }
      files.insert(files.end(), it->second.begin(), it->second.end());
    } else if (byPrefix.size() == 1) {
      files.insert(files.end(), byPrefix.begin()->second.begin(), byPrefix.begin()->second.end());
    } else if (byPrefix.empty()) {
      errors.push_back(makeError("flight-recorder.no-dumps",
                                 p + ": no file whose name ends in a rank (PyTorch writes "
                                     "TORCH_FR_DUMP_TEMP_FILE<rank>, by default nccl_trace_rank_<rank>)"));
    } else {
      std::string what = p + ": files of more than one kind end in a rank: ";
      for (const auto& [pre, list] : byPrefix) {
        if (what.back() != ' ') what += ", ";
        what += "'";
        what += pre;
        what += "<rank>' (";
        what += std::to_string(list.size());
        what += ")";
      }
      what += "; pick one with --prefix";
      errors.push_back(makeError("flight-recorder.prefix", what));
    }
  }
  if (!errors.empty()) return errors;
  std::vector<FlightRecorderDump> dumps;
  for (const std::string& f : files) {
    const std::string name = fs::path(f).filename().string();
    auto rank = flightRecorderRankOf(name);
    if (!rank) {
      errors.push_back(
          makeError("flight-recorder.rank",
                    f + ": the file name does not end in the rank it was written by (PyTorch writes "
                        "TORCH_FR_DUMP_TEMP_FILE<rank>)"));
      continue;
    }
    auto bytes = readUserFile(f, f);
    if (!bytes.ok()) {
      errors.insert(errors.end(), bytes.errors().begin(), bytes.errors().end());
      continue;
    }
    auto dump = readFlightRecorderDump(*bytes, f, *rank);
    if (!dump.ok()) {
      errors.insert(errors.end(), dump.errors().begin(), dump.errors().end());
      continue;
    }
    dumps.push_back(std::move(*dump));
  }
  if (!errors.empty()) return errors;
  std::sort(dumps.begin(), dumps.end(),
            [](const FlightRecorderDump& a, const FlightRecorderDump& b) { return a.rank < b.rank; });
  for (size_t i = 1; i < dumps.size(); ++i)
    if (dumps[i].rank == dumps[i - 1].rank)
      errors.push_back(
          makeError("flight-recorder.duplicate-rank", dumps[i].source + " and " + dumps[i - 1].source +
                                                          " are both rank " + std::to_string(dumps[i].rank)));
  if (!errors.empty()) return errors;
  if (dumps.empty()) return makeError("flight-recorder.no-dumps", "no flight-recorder dump given");
  return dumps;
}

}  // namespace ps::core
