// The group's immediate block, agreed among its ranks (agree_imm_block in group_impl.hpp).

#include <fmt/format.h>

#include <algorithm>
#include <atomic>

#include "blob.hpp"
#include "group_impl.hpp"

namespace fabric::moe {

namespace {
// Offers rise every round and a block free at the highest offer is taken there, so rounds end
// within a few (one per block in the way); this bound only stops a broken all_gather.
constexpr int kMaxRounds = 64;
}  // namespace

Result<ImmReservation> agree_imm_block(TransferEngine& engine, const MoeConfig& config,
                                       const AllGather& all_gather) {
  // A name per group: two groups on one engine are two owners with disjoint blocks.
  static std::atomic<std::uint64_t> groups{0};
  const std::string owner = fmt::format("moe.group#{}", ++groups);
  const std::uint32_t count = kImmKinds * config.world_size;
  std::uint32_t lowest = kFirstReservableImm;
  for (int round = 0; round < kMaxRounds; ++round) {
    // The first offer is where the engine puts a new block (next fit: past recently released
    // ones, whose in-flight arrivals a new group must not count); later ones the first free
    // block at or above the highest offer, which is above every rank's recently released values.
    auto mine = round == 0 ? engine.reserve_imms(count, owner) : engine.reserve_imms_from(lowest, count, owner);
    // Every rank takes part in every round, also one that failed (offer 0), so that all leave
    // at the same round with the same answer.
    auto offers = all_gather(encode_imm_offer(mine.ok() ? mine->first() : 0));
    if (!offers.ok()) return offers.status();
    if (offers->size() != config.world_size)
      return Status(Errc::invalid_argument,
                    fmt::format("moe: all_gather returned {} offers for {} ranks", offers->size(),
                                config.world_size));
    std::uint32_t highest = 0;
    bool agreed = true;
    for (std::uint32_t r = 0; r < offers->size(); ++r) {
      auto first = decode_imm_offer((*offers)[r]);
      if (!first.ok()) return first.status();
      if (*first == 0) {
        if (!mine.ok()) return mine.status();
        return Status(Errc::out_of_range,
                      fmt::format("moe: rank {} has no free block of {} immediates at or above "
                                  "{:#x} for the group",
                                  r, count, lowest));
      }
      if (r > 0 && *first != highest) agreed = false;
      highest = std::max(highest, *first);
    }
    if (agreed) return std::move(mine).value();
    lowest = highest;  // `mine` is released here, before the next round reserves again
  }
  return Status(Errc::timeout,
                fmt::format("moe: ranks did not agree on an immediate block in {} rounds",
                            kMaxRounds));
}

}  // namespace fabric::moe
