#pragma once
// --sizes: which write sizes the single_write sweep runs.

#include <cstdint>
#include <string>
#include <vector>

namespace bench {

// The largest single_write the sweep runs: its buffer's size.
inline constexpr std::uint64_t kMaxSingleWrite = 64u << 20;

// "4K,64K,1M" (a list), "4K-64M" (every power of two from 4 KiB to 64 MiB),
// or "all" (every power of two from 8 B to `max_bytes`). Suffixes K, M, G
// are binary. Sizes must be multiples of 8 (the data checks hash words) and
// at most `max_bytes`; anything else throws, naming the offending part.
std::vector<std::uint64_t> parse_sizes(const std::string& spec, std::uint64_t max_bytes);

}  // namespace bench
