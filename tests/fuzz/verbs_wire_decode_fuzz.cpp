// The verbs backend's address and handshake decoders on arbitrary bytes (a
// handshake datagram arrives from anyone who can reach the UD queue pair):
// never crash, reject with Errc::malformed, and what they accept is canonical.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "fuzz_check.hpp"
#include "verbs/wire_format.hpp"

namespace {

template <typename Message>
void check(std::span<const std::byte> input) {
  auto decoded = Message::decode(input);
  if (!decoded) {
    FUZZ_CHECK(decoded.status().code() == fabric::Errc::malformed);
    FUZZ_CHECK(!decoded.status().message().empty());
    return;
  }
  FUZZ_CHECK(input.size() == Message::kBytes);
  const std::vector<std::byte> encoded = decoded->encode();
  FUZZ_CHECK(std::equal(encoded.begin(), encoded.end(), input.begin(), input.end()));
  auto again = Message::decode(encoded);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(*again == *decoded);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data), size);
  check<fabric::verbs::VerbsAddress>(input);
  check<fabric::verbs::Handshake>(input);
  return 0;
}
