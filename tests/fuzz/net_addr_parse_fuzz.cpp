// NetAddr::parse on arbitrary text: never crashes, and what it accepts prints
// back as the same text up to the case of the hex digits.

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fabric/net_addr.hpp"
#include "fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto addr = fabric::NetAddr::parse(text);
  if (!addr) {
    FUZZ_CHECK(addr.status().code() == fabric::Errc::malformed);
    return 0;
  }
  // parse() accepts upper-case hex; to_string() writes lower case only.
  std::string lowered(text);
  for (auto& c : lowered) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  FUZZ_CHECK(addr->to_string() == lowered);

  auto again = fabric::NetAddr::parse(addr->to_string());
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(*again == *addr);
  auto decoded = fabric::NetAddr::decode(addr->encode());
  FUZZ_CHECK(decoded.ok());
  FUZZ_CHECK(*decoded == *addr);
  return 0;
}
