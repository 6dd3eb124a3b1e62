#include "messages.hpp"

#include <cstring>

#include "fabric_test/data.hpp"

namespace fabric::field {

namespace {
std::uint64_t stream_seed(std::uint64_t seq, std::uint64_t salt) {
  return seq * 0x9e3779b97f4a7c15ull ^ salt;
}
}  // namespace

std::vector<std::byte> make_message(std::uint64_t seq, std::uint64_t salt, std::size_t size) {
  std::vector<std::byte> m(size < kMinMessage ? kMinMessage : size);
  std::memcpy(m.data(), &seq, 8);
  std::memcpy(m.data() + 8, &salt, 8);
  test::fill_random(std::span(m).subspan(kMinMessage), stream_seed(seq, salt));
  return m;
}

std::optional<std::uint64_t> check_message(std::span<const std::byte> message) {
  if (message.size() < kMinMessage) return std::nullopt;
  std::uint64_t seq = 0;
  std::uint64_t salt = 0;
  std::memcpy(&seq, message.data(), 8);
  std::memcpy(&salt, message.data() + 8, 8);
  const auto expected = make_message(seq, salt, message.size());
  if (std::memcmp(expected.data(), message.data(), message.size()) != 0) return std::nullopt;
  return seq;
}

}  // namespace fabric::field
