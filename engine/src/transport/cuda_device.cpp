// CUDA streams, events, allocator statistics and pinned-memory offload for one pipeline
// device. Raw CUDA runtime calls where the torch API changed between 1.13 and 2.x (events);
// c10::cuda only for what both have (stream pool, current stream, allocator statistics).
#ifdef PIPESTUDIO_HAVE_CUDA
#include "transport/cuda_device.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace ps::engine::detail {

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA ") + what + ": " + cudaGetErrorString(e));
}

// An event that lives as long as the shared pointer (used for one hand-over).
std::shared_ptr<void> recordOn(cudaStream_t s) {
  cudaEvent_t e = nullptr;
  check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "event create");
  check(cudaEventRecord(e, s), "event record");
  return std::shared_ptr<void>(e, [](void* p) { cudaEventDestroy(static_cast<cudaEvent_t>(p)); });
}

void waitOn(cudaStream_t s, const std::shared_ptr<void>& ev) {
  check(cudaStreamWaitEvent(s, static_cast<cudaEvent_t>(ev.get()), 0), "stream wait");
}

class CudaDeviceImpl final : public CudaDevice {
 public:
  explicit CudaDeviceImpl(int gpu)
      : gpu_(gpu),
        index_(static_cast<c10::DeviceIndex>(gpu)),
        compute_(c10::cuda::getStreamFromPool(false, index_)),
        side_(c10::cuda::getStreamFromPool(false, index_)),
        overlap_(c10::cuda::getStreamFromPool(false, index_)) {
    check(cudaSetDevice(gpu_), "set device");
    check(cudaEventCreate(&origin_), "event create");
  }
  ~CudaDeviceImpl() override {
    cudaEventDestroy(origin_);
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }

  int gpu() const override { return gpu_; }

  void bindThread() override {
    check(cudaSetDevice(gpu_), "set device");
    c10::cuda::setCurrentCUDAStream(compute_);
  }

  void beginIteration() override {
    used_ = 0;
    check(cudaEventRecord(origin_, compute_.stream()), "event record");
  }

  int recordEvent() override {
    if (used_ == events_.size()) {
      cudaEvent_t e = nullptr;
      check(cudaEventCreate(&e), "event create");
      events_.push_back(e);
    }
    check(cudaEventRecord(events_[used_], current()), "event record");
    return static_cast<int>(used_++);
  }

  std::vector<double> resolveEvents() override {
    synchronize();
    std::vector<double> ms(used_, 0.0);
    for (size_t i = 0; i < used_; ++i) {
      float t = 0;
      check(cudaEventElapsedTime(&t, origin_, events_[i]), "event elapsed time");
      ms[i] = t;
    }
    return ms;
  }

  void synchronize() override {
    for (cudaStream_t s : {compute_.stream(), side_.stream(), overlap_.stream()})
      check(cudaStreamSynchronize(s), "stream synchronize");
  }

  std::int64_t allocatedBytes() const override {
    // Index 0 of every StatArray is the aggregate over pool kinds (1.13 and 2.x alike).
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index_);
    return static_cast<std::int64_t>(stats.allocated_bytes[0].current);
  }

  at::Tensor offload(const at::Tensor& t) override {
    if (!t.is_cuda()) return t;
    waitOn(side_.stream(), recordOn(current()));
    at::Tensor host = at::empty(t.sizes(), t.options().device(at::kCPU).pinned_memory(true));
    {
      c10::cuda::CUDAStreamGuard guard(side_);
      host.copy_(t, /*non_blocking=*/true);
    }
    // The allocator must not hand t's memory out again before the side stream has read it.
    t.record_stream(side_);
    return host;
  }

  at::Tensor reload(const at::Tensor& host) override {
    if (host.is_cuda()) return host;
    waitOn(side_.stream(), recordOn(current()));
    at::Tensor dev;
    {
      c10::cuda::CUDAStreamGuard guard(side_);
      dev = at::empty(host.sizes(), host.options().device(at::Device(at::kCUDA, index_)));
      dev.copy_(host, /*non_blocking=*/true);
    }
    waitOn(current(), recordOn(side_.stream()));
    dev.record_stream(c10::cuda::getCurrentCUDAStream(index_));
    return dev;
  }

  void beginOverlap() override {
    waitOn(overlap_.stream(), recordOn(compute_.stream()));
    c10::cuda::setCurrentCUDAStream(overlap_);
    overlapping_ = true;
  }

  void endOverlap() override {
    if (!overlapping_) return;
    waitOn(compute_.stream(), recordOn(overlap_.stream()));
    c10::cuda::setCurrentCUDAStream(compute_);
    overlapping_ = false;
  }

  std::shared_ptr<void> markReady() override { return recordOn(current()); }

  void waitReady(const std::shared_ptr<void>& ready, const at::Tensor& t) override {
    if (!ready) return;
    waitOn(current(), ready);
    if (t.is_cuda()) t.record_stream(c10::cuda::getCurrentCUDAStream(index_));
  }

 private:
  cudaStream_t current() const { return overlapping_ ? overlap_.stream() : compute_.stream(); }

  int gpu_;
  c10::DeviceIndex index_;
  c10::cuda::CUDAStream compute_, side_, overlap_;
  cudaEvent_t origin_ = nullptr;
  std::vector<cudaEvent_t> events_;  // reused across iterations
  size_t used_ = 0;
  bool overlapping_ = false;
};

}  // namespace

int cudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

std::unique_ptr<CudaDevice> makeCudaDevice(int gpu) {
  const int n = cudaDeviceCount();
  if (gpu < 0 || gpu >= n)
    throw std::runtime_error("GPU " + std::to_string(gpu) + " does not exist (" + std::to_string(n) +
                             " visible)");
  return std::make_unique<CudaDeviceImpl>(gpu);
}

}  // namespace ps::engine::detail
#endif  // PIPESTUDIO_HAVE_CUDA
