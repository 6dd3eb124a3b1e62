#pragma once
// The address-vector entries one FiDomain holds: which peer address each belongs to, how many
// operations posted to it the provider still owes a completion for, whether (shm) its peer is
// still there, and a generation. The generation travels in the high half of the PeerHandle the
// engine caches, so once an entry is released (its peer found gone, or fenced) every handle to
// it fails with the reason instead of reaching whichever peer the provider gives the entry to
// next: libfabric hands removed FI_AV_TABLE indices out again, and shm holds only 256.
//
// Pure bookkeeping: FiDomain makes the fi_av_insert and fi_av_remove calls. Worker thread only.

#include <rdma/fabric.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "domain/domain.hpp"
#include "fabric/status.hpp"
#include "libfabric/shm_liveness.hpp"

namespace fabric::ofi {

class AvEntries {
 public:
  // The handle of no peer (a receive's context).
  static constexpr domain::PeerHandle kNoPeer = ~domain::PeerHandle{0};

  [[nodiscard]] static fi_addr_t index_of(domain::PeerHandle handle) noexcept {
    return handle & 0xffff'ffffu;
  }

  // The live handle of `address`, or kNoPeer when it holds no entry.
  [[nodiscard]] domain::PeerHandle find(std::string_view address) const;
  // Records the entry fi_av_insert gave `address`; returns its handle. `liveness` may be null
  // (not shm, or an address this library did not name).
  domain::PeerHandle adopt(std::string address, fi_addr_t index,
                           std::unique_ptr<ShmPeerLiveness> liveness);

  // Ok when the handle's entry is still its peer's and that peer is not known to be gone;
  // otherwise why nothing may be posted to it. Runs before every post: an index, a compare,
  // and shm's throttled look at the peer.
  [[nodiscard]] Status check(domain::PeerHandle handle) {
    const fi_addr_t index = index_of(handle);
    if (index >= entries_.size()) return stale(handle);
    Entry& e = entries_[index];
    if (!e.in_use || e.generation != generation_of(handle)) return stale(handle);
    return e.liveness ? e.liveness->check() : Status::success();
  }
  // The provider took an operation for the handle's peer / gave its completion back. A
  // completion for an entry released since (a fenced peer's) counts for nothing.
  void posted(domain::PeerHandle handle) noexcept { ++entries_[index_of(handle)].posted; }
  void completed(domain::PeerHandle handle) noexcept {
    const fi_addr_t index = index_of(handle);
    if (index < entries_.size() && entries_[index].generation == generation_of(handle) &&
        entries_[index].posted > 0) {
      --entries_[index].posted;
    }
  }

  // Forgets the entry (after fi_av_remove): its handles fail from now on with `why`, its
  // address resolves to a new entry.
  void release(fi_addr_t index, std::string why);
  // Looks at every watched peer (shm): those found gone with nothing posted to them, whose
  // entries may be removed now, each with why it is gone.
  struct Gone {
    fi_addr_t index;
    std::string why;
  };
  [[nodiscard]] std::vector<Gone> gone_and_idle();

  [[nodiscard]] std::size_t in_use() const noexcept { return by_address_.size(); }
  // Operations posted to the handle's entry and not completed (0 for a stale handle).
  [[nodiscard]] std::uint32_t outstanding(domain::PeerHandle handle) const noexcept {
    const fi_addr_t index = index_of(handle);
    if (index >= entries_.size() || entries_[index].generation != generation_of(handle)) return 0;
    return entries_[index].posted;
  }

 private:
  struct Entry {
    bool in_use = false;
    std::uint32_t generation = 0;  // bumped on release
    std::uint32_t posted = 0;
    std::string address;
    std::unique_ptr<ShmPeerLiveness> liveness;
    std::string released_why;  // of the last release
  };

  [[nodiscard]] static std::uint32_t generation_of(domain::PeerHandle handle) noexcept {
    return static_cast<std::uint32_t>(handle >> 32);
  }
  [[nodiscard]] static domain::PeerHandle make_handle(fi_addr_t index, std::uint32_t generation) {
    return (domain::PeerHandle{generation} << 32) | index;
  }
  [[nodiscard]] Status stale(domain::PeerHandle handle) const;

  std::vector<Entry> entries_;  // by fi_addr: FI_AV_TABLE hands indices out from 0
  std::unordered_map<std::string, fi_addr_t> by_address_;
};

}  // namespace fabric::ofi
