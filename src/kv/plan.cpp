#include "fabric/kv/plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace fabric::kv {

namespace {

bool holds(const KvLayout& l, HeadRange heads) {
  return heads.begin >= l.head_begin && heads.end <= l.head_begin + l.num_heads;
}

std::uint64_t in_page(const KvLayout& l, std::uint32_t head, std::uint32_t token) {
  return std::uint64_t{head - l.head_begin} * l.head_stride +
         std::uint64_t{token % l.tokens_per_page} * l.token_stride;
}

}  // namespace

Result<std::vector<Run>> plan_runs(const KvLayout& src, const KvLayout& dst, HeadRange heads,
                                   TokenRange tokens) {
  if (src.fingerprint() != dst.fingerprint()) {
    return Status(Errc::invalid_argument,
                  fmt::format("KV plan: layout fingerprints differ ({:016x} vs {:016x}): the two "
                              "sides hold different models",
                              src.fingerprint(), dst.fingerprint()));
  }
  if (heads.begin >= heads.end || tokens.begin >= tokens.end) {
    return Status(Errc::invalid_argument,
                  fmt::format("KV plan: empty heads [{}, {}) or tokens [{}, {})", heads.begin,
                              heads.end, tokens.begin, tokens.end));
  }
  if (!holds(src, heads) || !holds(dst, heads)) {
    return Status(Errc::invalid_argument,
                  fmt::format("KV plan: heads [{}, {}) not held by both sides (source [{}, {}), "
                              "destination [{}, {}))",
                              heads.begin, heads.end, src.head_begin,
                              src.head_begin + src.num_heads, dst.head_begin,
                              dst.head_begin + dst.num_heads));
  }
  const std::uint64_t entry = src.entry_bytes();
  // Walk in the source's memory order, so its contiguous entries come one after another.
  const bool heads_outer = src.token_stride <= src.head_stride;
  std::vector<Run> runs;
  auto add = [&](std::uint32_t sp, std::uint32_t dp, std::uint32_t h, std::uint32_t t) {
    const std::uint64_t so = in_page(src, h, t);
    const std::uint64_t d = in_page(dst, h, t);
    if (!runs.empty()) {
      Run& last = runs.back();
      if (last.src_page == sp && last.dst_page == dp && last.src_offset + last.length == so &&
          last.dst_offset + last.length == d) {
        last.length += entry;
        return;
      }
    }
    runs.push_back({sp, dp, so, d, entry});
  };
  for (std::uint32_t t = tokens.begin; t < tokens.end;) {
    // A segment: tokens whose source page and destination page are both fixed.
    const std::uint32_t src_end = (t / src.tokens_per_page + 1) * src.tokens_per_page;
    const std::uint32_t dst_end = (t / dst.tokens_per_page + 1) * dst.tokens_per_page;
    const std::uint32_t end = std::min({tokens.end, src_end, dst_end});
    const std::uint32_t sp = t / src.tokens_per_page;
    const std::uint32_t dp = t / dst.tokens_per_page;
    if (heads_outer) {
      for (std::uint32_t h = heads.begin; h < heads.end; ++h) {
        for (std::uint32_t k = t; k < end; ++k) add(sp, dp, h, k);
      }
    } else {
      for (std::uint32_t k = t; k < end; ++k) {
        for (std::uint32_t h = heads.begin; h < heads.end; ++h) add(sp, dp, h, k);
      }
    }
    t = end;
  }
  return runs;
}

Result<std::vector<Run>> plan_runs(const KvLayout& src, const KvLayout& dst, HeadRange heads,
                                   TokenRange tokens, std::uint32_t src_first) {
  const std::uint32_t align = chunk_alignment(src, dst);
  if (src_first % align != 0) {
    return Status(Errc::invalid_argument,
                  fmt::format("KV plan: the first source token {} is not a multiple of {} (both "
                              "sides' page sizes)",
                              src_first, align));
  }
  if (tokens.begin < src_first) {
    return Status(Errc::invalid_argument,
                  fmt::format("KV plan: tokens [{}, {}) start before the first wanted token {}",
                              tokens.begin, tokens.end, src_first));
  }
  auto runs = plan_runs(src, dst, heads, tokens);
  if (!runs.ok()) return runs;
  // Page-aligned on both sides, the shift moves whole destination pages and leaves every offset
  // inside a page, and so every run's shape, as it was.
  const std::uint32_t dst_pages_skipped = src_first / dst.tokens_per_page;
  for (Run& r : *runs) r.dst_page -= dst_pages_skipped;
  return runs;
}

std::uint32_t chunk_alignment(const KvLayout& src, const KvLayout& dst) noexcept {
  return std::lcm(src.tokens_per_page, dst.tokens_per_page);
}

std::uint64_t sender_imm_count(std::size_t runs_per_part, const KvLayout& src) {
  return std::uint64_t{runs_per_part} * src.parts() * src.num_layers + 1;
}

Result<std::vector<Route>> plan_routes(std::span<const HeadRange> sources, HeadRange wanted,
                                       std::uint64_t spread) {
  if (wanted.begin >= wanted.end) {
    return Status(Errc::invalid_argument, "KV routes: no heads wanted");
  }
  std::vector<Route> routes;
  std::vector<std::uint32_t> holders;
  for (std::uint32_t h = wanted.begin; h < wanted.end; ++h) {
    holders.clear();
    for (std::uint32_t i = 0; i < sources.size(); ++i) {
      if (sources[i].begin <= h && h < sources[i].end) holders.push_back(i);
    }
    if (holders.empty()) {
      return Status(Errc::not_found, fmt::format("KV routes: no source holds KV head {}", h));
    }
    const std::uint32_t pick = holders[(spread + h) % holders.size()];
    if (!routes.empty() && routes.back().source == pick && routes.back().heads.end == h) {
      routes.back().heads.end = h + 1;
    } else {
      routes.push_back({pick, HeadRange{h, h + 1}});
    }
  }
  return routes;
}

Result<std::vector<std::uint32_t>> receivers_per_source(std::span<const HeadRange> sources,
                                                        std::span<const HeadRange> destinations) {
  std::vector<std::uint32_t> counts(sources.size(), 0);
  for (std::size_t d = 0; d < destinations.size(); ++d) {
    auto routes = plan_routes(sources, destinations[d], d);
    if (!routes.ok()) return routes.status();
    std::vector<bool> seen(sources.size(), false);
    for (const Route& r : *routes) seen[r.source] = true;
    for (std::size_t s = 0; s < sources.size(); ++s) counts[s] += seen[s] ? 1 : 0;
  }
  return counts;
}

}  // namespace fabric::kv
