#include "fabric/weights/imms.hpp"

#include <fmt/format.h>

#include <atomic>

namespace fabric::weights {

Result<ImmReservation> reserve_update_imms(TransferEngine& engine) {
  // A name per reservation: two ranks' updates in one process get disjoint blocks.
  static std::atomic<std::uint64_t> reservations{0};
  auto r = engine.reserve_imms(kUpdateImms, fmt::format("weights#{}", ++reservations));
  if (!r.ok()) {
    return Status(r.status().code(), "weights: reserving update immediates: " + r.status().message());
  }
  return r;
}

ImmBlock block_of(const ImmReservation& reservation) noexcept {
  return {reservation.first(), reservation.count()};
}

namespace {
std::uint32_t slot(ImmBlock block, std::uint64_t version) noexcept {
  return block.first + static_cast<std::uint32_t>(version % kVersionsPerBlock) * (1 + kMaxMeshGroups);
}
}  // namespace

std::uint32_t data_imm(ImmBlock block, std::uint64_t version) noexcept {
  return slot(block, version);
}

std::uint32_t barrier_imm(ImmBlock block, std::uint64_t version, std::uint32_t group) noexcept {
  return slot(block, version) + 1 + group % kMaxMeshGroups;
}

}  // namespace fabric::weights
