// MrDesc::decode on arbitrary bytes: never crashes; what it accepts is
// canonical, self-consistent (a key per owner Domain, no address overflow)
// and survives every other way of rebuilding it.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "fabric/memory.hpp"
#include "fuzz_check.hpp"
#include "resealed.hpp"

namespace {

int check_decode(std::span<const std::byte> input) {
  const std::size_t size = input.size();
  auto desc = fabric::MrDesc::decode(input);
  if (!desc) {
    FUZZ_CHECK(desc.status().code() == fabric::Errc::malformed);
    FUZZ_CHECK(!desc.status().message().empty());
    return 0;
  }
  FUZZ_CHECK(!desc->empty());
  // The invariants every range check of the engine builds on.
  FUZZ_CHECK(desc->size() > 0);
  FUZZ_CHECK(desc->base() + desc->size() > desc->base());
  FUZZ_CHECK(desc->keys().size() == desc->owner().num_domains());

  const std::vector<std::byte> encoded = desc->encode();
  FUZZ_CHECK(encoded.size() == size);
  FUZZ_CHECK(std::equal(encoded.begin(), encoded.end(), input.begin()));

  auto again = fabric::MrDesc::decode(encoded);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(*again == *desc);

  auto parsed = fabric::MrDesc::parse(desc->to_string());
  FUZZ_CHECK(parsed.ok());
  FUZZ_CHECK(*parsed == *desc);

  const std::vector<fabric::RemoteKey> keys(desc->keys().begin(), desc->keys().end());
  auto made = fabric::MrDesc::make(desc->owner(), desc->base(), desc->size(), keys, desc->group(),
                                   desc->access());
  FUZZ_CHECK(made.ok());
  FUZZ_CHECK(*made == *desc);
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
