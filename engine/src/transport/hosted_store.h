#pragma once
// The store a local launch hosts for its ranks, as torchrun's agent does: the store binds a
// free port itself (no window between picking a port and binding it, in which another run
// could take it), and the ranks join it as clients (TORCHELASTIC_USE_AGENT_STORE=True).
// No torch here: the launcher stays torch-free.
#include <memory>

#include "pipestudio/core/model/result.h"

namespace ps::engine::detail {

class HostedStore {
 public:
  virtual ~HostedStore() = default;
  virtual int port() const = 0;
};

// A TCPStore server on 127.0.0.1 on a port of its own choosing, for `worldSize` ranks.
core::Result<std::unique_ptr<HostedStore>> hostLocalStore(int worldSize);

// The variable (and value) by which torchrun tells its workers that its agent hosts the store.
inline constexpr const char* kAgentStoreVariable = "TORCHELASTIC_USE_AGENT_STORE";

}  // namespace ps::engine::detail
