#pragma once
// One DomainGroup's Domains and what the worker knows about them: the peers resolved on them
// (cache by instance id, peer groups), how full each send queue is, when each peer last
// answered, and the scratch buffer that immediate-only WRITEs point at. Worker-thread only.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "domain/domain.hpp"
#include "engine/peer_index.hpp"
#include "fabric/net_addr.hpp"
#include "fabric/status.hpp"

namespace fabric::engine {

class DomainGroup {
 public:
  using Clock = std::chrono::steady_clock;

  DomainGroup() = default;
  DomainGroup(const DomainGroup&) = delete;
  DomainGroup& operator=(const DomainGroup&) = delete;

  // Takes the group's Domains and registers the scratch buffer on each.
  Status adopt(std::vector<std::unique_ptr<domain::Domain>> domains);

  [[nodiscard]] std::size_t size() const noexcept { return domains_.size(); }
  [[nodiscard]] bool empty() const noexcept { return domains_.empty(); }
  [[nodiscard]] domain::Domain& domain(std::size_t d) { return *domains_[d]; }
  [[nodiscard]] const domain::Domain& domain(std::size_t d) const { return *domains_[d]; }
  [[nodiscard]] const std::vector<std::unique_ptr<domain::Domain>>& domains() const noexcept {
    return domains_;
  }

  // --- peers
  // Where peers this group resolves are reported known (metrics); none before this is called.
  void set_peer_index(PeerIndex* index) noexcept { index_ = index; }
  // The handle of each Domain of the owner's group `group` into out[0, size()): from the
  // cache, resolving (once per engine instance and group) on a miss. `slot`, when given, gets
  // the owner's per-peer counter slot (PeerIndex::known; kNoSlot without an index).
  Status resolve_owner(const NetAddr& owner, std::uint32_t group, domain::PeerHandle* out,
                       std::uint32_t* slot = nullptr);
  // The same for the owner of `dst`'s memory and its group. A hit on the very owner object
  // checked before (the cache keeps it alive) skips comparing its addresses byte by byte.
  Status resolve_owner(const MrDesc& dst, domain::PeerHandle* out, std::uint32_t* slot = nullptr);
  // Resolves every group of every peer, kept as peer group `id` for the engine's lifetime.
  Status add_peer_group(std::uint64_t id, const std::vector<NetAddr>& peers);
  // Forgets peer group `id` (an add_peer_group that failed on another group); no-op if unknown.
  void drop_peer_group(std::uint64_t id) { peer_groups_.erase(id); }
  // Peer p's handle on Domain d of its group g at [p][g * size() + d]; null if unknown.
  [[nodiscard]] const std::vector<std::vector<domain::PeerHandle>>* peer_group(
      std::uint64_t id) const;
  // Every Domain forgets every group of the peer; so does the cache.
  Status fence_peer(const NetAddr& peer);

  // --- send queues
  [[nodiscard]] bool full(std::size_t d) const noexcept {
    return tx_in_flight_[d] >= tx_depth_[d];
  }
  // Posts on Domain d; counts it in flight when the provider took it.
  // Inline: it runs once per WRITE.
  Status post_write(std::size_t d, const domain::WriteDesc& w) {
    Status st = domains_[d]->post_write(w);
    if (st.ok()) took(d);
    return st;
  }
  Status post_read(std::size_t d, const domain::ReadDesc& r) {
    Status st = domains_[d]->post_read(r);
    if (st.ok()) took(d);
    return st;
  }
  // Operations Domain d's provider took, and of those how many it has given back: an operation
  // posted as the n-th has every one posted before it completed, in whatever order, once the
  // completions reach n - 1 (Worker::expire_stalled).
  [[nodiscard]] std::uint64_t posted(std::size_t d) const noexcept { return tx_posted_[d]; }
  [[nodiscard]] std::uint64_t completions(std::size_t d) const noexcept {
    return tx_posted_[d] - tx_in_flight_[d];
  }
  Status post_send(domain::PeerHandle peer, const void* buf, std::size_t len, void* desc,
                   domain::Token token);
  // A completion on Domain d; `peer` (when known) answered at `now`.
  void completed(std::size_t d, const domain::PeerHandle* peer, Clock::time_point now);
  // The latest answer of any of a single-peer request's handles (one per Domain), or `since`.
  [[nodiscard]] Clock::time_point last_heard(const domain::PeerHandle* peers,
                                             Clock::time_point since) const;
  // Whether a Domain's provider moves bytes only while polled (Domain::progress_pending).
  [[nodiscard]] bool provider_holds_unread_bytes() const noexcept;
  // Each Domain's wait fd (Domain::wait_fd), -1 where it has none.
  [[nodiscard]] std::vector<int> wait_fds() const;
  [[nodiscard]] std::uint64_t in_flight() const noexcept;
  [[nodiscard]] std::uint64_t depth() const noexcept;

  // --- immediate-only WRITEs still need a valid local buffer (EFA)
  [[nodiscard]] const std::byte* scratch() const noexcept { return scratch_.get(); }
  [[nodiscard]] void* scratch_desc(std::size_t d) const { return scratch_regions_[d]->local_desc(); }

  // The providers must be done with our buffers before they are freed.
  void close_endpoints();

 private:
  void took(std::size_t d) noexcept {
    ++tx_in_flight_[d];
    ++tx_posted_[d];
  }

  std::vector<std::unique_ptr<domain::Domain>> domains_;
  std::vector<std::uint32_t> tx_in_flight_;  // per Domain
  std::vector<std::uint64_t> tx_posted_;     // per Domain, since adopt()
  std::vector<std::uint32_t> tx_depth_;      // per Domain: its limits().tx_depth, read once
  // Per Domain: when each peer last completed an operation of ours. A request waiting behind
  // others to the same peer (a deep window on a slow link) is not stalled while they complete.
  std::vector<std::unordered_map<domain::PeerHandle, Clock::time_point>> peer_progress_;
  std::unique_ptr<std::byte[]> scratch_;
  std::vector<std::unique_ptr<domain::MemoryRegion>> scratch_regions_;
  std::unordered_map<std::uint64_t, std::vector<std::vector<domain::PeerHandle>>> peer_groups_;
  // Peers resolved so far, by NetAddr::instance_id (a restarted peer has a new one), each of
  // its groups on first use. The address is kept to check a hit: two engines never share an
  // instance id, but a forged or corrupted descriptor could.
  struct CachedPeer {
    NetAddr address;
    // The last descriptor owner found equal to `address`, held so that its address cannot be
    // reused by another NetAddr while it is cached here.
    std::shared_ptr<const NetAddr> checked_owner;
    std::vector<std::array<domain::PeerHandle, NetAddr::kMaxDomains>> handles;  // per group
    std::vector<bool> resolved;                                                 // per group
    std::uint32_t slot = PeerIndex::kNoSlot;  // PeerIndex::known's answer
  };
  std::unordered_map<std::uint64_t, CachedPeer> peer_cache_;

  PeerIndex* index_ = nullptr;

  Status resolve_cached(const NetAddr& owner, std::uint32_t group, domain::PeerHandle* out,
                        const MrDesc* dst, std::uint32_t* slot);
};

}  // namespace fabric::engine
