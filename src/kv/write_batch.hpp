#pragma once
// Turns a plan's runs into the engine's paged writes: runs of equal length form one
// PagedWrite per (layer, part), addressed as index * unit from the part's base, where unit is
// the gcd of the layout's strides (so every run start is a whole number of units).

#include <cstdint>
#include <span>
#include <vector>

#include "fabric/kv/layout.hpp"
#include "fabric/kv/plan.hpp"
#include "fabric/requests.hpp"

namespace fabric::kv {

struct WriteBatch {
  struct Group {
    std::uint64_t length = 0;
    std::vector<std::uint32_t> src_index;
    std::vector<std::uint32_t> dst_index;
  };
  std::vector<Group> groups;
  std::uint64_t src_unit = 1;
  std::uint64_t dst_unit = 1;
  std::size_t runs = 0;
};

// Errors: a run naming a page past either page list, or an address that does not fit 32-bit
// indices of the unit (Errc::unsupported).
[[nodiscard]] Result<WriteBatch> make_batch(const KvLayout& src,
                                            std::span<const std::uint32_t> src_pages,
                                            const KvLayout& dst,
                                            std::span<const std::uint32_t> dst_pages,
                                            std::span<const Run> runs);

// The group's write of (layer, part): sources in src_region, destinations in dst_region.
[[nodiscard]] PagedWrite paged_write(const WriteBatch& batch, const WriteBatch::Group& group,
                                     const KvLayout& src, const KvLayout& dst,
                                     std::uint32_t layer, std::uint32_t part,
                                     const MrHandle& src_region, const MrDesc& dst_region,
                                     std::uint32_t imm);

}  // namespace fabric::kv
