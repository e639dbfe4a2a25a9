#pragma once
// Transports between devices (private to the engine). Stages on devices of this process hand
// tensors over through the in-process mailbox; devices of other processes are reached through
// a RemoteTransport (c10d ProcessGroupGloo over a TCPStore; NCCL when CUDA is built in,
// nccl_transport.cpp, declared in cuda_device.h).
#include <ATen/ATen.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>

#include "common/error_text.h"
#include "pipestudio/core/model/result.h"
#include "pipestudio/engine/engine.h"

namespace ps::engine::detail {

// Activation for stage `stage` (kind 0) or gradient for stage `stage` (kind 1), micro-batch m.
struct MessageKey {
  int kind = 0;
  int stage = 0;
  int microbatch = 0;
  friend bool operator<(const MessageKey& a, const MessageKey& b) {
    return std::tie(a.kind, a.stage, a.microbatch) < std::tie(b.kind, b.stage, b.microbatch);
  }
  int tag() const { return (kind * 4096 + stage) * 65536 + microbatch; }
};

struct Envelope {
  at::Tensor tensor;
  int srcDevice = 0;
  core::Op producer;
  double sentMs = 0;            // sender's clock, ms since the iteration origin
  std::shared_ptr<void> ready;  // GPU: event on the producer's stream the consumer waits for
};

// Thrown by waits that give up because the run is being stopped (another worker failed, or
// the user cancelled): the waiting worker reports nothing of its own.
struct Aborted {};

// Thrown by remote waits whose connection to a peer closed while no rank had published an
// error: the peer process ended (killed, crashed) without reporting. `rank` is the peer the
// wait was for, -1 when the operation involves several peers (a barrier).
struct PeerLost : std::runtime_error {
  PeerLost(int rank_, const std::string& what) : std::runtime_error(what), rank(rank_) {}
  int rank;
};

// Thrown by a remote barrier or the wait for sends when the timeout ran out.
struct WaitTimedOut : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Mailbox {
 public:
  void put(const MessageKey& key, Envelope e);
  // Waits until the message is there. Returns nullopt on timeout; throws Aborted when
  // stop() was called or *cancel becomes true.
  std::optional<Envelope> take(const MessageKey& key, std::chrono::steady_clock::time_point deadline,
                               const std::atomic<bool>& stop, const std::atomic<bool>* cancel);
  void wakeAll();
  void clear();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<MessageKey, Envelope> box_;
};

class RemoteTransport {
 public:
  virtual ~RemoteTransport() = default;
  virtual int rank() const = 0;
  virtual int worldSize() const = 0;
  virtual void send(const MessageKey& key, const at::Tensor& t, int dstRank) = 0;
  // Returns nullopt on timeout; throws Aborted when the peer is gone because another rank
  // published an abort; throws PeerLost when the peer is gone without a word.
  virtual std::optional<at::Tensor> recv(const MessageKey& key, int srcRank, at::IntArrayRef shape,
                                         const at::TensorOptions& options, std::chrono::milliseconds timeout,
                                         const std::atomic<bool>& stop, const std::atomic<bool>* cancel) = 0;
  virtual void flush(std::chrono::milliseconds timeout) = 0;  // waits for every send
  virtual void barrier(std::chrono::milliseconds timeout, const std::atomic<bool>* cancel) = 0;
  virtual void setKey(const std::string& key, const std::string& value) = 0;
  virtual std::optional<std::string> getKey(const std::string& key, std::chrono::milliseconds timeout) = 0;
  virtual bool hasKey(const std::string& key) = 0;
  // Drops the process group (closing its connections, so blocked peers fail fast); the
  // store stays for the final reports.
  virtual void close() = 0;
};

// d.connectTimeoutSeconds bounds the rendezvous; timeoutSeconds each wait afterwards.
core::Result<std::unique_ptr<RemoteTransport>> connectGloo(const DistributedOptions& d,
                                                           double timeoutSeconds);

}  // namespace ps::engine::detail
