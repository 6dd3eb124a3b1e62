#pragma once
// A SEND's bytes carry their own check: sequence number, salt, then a stream derived from both,
// so the receiving peer verifies each message alone and marks its sequence number as seen.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace fabric::field {

inline constexpr std::size_t kMinMessage = 16;

[[nodiscard]] std::vector<std::byte> make_message(std::uint64_t seq, std::uint64_t salt,
                                                  std::size_t size);
// The sequence number of an intact message, nullopt for anything else.
[[nodiscard]] std::optional<std::uint64_t> check_message(std::span<const std::byte> message);

}  // namespace fabric::field
