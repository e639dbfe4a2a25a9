// The post-mortem of a hung run (hang_report.h).
#include "pipestudio/core/model/hang_report.h"

#include <cstdio>

#include "pipestudio/core/model/enum_names.h"

namespace ps::core {

namespace {

constexpr EnumName<StuckDevice::State> kStuckStateNames[] = {
    {StuckDevice::State::Silent, "silent"},
    {StuckDevice::State::Waiting, "waiting"},
    {StuckDevice::State::Running, "running"},
    {StuckDevice::State::Finished, "finished"},
};

constexpr std::string_view kCycleLead = "wait cycle: ";
constexpr std::string_view kChainLead = "wait chain: ";
constexpr std::string_view kStuckNoteCode = "engine.stuck";

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", s);
  return buf;
}

std::string who(std::string_view word, int device) {
  return std::string(word) + " " + std::to_string(device);
}

}  // namespace

PS_ENUM_NAME_FUNCTION(StuckDevice::State, kStuckStateNames, stuckStateName);
PS_ENUM_FROM_NAME_FUNCTION(StuckDevice::State, kStuckStateNames, stuckStateFromName);

std::string describeStuckDevice(const StuckDevice& d, std::string_view word) {
  std::string line = who(word, d.device) + ": ";
  switch (d.state) {
    case StuckDevice::State::Waiting:
      line += "waits in " + (d.action.empty() ? std::string("?") : d.action) + " for " +
              (d.waitsFor.empty() ? std::string("data") : d.waitsFor) + " on " + who(word, d.waitsOnDevice);
      if (d.seconds >= 0) line += " (" + seconds(d.seconds) + ")";
      if (!d.note.empty()) line += ": " + d.note;
      break;
    case StuckDevice::State::Running:
      line += d.action.empty() ? std::string("running, between steps") : "running " + d.action;
      if (!d.note.empty()) line += ": " + d.note;
      break;
    case StuckDevice::State::Finished:
      line += "finished its iteration";
      break;
    case StuckDevice::State::Silent:
      line += "silent" + (d.note.empty() ? std::string() : ": " + d.note);
      if (!d.action.empty()) line += ", last seen in " + d.action;
      break;
  }
  return line;
}

