// Transport between processes: c10d ProcessGroupGloo over a TCPStore (rank 0 hosts the
// store). Sends are asynchronous and awaited at the end of the iteration, so schedules that
// send both ways between two devices cannot deadlock on rendezvous. A receive waits once for
// the whole timeout: a timed-out wait makes Gloo tear the context down, so waits cannot be
// sliced. A rank that fails closes its group instead, and the peers' receives fail at once
// with "connection closed"; the root cause is read from the store's "abort" key.
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "transport.h"

namespace ps::engine::detail {

namespace {

class GlooTransport : public RemoteTransport {
 public:
  GlooTransport(c10::intrusive_ptr<c10d::TCPStore> store, c10::intrusive_ptr<c10d::ProcessGroupGloo> pg, int rank,
                int world)
      : store_(std::move(store)), pg_(std::move(pg)), rank_(rank), world_(world) {}

  int rank() const override { return rank_; }
  int worldSize() const override { return world_; }

  void send(const MessageKey& key, const at::Tensor& t, int dstRank) override {
    std::vector<at::Tensor> v{t};
    auto work = pg_->send(v, dstRank, key.tag());
    std::lock_guard lock(mu_);
    pending_.push_back(work);
  }

  std::optional<at::Tensor> recv(const MessageKey& key, int srcRank, at::IntArrayRef shape,
                                 const at::TensorOptions& options, std::chrono::milliseconds timeout,
                                 const std::atomic<bool>& stop, const std::atomic<bool>* cancel) override {
    std::vector<at::Tensor> v{at::empty(shape, options)};
    auto work = pg_->recv(v, srcRank, key.tag());
    (void)stop;
    (void)cancel;
    const auto start = std::chrono::steady_clock::now();
    try {
      if (work->wait(timeout)) return v[0];
    } catch (const std::exception& e) {
      // A peer whose own wait timed out tears the connection down; when that happens as our
      // deadline arrives it is the same situation as our own timeout.
      const auto waited = std::chrono::steady_clock::now() - start;
      if (isTimeout(e) || waited >= timeout * 9 / 10) return std::nullopt;
      if (hasKeyQuietly("abort")) throw Aborted{};
      throw;
    }
    return std::nullopt;
  }

  void flush(std::chrono::milliseconds timeout) override {
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    {
      std::lock_guard lock(mu_);
      works.swap(pending_);
    }
    for (auto& w : works) w->wait(timeout);
  }

  void barrier(std::chrono::milliseconds timeout, const std::atomic<bool>* cancel) override {
    (void)cancel;
    auto work = pg_->barrier();
    try {
      work->wait(timeout);
    } catch (const std::exception& e) {
      if (hasKeyQuietly("abort")) throw Aborted{};
      throw;
    }
  }

  void close() override {
    {
      std::lock_guard lock(mu_);
      pending_.clear();
    }
    pg_.reset();
  }

  static bool isTimeout(const std::exception& e) {
    std::string what = e.what();
    return what.find("imed out") != std::string::npos;
  }

  bool hasKeyQuietly(const std::string& key) {
    try {
      return store_->check({key});
    } catch (const std::exception&) {
      return false;
    }
  }

  void setKey(const std::string& key, const std::string& value) override {
    store_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
  }

  std::optional<std::string> getKey(const std::string& key, std::chrono::milliseconds timeout) override {
    try {
      store_->wait({key}, timeout);
    } catch (const std::exception&) {
      return std::nullopt;
    }
    auto bytes = store_->get(key);
    return std::string(bytes.begin(), bytes.end());
  }

  bool hasKey(const std::string& key) override { return store_->check({key}); }

 private:
  c10::intrusive_ptr<c10d::TCPStore> store_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
  int rank_, world_;
  std::mutex mu_;
  std::vector<c10::intrusive_ptr<c10d::Work>> pending_;
};

}  // namespace

core::Result<std::unique_ptr<RemoteTransport>> connectGloo(const DistributedOptions& d, double timeoutSeconds) {
  if (d.rank < 0 || d.rank >= d.worldSize)
    return core::makeError("engine.distributed", "rank " + std::to_string(d.rank) + " is outside 0.." +
                                                     std::to_string(d.worldSize - 1));
  if (d.masterPort <= 0 || d.masterPort > 65535)
    return core::makeError("engine.distributed", "master port " + std::to_string(d.masterPort) + " is not a port");
  try {
    const auto timeout = std::chrono::milliseconds(static_cast<long>(std::max(timeoutSeconds, 1.0) * 1000));
    c10d::TCPStoreOptions so;
    so.port = static_cast<std::uint16_t>(d.masterPort);
    so.isServer = d.rank == 0;
    so.numWorkers = static_cast<std::size_t>(d.worldSize);
    so.waitWorkers = false;
    so.timeout = timeout;
    auto store = c10::make_intrusive<c10d::TCPStore>(d.masterAddr, so);
    auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
    const bool loopback = d.masterAddr == "127.0.0.1" || d.masterAddr == "localhost";
    opts->devices.push_back(loopback ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                     : c10d::ProcessGroupGloo::createDefaultDevice());
    auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, d.rank, d.worldSize, opts);
    return std::unique_ptr<RemoteTransport>(std::make_unique<GlooTransport>(store, pg, d.rank, d.worldSize));
  } catch (const c10::Error& e) {
    return core::makeError("engine.distributed", "rank " + std::to_string(d.rank) + " cannot join " + d.masterAddr + ":" +
                                                     std::to_string(d.masterPort) + ": " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return core::makeError("engine.distributed", "rank " + std::to_string(d.rank) + " cannot join " + d.masterAddr + ":" +
                                                     std::to_string(d.masterPort) + ": " + e.what());
  }
}

}  // namespace ps::engine::detail
