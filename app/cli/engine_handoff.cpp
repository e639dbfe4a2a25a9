// `run` and `profile` in pipestudio-cli: find pipestudio-engine and exec it (engine_handoff.h).
#include "engine_handoff.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "common/command.h"
#include "common/engine_commands.h"
#include "common/install_paths.h"
#include "pipestudio/core/io/run_events.h"

#ifndef PIPESTUDIO_ENGINE_RELDIR
#define PIPESTUDIO_ENGINE_RELDIR "../libexec/pipestudio"
#endif
#ifndef PIPESTUDIO_ENGINE_PACKAGE
#define PIPESTUDIO_ENGINE_PACKAGE "pipestudio-engine"
#endif

namespace ps::cli {
namespace {

namespace fs = std::filesystem;

// "" when `path` is an executable regular file, else what is wrong with it.
std::string checkExecutable(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "not found";
  if (!S_ISREG(st.st_mode)) return "not a file";
  if (::access(path.c_str(), X_OK) != 0) return "not executable";
  return "";
}

std::string joinPaths(const std::vector<std::string>& paths) {
  std::string s;
  for (const auto& p : paths) s += (s.empty() ? "" : ", ") + p;
  return s;
}

bool readAt(int fd, void* buf, size_t n, off_t at) {
  return ::pread(fd, buf, n, at) == static_cast<ssize_t>(n);
}

// The engine's stamp from its ELF section, without running it; nullopt when the file is no
// 64-bit ELF or has no stamp (a wrapper script, say).
std::optional<std::string> readStampSection(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  Elf64_Ehdr eh{};
  if (!readAt(fd, &eh, sizeof eh, 0) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 ||
      eh.e_shnum > 4096 || eh.e_shstrndx >= eh.e_shnum)
    return std::nullopt;
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  if (!readAt(fd, sh.data(), sh.size() * sizeof(Elf64_Shdr), static_cast<off_t>(eh.e_shoff)))
    return std::nullopt;
  const Elf64_Shdr& names = sh[eh.e_shstrndx];
  if (names.sh_size == 0 || names.sh_size > (1u << 20)) return std::nullopt;
  std::string strtab(names.sh_size, '\0');
  if (!readAt(fd, strtab.data(), strtab.size(), static_cast<off_t>(names.sh_offset))) return std::nullopt;
  for (const Elf64_Shdr& s : sh) {
    if (s.sh_name >= strtab.size() || std::strcmp(strtab.c_str() + s.sh_name, kEngineStampSection) != 0)
      continue;
    if (s.sh_type == SHT_NOBITS || s.sh_size == 0 || s.sh_size > 4096) return std::nullopt;
    std::string text(s.sh_size, '\0');
    if (!readAt(fd, text.data(), text.size(), static_cast<off_t>(s.sh_offset))) return std::nullopt;
    text.resize(std::strlen(text.c_str()));
    return text;
  }
  return std::nullopt;
}

std::string shellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

bool eventsRequested(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--events=jsonl") return true;
    if (args[i] == "--events" && i + 1 < args.size() && args[i + 1] == "jsonl") return true;
  }
  return false;
}

int refuse(const std::string& command, const std::vector<std::string>& args, const std::string& code,
           const std::string& message) {
  std::cerr << "pipestudio-cli " << command << ": " << message << "\n";
  // A reader of the event stream (the GUI, a script over ssh) sees the reason there too.
  if (eventsRequested(args)) std::cout << ps::core::run_event::refused(code, message) << std::endl;
  return kExitEngine;
}

std::string notFoundMessage(const EngineLocation& loc) {
  std::string m = "cannot find pipestudio-engine, which runs `run` and `profile` (" + loc.problem +
                  "); looked at: " + joinPaths(loc.lookedAt);
#ifdef PIPESTUDIO_ENGINE_IN_BUILD
  // Packaged apart (it brings libtorch): a GUI or CLI install may well lack it.
  return m + "; install the " PIPESTUDIO_ENGINE_PACKAGE " package, or set PIPESTUDIO_ENGINE to its path";
#else
  return m +
         "; this build has no engine (libtorch was not found when it was configured); set "
         "PIPESTUDIO_ENGINE to its path";
#endif
}

std::string mismatchMessage(const std::string& path, const EngineVersion& v) {
  return "version mismatch: the engine at " + path + " is " + v.program + " (run-event protocol " +
         std::to_string(v.protocol) +
         "), this pipestudio-cli is " PIPESTUDIO_VERSION " (run-event protocol " +
         std::to_string(ps::core::kRunEventProtocolVersion) +
         "); install matching pipestudio-cli and pipestudio-engine";
}

}  // namespace

