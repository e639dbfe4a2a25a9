#include "pipestudio/core/io/cluster.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <initializer_list>
#include <map>
#include <sstream>
#include <tuple>

namespace ps::core {

namespace {

bool parsePositive(std::string_view s, int maximum, int& out) {
  int v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 1 || v > maximum) return false;
  out = v;
  return true;
}

// A whole number of digits only (no sign), however large: "70000" is a number, too many.
bool allDigits(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

bool blankOrControl(char c) {
  return std::isspace(static_cast<unsigned char>(c)) || std::iscntrl(static_cast<unsigned char>(c));
}

// A host name or address as ssh, Slurm and a shell take it without quoting: letters, digits and
// "._-" (IPv6: ':' and a zone's '%'), never starting with '-' (ssh would read an option).
bool validHostName(std::string_view s) {
  if (s.empty() || s.front() == '-') return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) &&
        std::string_view("._-:%").find(c) == std::string_view::npos)
      return false;
  return true;
}

// A login name: letters, digits and "._-+@" (a Kerberos or domain user "a@REALM"), never
// starting with '-' (`ssh -oProxyCommand=...@host` would run a local command).
bool validUserName(std::string_view s) {
  if (s.empty() || s.front() == '-') return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) &&
        std::string_view("._-+@").find(c) == std::string_view::npos)
      return false;
  return true;
}

}  // namespace

std::string ClusterHost::label() const {
  return port == 22 ? host : host + ":" + std::to_string(port);
}

int clusterWorldSize(const std::vector<ClusterHost>& hosts) {
  int n = 0;
  for (const auto& h : hosts) n += h.ranks;
  return n;
}

std::string clusterTargetName(const std::vector<ClusterHost>& hosts) {
  return "cluster (" + std::to_string(hosts.size()) + " hosts, " + std::to_string(clusterWorldSize(hosts)) +
         " ranks)";
}

