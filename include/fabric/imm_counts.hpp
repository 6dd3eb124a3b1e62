#pragma once
// How many immediates a request delivers to its receiver (docs/api.md, "Immediate counts"): the
// rule the engine plans its WRITEs by, for a receiver to wait by. The workloads and the Python
// package call these; none restates the rule.

#include <cstdint>

#include "fabric/requests.hpp"
#include "fabric/status.hpp"

namespace fabric {

// One submit_single_write of `length` bytes with an imm, over a group of `num_domains` Domains:
// one per WRITE after sharding (an empty shard still sends one) and splitting at
// kMaxWriteBytes. invalid_argument for no Domain, a pinned Domain past the last, or more shards
// than the engine takes.
[[nodiscard]] Result<std::uint64_t> single_write_imm_count(
    std::uint64_t length, std::uint32_t num_domains,
    const WriteRouting& routing = WriteRouting::all_domains());

// One submit_paged_writes with an imm: one per page.
[[nodiscard]] constexpr std::uint64_t paged_writes_imm_count(std::uint64_t num_pages) noexcept {
  return num_pages;
}

// What each receiving peer of a submit_scatter with an imm sees for its slice of `length` bytes.
[[nodiscard]] Result<std::uint64_t> scatter_imm_count(
    std::uint64_t length, std::uint32_t num_domains,
    const ScatterRouting& routing = ScatterRouting::peers());

}  // namespace fabric
