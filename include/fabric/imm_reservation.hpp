#pragma once
// Blocks of immediate values that the workloads sharing one engine hand out among themselves
// (TransferEngine::reserve_imms, docs/api.md "Reserved immediates"). A workload counts only
// values of its own blocks, so two workloads on one engine never count each other's arrivals.

#include <cstdint>
#include <memory>
#include <string>

#include "fabric/status.hpp"

namespace fabric {

namespace detail {
class ImmSpace;
}

// Reservations start here; the values below stay free for programs that pick their own
// immediates without reserving (as every program did before reservations existed).
inline constexpr std::uint32_t kFirstReservableImm = 1u << 20;

// One reserved block [first, first + count): move-only, released when destroyed (or release()d),
// also after its engine stopped.
class ImmReservation {
 public:
  ImmReservation() = default;
  ~ImmReservation();
  ImmReservation(ImmReservation&& other) noexcept;
  ImmReservation& operator=(ImmReservation&& other) noexcept;
  ImmReservation(const ImmReservation&) = delete;
  ImmReservation& operator=(const ImmReservation&) = delete;

  [[nodiscard]] std::uint32_t first() const noexcept { return first_; }
  [[nodiscard]] std::uint32_t count() const noexcept { return count_; }
  [[nodiscard]] const std::string& owner() const noexcept { return owner_; }
  [[nodiscard]] bool contains(std::uint32_t imm) const noexcept {
    return count_ > 0 && imm >= first_ && imm - first_ < count_;
  }
  // The block's i-th value; out_of_range past count().
  [[nodiscard]] Result<std::uint32_t> at(std::uint32_t i) const;
  // ok for a value of this block, else invalid_argument naming the owner and the block: the
  // check a workload makes before it counts or sends a value.
  [[nodiscard]] Status check(std::uint32_t imm) const;
  // Gives the block back now; idempotent.
  void release() noexcept;

 private:
  friend class detail::ImmSpace;
  ImmReservation(std::weak_ptr<detail::ImmSpace> space, std::uint32_t first, std::uint32_t count,
                 std::string owner)
      : space_(std::move(space)), first_(first), count_(count), owner_(std::move(owner)) {}

  std::weak_ptr<detail::ImmSpace> space_;
  std::uint32_t first_ = 0;
  std::uint32_t count_ = 0;
  std::string owner_;
};

}  // namespace fabric
