#pragma once
// Local multi-process launch: starts N ranks of the same program with torchrun-style
// environment variables and waits for them. No torch here.
#include <string>
#include <vector>

#include "pipestudio/engine/engine.h"

namespace ps::engine {

// A free TCP port on 127.0.0.1 (0 when none could be found).
int pickFreePort();

// torchrun-style variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) when
// RANK and WORLD_SIZE are set; nullopt otherwise. Bad values are errors.
core::Result<std::optional<DistributedOptions>> distributedFromEnvironment();

// Starts `nproc` copies of `program` (argv[0] is replaced by the program) with RANK 0..N-1 and
// the other variables set, ranks above 0 with stdout sent to /dev/null. SIGINT and SIGTERM
// received meanwhile are forwarded. When one rank fails, the others get `graceSeconds` to end
// on their own and are then terminated. Returns rank 0's exit status, or the first failing
// rank's when rank 0 succeeded; -1 with `error` set when nothing could be started.
int launchLocalRanks(const std::string& program, const std::vector<std::string>& args, int nproc, double graceSeconds,
                     std::string& error);

}  // namespace ps::engine