Result<std::vector<ClusterHost>> parseHostFile(std::string_view text, const std::string& filename) {
  std::vector<ClusterHost> hosts;
  Diagnostics errors;
  int lineNo = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    ++lineNo;
    pos = end + 1;
    // Words and their columns; "..." keeps blanks and '#' in a value (\" and \\ inside).
    std::vector<std::pair<std::string, int>> words;
    bool unterminated = false;
    for (size_t i = 0; i < line.size();) {
      if (blankOrControl(line[i])) {
        ++i;
        continue;
      }
      if (line[i] == '#') break;  // a comment to the end of the line
      const int col = static_cast<int>(i) + 1;
      std::string word;
      bool comment = false;
      while (i < line.size() && !blankOrControl(line[i])) {
        if (line[i] == '#') {  // unquoted: the rest of the line is a comment
          comment = true;
          break;
        }
        if (line[i] != '"') {
          word += line[i++];
          continue;
        }
        ++i;
        while (i < line.size() && line[i] != '"') {
          if (line[i] == '\\' && i + 1 < line.size()) ++i;
          word += line[i++];
        }
        if (i >= line.size()) {
          unterminated = true;
          errors.push_back(makeError("hosts.syntax", "a '\"' is not closed on this line",
                                     SourceLocation{filename, lineNo, col}));
          break;
        }
        ++i;
      }
      if (!word.empty() || !comment) words.emplace_back(std::move(word), col);
      if (comment || unterminated) break;
    }
    if (unterminated) {
      if (end == text.size()) break;
      continue;
    }
    if (words.empty()) {
      if (end == text.size()) break;
      continue;
    }
    auto at = [&](int col) { return SourceLocation{filename, lineNo, col}; };
    auto fail = [&](int col, std::string message) {
      errors.push_back(makeError("hosts.syntax", std::move(message), at(col)));
    };
    ClusterHost h;
    h.location = at(words[0].second);
    // [user@]host[:port]
    std::string_view dest = words[0].first;
    const int destCol = words[0].second;
    if (dest.find('=') != std::string_view::npos) {
      fail(destCol, "a host line starts with the host ([user@]host[:port]), not '" + std::string(dest) + "'");
      continue;
    }
    if (const size_t atSign = dest.rfind('@'); atSign != std::string_view::npos) {
      h.user = std::string(dest.substr(0, atSign));
      dest = dest.substr(atSign + 1);
      if (h.user.empty()) {
        fail(destCol, "empty user name before '@'");
        continue;
      }
      if (!validUserName(h.user)) {
        fail(destCol,
             "'" + h.user +
                 "' is no login name (letters, digits and '.', '-', '_', '+', '@'; not starting with '-')");
        continue;
      }
    }
    // host:port, but not an IPv6 address ("[::1]:22" or a bare "::1").
    if (!dest.empty() && dest.front() == '[') {
      const size_t close = dest.find(']');
      if (close == std::string_view::npos) {
        fail(destCol, "'[' without ']' in '" + std::string(words[0].first) + "'");
        continue;
      }
      std::string_view rest = dest.substr(close + 1);
      if (!rest.empty()) {
        if (rest.front() != ':' || !parsePositive(rest.substr(1), 65535, h.port)) {
          fail(destCol, "bad port in '" + std::string(words[0].first) + "' (1-65535)");
          continue;
        }
      }
      dest = dest.substr(1, close - 1);
    } else if (const size_t colon = dest.find(':');
               colon != std::string_view::npos && dest.find(':', colon + 1) == std::string_view::npos) {
      if (!parsePositive(dest.substr(colon + 1), 65535, h.port)) {
        fail(destCol + static_cast<int>(words[0].first.size() - dest.size() + colon + 1),
             "bad port '" + std::string(dest.substr(colon + 1)) + "' (1-65535)");
        continue;
      }
      dest = dest.substr(0, colon);
    }
    if (!validHostName(dest)) {
      fail(destCol, "'" + std::string(words[0].first) +
                        "' is no host name (letters, digits and '.', '-', '_'; not starting with '-')");
      continue;
    }
    h.host = std::string(dest);
    bool bad = false;
    for (size_t w = 1; w < words.size() && !bad; ++w) {
      const std::string_view word = words[w].first;
      const int col = words[w].second;
      const size_t eq = word.find('=');
      if (eq == std::string_view::npos || eq == 0) {
        fail(col,
             "expected key=value (ranks, user, port, key, cli, addr, ssh), not '" + std::string(word) + "'");
        bad = true;
        break;
      }
      const std::string key(word.substr(0, eq));
      const std::string_view value = word.substr(eq + 1);
      const int valueCol = col + static_cast<int>(eq) + 1;
      if (value.empty()) {
        fail(valueCol, key + "= needs a value");
        bad = true;
      } else if (key == "ranks") {
        if (!parsePositive(value, kMaxRanksPerHost, h.ranks)) {
          const bool tooMany = allDigits(value) && value.find_first_not_of('0') != std::string_view::npos;
          fail(valueCol,
               tooMany ? "ranks=" + std::string(value) + " is more processes than one host runs (at most " +
                             std::to_string(kMaxRanksPerHost) + ")"
                       : "ranks= needs a positive number of processes, not '" + std::string(value) + "'");
          bad = true;
        }
      } else if (key == "port") {
        if (!parsePositive(value, 65535, h.port)) {
          fail(valueCol, "port= needs a port number (1-65535), not '" + std::string(value) + "'");
          bad = true;
        }
      } else if (key == "user") {
        if (!validUserName(value)) {
          fail(valueCol,
               "user= needs a login name (letters, digits and '.', '-', '_', '+', '@'; not starting "
               "with '-')");
          bad = true;
        }
        h.user = std::string(value);
      } else if (key == "key") {
        h.key = std::string(value);
      } else if (key == "cli") {
        h.cli = std::string(value);
      } else if (key == "addr") {
        if (!validHostName(value)) {
          fail(valueCol,
               "addr= needs a host name or address (letters, digits and '.', '-', '_', ':'; not "
               "starting with '-')");
          bad = true;
        }
        h.addr = std::string(value);
      } else if (key == "ssh") {
        h.sshOptions.emplace_back(value);
      } else {
        fail(col, "unknown key '" + key + "' (ranks, user, port, key, cli, addr, ssh)");
        bad = true;
      }
    }
    if (!bad) hosts.push_back(std::move(h));
    if (end == text.size()) break;
  }
  if (!errors.empty()) return errors;
  if (hosts.empty())
    return makeError("hosts.empty", "no hosts in the host file (one '[user@]host[:port] ranks=N' a line)",
                     SourceLocation{filename, std::max(1, lineNo), 1});
  // One map lookup a host: a 100,000-line file is checked in milliseconds.
  std::map<std::tuple<std::string, int, std::string>, size_t> seen;
  for (size_t i = 0; i < hosts.size(); ++i) {
    const auto [it, inserted] = seen.emplace(std::make_tuple(hosts[i].host, hosts[i].port, hosts[i].user), i);
    if (!inserted)
      return makeError("hosts.duplicate",
                       "host " + hosts[i].label() + " is listed twice (line " +
                           std::to_string(hosts[it->second].location.line) + "); give it ranks=N once",
                       hosts[i].location);
  }
  return hosts;
}

