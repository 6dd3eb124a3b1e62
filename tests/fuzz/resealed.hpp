#pragma once
// The input with its last 4 bytes replaced by the CRC-32 of the rest, as the
// version 2 wire formats end (docs/api.md#wire-formats).

#include <cstddef>
#include <span>
#include <vector>

#include "common/wire.hpp"

namespace fuzz {

inline std::vector<std::byte> resealed(std::span<const std::byte> input) {
  std::vector<std::byte> out(input.begin(), input.end());
  if (out.size() < 4) return out;
  out.resize(out.size() - 4);
  fabric::wire::Writer w;
  w.bytes(out);
  w.seal();
  return std::move(w).take();
}

}  // namespace fuzz
