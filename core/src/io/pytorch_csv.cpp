#include "pipestudio/core/io/pytorch_csv.h"

#include <algorithm>
#include <charconv>
#include <deque>

#include "pipestudio/core/analysis/pytorch_lowering.h"

namespace ps::core {

namespace {

struct CsvCell {
  std::string_view text;  // unquoted: a view of the line, or of `owned` for a quoted cell
  int column = 1;         // 1-based byte column of the cell's first non-space character
};

// Splits one CSV line into `cells` (RFC 4180 quotes; a quoted cell may not span lines here,
// since actions never contain newlines). Unquoted cells, the common case, are views of the
// line; a quoted cell's text is kept in `owned` (a deque, so the views stay valid).
void splitCells(std::string_view line, std::vector<CsvCell>& cells, std::deque<std::string>& owned) {
  cells.clear();
  size_t i = 0;
  while (true) {
    CsvCell c;
    size_t start = i;
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    c.column = static_cast<int>(i) + 1;
    if (i < line.size() && line[i] == '"') {
      std::string text;
      ++i;
      while (i < line.size()) {
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            text += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        text += line[i++];
      }
      // Anything after the closing quote up to the comma is kept (and will fail to parse
      // unless it is blank).
      while (i < line.size() && line[i] != ',') text += line[i++];
      c.text = owned.emplace_back(std::move(text));
    } else {
      i = start;
      while (i < line.size() && line[i] != ',') ++i;
      c.text = line.substr(start, i - start);
    }
    cells.push_back(c);
    if (i >= line.size()) break;
    ++i;  // the comma
  }
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

constexpr int kMaxStage = 100'000;

bool isDigit(char c) {
  return c >= '0' && c <= '9';
}

// The kinds a PyTorch action can name (its _ComputationType, up to 2.15's WAIT_* actions):
// every built-in kind but R, OFFLOAD and RELOAD, which PyTorch has no action for.
bool csvExpressible(OpKind k) {
  return !isUserKind(k) && k != OpKind::R && k != OpKind::Offload && k != OpKind::Reload;
}

std::optional<OpKind> actionKind(std::string_view t) {
  auto k = builtinKindFromName(t);
  if (!k || !csvExpressible(*k)) return std::nullopt;
  return k;
}

bool isCompute(OpKind k) {
  return k == OpKind::F || k == OpKind::B || k == OpKind::I || k == OpKind::W;
}

std::string hintFor(std::string_view type) {
  std::string upper(type), all;
  for (char& c : upper) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  for (std::uint16_t i = 0; i < static_cast<std::uint16_t>(OpKind::kBuiltinCount); ++i) {
    const auto k = static_cast<OpKind>(i);
    if (!csvExpressible(k)) continue;
    if (upper == builtinKindName(k))
      return "did you mean " + std::string(builtinKindName(k)) + "? (action types are upper case)";
    all += (all.empty() ? "" : ", ") + std::string(builtinKindName(k));
  }
  if (upper == "SEND_F_RECV_B" || upper == "SEND_B_RECV_F")
    return "combined send/receive actions are not supported; write SEND and RECV cells";
  return "action types: " + all;
}

bool parseInt(std::string_view s, int& out) {
  if (s.empty() || s.size() > 9) return false;
  auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

}  // namespace

Result<Schedule> readPytorchCsv(std::string_view text, const CsvReadOptions& options) {
  return readPytorchCsv(text, options, nullptr);
}

Result<Schedule> readPytorchCsv(std::string_view text, const CsvReadOptions& options,
                                CsvStepLocations* locations) {
  Diagnostics errors;
  const int maxErrors = std::max(1, options.maxErrors);
  auto fail = [&](int line, int col, const std::string& msg, std::string hint = {}) {
    if (static_cast<int>(errors.size()) >= maxErrors) return;
    Diagnostic d = makeError("csv.action", msg, SourceLocation{options.filename, line, col});
    d.hint = std::move(hint);
    errors.push_back(std::move(d));
  };

  if (text.size() >= 3 && static_cast<unsigned char>(text[0]) == 0xEF &&
      static_cast<unsigned char>(text[1]) == 0xBB && static_cast<unsigned char>(text[2]) == 0xBF)
    text.remove_prefix(3);

  // Rows, one per rank; a final newline does not start another rank.
  std::vector<std::string_view> lines;
  {
    size_t pos = 0;
    while (pos < text.size()) {
      size_t nl = text.find('\n', pos);
      std::string_view line =
          text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      lines.push_back(line);
      if (nl == std::string_view::npos) break;
      pos = nl + 1;
    }
  }
  if (lines.empty())
    return makeError("csv.empty", "the CSV has no rows (one row per rank expected)",
                     SourceLocation{options.filename, 1, 1});

  struct Located {
    Step step;
    int line, column;
    std::string_view cell;  // a view of `text` or of `ownedCells`
  };
  std::vector<std::vector<Located>> rows(lines.size());
  int maxStage = -1, maxMb = -1;

  auto parseAction = [&](std::string_view a, int line, int col, std::string_view cellView, Op& out) -> bool {
    const auto cell = [cellView] { return std::string(cellView); };
    a = trim(a);
    size_t i = 0;
    while (i < a.size() && isDigit(a[i])) ++i;
    if (i == 0) {
      fail(line, col, "'" + cell() + "': an action starts with its stage number, e.g. 2F0");
      return false;
    }
    size_t t = i;
    while (t < a.size() && !isDigit(a[t])) ++t;
    std::string_view stageStr = a.substr(0, i), type = a.substr(i, t - i), mbStr = a.substr(t);
    auto kind = actionKind(type);
    if (!kind) {
      fail(line, col, "'" + cell() + "': unknown action type '" + std::string(type) + "'", hintFor(type));
      return false;
    }
    int stage = 0, mb = -1;
    if (!parseInt(stageStr, stage) || stage > kMaxStage) {
      fail(line, col,
           "'" + cell() + "': stage number " + std::string(stageStr) + " is too large (at most " +
               std::to_string(kMaxStage) + ")");
      return false;
    }
    bool stageLevel = isStageLevelKind(*kind);
    if (stageLevel && !mbStr.empty()) {
      fail(line, col,
           "'" + cell() + "': " + std::string(type) + " is a stage action and takes no micro-batch");
      return false;
    }
    if (!stageLevel) {
      if (mbStr.empty()) {
        fail(line, col,
             "'" + cell() + "': " + std::string(type) + " needs a micro-batch number, e.g. " +
                 std::string(stageStr) + std::string(type) + "0");
        return false;
      }
      if (!parseInt(mbStr, mb)) {
        fail(line, col, "'" + cell() + "': '" + std::string(mbStr) + "' is not a micro-batch number");
        return false;
      }
    }
    out = Op{*kind, stage, mb};
    return true;
  };

  std::vector<CsvCell> lineCells;
  std::deque<std::string> ownedCells;
  for (size_t r = 0; r < lines.size(); ++r) {
    const int lineNo = static_cast<int>(r) + 1;
    if (trim(lines[r]).empty()) continue;  // a rank with no actions
    splitCells(lines[r], lineCells, ownedCells);
    rows[r].reserve(lineCells.size());
    for (const CsvCell& c : lineCells) {
      std::string_view cell = trim(c.text);
      if (cell.empty()) continue;  // idle step
      const std::string_view cellStr = cell;
      Step step;
      bool ok = true;
      if (cell.front() == '(') {
        size_t close = cell.find(')');
        if (close == std::string_view::npos) {
          fail(lineNo, c.column,
               "'" + std::string(cellStr) +
                   "': overlapped actions need a closing ')', e.g. (0F7;7B3)OVERLAP_F_B");
          continue;
        }
        std::string_view inner = cell.substr(1, close - 1), suffix = trim(cell.substr(close + 1));
        if (suffix != "OVERLAP_F_B") {
          fail(lineNo, c.column,
               "'" + std::string(cellStr) + "': overlapped actions end with OVERLAP_F_B, not '" +
                   std::string(suffix) + "'");
          continue;
        }
        std::vector<Op> subs;
        size_t start = 0;
        while (ok) {
          size_t semi = inner.find(';', start);
          std::string_view part =
              inner.substr(start, semi == std::string_view::npos ? std::string_view::npos : semi - start);
          Op op;
          if (!parseAction(part, lineNo, c.column, cellStr, op)) ok = false;
          subs.push_back(op);
          if (semi == std::string_view::npos) break;
          start = semi + 1;
        }
        if (!ok) continue;
        if (subs.size() != 2) {
          fail(lineNo, c.column,
               "'" + std::string(cellStr) + "': an overlapped cell holds exactly two actions, got " +
                   std::to_string(subs.size()));
          continue;
        }
        step = Step{subs[0], subs[1]};
      } else {
        Op op;
        if (!parseAction(cell, lineNo, c.column, cellStr, op)) continue;
        step = Step{op, {}};
      }
      for (const Op* op : {&step.first, step.second ? &*step.second : nullptr}) {
        if (!op) continue;
        maxStage = std::max(maxStage, op->stage);
        maxMb = std::max(maxMb, op->microbatch);
      }
      rows[r].push_back(Located{step, lineNo, c.column, cellStr});
    }
  }
  if (!errors.empty()) return errors;
  if (maxStage < 0)
    return makeError("csv.empty", "the CSV holds no actions", SourceLocation{options.filename, 1, 1});

  // Stage -> rank from the rows.
  const int devices = static_cast<int>(rows.size());
  const int stages = maxStage + 1;
  std::vector<int> stageToDevice(static_cast<size_t>(stages), -1);
  std::vector<const Located*> firstSeen(static_cast<size_t>(stages), nullptr);
  for (int d = 0; d < devices; ++d) {
    for (const Located& l : rows[static_cast<size_t>(d)]) {
      for (const Op* op : {&l.step.first, l.step.second ? &*l.step.second : nullptr}) {
        if (!op) continue;
        auto su = static_cast<size_t>(op->stage);
        if (stageToDevice[su] < 0) {
          stageToDevice[su] = d;
          firstSeen[su] = &l;
        } else if (stageToDevice[su] != d) {
          fail(l.line, l.column,
               "'" + std::string(l.cell) + "': stage " + std::to_string(op->stage) + " appears on rank " +
                   std::to_string(d) + " but already on rank " + std::to_string(stageToDevice[su]) + " (" +
                   options.filename + ":" + std::to_string(firstSeen[su]->line) + ":" +
                   std::to_string(firstSeen[su]->column) + ")");
        }
      }
    }
  }
  for (int st = 0; st < stages; ++st)
    if (stageToDevice[static_cast<size_t>(st)] < 0)
      fail(1, 1,
           "stage " + std::to_string(st) + " appears in no row, so its rank is unknown (stages 0.." +
               std::to_string(maxStage) + " are used)");
  int microbatches = options.microbatches > 0 ? options.microbatches : std::max(maxMb + 1, 1);
  if (options.microbatches > 0)
    for (const auto& row : rows)
      for (const Located& l : row)
        for (const Op* op : {&l.step.first, l.step.second ? &*l.step.second : nullptr})
          if (op && op->microbatch >= microbatches)
            fail(l.line, l.column,
                 "'" + std::string(l.cell) + "': micro-batch " + std::to_string(op->microbatch) +
                     " is outside 0.." + std::to_string(microbatches - 1));
  if (!errors.empty()) return errors;

  // Recognise a named placement, else keep the explicit list.
  Pipeline pipeline;
  bool named = false;
  for (PlacementKind k : {PlacementKind::Linear, PlacementKind::Interleaved, PlacementKind::VShape}) {
    auto p = Pipeline::make(devices, stages, microbatches, k);
    if (p.ok() && p->stageToDevice == stageToDevice) {
      pipeline = std::move(*p);
      named = true;
      break;
    }
  }
  if (!named) {
    auto p = Pipeline::makeExplicit(devices, microbatches, stageToDevice);
    PS_TRY(p);
    pipeline = std::move(*p);
  }
  Schedule s;
  s.pipeline = std::move(pipeline);
  s.devices.resize(static_cast<size_t>(devices));
  for (int d = 0; d < devices; ++d) {
    auto& out = s.devices[static_cast<size_t>(d)];
    out.reserve(rows[static_cast<size_t>(d)].size());
    for (const Located& l : rows[static_cast<size_t>(d)]) out.push_back(l.step);
  }
  if (locations) {
    locations->assign(static_cast<size_t>(devices), {});
    for (int d = 0; d < devices; ++d) {
      (*locations)[static_cast<size_t>(d)].reserve(rows[static_cast<size_t>(d)].size());
      for (const Located& l : rows[static_cast<size_t>(d)])
        (*locations)[static_cast<size_t>(d)].push_back(SourceLocation{options.filename, l.line, l.column});
    }
  }
  return s;
}

namespace {
bool isWait(OpKind k) {
  return k == OpKind::WaitSendF || k == OpKind::WaitSendB || k == OpKind::WaitReduceGrad;
}
}  // namespace

Result<std::string> writePytorchCsv(const Schedule& s, CsvFormat format, const PytorchTarget& target) {
  // compute_only: what PyTorch's _load_csv(format="compute_only") accepts, compute actions
  // only (it refuses REDUCE_GRAD, UNSHARD, RESHARD and SEND/RECV there; its lowering adds them).
  // compute_comms: run as written by _PipelineScheduleRuntime, so it must hold what PyTorch's
  // lowering adds: a compute-only schedule is lowered exactly as PyTorch lowers it; one with
  // explicit SEND/RECV keeps its order and gets the REDUCE_GRAD it lacks (where the runtime
  // divides the gradients by the number of micro-batches). No idle cells: the runtime refuses
  // them in compute_comms. From 2.15 on, compute_comms also needs its WAIT_SEND_F/B and
  // WAIT_REDUCE_GRAD actions (PytorchTarget), which earlier versions cannot read.
  PS_TRY(checkPytorchHasNoRoutes(s));
  const Schedule* out = &s;
  Schedule lowered;
  const bool waits = target.atLeast(2, 15);
  if (format == CsvFormat::ComputeComms) {
    if (!hasExplicitComms(s)) {
      PS_ASSIGN_OR_RETURN(lowered, lowerToPytorchComms(s, target));
    } else {
      lowered = s;
      bool hasReduce = false, hasWaitSend = false, hasWaitReduce = false;
      for (const auto& dev : s.devices)
        for (const auto& st : dev) {
          if (st.second) continue;
          hasReduce |= st.first.kind == OpKind::ReduceGrad;
          hasWaitSend |= st.first.kind == OpKind::WaitSendF || st.first.kind == OpKind::WaitSendB;
          hasWaitReduce |= st.first.kind == OpKind::WaitReduceGrad;
        }
      if (!hasReduce)
        for (auto& dev : lowered.devices) dev = addReduceGrad(dev, s.pipeline.microbatches, waits);
      if (waits && hasReduce && !hasWaitReduce)
        for (auto& dev : lowered.devices) {
          std::vector<Step> withWaits;
          for (const Step& st : dev) {
            withWaits.push_back(st);
            if (!st.second && st.first.kind == OpKind::ReduceGrad)
              withWaits.push_back(Step{Op{OpKind::WaitReduceGrad, st.first.stage, -1}, {}});
          }
          dev = std::move(withWaits);
        }
      if (waits && !hasWaitSend)
        for (auto& dev : lowered.devices) dev = addWaitSend(dev);
    }
    out = &lowered;
  }
  auto keep = [&](const Step& st) {
    if (st.second) return true;
    if (format == CsvFormat::ComputeOnly) return isCompute(st.first.kind);
    return csvExpressible(st.first.kind) && (waits || !isWait(st.first.kind));
  };
  std::string text;
  for (const auto& dev : out->devices) {
    bool first = true;
    for (const auto& st : dev) {
      if (!keep(st)) continue;
      if (!first) text += ',';
      first = false;
      text += pytorchStepText(*out, st);
    }
    // Python's csv.writer ends rows in \r\n, so PyTorch's _dump_csv does: a file PyTorch wrote
    // comes back byte for byte.
    text += "\r\n";
  }
  return text;
}

std::vector<std::string> csvExportLosses(const Schedule& s, CsvFormat format, const PytorchTarget& target) {
  std::vector<std::string> out;
  if (!s.partition.empty()) {
    std::string p;
    for (size_t i = 0; i < s.partition.size(); ++i) p += (i ? "," : "") + std::to_string(s.partition[i]);
    out.push_back("the partition (layers per stage " + p + ")");
  }
  if (s.profile && !s.profile->empty()) out.push_back("the cost profile (" + *s.profile + ")");
  size_t noAction = 0, comms = 0, stageActions = 0, waits = 0;
  for (const auto& dev : s.devices)
    for (const auto& st : dev) {
      if (st.second) continue;
      const OpKind k = st.first.kind;
      if (!csvExpressible(k))
        ++noAction;
      else if (format == CsvFormat::ComputeComms && isWait(k) && !target.atLeast(2, 15))
        ++waits;
      else if (format == CsvFormat::ComputeOnly && isStageLevelKind(k))
        ++stageActions;
      else if (format == CsvFormat::ComputeOnly && !isCompute(k))
        ++comms;
    }
  if (noAction)
    out.push_back(std::to_string(noAction) +
                  " ops with no PyTorch action (R, OFFLOAD, RELOAD, declared kinds)");
  if (comms)
    out.push_back(std::to_string(comms) +
                  " SEND/RECV actions, which compute_only does not hold (PyTorch's lowering places its own; "
                  "use compute_comms to keep these)");
  if (waits)
    out.push_back(std::to_string(waits) + " WAIT_SEND/WAIT_REDUCE_GRAD actions, which PyTorch " +
                  target.name() + " does not have (2.15 does: --pytorch 2.15)");
  if (stageActions)
    out.push_back(std::to_string(stageActions) +
                  " UNSHARD/RESHARD/REDUCE_GRAD actions, which PyTorch's compute_only loader refuses (its "
                  "lowering adds them)");
  if (!s.userKinds.empty()) out.push_back("the declared op kinds");
  return out;
}

}  // namespace ps::core