namespace {
// A value as the parser reads it back: quoted when it has blanks, quotes or '#'.
std::string hostFileValue(const std::string& v) {
  bool plain = !v.empty();
  for (char c : v) plain = plain && !blankOrControl(c) && c != '"' && c != '#' && c != '\\';
  if (plain) return v;
  std::string q = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') q += '\\';
    q += c;
  }
  return q + "\"";
}
}  // namespace

std::string formatHostFile(const std::vector<ClusterHost>& hosts) {
  std::string out;
  for (const auto& h : hosts) {
    // An IPv6 address in brackets, so that its last ':' is not read as a port.
    const std::string host = h.host.find(':') != std::string::npos ? "[" + h.host + "]" : h.host;
    out += h.user.empty() ? host : hostFileValue(h.user + "@" + host);
    if (h.port != 22) out += " port=" + std::to_string(h.port);
    out += " ranks=" + std::to_string(h.ranks);
    if (!h.key.empty()) out += " key=" + hostFileValue(h.key);
    if (!h.cli.empty() && h.cli != "pipestudio-cli") out += " cli=" + hostFileValue(h.cli);
    if (!h.addr.empty()) out += " addr=" + hostFileValue(h.addr);
    for (const auto& o : h.sshOptions) out += " ssh=" + hostFileValue(o);
    out += "\n";
  }
  return out;
}

std::string shellQuoteWord(std::string_view word) {
  bool safe = !word.empty();
  for (char c : word)
    if (!(std::isalnum(static_cast<unsigned char>(c)) ||
          std::string_view("_@%+=:,./-").find(c) != std::string_view::npos))
      safe = false;
  if (safe) return std::string(word);
  std::string q = "'";
  for (char c : word) {
    if (c == '\'')
      q += "'\\''";
    else
      q += c;
  }
  return q + "'";
}

std::string printLaunchCommands(const std::vector<ClusterHost>& hosts, LaunchKind kind,
                                const std::vector<std::string>& cliArgs, const std::string& stagedSchedule,
                                int masterPort, const std::string& localSchedule) {
  return printLaunchCommands(hosts, kind, cliArgs, std::vector<StagedFile>{{localSchedule, stagedSchedule}},
                             masterPort);
}

namespace {
std::string runCommand(const std::string& cli, const std::vector<std::string>& cliArgs) {
  std::string s = shellQuoteWord(cli) + " run";
  for (const auto& a : cliArgs) s += " " + shellQuoteWord(a);
  return s;
}
}  // namespace

