// Finding the per-rank trace files in the folders torchtitan, Megatron-LM and
// tensorboard_trace_handler write (trace_files.h).
#include "pipestudio/core/io/trace_files.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>

namespace ps::core {

namespace fs = std::filesystem;

std::string_view traceLayoutName(TraceLayout l) {
  switch (l) {
    case TraceLayout::Files:
      return "files";
    case TraceLayout::Folder:
      return "folder";
    case TraceLayout::Torchtitan:
      return "torchtitan";
    case TraceLayout::Megatron:
      return "megatron";
    case TraceLayout::TensorBoard:
      return "tensorboard";
  }
  return "files";
}

bool naturalLess(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const bool da = std::isdigit(static_cast<unsigned char>(a[i])) != 0;
    const bool db = std::isdigit(static_cast<unsigned char>(b[j])) != 0;
    if (da && db) {
      size_t ei = i, ej = j;
      while (ei < a.size() && std::isdigit(static_cast<unsigned char>(a[ei]))) ++ei;
      while (ej < b.size() && std::isdigit(static_cast<unsigned char>(b[ej]))) ++ej;
      // Compare the runs as numbers: without leading zeros, the longer one is larger.
      size_t si = i, sj = j;
      while (si + 1 < ei && a[si] == '0') ++si;
      while (sj + 1 < ej && b[sj] == '0') ++sj;
      if (ei - si != ej - sj) return ei - si < ej - sj;
      int c = a.compare(si, ei - si, b, sj, ej - sj);
      if (c != 0) return c < 0;
      if (ei - i != ej - j) return ei - i < ej - j;
      i = ei;
      j = ej;
      continue;
    }
    if (a[i] != b[j]) return a[i] < b[j];
    ++i;
    ++j;
  }
  return a.size() - i < b.size() - j;
}

namespace {

bool endsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool isTraceName(const std::string& name) {
  return endsWith(name, ".json") || endsWith(name, ".json.gz");
}

Diagnostic note(std::string code, std::string message, const std::string& file = {}) {
  Diagnostic d;
  d.severity = Severity::Note;
  d.code = std::move(code);
  d.message = std::move(message);
  d.location.file = file;
  return d;
}

// A folder's entries, without throwing: unreadable entries and symlink loops become warnings.
struct Listing {
  std::vector<fs::path> files;  // regular files (symlinks followed)
  std::vector<fs::path> dirs;
};

Listing list(const fs::path& dir, Diagnostics& notes) {
  Listing out;
  std::error_code ec;
  fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  if (ec) {
    notes.push_back(makeWarning("trace.folder", dir.string() + ": cannot list: " + ec.message(),
                                SourceLocation{dir.string(), 0, 0}));
    return out;
  }
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) {
      notes.push_back(makeWarning("trace.folder", dir.string() + ": cannot list further: " + ec.message(),
                                  SourceLocation{dir.string(), 0, 0}));
      break;
    }
    const fs::directory_entry& e = *it;
    std::error_code st;
    fs::file_status s = e.status(st);  // follows symlinks: a loop fails here (ELOOP)
    if (st) {
      notes.push_back(makeWarning("trace.folder", e.path().string() + ": skipped: " + st.message(),
                                  SourceLocation{e.path().string(), 0, 0}));
      continue;
    }
    if (fs::is_regular_file(s))
      out.files.push_back(e.path());
    else if (fs::is_directory(s))
      out.dirs.push_back(e.path());
  }
  auto byName = [](const fs::path& a, const fs::path& b) {
    return naturalLess(a.filename().string(), b.filename().string());
  };
  std::sort(out.files.begin(), out.files.end(), byName);
  std::sort(out.dirs.begin(), out.dirs.end(), byName);
  return out;
}

bool isDir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

// torchtitan's iteration_<N> folders: N -> folder.
std::map<long long, fs::path> stepFolders(const Listing& l) {
  std::map<long long, fs::path> out;
  for (const auto& d : l.dirs) {
    const std::string n = d.filename().string();
    if (n.rfind("iteration_", 0) != 0 || n.size() == 10 || n.size() > 28) continue;
    const std::string digits = n.substr(10);
    if (digits.find_first_not_of("0123456789") != std::string::npos) continue;
    out.emplace(std::stoll(digits), d);
  }
  return out;
}

