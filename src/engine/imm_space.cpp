#include "engine/imm_space.hpp"

#include <fmt/format.h>

namespace fabric {

namespace detail {

Result<ImmReservation> ImmSpace::reserve(std::uint32_t count, std::string owner) {
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
  // First fit from the bottom: blocks are few (one per workload), so a walk is enough.
  std::uint64_t candidate = kFirstReservableImm;
  for (const auto& [first, block] : blocks_) {
    if (candidate + count <= first) break;
    candidate = std::max<std::uint64_t>(candidate, std::uint64_t{first} + block.count);
  }
  if (candidate + count > (std::uint64_t{1} << 32)) {
    return Status(Errc::out_of_range,
                  fmt::format("reserve_imms: no free block of {} immediates for \"{}\" ({} "
                              "blocks held)",
                              count, owner, blocks_.size()));
  }
  const auto first = static_cast<std::uint32_t>(candidate);
  blocks_.emplace(first, Block{count, owner});
  return ImmReservation(weak_from_this(), first, count, std::move(owner));
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
