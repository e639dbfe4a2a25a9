// Canonical explicit form of a Schedule. parseDsl(printDsl(s)) == s for every schedule whose
// ops are well formed (stage-level kinds without micro-batch, the others with one).
#include <charconv>
#include <filesystem>

#include "io/dsl_internal.h"

namespace ps::core {

namespace {

constexpr size_t kWrapColumn = 100;

void appendInt(std::string& out, long long v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void appendQuoted(std::string& out, const std::string& s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += c;
    }
  }
  out += '"';
}

void appendList(std::string& out, const std::vector<int>& v) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    appendInt(out, v[i]);
  }
}

void appendNames(std::string& out, const std::vector<std::string>& v) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ", ";
    out += v[i];
  }
}

// "0..4, 7, 9..11": runs of consecutive integers as ranges (end excluded), others alone.
void appendRanges(std::string& out, const std::vector<int>& v) {
  for (size_t i = 0; i < v.size();) {
    size_t j = i + 1;
    while (j < v.size() && v[j] == v[j - 1] + 1) ++j;
    if (i > 0) out += ", ";
    appendInt(out, v[i]);
    if (j - i > 1) {
      out += "..";
      appendInt(out, static_cast<std::int64_t>(v[j - 1]) + 1);
    }
    i = j;
  }
}

}  // namespace

std::string printDsl(const Schedule& s) {
  std::string out;
  out.reserve(256 + s.opCount() * 6);
  const Pipeline& p = s.pipeline;
  if (!s.name.empty()) {
    out += "name ";
    appendQuoted(out, s.name);
    out += '\n';
  }
  out += "devices ";
  appendInt(out, p.devices);
  out += "\nstages ";
  appendInt(out, p.stages);
  out += "\nmicrobatches ";
  appendInt(out, p.microbatches);
  out += "\nplacement ";
  out += placementKindName(p.placementKind);
  if (p.placementKind == PlacementKind::Explicit) {
    out += ' ';
    appendList(out, p.stageToDevice);
  }
  out += '\n';
  if (s.profile) {
    out += "profile ";
    appendQuoted(out, *s.profile);
    out += '\n';
  }
  if (!s.partition.empty()) {
    out += "partition ";
    appendList(out, s.partition);
    out += '\n';
  }
  for (const Route& r : p.routes) {
    out += "route ";
    appendInt(out, r.firstMicrobatch);
    out += "..";
    appendInt(out, static_cast<std::int64_t>(r.firstMicrobatch) + r.microbatchCount);
    out += ": ";
    appendRanges(out, r.stages);
    out += '\n';
  }
  if (!p.stageBlock.empty()) {
    out += "blocks ";
    appendRanges(out, p.stageBlock);
    out += '\n';
  }
  for (const UserKind& k : s.userKinds) {
    out += "kind ";
    out += k.name;
    if (k.stageLevel) out += " stage_level";
    if (!k.durationExpr.empty()) {
      out += " duration = ";
      out += k.durationExpr;
    }
    if (k.memory.transientBytes != 0 || k.memory.deltaBytes != 0) {
      out += " memory";
      if (k.memory.transientBytes != 0) {
        out += " transient ";
        appendInt(out, k.memory.transientBytes);
      }
      if (k.memory.deltaBytes != 0) {
        out += " delta ";
        appendInt(out, k.memory.deltaBytes);
      }
    }
    if (!k.after.empty()) {
      out += " after ";
      appendNames(out, k.after);
    }
    if (!k.before.empty()) {
      out += " before ";
      appendNames(out, k.before);
    }
    out += '\n';
  }

  // Kind names once, not per op.
  std::vector<std::string> userNames;
  for (const UserKind& k : s.userKinds) userNames.push_back(k.name);
  auto kindName = [&](OpKind k) -> std::string_view {
    if (isUserKind(k)) {
      size_t i = static_cast<size_t>(k) - kFirstUserKind;
      return i < userNames.size() ? std::string_view(userNames[i]) : std::string_view("?");
    }
    return builtinKindName(k);
  };

  std::vector<int> onlyStage(s.devices.size(), -1);
  {
    std::vector<int> count(s.devices.size(), 0);
    for (int st = 0; st < static_cast<int>(p.stageToDevice.size()); ++st) {
      int d = p.stageToDevice[static_cast<size_t>(st)];
      if (d < 0 || static_cast<size_t>(d) >= s.devices.size()) continue;
      if (count[static_cast<size_t>(d)]++ == 0)
        onlyStage[static_cast<size_t>(d)] = st;
      else
        onlyStage[static_cast<size_t>(d)] = -1;
    }
  }

  out += '\n';
  for (size_t d = 0; d < s.devices.size(); ++d) {
    size_t lineStart = out.size();
    out += "device ";
    appendInt(out, static_cast<long long>(d));
    out += ':';
    const int only = onlyStage[d];
    auto appendOp = [&](const Op& op) {
      out += kindName(op.kind);
      if (op.microbatch >= 0) appendInt(out, op.microbatch);
      if (op.stage != only || only < 0) {
        out += "@s";
        appendInt(out, op.stage);
      }
    };
    for (const Step& st : s.devices[d]) {
      if (out.size() - lineStart > kWrapColumn) {
        out += "\n ";
        lineStart = out.size() - 1;
      }
      out += ' ';
      if (st.second) {
        out += '(';
        appendOp(st.first);
        out += ' ';
        appendOp(*st.second);
        out += ')';
      } else {
        appendOp(st.first);
      }
    }
    out += '\n';
  }
  return out;
}

std::string profileReferenceFor(std::string_view profilePath, std::string_view pipePath) {
  namespace fs = std::filesystem;
  if (profilePath.empty() || pipePath.empty() || pipePath == "-") return std::string(profilePath);
  std::error_code ec;
  const fs::path profile = fs::absolute(fs::path(profilePath), ec).lexically_normal();
  if (ec) return std::string(profilePath);
  const fs::path dir = fs::absolute(fs::path(pipePath), ec).lexically_normal().parent_path();
  if (ec || profile.root_name() != dir.root_name()) return std::string(profilePath);
  const fs::path rel = profile.lexically_relative(dir);
  return rel.empty() ? std::string(profilePath) : rel.generic_string();
}

std::string resolveProfileReference(std::string_view name, std::string_view pipePath,
                                    std::string_view dataDir) {
  namespace fs = std::filesystem;
  fs::path beside(name);
  if (beside.is_relative() && !pipePath.empty() && pipePath != "-")
    beside = fs::path(pipePath).parent_path() / beside;
  std::vector<fs::path> candidates{beside, fs::path(name)};
  if (!dataDir.empty()) {
    const fs::path data(dataDir);
    candidates.push_back(data / name);
    candidates.push_back(data / "profiles" / name);
    candidates.push_back(data / "profiles" / (std::string(name) + ".json"));
  }
  std::error_code ec;
  for (const auto& c : candidates)
    if (fs::is_regular_file(c, ec)) return c.string();
  return beside.string();
}

}  // namespace ps::core