// tensorboard_trace_handler's "<worker>.<ns>.pt.trace.json[.gz]": the worker and the time.
std::optional<std::pair<std::string, std::string>> tensorboardName(const std::string& name) {
  std::string stem;
  if (endsWith(name, ".pt.trace.json"))
    stem = name.substr(0, name.size() - 14);
  else if (endsWith(name, ".pt.trace.json.gz"))
    stem = name.substr(0, name.size() - 17);
  else
    return std::nullopt;
  auto dot = stem.rfind('.');
  if (dot == std::string::npos || dot + 1 == stem.size()) return std::nullopt;
  std::string ns = stem.substr(dot + 1);
  if (ns.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::make_pair(stem.substr(0, dot), ns);
}

// The trace files of one folder: *.json and *.json.gz; of a name given both ways the plain one;
// of tensorboard_trace_handler's dumps the newest per worker.
std::vector<std::string> traceFilesIn(const fs::path& dir, const Listing& l, TraceSelection& sel) {
  std::vector<fs::path> traces;
  for (const auto& f : l.files)
    if (isTraceName(f.filename().string())) traces.push_back(f);
  std::set<std::string> plain;
  for (const auto& f : traces)
    if (endsWith(f.filename().string(), ".json")) plain.insert(f.filename().string());
  std::vector<fs::path> kept;
  for (const auto& f : traces) {
    const std::string n = f.filename().string();
    if (endsWith(n, ".json.gz") && plain.count(n.substr(0, n.size() - 3))) {
      sel.notes.push_back(
          note("trace.folder", f.string() + ": left out: the same trace is there uncompressed"));
      continue;
    }
    kept.push_back(f);
  }
  // Several profiling cycles of one worker: its newest dump (largest time in the name).
  std::map<std::string, std::pair<std::string, fs::path>> newest;
  size_t older = 0;
  bool tensorboard = !kept.empty();
  for (const auto& f : kept) {
    auto tb = tensorboardName(f.filename().string());
    if (!tb) {
      tensorboard = false;
      continue;
    }
    auto [it, fresh] = newest.emplace(tb->first, std::make_pair(tb->second, f));
    if (!fresh) {
      ++older;
      const std::string& known = it->second.first;
      bool later = tb->second.size() != known.size() ? tb->second.size() > known.size() : tb->second > known;
      if (later) it->second = std::make_pair(tb->second, f);
    }
  }
  std::vector<std::string> out;
  if (tensorboard) {
    sel.layout = TraceLayout::TensorBoard;
    for (const auto& [worker, v] : newest) out.push_back(v.second.string());
    if (older > 0)
      sel.notes.push_back(
          note("trace.folder", dir.string() + ": " + std::to_string(older) +
                                   " older profiling dump(s) of the same workers left out (the "
                                   "newest of each worker is read; give the files to read others)"));
  } else {
    for (const auto& f : kept) out.push_back(f.string());
  }
  std::sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) {
    return naturalLess(fs::path(a).filename().string(), fs::path(b).filename().string());
  });
  return out;
}

bool allNamed(const std::vector<std::string>& files, bool (*pred)(const std::string&)) {
  return !files.empty() && std::all_of(files.begin(), files.end(), [&](const std::string& f) {
    return pred(fs::path(f).filename().string());
  });
}
bool megatronName(const std::string& n) {
  return n.rfind("rank-", 0) == 0 && (endsWith(n, ".json.gz") || endsWith(n, ".json"));
}
bool torchtitanName(const std::string& n) {
  return n.rfind("rank", 0) == 0 && (endsWith(n, "_trace.json.gz") || endsWith(n, "_trace.json"));
}

std::string joinSteps(const std::map<long long, fs::path>& steps) {
  std::string s;
  for (const auto& [n, p] : steps) s += (s.empty() ? "" : ", ") + p.filename().string();
  return s;
}

Status expandTorchtitan(const fs::path& root, const std::map<long long, fs::path>& steps,
                        const TraceDiscoveryOptions& options, TraceSelection& sel) {
  sel.layout = TraceLayout::Torchtitan;
  for (const auto& [n, p] : steps) sel.steps.push_back(n);
  long long step = steps.rbegin()->first;
  if (options.step) {
    if (!steps.count(*options.step))
      return makeError("trace.folder",
                       root.string() + ": no iteration_" + std::to_string(*options.step) +
                           " folder (there are " + joinSteps(steps) + ")",
                       SourceLocation{root.string(), 0, 0});
    step = *options.step;
  }
  sel.step = step;
  const fs::path& dir = steps.at(step);
  Listing l = list(dir, sel.notes);
  auto files = traceFilesIn(dir, l, sel);
  sel.layout = TraceLayout::Torchtitan;
  if (files.empty()) {
    // torchft writes one folder per replica under the step's.
    std::vector<std::pair<fs::path, std::vector<std::string>>> leaves;
    for (const auto& d : l.dirs) {
      Listing ll = list(d, sel.notes);
      auto f = traceFilesIn(d, ll, sel);
      sel.layout = TraceLayout::Torchtitan;
      if (!f.empty()) leaves.emplace_back(d, std::move(f));
    }
    if (leaves.size() > 1) {
      std::string names;
      for (const auto& [d, f] : leaves) names += (names.empty() ? "" : ", ") + d.filename().string();
      return makeError(
          "trace.folder",
          dir.string() + ": traces of several replicas (" + names + "): give one of these folders",
          SourceLocation{dir.string(), 0, 0});
    }
    if (leaves.empty())
      return makeError("trace.folder", dir.string() + ": no trace files (*.json, *.json.gz)",
                       SourceLocation{dir.string(), 0, 0});
    files = std::move(leaves.front().second);
  }
  sel.files.insert(sel.files.end(), files.begin(), files.end());
  sel.notes.push_back(note(
      "trace.folder", root.string() + ": torchtitan's traces of step " + std::to_string(step) +
                          (steps.size() > 1 ? " (" + std::string(options.step ? "chosen" : "the newest") +
                                                  " of " + joinSteps(steps) + ")"
                                            : "")));
  return okStatus();
}

