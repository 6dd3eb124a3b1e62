// FakeDomain: the in-process Domain (doubles/fake_domain.hpp). One mutex per endpoint guards
// what other Domains' threads touch (its registrations, receives and event queue); no two
// endpoint locks are ever held at once, so Domains writing to each other cannot deadlock.
#include "doubles/fake_domain.hpp"

#include <algorithm>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <unordered_map>

namespace fabric::domain {

struct FakeEndpoint {
  struct Region {
    std::uintptr_t base = 0;
    std::size_t length = 0;
    Access access{};
  };
  struct Recv {
    void* buf = nullptr;
    std::size_t length = 0;
    Token token = 0;
  };
  struct Pending {
    Event event;
    std::uint64_t due = 0;  // the poll number from which poll() may return it
  };

  explicit FakeEndpoint(std::uint32_t delay) : delay_polls(delay) {}

  // Caller holds `mutex`.
  void push(Event event) {
    events.push_back({std::move(event), polls.load(std::memory_order_acquire) + delay_polls});
  }

  // A remote WRITE arriving here: lands only inside a region registered for remote writes
  // under `rkey`, as the NIC's key and bounds check would have it.
  Status deliver_write(const void* src, std::uint64_t length, std::uint64_t remote_addr,
                       std::uint64_t rkey, std::optional<std::uint32_t> imm) {
    std::lock_guard lock(mutex);
    if (!open) return {Errc::provider, "fake: the target's endpoint is closed"};
    const auto it = regions.find(rkey);
    if (it == regions.end()) {
      return {Errc::provider, "fake: remote access error (no region has key " +
                                  std::to_string(rkey) + ")"};
    }
    const Region& r = it->second;
    if (!has_access(r.access, Access::remote_write)) {
      return {Errc::provider, "fake: remote access error (region not writable remotely)"};
    }
    if (remote_addr < r.base || length > r.length ||
        remote_addr - r.base > r.length - length) {
      return {Errc::provider, "fake: remote access error (write outside the region)"};
    }
    if (length > 0) std::memcpy(reinterpret_cast<void*>(remote_addr), src, length);
    if (imm) {
      Event ev;
      ev.kind = Event::Kind::imm_arrived;
      ev.imm = *imm;
      push(std::move(ev));
    }
    return Status::success();
  }

  // A remote READ of this endpoint's memory: served only from a region registered for remote
  // reads under `rkey`; otherwise nothing is copied and the reader's READ fails.
  Status serve_read(void* dst, std::uint64_t length, std::uint64_t remote_addr,
                    std::uint64_t rkey) {
    std::lock_guard lock(mutex);
    if (!open) return {Errc::provider, "fake: the target's endpoint is closed"};
    const auto it = regions.find(rkey);
    if (it == regions.end()) {
      return {Errc::provider, "fake: remote access error (no region has key " +
                                  std::to_string(rkey) + ")"};
    }
    const Region& r = it->second;
    if (!has_access(r.access, Access::remote_read)) {
      return {Errc::provider, "fake: remote access error (region not readable remotely)"};
    }
    if (remote_addr < r.base || length > r.length ||
        remote_addr - r.base > r.length - length) {
      return {Errc::provider, "fake: remote access error (read outside the region)"};
    }
    if (length > 0) std::memcpy(dst, reinterpret_cast<const void*>(remote_addr), length);
    return Status::success();
  }

  // Caller holds `mutex`. Truncation fails the receive, as providers report it.
  void fill(const Recv& recv, std::span<const std::byte> message) {
    Event ev;
    ev.kind = Event::Kind::recv_done;
    ev.token = recv.token;
    if (message.size() > recv.length) {
      ev.status = Status(Errc::provider, "fake: message of " + std::to_string(message.size()) +
                                             " bytes truncated to a " +
                                             std::to_string(recv.length) + "-byte receive");
    } else {
      if (!message.empty()) std::memcpy(recv.buf, message.data(), message.size());
      ev.length = message.size();
    }
    push(std::move(ev));
  }

