// One-line error texts: c10 errors carry a backtrace and "Exception raised from" frames that
// mean nothing to a user; every message the engine reports goes through errorText.
#include "common/error_text.h"

#include <c10/util/Exception.h>
#include <c10/util/Logging.h>
#include <torch/version.h>

#include <cstdio>
#include <iostream>
#include <mutex>
#include <set>
#include <string>

#include "pipestudio/engine/engine.h"

namespace ps::engine {

std::string formatSeconds(double seconds) {
  char buf[64];
  if (seconds >= 1 || seconds == 0)
    std::snprintf(buf, sizeof buf, "%.2f s", seconds);
  else
    std::snprintf(buf, sizeof buf, "%.3g s", seconds);
  return buf;
}

namespace detail {

std::string errorText(const std::exception& e) {
  const auto* c = dynamic_cast<const c10::Error*>(&e);
  std::string s = c ? c->what_without_backtrace() : e.what();
  for (const char* marker : {"Exception raised from", "frame #0"}) {
    const auto cut = s.find(marker);
    if (cut != std::string::npos) s.resize(cut);
  }
  std::string out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find('\n', start);
    if (end == std::string::npos) end = s.size();
    std::string line = s.substr(start, end - start);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r' || line.back() == '\t'))
      line.pop_back();
    size_t lead = line.find_first_not_of(" \t");
    if (lead != std::string::npos) {
      if (!out.empty()) out += "; ";
      out += line.substr(lead);
    }
    start = end + 1;
  }
  return out.empty() ? std::string("unknown error") : out;
}

namespace {
// c10 warnings (TORCH_WARN) as one line each, every distinct one once: a run of many
// iterations must not repeat the same advice on every op.
class OnceWarningHandler : public c10::WarningHandler {
 public:
#if TORCH_VERSION_MAJOR >= 2
  void process(const c10::Warning& warning) override {
    print(warning.msg());
  }
#else
  void process(const c10::SourceLocation&, const std::string& msg, const bool) override {
    print(msg);
  }
#endif

 private:
  void print(const std::string& msg) {
    std::lock_guard lock(mu_);
    if (!seen_.insert(msg).second) return;
    std::string line = msg;
    for (char& c : line)
      if (c == '\n') c = ' ';
    std::cerr << "pipestudio: torch warning: " << line << "\n";
  }
  std::mutex mu_;
  std::set<std::string> seen_;
};
}  // namespace

void quietTorchLogging() {
  static OnceWarningHandler handler;
  // libtorch 2.x keeps the handler per thread (c10::WarningUtils); 1.13 has one for all.
#if TORCH_VERSION_MAJOR >= 2
  thread_local bool installed = false;
  if (!installed) {
    c10::WarningUtils::set_warning_handler(&handler);
    installed = true;
  }
#endif
  static std::once_flag once;
  std::call_once(once, [] {
#if TORCH_VERSION_MAJOR < 2
    c10::Warning::set_warning_handler(&handler);
#endif
    // The libraries' own log lines (Gloo, c10d: "[c10d] The client socket has timed out ...")
    // would repeat, in another form, what the engine reports once in its own words with the
    // rank, op and place: every failure they log reaches the user as the engine's message.
#ifdef C10_USE_GLOG
    FLAGS_minloglevel = 3;  // FATAL only
#else
    FLAGS_caffe2_log_level = 3;
#endif
  });
}

}  // namespace detail
}  // namespace ps::engine
