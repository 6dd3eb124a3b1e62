#include "libfabric/av_entries.hpp"

#include <fmt/format.h>

namespace fabric::ofi {

domain::PeerHandle AvEntries::find(std::string_view address) const {
  const auto it = by_address_.find(std::string(address));
  if (it == by_address_.end()) return kNoPeer;
  return make_handle(it->second, entries_[it->second].generation);
}

domain::PeerHandle AvEntries::adopt(std::string address, fi_addr_t index,
                                    std::unique_ptr<ShmPeerLiveness> liveness) {
  if (entries_.size() <= index) entries_.resize(index + 1);
  Entry& e = entries_[index];
  // An index the provider hands out is free on its side: whatever this table still knew of it
  // (a fenced peer's entry removed without this table's release) is over.
  if (e.in_use) release(index, "its address-vector entry was given to another peer");
  e.in_use = true;
  e.posted = 0;
  e.address = address;
  e.liveness = std::move(liveness);
  by_address_.insert_or_assign(std::move(address), index);
  return make_handle(index, e.generation);
}

void AvEntries::release(fi_addr_t index, std::string why) {
  if (index >= entries_.size() || !entries_[index].in_use) return;
  Entry& e = entries_[index];
  by_address_.erase(e.address);
  e.in_use = false;
  ++e.generation;
  e.posted = 0;
  e.address.clear();
  e.liveness.reset();  // closes its descriptors
  e.released_why = std::move(why);
}

std::vector<AvEntries::Gone> AvEntries::gone_and_idle() {
  std::vector<Gone> gone;
  for (fi_addr_t i = 0; i < entries_.size(); ++i) {
    Entry& e = entries_[i];
    if (!e.in_use || !e.liveness) continue;
    if (!e.liveness->gone()) (void)e.liveness->check();
    if (e.liveness->gone() && e.posted == 0) gone.push_back({i, e.liveness->describe_gone()});
  }
  return gone;
}

Status AvEntries::stale(domain::PeerHandle handle) const {
  const fi_addr_t index = index_of(handle);
  const std::uint32_t generation = generation_of(handle);
  if (index < entries_.size()) {
    const Entry& e = entries_[index];
    // The entry's last release is this handle's own when the generation moved on by one.
    const bool own_release = e.generation == generation + 1;
    if (own_release && !e.released_why.empty()) {
      return {Errc::provider,
              fmt::format("stale peer handle (address-vector entry {}, generation {}): {}; "
                          "nothing was sent",
                          index, generation, e.released_why)};
    }
  }
  return {Errc::provider,
          fmt::format("stale peer handle (address-vector entry {}, generation {}): the entry was "
                      "released and may belong to another peer now; nothing was sent",
                      index, generation)};
}

}  // namespace fabric::ofi
