#pragma once
// The immediates of weight updates when the engine is shared with other workloads: each rank
// that receives them (an inference rank: data and commit; a trainer: barriers) reserves one
// block on its engine and hands it to the trainers with its descriptor (ExecutorPeers).

#include <cstdint>

#include "fabric/engine.hpp"

namespace fabric::weights {

// A block's values per version: one data value, then one barrier value per mesh group.
inline constexpr std::uint32_t kMaxMeshGroups = 16;
// Versions a block tells apart: version v and v + kVersionsPerBlock share values, so arrivals
// of a failed update could complete one that many versions later, never an earlier one.
inline constexpr std::uint32_t kVersionsPerBlock = 1024;
inline constexpr std::uint32_t kUpdateImms = kVersionsPerBlock * (1 + kMaxMeshGroups);

// A peer's block as the trainers learn it (out of band, beside its MrDesc).
struct ImmBlock {
  std::uint32_t first = 0;
  std::uint32_t count = 0;
  friend bool operator==(const ImmBlock&, const ImmBlock&) = default;
};

// kUpdateImms values on `engine` for one rank's updates (owner "weights#<n>"), released when
// the reservation is destroyed; out_of_range naming the owner when none is free.
[[nodiscard]] Result<ImmReservation> reserve_update_imms(TransferEngine& engine);
[[nodiscard]] ImmBlock block_of(const ImmReservation& reservation) noexcept;

// Update `version`'s values in `block` (at least kUpdateImms values; group < kMaxMeshGroups):
// every data write and commit carries data_imm; the barrier after mesh group g, barrier_imm.
[[nodiscard]] std::uint32_t data_imm(ImmBlock block, std::uint64_t version) noexcept;
[[nodiscard]] std::uint32_t barrier_imm(ImmBlock block, std::uint64_t version,
                                        std::uint32_t group) noexcept;

}  // namespace fabric::weights
