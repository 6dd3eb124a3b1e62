#pragma once
// The engine's book of reserved immediate blocks (fabric/imm_reservation.hpp): which values
// each workload owns, so that no two reservations overlap. Any thread; one mutex.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "fabric/imm_reservation.hpp"

namespace fabric::detail {

class ImmSpace : public std::enable_shared_from_this<ImmSpace> {
 public:
  // The lowest block of `count` values at or above kFirstReservableImm that overlaps none held.
  // invalid_argument for count 0 or an empty owner name, or an owner that holds a block already
  // under that name; out_of_range when no gap is that large.
  Result<ImmReservation> reserve(std::uint32_t count, std::string owner);
  void release(std::uint32_t first) noexcept;
  // Blocks held now.
  [[nodiscard]] std::size_t held() const;

 private:
  struct Block {
    std::uint32_t count = 0;
    std::string owner;
  };
  mutable std::mutex mutex_;
  std::map<std::uint32_t, Block> blocks_;  // by first value
};

}  // namespace fabric::detail
