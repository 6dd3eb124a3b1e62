#include "arguments.hpp"

#include <fmt/format.h>

#include "messages.hpp"

namespace fabric::kv {

Status check_id(std::string_view side, std::string_view id) {
  if (!id.empty() && id.size() <= msg::kMaxIdBytes) return Status::success();
  return {Errc::invalid_argument, fmt::format("{}: request ids are 1-{} bytes", side,
                                              msg::kMaxIdBytes)};
}

Status check_pages(std::string_view side, std::span<const std::uint32_t> pages,
                   std::uint32_t num_pages, std::size_t first) {
  for (std::size_t i = 0; i < pages.size(); ++i) {
    if (pages[i] >= num_pages) {
      return {Errc::out_of_range,
              fmt::format("{}: page {} (position {}) of {}", side, pages[i], first + i, num_pages)};
    }
  }
  return Status::success();
}

Status check_parts_fit(std::string_view side, const KvLayout& layout,
                       std::span<const std::uint64_t> region_bytes) {
  const std::uint64_t span = layout.span_bytes();
  for (const PartBase& b : layout.bases) {
    const std::uint64_t bytes = region_bytes[b.region];
    if (bytes == 0 || b.offset + span > bytes) {
      return {Errc::out_of_range,
              fmt::format("{}: region {} ({} bytes) cannot hold a part of {} bytes at offset {}",
                          side, b.region, bytes, span, b.offset)};
    }
  }
  return Status::success();
}

}  // namespace fabric::kv
