// NetAddr::decode on arbitrary bytes: never crashes, and what it accepts is
// canonical (re-encodes to the very same bytes) and survives every other way
// of rebuilding it.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fabric/net_addr.hpp"
#include "fuzz_check.hpp"
#include "resealed.hpp"

namespace {

int check_decode(std::span<const std::byte> input) {
  const std::size_t size = input.size();
  auto addr = fabric::NetAddr::decode(input);
  if (!addr) {
    FUZZ_CHECK(addr.status().code() == fabric::Errc::malformed);
    FUZZ_CHECK(!addr.status().message().empty());
    return 0;
  }
  FUZZ_CHECK(!addr->empty());
  const std::vector<std::byte> encoded = addr->encode();
  // Every field has exactly one encoding and trailing bytes are rejected, so
  // anything accepted must come back byte for byte.
  FUZZ_CHECK(encoded.size() == size);
  FUZZ_CHECK(std::equal(encoded.begin(), encoded.end(), input.begin()));

  auto again = fabric::NetAddr::decode(encoded);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(*again == *addr);

  auto parsed = fabric::NetAddr::parse(addr->to_string());
  FUZZ_CHECK(parsed.ok());
  FUZZ_CHECK(*parsed == *addr);

  std::vector<std::vector<std::byte>> domains;
  for (std::size_t g = 0; g < addr->num_groups(); ++g) {
    for (std::size_t i = 0; i < addr->num_domains(); ++i) {
      const auto d = addr->domain_address(g, i);
      domains.emplace_back(d.begin(), d.end());
    }
  }
  auto made = fabric::NetAddr::make(addr->backend(), addr->provider(), addr->instance_id(),
                                    addr->max_message_size(), std::move(domains),
                                    addr->num_groups());
  FUZZ_CHECK(made.ok());
  FUZZ_CHECK(*made == *addr);
  (void)addr->describe();
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data), size);
  check_decode(input);
  // Mutated input almost never keeps its CRC-32, so also decode it with the
  // checksum made right: that is what reaches the field checks behind it.
  check_decode(fuzz::resealed(input));
  return 0;
}