std::string printLaunchCommands(const std::vector<ClusterHost>& hosts, LaunchKind kind,
                                const std::vector<std::string>& cliArgs, const std::vector<StagedFile>& files,
                                int masterPort) {
  std::ostringstream out;
  if (hosts.empty()) return {};
  const ClusterHost& first = hosts.front();
  const int nodes = static_cast<int>(hosts.size());
  bool uniform = true;
  for (const auto& h : hosts) uniform = uniform && h.ranks == first.ranks;
  auto command = [&](const ClusterHost& h) { return runCommand(h.cli, cliArgs); };
  // Every file the ranks read: the schedule, and a TorchScript model or an --inputs batch.
  for (size_t f = 0; f < files.size(); ++f) {
    const std::string& staged = files[f].staged;
    const size_t slash = staged.rfind('/');
    const std::string stagedDir = slash == std::string::npos || slash == 0 ? "/" : staged.substr(0, slash);
    out << "# " << (f == 0 ? std::string("The schedule") : "And " + files[f].what) << " must be at "
        << shellQuoteWord(staged) << " on every host (a shared file system, or copy it):\n";
    for (const auto& h : hosts) {
      const std::string p = h.port != 22 ? std::to_string(h.port) : std::string();
      out << "#   ssh" << (p.empty() ? "" : " -p " + p) << " -- " << shellQuoteWord(h.destination())
          << " mkdir -p " << shellQuoteWord(stagedDir) << " && scp" << (p.empty() ? "" : " -P " + p) << " -- "
          << shellQuoteWord(files[f].local) << " " << shellQuoteWord(h.destination() + ":" + staged) << "\n";
    }
  }
  if (kind == LaunchKind::Torchrun) {
    // The underscore spellings: every torchrun accepts them (torch 2.x also takes "--nproc-per-node"
    // and the like, torch 1.x only these).
    out << "# torchrun, static rendezvous: on each host, its own --node_rank (the first host's store on port "
        << masterPort << "):\n";
    for (size_t i = 0; i < hosts.size(); ++i) {
      const auto& h = hosts[i];
      out << "# on " << h.label() << ":\n";
      out << "torchrun --nnodes " << nodes << " --nproc_per_node " << h.ranks << " --node_rank " << i
          << " --master_addr " << shellQuoteWord(first.address()) << " --master_port " << masterPort
          << " --no_python " << command(h) << "\n";
    }
    if (uniform) {
      out << "# or torchrun, c10d rendezvous: the same command on every host:\n";
      out << "torchrun --nnodes " << nodes << " --nproc_per_node " << first.ranks
          << " --rdzv_backend c10d --rdzv_endpoint "
          << shellQuoteWord(first.address() + ":" + std::to_string(masterPort)) << " --rdzv_id pipestudio-"
          << masterPort << " --no_python " << command(first) << "\n";
    }
  } else {
    std::string nodelist;
    for (const auto& h : hosts) nodelist += (nodelist.empty() ? "" : ",") + h.host;
    const std::string quotedNodes = shellQuoteWord(nodelist);
    out << "# Slurm: ranks from SLURM_PROCID / SLURM_NTASKS, the store on the first node's port "
        << masterPort << "\n";
    if (uniform) {
      out << "# as a batch job (sbatch job.sh):\n";
      out << "#!/bin/sh\n";
      out << "#SBATCH --job-name=pipestudio\n";
      out << "#SBATCH --nodes=" << nodes << "\n";
      out << "#SBATCH --ntasks-per-node=" << first.ranks << "\n";
      out << "#SBATCH --nodelist=" << nodelist << "\n";
      out << "export MASTER_PORT=" << masterPort << "\n";
      out << "srun --kill-on-bad-exit=1 " << command(first) << "\n";
      out << "# or at once, from a login node:\n";
      out << "MASTER_PORT=" << masterPort << " srun --nodes=" << nodes << " --ntasks-per-node=" << first.ranks
          << " --nodelist=" << quotedNodes << " --kill-on-bad-exit=1 " << command(first) << "\n";
    } else {
      // Different ranks per host: srun places tasks by a host file (one line per task).
      out << "# ranks differ between hosts: one line per task in a Slurm host file\n";
      // printf of quoted words, not a heredoc: no host name can end it early.
      out << "printf '%s\\n'";
      for (const auto& h : hosts)
        for (int r = 0; r < h.ranks; ++r) out << " " << shellQuoteWord(h.host);
      out << " > pipestudio.hosts\n";
      out << "MASTER_PORT=" << masterPort << " SLURM_HOSTFILE=pipestudio.hosts srun --nodes=" << nodes
          << " --ntasks=" << clusterWorldSize(hosts) << " --distribution=arbitrary --nodelist=" << quotedNodes
          << " --kill-on-bad-exit=1 " << command(first) << "\n";
    }
  }
  return out.str();
}

