#include "engine/channel_frame.hpp"

#include <string_view>

#include "common/wire.hpp"
#include "fabric/channel.hpp"

namespace fabric {

std::uint64_t channel_id(std::string_view name) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace fabric

namespace fabric::engine {

std::vector<std::byte> channel_prefix(std::uint64_t channel, const NetAddr& sender) {
  const std::vector<std::byte> address = sender.encode();
  wire::Writer w;
  w.u8(kChannelFrameVersion);
  w.u8(0);
  w.u16(static_cast<std::uint16_t>(address.size()));
  w.u32(0);
  w.u64(channel);
  w.u64(sender.instance_id());
  w.bytes(address);
  return std::move(w).take();
}

std::optional<ChannelFrame> parse_channel_frame(std::span<const std::byte> bytes) {
  wire::Reader r(bytes);
  const auto version = r.u8();
  const auto flags = r.u8();
  const auto address_len = r.u16();
  const auto reserved = r.u32();
  const auto channel = r.u64();
  const auto sender = r.u64();
  if (!sender || *version != kChannelFrameVersion || *flags != 0 || *reserved != 0) {
    return std::nullopt;
  }
  const auto address = r.bytes(*address_len);
  if (!address) return std::nullopt;
  return ChannelFrame{*channel, *sender, *address, bytes.subspan(bytes.size() - r.remaining())};
}

}  // namespace fabric::engine
