#include "engine/domain_group.hpp"

#include <algorithm>
#include <cstring>

namespace fabric::engine {

namespace {
constexpr std::size_t kScratchBytes = 64;

// Whether a cached peer's Domains of `group` are the owner's: byte compares only (the backend
// and provider of every owner were checked at submit, against this engine's own).
bool same_domain_addresses(const NetAddr& cached, const NetAddr& owner, std::uint32_t group) {
  if (cached.num_domains() != owner.num_domains() || cached.num_groups() != owner.num_groups()) {
    return false;
  }
  for (std::size_t d = 0; d < owner.num_domains(); ++d) {
    const auto a = cached.domain_address(group, d);
    const auto b = owner.domain_address(group, d);
    if (a.size() != b.size() || std::memcmp(a.data(), b.data(), a.size()) != 0) return false;
  }
  return true;
}
}  // namespace

Status DomainGroup::adopt(std::vector<std::unique_ptr<domain::Domain>> domains) {
  if (domains.empty()) return {Errc::provider, "the backend opened no Domain for this group"};
  domains_ = std::move(domains);
  tx_in_flight_.assign(domains_.size(), 0);
  tx_posted_.assign(domains_.size(), 0);
  tx_depth_.assign(domains_.size(), 0);
  peer_progress_.assign(domains_.size(), {});
  for (std::size_t d = 0; d < domains_.size(); ++d) tx_depth_[d] = domains_[d]->limits().tx_depth;
  scratch_ = std::make_unique<std::byte[]>(kScratchBytes);
  for (auto& d : domains_) {
    auto region = d->register_memory(domain::MemorySpan::host(scratch_.get(), kScratchBytes),
                                     static_cast<Access>(0));
    if (!region) return region.status();
    scratch_regions_.push_back(std::move(region).value());
  }
  return Status::success();
}

Status DomainGroup::resolve_owner(const NetAddr& owner, std::uint32_t group,
                                  domain::PeerHandle* out, std::uint32_t* slot) {
  return resolve_cached(owner, group, out, nullptr, slot);
}

Status DomainGroup::resolve_owner(const MrDesc& dst, domain::PeerHandle* out,
                                  std::uint32_t* slot) {
  return resolve_cached(dst.owner(), dst.group(), out, &dst, slot);
}

Status DomainGroup::resolve_cached(const NetAddr& owner, std::uint32_t group,
                                   domain::PeerHandle* out, const MrDesc* dst,
                                   std::uint32_t* slot) {
  const std::size_t k = domains_.size();
  auto it = peer_cache_.find(owner.instance_id());
  if (it != peer_cache_.end() && &owner != it->second.checked_owner.get()) {
    if (!same_domain_addresses(it->second.address, owner, group)) {
      // Another engine under a known instance id (forged or corrupted): never its handles.
      peer_cache_.erase(it);
      it = peer_cache_.end();
    } else if (dst != nullptr && it->second.address == owner) {
      // Equal in every group, not only this one: a later hit skips the compare for good.
      it->second.checked_owner = dst->shared_owner();
    }
  }
  if (it != peer_cache_.end() && it->second.resolved[group]) {
    std::copy_n(it->second.handles[group].begin(), k, out);
    if (slot != nullptr) *slot = it->second.slot;
    return Status::success();
  }
  std::array<domain::PeerHandle, NetAddr::kMaxDomains> handles{};
  for (std::size_t d = 0; d < k; ++d) {
    auto handle = domains_[d]->resolve_peer(owner.domain_address(group, d));
    if (!handle) return handle.status();
    handles[d] = *handle;
  }
  std::copy_n(handles.begin(), k, out);
  if (it == peer_cache_.end()) {
    CachedPeer fresh;
    fresh.address = owner;
    if (dst != nullptr) fresh.checked_owner = dst->shared_owner();
    fresh.handles.resize(owner.num_groups());
    fresh.resolved.assign(owner.num_groups(), false);
    if (index_ != nullptr) fresh.slot = index_->known(owner.instance_id());
    it = peer_cache_.insert_or_assign(owner.instance_id(), std::move(fresh)).first;
  }
  it->second.handles[group] = handles;
  it->second.resolved[group] = true;
  if (slot != nullptr) *slot = it->second.slot;
  return Status::success();
}

Status DomainGroup::add_peer_group(std::uint64_t id, const std::vector<NetAddr>& peers) {
  const std::size_t k = domains_.size();
  std::vector<std::vector<domain::PeerHandle>> table(peers.size());
  for (std::size_t p = 0; p < peers.size(); ++p) {
    table[p].resize(peers[p].num_groups() * k);
    for (std::size_t g = 0; g < peers[p].num_groups(); ++g) {
      for (std::size_t d = 0; d < k; ++d) {
        auto handle = domains_[d]->resolve_peer(peers[p].domain_address(g, d));
        if (!handle) return handle.status();
        table[p][g * k + d] = *handle;
      }
    }
  }
  peer_groups_.insert_or_assign(id, std::move(table));
  if (index_ != nullptr) {
    for (const NetAddr& peer : peers) (void)index_->known(peer.instance_id());
  }
  return Status::success();
}

const std::vector<std::vector<domain::PeerHandle>>* DomainGroup::peer_group(
    std::uint64_t id) const {
  auto it = peer_groups_.find(id);
  return it == peer_groups_.end() ? nullptr : &it->second;
}

Status DomainGroup::fence_peer(const NetAddr& peer) {
  // Every group of the peer may write to every group of ours; the cache must not hand out the
  // handles the Domains dropped.
  peer_cache_.erase(peer.instance_id());
  for (std::size_t g = 0; g < peer.num_groups(); ++g) {
    for (std::size_t d = 0; d < domains_.size(); ++d) {
      if (auto st = domains_[d]->fence_peer(peer.domain_address(g, d)); !st.ok()) return st;
    }
  }
  return Status::success();
}

Status DomainGroup::post_send(domain::PeerHandle peer, const void* buf, std::size_t len,
                              void* desc, domain::Token token) {
  Status st = domains_[0]->post_send(peer, buf, len, desc, token);
  if (st.ok()) took(0);
  return st;
}

void DomainGroup::completed(std::size_t d, const domain::PeerHandle* peer, Clock::time_point now) {
  --tx_in_flight_[d];
  if (peer != nullptr) peer_progress_[d][*peer] = now;
}

DomainGroup::Clock::time_point DomainGroup::last_heard(const domain::PeerHandle* peers,
                                                       Clock::time_point since) const {
  Clock::time_point latest = since;
  for (std::size_t d = 0; d < domains_.size(); ++d) {
    const auto it = peer_progress_[d].find(peers[d]);
    if (it != peer_progress_[d].end()) latest = std::max(latest, it->second);
  }
  return latest;
}

bool DomainGroup::provider_holds_unread_bytes() const noexcept {
  return std::any_of(domains_.begin(), domains_.end(),
                     [](const auto& d) { return d->progress_pending(); });
}

std::vector<int> DomainGroup::wait_fds() const {
  std::vector<int> fds;
  for (const auto& d : domains_) fds.push_back(d->wait_fd());
  return fds;
}

std::uint64_t DomainGroup::in_flight() const noexcept {
  std::uint64_t n = 0;
  for (auto v : tx_in_flight_) n += v;
  return n;
}

std::uint64_t DomainGroup::depth() const noexcept {
  std::uint64_t n = 0;
  for (auto v : tx_depth_) n += v;
  return n;
}

void DomainGroup::close_endpoints() {
  for (auto& d : domains_) d->close_endpoint();
}

}  // namespace fabric::engine
