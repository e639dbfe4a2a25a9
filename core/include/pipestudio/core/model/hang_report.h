#pragma once
// The post-mortem of a run that hung: where each device (rank) stood when the run was stopped
// (the action it was in and what it waited for, as the engine's ranks report it in `stuck` run
// events) and the chain of waits from the device that timed out: a cycle ("rank 1 waits in 1F1
// for 0F1 on rank 0, which waits in 0B1 for 1B1 on rank 1, closing the cycle"), or a chain that
// ends at a rank that is not waiting (still computing, or silent: stopped, dead, unreachable).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipestudio/core/model/result.h"

namespace ps::core {

struct StuckDevice {
  enum class State : std::uint8_t {
    Waiting,   // blocked on data from another device
    Running,   // in an op, not waiting (or waiting on nothing it named)
    Finished,  // done with the iteration
    Silent,    // sent nothing: stopped, killed, hung outside the engine's waits
  };
  int device = -1;
  State state = State::Silent;
  int step = -1;           // its step in the device's order (-1: unknown, between iterations)
  std::string action;      // that step's action as PyTorch writes it ("1F1"); empty when unknown
  int waitsOnDevice = -1;  // Waiting: the device whose output it waits for
  std::string waitsFor;    // Waiting: that device's action ("0F1")
  int waitsForStep = -1;   // Waiting: its step there (-1 unknown): before that device's step, it
                           // ran and its output never arrived; after, that device is not there yet
  double seconds = 0;      // Waiting: how long it had waited (negative: not known)
  std::string note;        // Silent: why ("stopped (SIGSTOP)", "sent no report"); else optional,
                           // printed after the state
};

std::string_view stuckStateName(StuckDevice::State s);  // "waiting", "running", "finished", "silent"
std::optional<StuckDevice::State> stuckStateFromName(std::string_view name);

struct HangReport {
  std::vector<int> path;  // devices from the start, following each one's wait
  bool cycle = false;     // the path closes on itself (path.back() waits for path[cycleFrom])
  int cycleFrom = 0;
  std::string text;          // one sentence, as described at the top of this file
  std::vector<OpRef> stuck;  // each device's step on the path (the GUI marks them)
};

// Follows the waits from device `from`. `states` is indexed by device (a device missing from it
// or with device < 0 counts as silent). `word` names a device in the text: "rank" for one
// process per device, "device" for the devices of one process.
HangReport describeHang(const std::vector<StuckDevice>& states, int from, std::string_view word = "rank");

// The hang's clause in the run's error message (after "; "): "wait cycle: TEXT" or "wait chain:
// TEXT" (empty when the report has no text). The engine and the CLI write it; findHang reads it.
std::string hangClause(const HangReport& h);

// A hung run as its timeline keeps it (streamed as run events or stored in a session): the
// error whose message carries hangClause, its related ops the stuck steps. For the GUI, which
// has the run's timeline but not the ranks' states.
struct RunHang {
  bool cycle = false;
  std::string text;          // describeHang's sentence
  std::string clause;        // "wait cycle: " + text
  std::string cause;         // the message before the clause ("rank 1 timed out after 3 s in 1F0")
  std::string code;          // the error's code ("engine.timeout")
  std::vector<OpRef> stuck;  // the error's related ops: each device's stuck step
  // For each of `stuck`, that device's line (describeStuckDevice) from its stuckNote; empty
  // when the timeline has none (a session recorded before the notes).
  std::vector<std::string> notes;
};

// Where one device stood, as a note in the run's timeline (code "engine.stuck", message
// describeStuckDevice, related its step when known): the reader of the run events and the CLI
// add one per device beside the hang's error, so a stored run keeps them.
Diagnostic stuckNote(const StuckDevice& d, std::string_view word = "rank");
std::optional<RunHang> findHang(const Diagnostics& diagnostics);

// One line per device, for people: "rank 1: waits in 1F1 for 0F1 on rank 0 (5.00 s)",
// "rank 2: silent: stopped (SIGSTOP), last seen after 2F3".
std::string describeStuckDevice(const StuckDevice& d, std::string_view word = "rank");

}  // namespace ps::core