std::string printLocalLaunchCommands(LaunchKind kind, int nproc, const std::vector<std::string>& cliArgs,
                                     int masterPort, const std::string& cli) {
  std::ostringstream out;
  const std::string command = runCommand(cli, cliArgs);
  if (kind == LaunchKind::Torchrun) {
    out << "# torchrun, " << nproc << " ranks on this host (static rendezvous, the store on port "
        << masterPort << "):\n";
    out << "torchrun --nnodes 1 --nproc_per_node " << nproc << " --master_addr 127.0.0.1 --master_port "
        << masterPort << " --no_python " << command << "\n";
  } else {
    out << "# Slurm, " << nproc
        << " tasks on one node (ranks from SLURM_PROCID / SLURM_NTASKS, the store on port " << masterPort
        << "):\n";
    out << "MASTER_PORT=" << masterPort << " srun --nodes=1 --ntasks=" << nproc << " --kill-on-bad-exit=1 "
        << command << "\n";
  }
  return out.str();
}

std::vector<std::string> sshArguments(const ClusterHost& h, const SshCall& call) {
  const int timeout = std::max(1, static_cast<int>(call.connectTimeoutSeconds));
  std::vector<std::string> a{"-o", "BatchMode=yes", "-o", "ConnectTimeout=" + std::to_string(timeout)};
  if (call.keepAlive) a.insert(a.end(), {"-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=2"});
  a.insert(a.end(), {"-p", std::to_string(h.port)});
  if (!h.key.empty()) a.insert(a.end(), {"-i", h.key, "-o", "IdentitiesOnly=yes"});
  for (const std::string& o : h.sshOptions) {
    const size_t b = o.find_first_not_of(" \t");
    if (b == std::string::npos) continue;
    const size_t e = o.find_last_not_of(" \t");
    a.insert(a.end(), {"-o", o.substr(b, e - b + 1)});
  }
  a.insert(a.end(), {"--", h.destination()});
  return a;
}

namespace {

bool containsNoCase(std::string_view text, std::string_view what) {
  auto lower = [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); };
  return std::search(text.begin(), text.end(), what.begin(), what.end(),
                     [&](char a, char b) { return lower(a) == lower(b); }) != text.end();
}

bool saysAny(std::string_view text, std::initializer_list<std::string_view> phrases) {
  return std::any_of(phrases.begin(), phrases.end(),
                     [&](std::string_view p) { return containsNoCase(text, p); });
}

}  // namespace

std::string describeSshFailure(const ClusterHost& h, int exitCode, std::string_view stderrText) {
  if (exitCode != 255) return {};
  const std::string said(lastLine(stderrText));
  const std::string port = std::to_string(h.port);
  auto with = [&](std::string headline, std::string_view remedy) {
    if (!said.empty()) headline += ": " + said;
    if (!remedy.empty()) headline += " (" + std::string(remedy) + ")";
    return headline;
  };
  if (saysAny(stderrText,
              {"Permission denied", "Too many authentication failures", "no supported authentication"}))
    return with("authentication refused by " + h.destination() + " on port " + port,
                "check the user and the identity file");
  if (saysAny(stderrText, {"Host key verification failed", "IDENTIFICATION HAS CHANGED"}))
    return with(
        "the host key of " + h.host + " is unknown or changed",
        "connect once with ssh to check it, or add StrictHostKeyChecking=accept-new to the host's ssh "
        "options");
  if (saysAny(stderrText, {"Connection refused", "timed out", "No route to host", "Could not resolve",
                           "Name or service not known", "Network is unreachable", "Connection closed",
                           "Connection reset"}))
    return with("cannot reach " + h.host + " on port " + port, {});
  return with("the connection to " + h.destination() + " on port " + port + " failed",
              said.empty() ? "ssh exit status 255" : "");
}

}  // namespace ps::core
