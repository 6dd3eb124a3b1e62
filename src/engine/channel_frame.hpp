#pragma once
// The header in front of every channel message (docs/api.md, "Channels"), little-endian through
// common/wire:
//   u8  version (1)   u8 flags (0)   u16 A: bytes of the sender's address   u32 reserved (0)
//   u64 channel id (channel_id(name))
//   u64 sender instance id (NetAddr::instance_id)
//   A bytes: the sender's NetAddr::encode()
// then the payload. The address travels with every message so that a receiver can answer a peer
// it has never heard of; it decodes it only the first time it sees the instance id.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "fabric/net_addr.hpp"

namespace fabric::engine {

inline constexpr std::uint8_t kChannelFrameVersion = 1;
inline constexpr std::size_t kChannelFixedHeaderBytes = 24;

// Everything before the payload, for one channel of one engine: built once when it opens.
std::vector<std::byte> channel_prefix(std::uint64_t channel, const NetAddr& sender);

struct ChannelFrame {
  std::uint64_t channel = 0;
  std::uint64_t sender = 0;
  std::span<const std::byte> sender_address;
  std::span<const std::byte> payload;
};

// nullopt for bytes that are not a channel frame of a version this engine reads.
std::optional<ChannelFrame> parse_channel_frame(std::span<const std::byte> bytes);

}  // namespace fabric::engine
