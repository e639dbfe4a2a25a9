// Transport between GPU processes over NCCL point-to-point (ncclSend/ncclRecv). NCCL has no
// tags and a communicator runs its operations in issue order, so every directed pair of ranks
// gets its own two-rank communicator and stream carrying one direction only: the sender's
// sends and the receiver's receives then match one to one in order. The sender publishes a
// header per message (tag, dtype, shape) under a sequence number in the TCPStore; the
// receiver posts its receives in that sequence, keeping messages that arrive before they are
// asked for. Unique ids, keys, barriers and aborts go through a Gloo control transport.
#ifdef PIPESTUDIO_HAVE_CUDA
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "transport/cuda_device.h"

namespace ps::engine::detail {

namespace {

void ncclCheck(ncclResult_t r, const std::string& what) {
  if (r != ncclSuccess) throw std::runtime_error("NCCL " + what + ": " + ncclGetErrorString(r));
}

void cudaCheck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA ") + what + ": " + cudaGetErrorString(e));
}

// Makes `waiter` wait for the work queued on `producer` so far.
void streamWait(cudaStream_t waiter, cudaStream_t producer) {
  cudaEvent_t e = nullptr;
  cudaCheck(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "event create");
  cudaCheck(cudaEventRecord(e, producer), "event record");
  cudaCheck(cudaStreamWaitEvent(waiter, e, 0), "stream wait");
  cudaEventDestroy(e);  // released once the wait has been satisfied
}

struct Link {
  ncclComm_t comm = nullptr;
  c10::cuda::CUDAStream stream;
  long seq = 0;
};

class NcclTransport final : public RemoteTransport {
 public:
  NcclTransport(std::unique_ptr<RemoteTransport> control, int gpu, std::chrono::milliseconds timeout,
                const std::vector<std::pair<int, int>>& pairs)
      : ctl_(std::move(control)), gpu_(gpu), index_(static_cast<c10::DeviceIndex>(gpu)) {
    cudaCheck(cudaSetDevice(gpu_), "set device");
    const int me = ctl_->rank();
    // Every rank walks the pairs in the same order, so the blocking two-rank initialisations
    // cannot wait on each other in a cycle.
    std::vector<std::pair<int, int>> sorted = pairs;
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    for (auto [src, dst] : sorted) {
      if (src != me && dst != me) continue;
      const std::string key = "nccl/id/" + std::to_string(src) + "/" + std::to_string(dst);
      ncclUniqueId id{};
      if (src == me) {
        ncclCheck(ncclGetUniqueId(&id), "get unique id");
        ctl_->setKey(key, std::string(id.internal, sizeof(id.internal)));
      } else {
        auto text = ctl_->getKey(key, timeout);
        if (!text || text->size() != sizeof(id.internal))
          throw std::runtime_error("no NCCL id from rank " + std::to_string(src) + " within the timeout");
        std::copy(text->begin(), text->end(), id.internal);
      }
      Link link{nullptr, c10::cuda::getStreamFromPool(false, index_), 0};
      ncclCheck(ncclCommInitRank(&link.comm, 2, id, src == me ? 0 : 1),
                "init with rank " + std::to_string(src == me ? dst : src));
      (src == me ? sendTo_ : recvFrom_).emplace(src == me ? dst : src, link);
    }
  }

  ~NcclTransport() override {
    if (!aborted_) {
      for (auto* links : {&sendTo_, &recvFrom_})
        for (auto& [peer, link] : *links) ncclCommDestroy(link.comm);
    }
  }

  int rank() const override { return ctl_->rank(); }
  int worldSize() const override { return ctl_->worldSize(); }

  void send(const MessageKey& key, const at::Tensor& t, int dstRank) override {
    std::lock_guard lock(mu_);
    auto it = sendTo_.find(dstRank);
    if (it == sendTo_.end()) throw std::runtime_error("no NCCL link to rank " + std::to_string(dstRank));
    Link& link = it->second;
    const at::Tensor c = t.contiguous();
    streamWait(link.stream.stream(), c10::cuda::getCurrentCUDAStream(index_).stream());
    ncclCheck(ncclSend(c.data_ptr(), static_cast<size_t>(c.numel()) * c.element_size(), ncclUint8, 1,
                       link.comm, link.stream.stream()),
              "send to rank " + std::to_string(dstRank));
    c.record_stream(link.stream);
    std::ostringstream h;
    h << key.tag() << ' ' << static_cast<int>(c.scalar_type()) << ' ' << c.dim();
    for (int64_t d : c.sizes()) h << ' ' << d;
    ctl_->setKey(headerKey(rank(), dstRank, link.seq++), h.str());
  }

