// Transport between processes: c10d ProcessGroupGloo over a TCPStore (rank 0 hosts the
// store, or the launcher does: hosted_store.h). Sends are asynchronous and awaited at the end of the
// iteration, so schedules that send both ways between two devices cannot deadlock on rendezvous. A receive
// waits once for the whole timeout: a timed-out wait makes Gloo tear the context down, so waits cannot be
// sliced. A rank that fails closes its group instead, and the peers' receives fail at once
// with "connection closed"; the root cause is read from the store's "abort" key.
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO
#endif
#include <cstdlib>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "transport/hosted_store.h"
#include "transport/transport.h"

namespace ps::engine::detail {

namespace {

class GlooTransport : public RemoteTransport {
 public:
  GlooTransport(c10::intrusive_ptr<c10d::Store> store, c10::intrusive_ptr<c10d::ProcessGroupGloo> pg,
                int rank, int world)
      : store_(std::move(store)), pg_(std::move(pg)), rank_(rank), world_(world) {}

  int rank() const override { return rank_; }
  int worldSize() const override { return world_; }

  void send(const MessageKey& key, const at::Tensor& t, int dstRank) override {
    std::vector<at::Tensor> v{t};
    c10::intrusive_ptr<c10d::Work> work;
    try {
      work = pg_->send(v, dstRank, key.tag());
    } catch (const std::exception& e) {
      lost(dstRank, e);
    }
    std::lock_guard lock(mu_);
    pending_.push_back({work, dstRank});
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
      lost(srcRank, e);
    }
    return std::nullopt;
  }

  // A wait failed on a closed connection: another rank's published failure (Aborted), the
  // store's host gone (rank 0), or `peer` ended without a word.
  [[noreturn]] void lost(int peer, const std::exception& e) {
    bool aborted = false, storeGone = false;
    try {
      aborted = store_->check({"abort"});
    } catch (const std::exception&) {
      storeGone = true;
    }
    if (aborted) throw Aborted{};
    if (storeGone && rank_ != 0)
      throw PeerLost(0, "rank 0 (device 0), which hosts the store, ended without reporting an error (" +
                            errorText(e) + ")");
    if (peer < 0 && world_ == 2) peer = 1 - rank_;  // of two ranks, the other one
    if (peer < 0) throw PeerLost(-1, "a peer rank ended without reporting an error (its connection closed)");
    throw PeerLost(peer, "rank " + std::to_string(peer) + " (device " + std::to_string(peer) +
                             ") ended without reporting an error: its connection closed");
  }

  void flush(std::chrono::milliseconds timeout) override {
    std::vector<std::pair<c10::intrusive_ptr<c10d::Work>, int>> works;
    {
      std::lock_guard lock(mu_);
      works.swap(pending_);
    }
    for (auto& [w, dst] : works) {
      try {
        w->wait(timeout);
      } catch (const std::exception& e) {
        if (isTimeout(e))
          throw WaitTimedOut("timed out after " + formatSeconds(timeout.count() / 1000.0) +
                             " waiting for rank " + std::to_string(dst) + " to take what this rank sent");
        lost(dst, e);
      }
    }
  }

  void barrier(std::chrono::milliseconds timeout, const std::atomic<bool>* cancel) override {
    (void)cancel;
    const auto start = std::chrono::steady_clock::now();
    try {
      auto work = pg_->barrier();
      work->wait(timeout);
    } catch (const std::exception& e) {
      if (isTimeout(e) || std::chrono::steady_clock::now() - start >= timeout * 9 / 10)
        throw WaitTimedOut("timed out after " + formatSeconds(timeout.count() / 1000.0) +
                           " waiting for every rank at the start of the iteration");
      lost(-1, e);
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
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
  int rank_, world_;
  std::mutex mu_;
  std::vector<std::pair<c10::intrusive_ptr<c10d::Work>, int>> pending_;  // sends and their destination
};

class TcpHostedStore : public HostedStore {
 public:
  explicit TcpHostedStore(c10::intrusive_ptr<c10d::TCPStore> store) : store_(std::move(store)) {}
  int port() const override { return store_->getPort(); }

 private:
  c10::intrusive_ptr<c10d::TCPStore> store_;
};

}  // namespace

core::Result<std::unique_ptr<HostedStore>> hostLocalStore(int worldSize) {
  try {
    c10d::TCPStoreOptions so;
    so.port = 0;  // the server binds a free port and reports it
    so.isServer = true;
    so.numWorkers = static_cast<std::size_t>(worldSize);
    so.waitWorkers = false;
    auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", so);
    if (store->getPort() == 0)
      return core::makeError("engine.launch", "the ranks' store on 127.0.0.1 reports no port");
    return std::unique_ptr<HostedStore>(std::make_unique<TcpHostedStore>(std::move(store)));
  } catch (const std::exception& e) {
    return core::makeError("engine.launch", "cannot host the ranks' store on 127.0.0.1: " + errorText(e));
  }
}

core::Result<std::unique_ptr<RemoteTransport>> connectGloo(const DistributedOptions& d,
                                                           double timeoutSeconds) {
  if (d.rank < 0 || d.rank >= d.worldSize)
    return core::makeError("engine.distributed", "rank " + std::to_string(d.rank) + " is outside 0.." +
                                                     std::to_string(d.worldSize - 1));
  if (d.masterPort <= 0 || d.masterPort > 65535)
    return core::makeError("engine.distributed",
                           "master port " + std::to_string(d.masterPort) + " is not a port");
  const std::string where = "rank " + std::to_string(d.rank) + " cannot join the run at " + d.masterAddr +
                            ":" + std::to_string(d.masterPort);
  try {
    (void)timeoutSeconds;  // waits after the rendezvous pass their own bounds
    const auto connect =
        std::chrono::milliseconds(static_cast<long>(std::max(d.connectTimeoutSeconds, 0.001) * 1000));
    c10d::TCPStoreOptions so;
    so.port = static_cast<std::uint16_t>(d.masterPort);
    // torchrun may hand its workers its agent's store (TORCHELASTIC_USE_AGENT_STORE=True), and
    // our own launcher does: then rank 0 joins it as a client, and our keys live under a
    // prefix of their own.
    const char* agent = std::getenv(kAgentStoreVariable);
    const bool agentStore = agent && std::string(agent) == "True";
    so.isServer = d.rank == 0 && !agentStore;
    so.numWorkers = static_cast<std::size_t>(d.worldSize);
    so.waitWorkers = false;
    so.timeout = connect;
    c10::intrusive_ptr<c10d::Store> store = c10::make_intrusive<c10d::TCPStore>(d.masterAddr, so);
    if (agentStore) store = c10::make_intrusive<c10d::PrefixStore>("pipestudio", store);
    auto opts = c10d::ProcessGroupGloo::Options::create(connect);
    const bool loopback = d.masterAddr == "127.0.0.1" || d.masterAddr == "localhost";
    opts->devices.push_back(loopback ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                     : c10d::ProcessGroupGloo::createDefaultDevice());
    auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, d.rank, d.worldSize, opts);
    return std::unique_ptr<RemoteTransport>(std::make_unique<GlooTransport>(store, pg, d.rank, d.worldSize));
  } catch (const std::exception& e) {
    std::string why = errorText(e);
    if (why.find("imeout") != std::string::npos || why.find("imed out") != std::string::npos)
      why = "not every rank joined within --connect-timeout " + formatSeconds(d.connectTimeoutSeconds) +
            " (" + why + ")";
    return core::makeError("engine.distributed", where + ": " + why);
  }
}

}  // namespace ps::engine::detail
