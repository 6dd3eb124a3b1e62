#pragma once
// A test double of the internal Domain interface with no provider behind it: FakeDomains on one
// FakeFabric move bytes between engines of the same process with memcpy, checked against the
// target's registrations as a NIC would. Faults (a refused or failed WRITE, a peer whose
// completions never come, late completions) are switched on per Domain with FakeFaults.
// tests/support/doubles/README.md says how a test installs it.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "doubles/domain_decorator.hpp"
#include "domain/domain.hpp"

namespace fabric::domain {

struct FakeFaults {
  // The nth post_write of this Domain (1-based, counting calls that got past back-pressure;
  // 0: none) fails with fail_write_code: refused by post_write itself, or, with
  // fail_write_at_completion, accepted and completed with that error (nothing lands).
  std::uint64_t fail_write_nth = 0;
  Errc fail_write_code = Errc::provider;
  bool fail_write_at_completion = false;
  // The nth post_write (counted as fail_write_nth counts; 0: none) is accepted and then
  // vanishes, while every other WRITE to the same peer completes: a provider that holds one
  // operation for good.
  std::uint64_t drop_write_nth = 0;
  // Every nth post_write/post_send call (0: never) is answered Errc::again although the queue
  // has room, as a provider whose queue fills below its advertised depth does.
  std::uint64_t again_every = 0;
  // WRITEs and SENDs to these Domain addresses are accepted and then vanish: nothing lands and
  // no completion ever arrives (a dead peer whose provider never gives up).
  std::vector<std::vector<std::byte>> drop_to;
  // WRITEs and SENDs to these Domain addresses are refused with Errc::again, every time (a
  // peer whose connection never comes up, or a dead shm peer whose receive queue stays full).
  std::vector<std::vector<std::byte>> refuse_to;
  // Every event queued on this Domain becomes visible to poll() this many polls later.
  std::uint32_t delay_polls = 0;
};

struct FakeOptions {
  std::uint32_t tx_depth = 256;  // WRITEs/SENDs posted and not yet polled, at most
  std::uint32_t rx_depth = 256;  // posted receives, at most
  FakeFaults faults;
};

// What one FakeDomain did; read by the test after (or while) the engine runs.
struct FakeStats {
  std::atomic<std::uint64_t> writes{0};        // WRITEs accepted
  std::atomic<std::uint64_t> refused_again{0}; // post_write/post_send answered Errc::again
  std::atomic<std::uint64_t> refused_peer{0};  // of which by refuse_to
  std::atomic<std::uint64_t> injected{0};      // WRITEs failed by fail_write_nth
  std::atomic<std::uint64_t> dropped{0};       // operations swallowed by drop_to
  std::atomic<std::uint64_t> remote_errors{0}; // WRITEs the target refused (key, bounds)
  // WRITEs posted from each kind of thread: the one that opened the Domain (the engine's
  // worker), or any other (a caller posting for the worker: EngineConfig::post_on_submit).
  std::atomic<std::uint64_t> writes_from_opener{0};
  std::atomic<std::uint64_t> writes_from_others{0};
};

struct FakeEndpoint;  // the part of a FakeDomain that other Domains' threads touch
class FakeDomain;

// The registry that lets FakeDomains find each other: address bytes -> Domain. Shared by the
// Domains it opens (they keep it alive); thread safe.
class FakeFabric : public std::enable_shared_from_this<FakeFabric> {
 public:
  static std::shared_ptr<FakeFabric> create() { return std::shared_ptr<FakeFabric>(new FakeFabric); }

  std::unique_ptr<FakeDomain> open(FakeOptions options = {});

  // A decorator for set_test_decorator(): it drops the real Domain it is given and returns a
  // FakeDomain on this fabric, opened with options_for_next() (default options when empty).
  DomainDecorator decorator(std::function<FakeOptions()> options_for_next = {});

  // Stats of the Domain that owns `address` (kept after it is destroyed); null if none.
  std::shared_ptr<const FakeStats> stats(std::span<const std::byte> address) const;

  // The Domain at `address` if it is open; internal to FakeDomain.
  std::shared_ptr<FakeEndpoint> find(std::span<const std::byte> address) const;

  // The nth resolve_peer from now on, counted over every Domain of this fabric (1-based; 0:
  // none), fails with Errc::provider, as an address-vector insert can. Counted across Domains
  // because a test targets one group of an engine, whose Domains open on their own threads.
  void fail_nth_resolve(std::uint64_t n);
  // Whether this resolve_peer call is the one fail_nth_resolve named; internal to FakeDomain.
  bool resolve_fails();

 private:
  FakeFabric() = default;
  friend class FakeDomain;
  void forget(const std::vector<std::byte>& address);

  std::atomic<std::uint64_t> resolves_left_{0};  // fail_nth_resolve's countdown; 0: off

  mutable std::mutex mutex_;
  std::uint64_t next_id_ = 1;
  std::map<std::vector<std::byte>, std::weak_ptr<FakeEndpoint>> endpoints_;
  std::map<std::vector<std::byte>, std::shared_ptr<FakeStats>> stats_;
};

class FakeDomain final : public Domain {
 public:
  FakeDomain(std::shared_ptr<FakeFabric> fabric, std::vector<std::byte> address,
             FakeOptions options, std::shared_ptr<FakeStats> stats);
  ~FakeDomain() override;

  std::span<const std::byte> address() const noexcept override { return address_; }
  const Limits& limits() const noexcept override { return limits_; }
  Result<std::unique_ptr<MemoryRegion>> register_memory(const MemorySpan& span,
                                                        Access access) override;
  Result<PeerHandle> resolve_peer(std::span<const std::byte> address) override;
  Status post_write(const WriteDesc& write) override;
  // Copies from the peer's region (Access::remote_read only) at once, like post_write.
  Status post_read(const ReadDesc& read) override;
  Status post_send(PeerHandle peer, const void* buf, std::size_t length, void* desc,
                   Token token) override;
  Status post_recv(void* buf, std::size_t length, void* desc, Token token) override;
  std::size_t poll(std::span<Event> out) override;
  void close_endpoint() noexcept override;

  [[nodiscard]] const FakeStats& stats() const noexcept { return *stats_; }

 private:
  bool dropped(PeerHandle peer) const;
  Status refuse_when_full();
  Status refuse_peer(PeerHandle peer);  // FakeFaults::refuse_to
  void complete_tx(Token token, Status status);

  std::shared_ptr<FakeFabric> fabric_;
  std::vector<std::byte> address_;
  FakeOptions options_;
  Limits limits_;
  std::shared_ptr<FakeStats> stats_;
  std::shared_ptr<FakeEndpoint> endpoint_;
  std::vector<std::vector<std::byte>> peers_;  // PeerHandle i -> address
  std::thread::id opener_ = std::this_thread::get_id();
  std::uint32_t tx_outstanding_ = 0;           // posted, completion not yet polled
  std::uint64_t write_calls_ = 0;
  std::uint64_t tx_calls_ = 0;  // for again_every
  std::atomic<std::uint64_t> next_rkey_{1};
};

}  // namespace fabric::domain
