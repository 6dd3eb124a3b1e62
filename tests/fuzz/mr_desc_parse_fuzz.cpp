// MrDesc::parse on arbitrary text: never crashes, and what it accepts prints
// back as the same text up to the case of the hex digits.

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fabric/memory.hpp"
#include "fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto desc = fabric::MrDesc::parse(text);
  if (!desc) {
    FUZZ_CHECK(desc.status().code() == fabric::Errc::malformed);
    return 0;
  }
  std::string lowered(text);
  for (auto& c : lowered) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  FUZZ_CHECK(desc->to_string() == lowered);

  auto again = fabric::MrDesc::parse(desc->to_string());
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(*again == *desc);
  auto decoded = fabric::MrDesc::decode(desc->encode());
  FUZZ_CHECK(decoded.ok());
  FUZZ_CHECK(*decoded == *desc);
  return 0;
}
