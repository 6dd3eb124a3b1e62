#pragma once
// The checks of arguments that the Sender's and the Receiver's public calls share. Each error
// starts with the side's name ("KV sender", "KV receiver"), as the caller sees it.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "fabric/kv/layout.hpp"
#include "fabric/status.hpp"

namespace fabric::kv {

[[nodiscard]] constexpr std::uint32_t pages_for(std::uint32_t tokens, std::uint32_t per_page) {
  return (tokens + per_page - 1) / per_page;
}

// A request id: 1 to msg::kMaxIdBytes bytes, as the messages carry it.
[[nodiscard]] Status check_id(std::string_view side, std::string_view id);

// Every page is one of the layout's; `first` is the position of pages[0] in the request, so an
// error names the position the caller knows.
[[nodiscard]] Status check_pages(std::string_view side, std::span<const std::uint32_t> pages,
                                 std::uint32_t num_pages, std::size_t first = 0);

// Every part of `layout` fits in its region; region_bytes[i] is the usable size of region i
// (0 for a region that is not valid).
[[nodiscard]] Status check_parts_fit(std::string_view side, const KvLayout& layout,
                                     std::span<const std::uint64_t> region_bytes);

}  // namespace fabric::kv