EngineLocation locateEngine() {
  EngineLocation loc;
  if (const char* env = std::getenv("PIPESTUDIO_ENGINE"); env && *env) {
    loc.lookedAt.push_back(std::string(env) + " (PIPESTUDIO_ENGINE)");
    std::string why = checkExecutable(env);
    if (why.empty())
      loc.path = env;
    else
      loc.problem = "PIPESTUDIO_ENGINE: " + why;
    return loc;
  }
  const fs::path dir = selfDirectory();
  const std::vector<fs::path> candidates{dir / kEngineName,
                                         (dir / PIPESTUDIO_ENGINE_RELDIR / kEngineName).lexically_normal()};
  std::string firstProblem;
  for (const auto& c : candidates) {
    loc.lookedAt.push_back(c.string());
    std::string why = checkExecutable(c.string());
    if (why.empty()) {
      loc.path = c.string();
      return loc;
    }
    if (why != "not found" && firstProblem.empty()) firstProblem = c.string() + " is " + why;
  }
  loc.problem = firstProblem.empty() ? "not found" : firstProblem;
  return loc;
}

std::optional<EngineVersion> engineVersion(const std::string& path, std::string& error) {
  if (auto stamp = readStampSection(path)) {
    if (auto v = parseEngineStamp(*stamp)) return v;
  }
  // No stamp (not an ELF file of ours): ask it.
  FILE* p = ::popen((shellQuote(path) + " --version 2>/dev/null").c_str(), "r");
  if (!p) {
    error = "cannot run " + path + " --version";
    return std::nullopt;
  }
  std::string out;
  char buf[512];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0 && out.size() < 65536) out.append(buf, n);
  const int status = ::pclose(p);
  auto v = parseEngineStamp(out);
  if (!v) {
    error =
        "'" + path + " --version' (exit status " +
        std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
        ") did not print a pipestudio-engine version" +
        (out.empty() ? std::string() : " (printed '" + out.substr(0, out.find('\n')).substr(0, 120) + "')");
    return std::nullopt;
  }
  return v;
}

int handOffToEngine(const std::string& command, const std::vector<std::string>& args) {
  const EngineLocation loc = locateEngine();
  if (loc.path.empty()) return refuse(command, args, "cli.engine_not_found", notFoundMessage(loc));
  // A stamped engine of another protocol is refused here; any other engine checks the
  // protocol itself from the environment (engine main.cpp).
  if (auto stamp = readStampSection(loc.path))
    if (auto v = parseEngineStamp(*stamp); v && v->protocol != ps::core::kRunEventProtocolVersion)
      return refuse(command, args, "cli.engine_mismatch", mismatchMessage(loc.path, *v));
  ::setenv(kCliProtocolEnv, std::to_string(ps::core::kRunEventProtocolVersion).c_str(), 1);
  std::vector<std::string> argvStrings{loc.path, command};
  argvStrings.insert(argvStrings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  argv.reserve(argvStrings.size() + 1);
  for (auto& s : argvStrings) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::cout.flush();
  ::execv(loc.path.c_str(), argv.data());
  return refuse(command, args, "cli.engine_not_started",
                "cannot start pipestudio-engine at " + loc.path + ": " + std::strerror(errno));
}

int printVersion() {
  std::cout << ps::core::cliVersionLine(PIPESTUDIO_VERSION) << "\n";
  const EngineLocation loc = locateEngine();
  if (loc.path.empty()) {
    // An engine that is simply not there is a state, not an error (its own package, optional);
    // one that PIPESTUDIO_ENGINE names and that cannot be used is an error.
    if (const char* env = std::getenv("PIPESTUDIO_ENGINE"); !env || !*env) {
#ifdef PIPESTUDIO_ENGINE_IN_BUILD
      std::cout << "pipestudio-engine: not installed (run and profile need the " PIPESTUDIO_ENGINE_PACKAGE
                   " package)\n";
#else
      std::cout << "pipestudio-engine: not part of this build (run and profile are unavailable)\n";
#endif
      return kExitOk;
    }
    std::cerr << "pipestudio-cli: " << notFoundMessage(loc) << "\n";
    return kExitEngine;
  }
  std::string error;
  auto v = engineVersion(loc.path, error);
  if (!v) {
    std::cerr << "pipestudio-cli: " << error << "\n";
    return kExitEngine;
  }
  std::cout << kEngineName << " " << v->program << " (run-event protocol " << v->protocol << ") at "
            << loc.path << "\n";
  if (v->protocol != ps::core::kRunEventProtocolVersion) {
    std::cerr << "pipestudio-cli: " << mismatchMessage(loc.path, *v) << "\n";
    return kExitEngine;
  }
  return kExitOk;
}

namespace {
// Each engine command, handed to the engine with its arguments.
[[maybe_unused]] const bool kRegistered = [] {
  for (const auto& c : kEngineCommands) {
    const std::string name(c.name);
    registry().push_back({name, std::string(c.summary) + ", in pipestudio-engine", "",
                          [name](const std::vector<std::string>& a) { return handOffToEngine(name, a); }});
  }
  return true;
}();
}  // namespace

}  // namespace ps::cli