  Status deliver_send(std::span<const std::byte> message) {
    std::lock_guard lock(mutex);
    if (!open) return {Errc::provider, "fake: the target's endpoint is closed"};
    if (recvs.empty()) {
      // No receive posted yet: held as an unexpected message until one is.
      unexpected.emplace_back(message.begin(), message.end());
      return Status::success();
    }
    const Recv recv = recvs.front();
    recvs.pop_front();
    fill(recv, message);
    return Status::success();
  }

  const std::uint32_t delay_polls;
  std::atomic<std::uint64_t> polls{0};
  std::mutex mutex;
  bool open = true;
  std::unordered_map<std::uint64_t, Region> regions;  // by rkey
  std::deque<Recv> recvs;
  std::deque<std::vector<std::byte>> unexpected;
  std::deque<Pending> events;
};

namespace {

class FakeRegion final : public MemoryRegion {
 public:
  FakeRegion(std::shared_ptr<FakeEndpoint> endpoint, RemoteKey key)
      : endpoint_(std::move(endpoint)), key_(key) {}
  ~FakeRegion() override {
    std::lock_guard lock(endpoint_->mutex);
    endpoint_->regions.erase(key_.rkey);
  }
  void* local_desc() const noexcept override { return nullptr; }
  RemoteKey remote_key() const noexcept override { return key_; }

