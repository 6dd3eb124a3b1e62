#include "engine/imm_space.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace fabric {

namespace detail {

Result<ImmReservation> ImmSpace::reserve(std::uint32_t count, std::string owner,
                                        std::optional<std::uint32_t> lowest) {
  if (count == 0) return Status(Errc::invalid_argument, "reserve_imms: count must be > 0");
  if (owner.empty()) {
    return Status(Errc::invalid_argument, "reserve_imms: name the owner (the workload)");
  }
  std::lock_guard lock(mutex_);
  for (const auto& [first, block] : blocks_) {
    if (block.owner == owner) {
      return Status(Errc::invalid_argument,
                    fmt::format("reserve_imms: \"{}\" holds [{:#x}, +{}) already; one block per "
                                "owner, so that two workloads cannot share a name",
                                owner, first, block.count));
    }
  }
  // Next fit: from the end of the last block handed out, then (the space used up) from the
  // bottom. So a released block's values stay unused as long as possible: an arrival still in
  // flight for its old owner (a dead peer's WRITE, counted after the owner let go of its
  // counters) would otherwise be counted by the next owner. Blocks are few: a walk is enough.
  // reserve_imms_from asks for the lowest free block at or above `lowest` instead: ranks that
  // agree on one block need every engine to take it there if it is free.
  const std::uint32_t floor = std::max(lowest.value_or(0), kFirstReservableImm);
  std::uint64_t candidate = fit(count, lowest ? floor : std::max<std::uint64_t>(floor, next_));
  if (candidate + count > kEnd && !lowest) candidate = fit(count, floor);
  if (candidate + count > kEnd) {
    return Status(Errc::out_of_range,
                  fmt::format("reserve_imms: no free block of {} immediates at or above {:#x} "
                              "for \"{}\" ({} blocks held)",
                              count, floor, owner,
                              blocks_.size()));
  }
  const auto first = static_cast<std::uint32_t>(candidate);
  next_ = std::max(next_, candidate + count);
  blocks_.emplace(first, Block{count, owner});
  return ImmReservation(weak_from_this(), first, count, std::move(owner));
}

std::uint64_t ImmSpace::fit(std::uint32_t count, std::uint64_t from) const {
  std::uint64_t candidate = from;
  for (const auto& [first, block] : blocks_) {
    if (std::uint64_t{first} + block.count <= candidate) continue;  // wholly below
    if (candidate + count <= first) break;
    candidate = std::uint64_t{first} + block.count;
  }
  return candidate;
}

void ImmSpace::release(std::uint32_t first) noexcept {
  std::lock_guard lock(mutex_);
  blocks_.erase(first);
}

std::size_t ImmSpace::held() const {
  std::lock_guard lock(mutex_);
  return blocks_.size();
}

}  // namespace detail

ImmReservation::~ImmReservation() { release(); }

ImmReservation::ImmReservation(ImmReservation&& other) noexcept
    : space_(std::move(other.space_)),
      first_(other.first_),
      count_(std::exchange(other.count_, 0)),
      owner_(std::move(other.owner_)) {}

ImmReservation& ImmReservation::operator=(ImmReservation&& other) noexcept {
  if (this != &other) {
    release();
    space_ = std::move(other.space_);
    first_ = other.first_;
    count_ = std::exchange(other.count_, 0);
    owner_ = std::move(other.owner_);
  }
  return *this;
}

Result<std::uint32_t> ImmReservation::at(std::uint32_t i) const {
  if (i >= count_) {
    return Status(Errc::out_of_range, fmt::format("immediate {} of \"{}\"'s block of {}", i,
                                                  owner_, count_));
  }
  return first_ + i;
}

Status ImmReservation::check(std::uint32_t imm) const {
  if (contains(imm)) return Status::success();
  return Status(Errc::invalid_argument,
                fmt::format("immediate {:#x} is outside \"{}\"'s block [{:#x}, +{})", imm, owner_,
                            first_, count_));
}

void ImmReservation::release() noexcept {
  if (count_ == 0) return;
  if (auto space = space_.lock()) space->release(first_);
  count_ = 0;
  space_.reset();
}

}  // namespace fabric
