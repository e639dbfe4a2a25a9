#pragma once
// GPU side of the executor (private; no CUDA types here, so executor.cpp compiles the same in
// every build). Implemented in cuda_device.cpp and nccl_transport.cpp, which build only with
// PIPESTUDIO_HAVE_CUDA; callers guard their use with the same macro.
#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "pipestudio/core/model/result.h"
#include "pipestudio/engine/engine.h"
#include "transport/transport.h"

namespace ps::engine::detail {

// GPUs visible to the CUDA runtime (0 when there is no driver or device).
int cudaDeviceCount();

// One pipeline device on a GPU: its own compute stream, a side stream for OFFLOAD/RELOAD and
// a second stream for the other op of an overlapped pair. Several pipeline devices may share
// one GPU (threads of one process): each still gets its own streams.
class CudaDevice {
 public:
  virtual ~CudaDevice() = default;
  virtual int gpu() const = 0;
  // Makes the calling thread use this GPU with the compute stream as its current stream.
  virtual void bindThread() = 0;
  // Drops the previous iteration's events and records the origin on the compute stream.
  virtual void beginIteration() = 0;
  // Records an event on the current stream (compute, or overlap inside a pair); returns its index.
  virtual int recordEvent() = 0;
  // Waits for every stream of this device, then gives each event's time in ms after the origin.
  virtual std::vector<double> resolveEvents() = 0;
  virtual void synchronize() = 0;
  // Bytes allocated on this GPU by the caching allocator now (the whole GPU: devices that
  // share a GPU see the same figure).
  virtual std::int64_t allocatedBytes() const = 0;
  // OFFLOAD: copies t to pinned host memory on the side stream after the work queued so far;
  // t's device memory returns to the allocator once the copy is done.
  virtual at::Tensor offload(const at::Tensor& t) = 0;
  // RELOAD: copies a host tensor back on the side stream; the current stream waits for it.
  virtual at::Tensor reload(const at::Tensor& host) = 0;
  // The second op of an overlapped pair runs on the overlap stream, after what the compute
  // stream had queued before the pair; endOverlap makes the compute stream wait for it.
  virtual void beginOverlap() = 0;
  virtual void endOverlap() = 0;
  // Hand-over between pipeline devices of one process: an event on the producer's current
  // stream, and the consumer's current stream waiting for it (t stays allocated until then).
  virtual std::shared_ptr<void> markReady() = 0;
  virtual void waitReady(const std::shared_ptr<void>& ready, const at::Tensor& t) = 0;
};

// Throws std::runtime_error naming the GPU when it cannot be used.
std::unique_ptr<CudaDevice> makeCudaDevice(int gpu);

// Tensors between processes over NCCL (ncclSend/ncclRecv), one two-rank communicator per
// directed pair of ranks that exchange tensors (pairs: (src, dst) ranks), bootstrapped with
// ncclGetUniqueId through the TCPStore of a Gloo control transport, which also serves the
// keys, barriers and aborts.
core::Result<std::unique_ptr<RemoteTransport>> connectNccl(const DistributedOptions& d, double timeoutSeconds,
                                                           int gpu,
                                                           const std::vector<std::pair<int, int>>& pairs);

}  // namespace ps::engine::detail
