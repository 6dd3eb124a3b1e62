#pragma once
// The engine's book of reserved immediate blocks (fabric/imm_reservation.hpp): which values
// each workload owns, so that no two reservations overlap. Any thread; one mutex.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "fabric/imm_reservation.hpp"

namespace fabric::detail {

class ImmSpace : public std::enable_shared_from_this<ImmSpace> {
 public:
  // A block of `count` values at or above kFirstReservableImm that overlaps none held: the
  // first that fits past the end of the last block handed out, else the first from the bottom,
  // so released values are reused only once the space ran out. With `lowest`
  // (reserve_imms_from): the first that fits at or above it. invalid_argument for count 0 or an
  // empty owner name, or an owner that holds a block already under that name; out_of_range when
  // no gap is that large.
  Result<ImmReservation> reserve(std::uint32_t count, std::string owner,
                                 std::optional<std::uint32_t> lowest = std::nullopt);
  void release(std::uint32_t first) noexcept;
  // Blocks held now.
  [[nodiscard]] std::size_t held() const;

 private:
  struct Block {
    std::uint32_t count = 0;
    std::string owner;
  };
  static constexpr std::uint64_t kEnd = std::uint64_t{1} << 32;
  // The first value at or above `from` where `count` values overlap no block held (past kEnd
  // when none). With mutex_ held.
  [[nodiscard]] std::uint64_t fit(std::uint32_t count, std::uint64_t from) const;

  mutable std::mutex mutex_;
  std::map<std::uint32_t, Block> blocks_;  // by first value
  std::uint64_t next_ = kFirstReservableImm;  // the end of the last block handed out
};

}  // namespace fabric::detail
