#pragma once
// A hung PyTorch run's flight-recorder dumps (io/flight_recorder.h) read against the plan it ran:
// each rank's point-to-point entries mapped to the plan's SEND/RECV actions, where each rank stands
// (hang_report.h's StuckDevice) and the wait cycle or chain across ranks.
//
// The mapping. A rank's pipeline rank is its rank in the process group the sends and receives
// went through (the numbers in "nccl:send 0->1"). The plan is the compute+comms order the ranks
// ran (a compute+comms CSV as given, or a compute order lowered as PyTorch lowers it), whose
// sends and receives each rank issues in order: the n-th op a rank issued of one kind and peer
// (send to rank 1, receive from rank 2) is the n-th SEND (RECV) with that peer in the rank's
// order, in step n / K for K of them per step. Counting needs the dump to hold the group's first
// point-to-point entry; once the ring buffer has overwritten it (a run past TORCH_FR_BUFFER_SIZE
// entries), p2p_seq_id places each op instead, as _PipelineScheduleRuntime issues each action as
// one batch, and every op is checked to be the kind and peer the plan has there.
//
// Where a rank stands: its first op not completed (the one its NCCL stream is stuck in; the
// ops of a batch take the state of the batch's "coalesced" entry), which waits for the peer's
// matching op (the k-th send from p to q meets the k-th receive q posts from p: comm_semantics.h's
// nccl). A rank whose ops all completed is running (computing, or stuck outside point-to-point
// ops); a rank with no dump is silent.
#include <string>
#include <vector>

#include "pipestudio/core/io/flight_recorder.h"
#include "pipestudio/core/model/hang_report.h"
#include "pipestudio/core/model/schedule.h"

namespace ps::core {

struct FlightRecorderReading {
  std::string group;               // the process group read: "name (description)"
  std::string backend;             // of its point-to-point entries: "nccl"
  std::vector<StuckDevice> ranks;  // indexed by pipeline rank
  int opsMapped = 0;               // point-to-point ops matched with the plan's actions
  int iteration = 0;               // the step (from 0) the first stuck op belongs to
  // From the rank whose stuck op was issued first (it has waited longest): the cycle or the chain.
  HangReport hang;
  bool hung() const { return !hang.text.empty(); }
};

struct FlightRecorderOptions {
  std::string group;  // a process group's name or description; empty: the one with sends and receives
};

// Errors: no point-to-point entry in any dump (with why: Gloo records none), a dump that does not
// follow the plan (an op of a kind or peer the plan has not there), ranks outside the plan.
Result<FlightRecorderReading> readHangFromFlightRecorder(const Schedule& plan,
                                                         const std::vector<FlightRecorderDump>& dumps,
                                                         const FlightRecorderOptions& options = {});

}  // namespace ps::core