 private:
  std::shared_ptr<FakeEndpoint> endpoint_;
  RemoteKey key_;
};

}  // namespace

// ---------------------------------------------------------------- FakeFabric

std::unique_ptr<FakeDomain> FakeFabric::open(FakeOptions options) {
  std::vector<std::byte> address;
  auto stats = std::make_shared<FakeStats>();
  {
    std::lock_guard lock(mutex_);
    // "fake" + a never reused id: unique and stable for the Domain's life.
    const std::uint64_t id = next_id_++;
    for (char c : std::string("fake")) address.push_back(static_cast<std::byte>(c));
    for (int i = 0; i < 8; ++i) address.push_back(static_cast<std::byte>(id >> (8 * i)));
    stats_[address] = stats;
  }
  auto domain = std::make_unique<FakeDomain>(shared_from_this(), address, std::move(options),
                                             std::move(stats));
  return domain;
}

DomainDecorator FakeFabric::decorator(std::function<FakeOptions()> options_for_next) {
  return [fabric = shared_from_this(),
          options = std::move(options_for_next)](std::unique_ptr<Domain> real) {
    real.reset();  // the engine opened a real Domain; the fake replaces it
    return std::unique_ptr<Domain>(fabric->open(options ? options() : FakeOptions{}));
  };
}

std::shared_ptr<const FakeStats> FakeFabric::stats(std::span<const std::byte> address) const {
  std::lock_guard lock(mutex_);
  const auto it = stats_.find(std::vector<std::byte>(address.begin(), address.end()));
  return it == stats_.end() ? nullptr : it->second;
}

std::shared_ptr<FakeEndpoint> FakeFabric::find(std::span<const std::byte> address) const {
  std::lock_guard lock(mutex_);
  const auto it = endpoints_.find(std::vector<std::byte>(address.begin(), address.end()));
  return it == endpoints_.end() ? nullptr : it->second.lock();
}

void FakeFabric::forget(const std::vector<std::byte>& address) {
  std::lock_guard lock(mutex_);
  endpoints_.erase(address);
}

// ---------------------------------------------------------------- FakeDomain

FakeDomain::FakeDomain(std::shared_ptr<FakeFabric> fabric, std::vector<std::byte> address,
                       FakeOptions options, std::shared_ptr<FakeStats> stats)
    : fabric_(std::move(fabric)),
      address_(std::move(address)),
      options_(std::move(options)),
      stats_(std::move(stats)),
      endpoint_(std::make_shared<FakeEndpoint>(options_.faults.delay_polls)) {
  limits_.tx_depth = options_.tx_depth;
  limits_.rx_depth = options_.rx_depth;
  limits_.inject_size = 0;
  limits_.needs_local_desc = false;
  limits_.provider = "fake";
  limits_.device = "fake";
  limits_.reads = true;
  std::lock_guard lock(fabric_->mutex_);
  fabric_->endpoints_[address_] = endpoint_;
}

FakeDomain::~FakeDomain() {
  close_endpoint();
  fabric_->forget(address_);
}

void FakeDomain::close_endpoint() noexcept {
  std::lock_guard lock(endpoint_->mutex);
  endpoint_->open = false;
  endpoint_->recvs.clear();
  endpoint_->events.clear();
}

Result<std::unique_ptr<MemoryRegion>> FakeDomain::register_memory(const MemorySpan& span,
                                                                  Access access) {
  if (!span.device.is_host()) return Status(Errc::unsupported, "fake: host memory only");
  const RemoteKey key{reinterpret_cast<std::uint64_t>(span.ptr), next_rkey_.fetch_add(1)};
  {
    std::lock_guard lock(endpoint_->mutex);
    endpoint_->regions[key.rkey] = {reinterpret_cast<std::uintptr_t>(span.ptr), span.length,
                                    access};
  }
  return std::unique_ptr<MemoryRegion>(std::make_unique<FakeRegion>(endpoint_, key));
}

void FakeFabric::fail_nth_resolve(std::uint64_t n) { resolves_left_.store(n); }

bool FakeFabric::resolve_fails() {
  std::uint64_t left = resolves_left_.load();
  while (left != 0 && !resolves_left_.compare_exchange_weak(left, left - 1)) {
  }
  return left == 1;
}

Result<PeerHandle> FakeDomain::resolve_peer(std::span<const std::byte> address) {
  if (fabric_->resolve_fails()) {
    return Status(Errc::provider, "fake: resolve_peer refused (FakeFabric::fail_nth_resolve)");
  }
  // Like an address-vector insert: succeeds for any address; an absent peer fails later.
  const std::vector<std::byte> key(address.begin(), address.end());
  const auto it = std::find(peers_.begin(), peers_.end(), key);
  if (it != peers_.end()) return static_cast<PeerHandle>(it - peers_.begin());
  peers_.push_back(key);
  return static_cast<PeerHandle>(peers_.size() - 1);
}

bool FakeDomain::dropped(PeerHandle peer) const {
  const auto& drop = options_.faults.drop_to;
  return std::find(drop.begin(), drop.end(), peers_[peer]) != drop.end();
}

void FakeDomain::complete_tx(Token token, Status status) {
  ++tx_outstanding_;
  Event ev;
  ev.kind = Event::Kind::tx_done;
  ev.token = token;
  ev.status = std::move(status);
  std::lock_guard lock(endpoint_->mutex);
  endpoint_->push(std::move(ev));
}

Status FakeDomain::refuse_when_full() {
  const std::uint64_t every = options_.faults.again_every;
  if (tx_outstanding_ >= limits_.tx_depth || (every != 0 && ++tx_calls_ % every == 0)) {
    stats_->refused_again.fetch_add(1);
    return {Errc::again, "fake: send queue full"};
  }
  return Status::success();
}

Status FakeDomain::refuse_peer(PeerHandle peer) {
  const auto& refuse = options_.faults.refuse_to;
  if (std::find(refuse.begin(), refuse.end(), peers_[peer]) == refuse.end()) {
    return Status::success();
  }
  stats_->refused_again.fetch_add(1);
  stats_->refused_peer.fetch_add(1);
  return {Errc::again, "fake: the peer refuses"};
}

Status FakeDomain::post_write(const WriteDesc& write) {
  if (write.peer >= peers_.size()) return {Errc::invalid_argument, "fake: unknown peer handle"};
  if (Status full = refuse_when_full(); !full.ok()) return full;
  if (Status refused = refuse_peer(write.peer); !refused.ok()) return refused;
  const FakeFaults& faults = options_.faults;
  if (++write_calls_ == faults.fail_write_nth) {
    stats_->injected.fetch_add(1);
    Status injected(faults.fail_write_code,
                    "fake: injected failure of write " + std::to_string(write_calls_));
    if (!faults.fail_write_at_completion) return injected;
    complete_tx(write.token, std::move(injected));
    return Status::success();
  }
  stats_->writes.fetch_add(1);
  (std::this_thread::get_id() == opener_ ? stats_->writes_from_opener
                                         : stats_->writes_from_others)
      .fetch_add(1);
  if (dropped(write.peer) || write_calls_ == faults.drop_write_nth) {
    ++tx_outstanding_;  // the provider holds it for good
    stats_->dropped.fetch_add(1);
    return Status::success();
  }
  Status st;
  if (auto target = fabric_->find(peers_[write.peer])) {
    st = target->deliver_write(write.local, write.length, write.remote_addr, write.rkey,
                               write.imm);
  } else {
    st = Status(Errc::provider, "fake: peer unreachable (no open Domain at its address)");
  }
  if (!st.ok()) stats_->remote_errors.fetch_add(1);
  complete_tx(write.token, std::move(st));
  return Status::success();
}

Status FakeDomain::post_read(const ReadDesc& read) {
  if (read.peer >= peers_.size()) return {Errc::invalid_argument, "fake: unknown peer handle"};
  if (Status full = refuse_when_full(); !full.ok()) return full;
  if (dropped(read.peer)) {
    ++tx_outstanding_;  // the provider holds it for good
    stats_->dropped.fetch_add(1);
    return Status::success();
  }
  Status st;
  if (auto target = fabric_->find(peers_[read.peer])) {
    st = target->serve_read(read.local, read.length, read.remote_addr, read.rkey);
  } else {
    st = Status(Errc::provider, "fake: peer unreachable (no open Domain at its address)");
  }
  if (!st.ok()) stats_->remote_errors.fetch_add(1);
  complete_tx(read.token, std::move(st));
  return Status::success();
}

Status FakeDomain::post_send(PeerHandle peer, const void* buf, std::size_t length, void*,
                             Token token) {
  if (peer >= peers_.size()) return {Errc::invalid_argument, "fake: unknown peer handle"};
  if (Status full = refuse_when_full(); !full.ok()) return full;
  if (Status refused = refuse_peer(peer); !refused.ok()) return refused;
  if (dropped(peer)) {
    ++tx_outstanding_;
    stats_->dropped.fetch_add(1);
    return Status::success();
  }
  Status st;
  const std::span<const std::byte> message(static_cast<const std::byte*>(buf), length);
  if (auto target = fabric_->find(peers_[peer])) {
    st = target->deliver_send(message);
  } else {
    st = Status(Errc::provider, "fake: peer unreachable (no open Domain at its address)");
  }
  complete_tx(token, std::move(st));
  return Status::success();
}

Status FakeDomain::post_recv(void* buf, std::size_t length, void*, Token token) {
  std::lock_guard lock(endpoint_->mutex);
  if (!endpoint_->open) return {Errc::shutdown, "fake: endpoint closed"};
  if (endpoint_->recvs.size() >= limits_.rx_depth) return {Errc::again, "fake: receive queue full"};
  const FakeEndpoint::Recv recv{buf, length, token};
  if (!endpoint_->unexpected.empty()) {
    const std::vector<std::byte> message = std::move(endpoint_->unexpected.front());
    endpoint_->unexpected.pop_front();
    endpoint_->fill(recv, message);
    return Status::success();
  }
  endpoint_->recvs.push_back(recv);
  return Status::success();
}

std::size_t FakeDomain::poll(std::span<Event> out) {
  const std::uint64_t now = endpoint_->polls.fetch_add(1, std::memory_order_acq_rel) + 1;
  std::size_t n = 0;
  std::lock_guard lock(endpoint_->mutex);
  auto& events = endpoint_->events;
  // Due numbers only grow along the queue (the poll count is monotonic), so FIFO is exact.
  while (n < out.size() && !events.empty() && events.front().due <= now) {
    out[n] = std::move(events.front().event);
    events.pop_front();
    if (out[n].kind == Event::Kind::tx_done) --tx_outstanding_;
    ++n;
  }
  return n;
}

}  // namespace fabric::domain
