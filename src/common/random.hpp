#pragma once
// 64 random bits from the OS (std::random_device reads getrandom on Linux): for values that must
// differ between processes and between incarnations of one (instance ids, MR keys, file names).

#include <cstdint>
#include <random>

namespace fabric {

[[nodiscard]] inline std::uint64_t random_u64() {
  std::random_device rd;
  return (std::uint64_t{rd()} << 32) ^ rd();
}

}  // namespace fabric