Status expandFolder(const fs::path& dir, const TraceDiscoveryOptions& options, TraceSelection& sel) {
  Listing l = list(dir, sel.notes);
  // torchtitan: the step folders here, or under the dump folder's profiling/traces (or traces/
  // when given profiling/).
  for (const fs::path& root : {dir, dir / "profiling" / "traces", dir / "traces"}) {
    if (root != dir && !isDir(root)) continue;
    Listing rl = root == dir ? l : list(root, sel.notes);
    auto steps = stepFolders(rl);
    if (!steps.empty()) return expandTorchtitan(root, steps, options, sel);
  }
  // Megatron-LM: torch_profile/ beside the tensorboard folder.
  std::vector<std::string> files;
  if (isDir(dir / "torch_profile")) {
    Listing ml = list(dir / "torch_profile", sel.notes);
    files = traceFilesIn(dir / "torch_profile", ml, sel);
    if (!files.empty()) {
      sel.layout = TraceLayout::Megatron;
      sel.notes.push_back(note("trace.folder", dir.string() + ": Megatron-LM's traces in torch_profile/"));
    }
  }
  if (files.empty()) {
    files = traceFilesIn(dir, l, sel);
    if (sel.layout != TraceLayout::TensorBoard)
      sel.layout = allNamed(files, megatronName)     ? TraceLayout::Megatron
                   : allNamed(files, torchtitanName) ? TraceLayout::Torchtitan
                                                     : TraceLayout::Folder;
  }
  if (files.empty()) {
    // With the entries skipped on the way (a symlink loop, an unreadable file): they may be why.
    Diagnostics ds = sel.notes;
    ds.push_back(makeError(
        "trace.folder",
        dir.string() + ": no trace files (*.json, *.json.gz), no torchtitan iteration_<N> folders, no "
                       "Megatron-LM torch_profile/",
        SourceLocation{dir.string(), 0, 0}));
    return ds;
  }
  if (options.step)
    sel.notes.push_back(makeWarning("trace.folder", dir.string() +
                                                        ": has no torchtitan iteration_<N> folders; the "
                                                        "step asked for does not apply"));
  sel.files.insert(sel.files.end(), files.begin(), files.end());
  return okStatus();
}

}  // namespace

Result<TraceSelection> findTraceFiles(const std::vector<std::string>& paths,
                                      const TraceDiscoveryOptions& options) {
  TraceSelection sel;
  if (paths.empty()) return makeError("trace.input", "no trace files given");
  Diagnostics errors;
  for (const auto& p : paths) {
    std::error_code ec;
    fs::file_status s = fs::status(p, ec);
    if (ec && ec != std::errc::no_such_file_or_directory) {
      errors.push_back(makeError("trace.open", p + ": " + ec.message(), SourceLocation{p, 0, 0}));
      continue;
    }
    if (fs::is_directory(s)) {
      auto st = expandFolder(p, options, sel);
      if (!st) errors.insert(errors.end(), st.errors().begin(), st.errors().end());
      continue;
    }
    // A file (or a missing one: opening it names the problem).
    sel.files.push_back(p);
  }
  if (!errors.empty()) return errors;
  return sel;
}

Result<TraceImport> importTraceFiles(const std::vector<std::string>& paths, const TraceImportOptions& options,
                                     const TraceDiscoveryOptions& discovery) {
  PS_ASSIGN_OR_RETURN(TraceSelection sel, findTraceFiles(paths, discovery));
  std::vector<TraceFile> files;
  files.reserve(sel.files.size());
  for (const auto& f : sel.files) {
    TraceFile tf;
    tf.name = f;
    tf.path = f;
    files.push_back(std::move(tf));
  }
  PS_ASSIGN_OR_RETURN(ImportedTrace trace, importChromeTraces(files, options));
  Diagnostics& d = trace.timeline.diagnostics;
  d.insert(d.begin(), sel.notes.begin(), sel.notes.end());
  return TraceImport{std::move(trace), std::move(sel)};
}

}  // namespace ps::core
