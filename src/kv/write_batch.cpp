#include "write_batch.hpp"

#include <fmt/format.h>

#include <limits>
#include <numeric>

namespace fabric::kv {

namespace {

std::uint64_t unit_of(const KvLayout& l) {
  std::uint64_t g = 0;
  for (std::uint64_t s : {l.page_stride, l.head_stride, l.token_stride}) g = std::gcd(g, s);
  return g == 0 ? l.entry_bytes() : g;
}

Result<std::uint32_t> index_of(std::uint64_t page, std::uint64_t stride, std::uint64_t offset,
                               std::uint64_t unit, const char* side) {
  const std::uint64_t byte = page * stride + offset;
  const std::uint64_t index = byte / unit;
  if (byte % unit != 0 || index > std::numeric_limits<std::uint32_t>::max()) {
    return Status(Errc::unsupported,
                  fmt::format("KV {} offset {} is not a 32-bit multiple of {} bytes", side, byte,
                              unit));
  }
  return static_cast<std::uint32_t>(index);
}

}  // namespace

Result<WriteBatch> make_batch(const KvLayout& src, std::span<const std::uint32_t> src_pages,
                              const KvLayout& dst, std::span<const std::uint32_t> dst_pages,
                              std::span<const Run> runs) {
  WriteBatch batch;
  batch.src_unit = unit_of(src);
  batch.dst_unit = unit_of(dst);
  batch.runs = runs.size();
  for (const Run& r : runs) {
    if (r.src_page >= src_pages.size() || r.dst_page >= dst_pages.size()) {
      return Status(Errc::out_of_range,
                    fmt::format("KV run names page {} / {} of lists of {} / {} pages", r.src_page,
                                r.dst_page, src_pages.size(), dst_pages.size()));
    }
    auto s = index_of(src_pages[r.src_page], src.page_stride, r.src_offset, batch.src_unit,
                      "source");
    if (!s.ok()) return s.status();
    auto d = index_of(dst_pages[r.dst_page], dst.page_stride, r.dst_offset, batch.dst_unit,
                      "destination");
    if (!d.ok()) return d.status();
    WriteBatch::Group* group = nullptr;
    for (auto& g : batch.groups) {
      if (g.length == r.length) group = &g;
    }
    if (group == nullptr) group = &batch.groups.emplace_back(WriteBatch::Group{r.length, {}, {}});
    group->src_index.push_back(*s);
    group->dst_index.push_back(*d);
  }
  return batch;
}

PagedWrite paged_write(const WriteBatch& batch, const WriteBatch::Group& group,
                       const KvLayout& src, const KvLayout& dst, std::uint32_t layer,
                       std::uint32_t part, const MrHandle& src_region, const MrDesc& dst_region,
                       std::uint32_t imm) {
  PagedWrite w;
  w.page_length = group.length;
  w.imm = imm;
  w.src = src_region;
  w.src_pages = Pages{group.src_index, batch.src_unit, src.base(layer, part).offset};
  w.dst = dst_region;
  w.dst_pages = Pages{group.dst_index, batch.dst_unit, dst.base(layer, part).offset};
  return w;
}

}  // namespace fabric::kv
