#pragma once

#include <cstdint>
#include <string>

namespace fabric {

// Where a registered buffer lives.
struct Device {
  enum class Kind : std::uint8_t { host, cuda };
  Kind kind = Kind::host;
  int index = 0;

  static constexpr Device host() noexcept { return {Kind::host, 0}; }
  static constexpr Device cuda(int ordinal) noexcept { return {Kind::cuda, ordinal}; }
  [[nodiscard]] bool is_host() const noexcept { return kind == Kind::host; }
  [[nodiscard]] std::string to_string() const;
  friend bool operator==(const Device&, const Device&) = default;
};

}  // namespace fabric
