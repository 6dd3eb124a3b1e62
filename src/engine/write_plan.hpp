#pragma once
// How a single write becomes WRITEs: the sharding that fixes the receiver's
// immediate count (docs/api.md, "Immediate counts").

#include <cstdint>
#include <vector>

#include "fabric/requests.hpp"
#include "fabric/status.hpp"

namespace fabric::engine {

// Upper bound on shards per single write: keeps a typo from allocating gigabytes.
inline constexpr std::uint32_t kMaxShards = 4096;

struct WritePiece {
  std::uint64_t offset = 0;  // from the start of the request's range
  std::uint64_t length = 0;
  std::uint32_t domain = 0;
};

// The WRITEs of a single write in posting order; one immediate each when the
// request carries one.
Result<std::vector<WritePiece>> plan_single_write(std::uint64_t length,
                                                  const WriteRouting& routing,
                                                  std::uint32_t num_domains,
                                                  std::uint64_t max_write = kMaxWriteBytes);
// The same, appended to `out`: the engine plans into a pooled Op's vector, whose storage
// outlives the request, so planning allocates nothing once it has grown.
Status plan_single_write_into(std::vector<WritePiece>& out, std::uint64_t length,
                              const WriteRouting& routing, std::uint32_t num_domains,
                              std::uint64_t max_write = kMaxWriteBytes);

// One WRITE of a scatter: which peer, which Domain, which bytes.
struct ScatterPiece {
  std::uint32_t peer = 0;
  std::uint32_t domain = 0;
  std::uint64_t src_offset = 0;  // absolute, in the source registration
  std::uint64_t dst_offset = 0;  // absolute, in the peer's registration
  std::uint64_t length = 0;
};

// The WRITEs of a scatter in posting order (peer-major); one immediate each.
Result<std::vector<ScatterPiece>> plan_scatter(const std::vector<ScatterSlice>& slices,
                                               const ScatterRouting& routing,
                                               std::uint32_t num_domains,
                                               std::uint64_t max_write = kMaxWriteBytes);
// The same, appended to `out` (see plan_single_write_into).
Status plan_scatter_into(std::vector<ScatterPiece>& out, const std::vector<ScatterSlice>& slices,
                         const ScatterRouting& routing, std::uint32_t num_domains,
                         std::uint64_t max_write = kMaxWriteBytes);

}  // namespace fabric::engine
