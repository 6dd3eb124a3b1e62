#pragma once
// Request checks done on the caller's thread, before anything is queued.
// Every message names the bad value.

#include <cstdint>
#include <vector>

#include "fabric/memory.hpp"
#include "fabric/net_addr.hpp"
#include "fabric/requests.hpp"
#include "fabric/status.hpp"

namespace fabric::engine {

struct LocalIdentity {
  const void* engine = nullptr;
  Backend backend = Backend::libfabric;
  std::string provider;
  std::size_t num_domains = 1;
  bool reads = false;  // every Domain of every group can READ
};

// A peer must speak the same backend and provider with the same Domain count.
Status check_peer(const NetAddr& peer, const LocalIdentity& self);
Status check_source(const MrHandle& mr, const LocalIdentity& self);
Status check_local_range(const MrHandle& mr, std::uint64_t offset, std::uint64_t length);
Status check_remote(const MrDesc& mr, const LocalIdentity& self);
Status check_remote_range(const MrDesc& mr, std::uint64_t offset, std::uint64_t length);
// The mode must be one of the enum's values; the Domain bounds are checked
// where the plan is made (write_plan.cpp) or here for scatters.
Status check_write_routing(const WriteRouting& routing);
Status check_scatter_routing(const ScatterRouting& routing, std::size_t num_domains);
Status check_single_write(const SingleWrite& w, const LocalIdentity& self);
// Each slice's destination and both its ranges; the message names the slice.
Status check_scatter_slices(const MrHandle& src, const std::vector<ScatterSlice>& slices,
                            const LocalIdentity& self);
Status check_paged_write(const PagedWrite& w, const LocalIdentity& self);
// Reads: as the writes, with the sides swapped, plus the provider's READ support and the source
// descriptor's Access::remote_read.
Status check_single_read(const SingleRead& r, const LocalIdentity& self);
Status check_paged_read(const PagedRead& r, const LocalIdentity& self);

}  // namespace fabric::engine