  std::optional<at::Tensor> recv(const MessageKey& key, int srcRank, at::IntArrayRef shape,
                                 const at::TensorOptions& options, std::chrono::milliseconds timeout,
                                 const std::atomic<bool>& stop, const std::atomic<bool>* cancel) override {
    (void)shape;  // the header carries the shape the sender really sent
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::lock_guard lock(mu_);
    auto it = recvFrom_.find(srcRank);
    if (it == recvFrom_.end()) throw std::runtime_error("no NCCL link from rank " + std::to_string(srcRank));
    Link& link = it->second;
    for (;;) {
      if (auto e = early_.find({srcRank, key.tag()}); e != early_.end()) {
        at::Tensor t = e->second;
        early_.erase(e);
        return t;
      }
      std::optional<std::string> header;
      while (!header) {
        if (stop.load() || (cancel && cancel->load()) || ctl_->hasKey("abort")) throw Aborted{};
        if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
        header = ctl_->getKey(headerKey(srcRank, rank(), link.seq), std::chrono::milliseconds(50));
      }
      std::istringstream h(*header);
      int tag = 0, dtype = 0, dims = 0;
      h >> tag >> dtype >> dims;
      std::vector<int64_t> sizes(static_cast<size_t>(std::max(dims, 0)));
      for (auto& d : sizes) h >> d;
      at::Tensor buf = at::empty(
          sizes, options.dtype(static_cast<at::ScalarType>(dtype)).device(at::Device(at::kCUDA, index_)));
      cudaStream_t consumer = c10::cuda::getCurrentCUDAStream(index_).stream();
      streamWait(link.stream.stream(), consumer);
      ncclCheck(ncclRecv(buf.data_ptr(), static_cast<size_t>(buf.numel()) * buf.element_size(), ncclUint8, 0,
                         link.comm, link.stream.stream()),
                "receive from rank " + std::to_string(srcRank));
      streamWait(consumer, link.stream.stream());
      buf.record_stream(link.stream);
      ++link.seq;
      if (tag == key.tag()) return buf;
      early_[{srcRank, tag}] = buf;
    }
  }

  void flush(std::chrono::milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::lock_guard lock(mu_);
    for (auto& [peer, link] : sendTo_) {
      for (;;) {
        cudaError_t q = cudaStreamQuery(link.stream.stream());
        if (q == cudaSuccess) break;
        if (q != cudaErrorNotReady) cudaCheck(q, "send stream");
        if (std::chrono::steady_clock::now() >= deadline)
          throw std::runtime_error("NCCL sends to rank " + std::to_string(peer) +
                                   " did not complete within the timeout");
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
  }

  void barrier(std::chrono::milliseconds timeout, const std::atomic<bool>* cancel) override {
    ctl_->barrier(timeout, cancel);
  }
  void setKey(const std::string& key, const std::string& value) override { ctl_->setKey(key, value); }
  std::optional<std::string> getKey(const std::string& key, std::chrono::milliseconds timeout) override {
    return ctl_->getKey(key, timeout);
  }
  bool hasKey(const std::string& key) override { return ctl_->hasKey(key); }

  void close() override {
    // Abort, not destroy: a peer that failed will never match the operations in flight.
    std::lock_guard lock(mu_);
    if (!aborted_) {
      for (auto* links : {&sendTo_, &recvFrom_})
        for (auto& [peer, link] : *links) ncclCommAbort(link.comm);
      aborted_ = true;
    }
    ctl_->close();
  }

 private:
  static std::string headerKey(int src, int dst, long seq) {
    return "nccl/msg/" + std::to_string(src) + "/" + std::to_string(dst) + "/" + std::to_string(seq);
  }

  std::unique_ptr<RemoteTransport> ctl_;
  int gpu_;
  c10::DeviceIndex index_;
  std::mutex mu_;  // NCCL calls on these communicators come from one thread at a time
  std::map<int, Link> sendTo_, recvFrom_;
  std::map<std::pair<int, int>, at::Tensor> early_;  // (source rank, tag) received before asked for
  bool aborted_ = false;
};

}  // namespace

core::Result<std::unique_ptr<RemoteTransport>> connectNccl(const DistributedOptions& d, double timeoutSeconds,
                                                           int gpu,
                                                           const std::vector<std::pair<int, int>>& pairs) {
  auto control = connectGloo(d, timeoutSeconds);
  PS_TRY(control);
  try {
    const auto timeout = std::chrono::milliseconds(static_cast<long>(std::max(timeoutSeconds, 1.0) * 1000));
    return std::unique_ptr<RemoteTransport>(
        std::make_unique<NcclTransport>(std::move(control.value()), gpu, timeout, pairs));
  } catch (const std::exception& e) {
    return core::makeError("engine.nccl", "rank " + std::to_string(d.rank) + " (GPU " + std::to_string(gpu) +
                                              "): cannot set up NCCL: " + e.what());
  }
}

}  // namespace ps::engine::detail
#endif  // PIPESTUDIO_HAVE_CUDA