HangReport describeHang(const std::vector<StuckDevice>& states, int from, std::string_view word) {
  HangReport r;
  auto at = [&](int d) -> StuckDevice {
    if (d >= 0 && static_cast<size_t>(d) < states.size() && states[static_cast<size_t>(d)].device >= 0)
      return states[static_cast<size_t>(d)];
    StuckDevice s;
    s.device = d;
    return s;
  };
  std::vector<int> seenAt(states.size(), -1);
  int d = from;
  while (d >= 0 && static_cast<size_t>(d) < states.size() && seenAt[static_cast<size_t>(d)] < 0) {
    seenAt[static_cast<size_t>(d)] = static_cast<int>(r.path.size());
    r.path.push_back(d);
    const StuckDevice s = at(d);
    if (s.step >= 0) r.stuck.push_back(OpRef{d, s.step});
    if (s.state != StuckDevice::State::Waiting) break;
    d = s.waitsOnDevice;
  }
  if (d >= 0 && static_cast<size_t>(d) < states.size() && seenAt[static_cast<size_t>(d)] >= 0 &&
      at(r.path.back()).state == StuckDevice::State::Waiting) {
    r.cycle = true;
    r.cycleFrom = seenAt[static_cast<size_t>(d)];
  }
  // The sentence: each waiting device in turn, then how it ends.
  std::string text;
  for (size_t k = 0; k < r.path.size(); ++k) {
    const StuckDevice s = at(r.path[k]);
    const StuckDevice* prev = k > 0 ? &states[static_cast<size_t>(r.path[k - 1])] : nullptr;
    // The previous device waits for an action this one has already run: its output was lost.
    const bool ran = prev && prev->waitsForStep >= 0 && s.step > prev->waitsForStep;
    if (s.state != StuckDevice::State::Waiting) {
      if (k == 0) text = who(word, s.device);
      const std::string lead = k == 0 ? " "
                               : ran  ? ", which ran " + prev->waitsFor + " (what it sent never arrived) and "
                                      : ", which ";
      switch (s.state) {
        case StuckDevice::State::Running:
          text += lead + "is" + (s.action.empty() ? std::string(" running") : " running " + s.action) +
                  " and waits for nothing";
          break;
        case StuckDevice::State::Finished:
          text += lead + "has finished its iteration";
          break;
        default:
          text += lead + "is silent";
          if (!s.note.empty()) text += " (" + s.note + ")";
          if (!s.action.empty()) text += ", last seen in " + s.action;
          break;
      }
      break;
    }
    if (k == 0)
      text = who(word, s.device) + " waits in " + s.action;
    else if (ran)
      text += ", which ran " + prev->waitsFor + " (what it sent never arrived) and waits in " + s.action;
    else
      text += ", which waits in " + s.action;
    text += " for " + (s.waitsFor.empty() ? std::string("data") : s.waitsFor) + " on " +
            who(word, s.waitsOnDevice);
  }
  if (r.cycle) {
    const StuckDevice first = at(r.path[static_cast<size_t>(r.cycleFrom)]);
    const StuckDevice last = at(r.path.back());
    if (last.waitsFor == first.action || (last.waitsForStep >= 0 && last.waitsForStep == first.step))
      text += ", closing the cycle";
    else if (last.waitsForStep >= 0 && first.step > last.waitsForStep)
      text += ", which " + who(word, first.device) + " ran (what it sent never arrived), closing the cycle";
    else
      text += ", which " + who(word, first.device) + " reaches only after " + first.action +
              ", closing the cycle";
  }
  r.text = text;
  return r;
}

std::string hangClause(const HangReport& h) {
  if (h.text.empty()) return {};
  return std::string(h.cycle ? kCycleLead : kChainLead) + h.text;
}

Diagnostic stuckNote(const StuckDevice& d, std::string_view word) {
  Diagnostic n;
  n.severity = Severity::Note;
  n.code = std::string(kStuckNoteCode);
  n.message = describeStuckDevice(d, word);
  if (d.device >= 0 && d.step >= 0) n.related.push_back(OpRef{d.device, d.step});
  return n;
}

std::optional<RunHang> findHang(const Diagnostics& diagnostics) {
  // The engine's error carries the stuck steps; a summary that repeats its message (the GUI's
  // "run failed on HOST: ...", put first) does not: prefer the one with steps.
  std::optional<RunHang> found;
  for (const Diagnostic& d : diagnostics) {
    if (d.severity != Severity::Error || (found && d.related.empty())) continue;
    for (const std::string_view lead : {kCycleLead, kChainLead}) {
      // At the start of the message or after "; " (the clause follows the timeout's own words).
      size_t at = d.message.rfind(std::string("; ") + std::string(lead));
      if (at != std::string::npos)
        at += 2;
      else if (d.message.starts_with(lead))
        at = 0;
      else
        continue;
      RunHang h;
      h.cycle = lead == kCycleLead;
      h.clause = d.message.substr(at);
      h.text = h.clause.substr(lead.size());
      h.cause = at >= 2 ? d.message.substr(0, at - 2) : std::string();
      h.code = d.code;
      h.stuck = d.related;
      for (const OpRef& r : h.stuck) {
        std::string note;
        for (const Diagnostic& n : diagnostics)
          if (n.code == kStuckNoteCode && !n.related.empty() && n.related.front().device == r.device)
            note = n.message;
        h.notes.push_back(std::move(note));
      }
      found = std::move(h);
      break;
    }
    if (found && !found->stuck.empty()) break;
  }
  return found;
}

}  // namespace ps::core
