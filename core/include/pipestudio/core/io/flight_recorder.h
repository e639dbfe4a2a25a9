#pragma once
// PyTorch's flight-recorder dumps: the ring buffer of collective and point-to-point operations each
// rank's process groups recorded (torch/csrc/distributed/c10d/FlightRecorder), as the rank writes
// it when its watchdog times out (TORCH_FR_DUMP_TEMP_FILE<rank>, a pickle: what
// torch.distributed.flight_recorder's fr_trace loads) or as
// torch._C._distributed_c10d._dump_fr_trace[_json]() returns it. Format version "2.x" (PyTorch 2.4
// and later); the fields PipeStudio reads are checked, others are left alone.
//
// Which operations are recorded depends on the backend: NCCL records every collective and every
// send and receive ("nccl:send 0->1", "nccl:recv 1<-0": group ranks; the ops of one
// batch_isend_irecv share a p2p_seq_id and end with a "nccl:coalesced" entry that carries their
// state); Gloo (checked on PyTorch 2.11) records collectives only, no point-to-point op.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipestudio/core/model/result.h"

namespace ps::core {

struct FlightRecorderEntry {
  std::int64_t recordId = -1;      // record_id: the entry's index in the rank's recorder, from 0
  std::string pgName, pgDesc;      // process_group: (name, description)
  std::int64_t collectiveSeq = 0;  // collective_seq_id
  std::int64_t p2pSeq = 0;         // p2p_seq_id (one per point-to-point op or batch)
  std::string profilingName;       // "nccl:send 0->1", "gloo:all_reduce", "nccl:coalesced"
  std::string backend;             // before the colon: "nccl", "gloo", "xccl"
  std::string op;                  // after it, up to a space: "send", "recv", "coalesced", "all_reduce"
  int self = -1, peer = -1;        // send/recv: this rank and the other, as group ranks
  bool isP2p = false;              // is_p2p
  std::string state;               // "scheduled", "started", "completed"
  bool retired = false;            // the watchdog saw it complete and retired it
  std::int64_t createdNs = 0;      // time_created_ns
  std::int64_t timeoutMs = 0;      // timeout_ms (0: not recorded)
  bool isSend() const { return op == "send"; }
  bool isRecv() const { return op == "recv"; }
  bool completed() const { return retired || state == "completed"; }
};

struct FlightRecorderGroup {
  std::string name, desc;
  std::vector<int> ranks;  // global ranks, in group-rank order ("ranks": "[0, 1]")
};

struct FlightRecorderDump {
  std::string source;   // the file read
  int rank = -1;        // the global rank: the number the file name ends in
  std::string version;  // "2.10"
  std::vector<FlightRecorderGroup> groups;
  std::vector<FlightRecorderEntry> entries;  // in recording order
  const FlightRecorderGroup* group(std::string_view name) const;
};

// One dump from its bytes: a pickle (what the watchdog writes) or JSON (_dump_fr_trace_json),
// told apart by the first byte. `source` names it in errors ("rank0: entry 12: ...").
Result<FlightRecorderDump> readFlightRecorderDump(std::string_view bytes, const std::string& source,
                                                  int rank);

// The global rank a dump's file name ends in ("nccl_trace_rank_3" -> 3), as fr_trace infers it.
std::optional<int> flightRecorderRankOf(std::string_view fileName);

// Dumps from files and folders: a folder contributes its regular files whose names end in a rank
// and share one prefix (fr_trace's rule: other prefixes are an error naming them, unless `prefix`
// picks one). Two dumps of one rank, or a file that is not a dump, are errors naming the file.
// Sorted by rank.
Result<std::vector<FlightRecorderDump>> readFlightRecorderDumps(const std::vector<std::string>& paths,
                                                                const std::string& prefix = {});

}  // namespace ps::core
