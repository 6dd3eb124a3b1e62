#include "fabric/kv/layout.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace fabric::kv {

namespace {

Status bad(std::string message) { return {Errc::invalid_argument, "KV layout: " + message}; }

// a * b + c without overflow, or false.
bool mul_add(std::uint64_t a, std::uint64_t b, std::uint64_t c, std::uint64_t& out) {
  std::uint64_t product = 0;
  return !__builtin_mul_overflow(a, b, &product) && !__builtin_add_overflow(product, c, &out);
}

}  // namespace

std::uint64_t KvLayout::offset(std::uint32_t layer, std::uint32_t part, std::uint32_t page,
                               std::uint32_t head, std::uint32_t token) const {
  return base(layer, part).offset + std::uint64_t{page} * page_stride +
         std::uint64_t{head - head_begin} * head_stride + std::uint64_t{token} * token_stride;
}

std::uint64_t KvLayout::span_bytes() const noexcept {
  return std::uint64_t{num_pages - 1} * page_stride + std::uint64_t{num_heads - 1} * head_stride +
         std::uint64_t{tokens_per_page - 1} * token_stride + entry_bytes();
}

Status KvLayout::validate() const {
  if (kind != KvKind::separate && kind != KvKind::fused && kind != KvKind::mla) {
    return bad(fmt::format("unknown kind {}", static_cast<int>(kind)));
  }
  if (num_layers == 0 || num_pages == 0 || tokens_per_page == 0 || total_kv_heads == 0 ||
      num_heads == 0 || head_size == 0 || elem_bytes == 0 || num_regions == 0) {
    return bad("layers, pages, tokens per page, heads, head size, element size and regions must "
               "all be non-zero");
  }
  if (kind == KvKind::mla && total_kv_heads != 1) {
    return bad(fmt::format("MLA has one latent per token, not {} heads", total_kv_heads));
  }
  if (head_begin >= total_kv_heads || num_heads > total_kv_heads - head_begin) {
    return bad(fmt::format("heads [{}, {}) outside the model's {}", head_begin,
                           std::uint64_t{head_begin} + num_heads, total_kv_heads));
  }
  // Entries must not overlap: sorted by stride, each dimension must step past everything the
  // finer ones span (dimensions of extent 1 take no room).
  struct Dim {
    std::uint64_t stride;
    std::uint64_t extent;
    const char* name;
  };
  std::array<Dim, 3> dims{Dim{page_stride, num_pages, "page"}, Dim{head_stride, num_heads, "head"},
                          Dim{token_stride, tokens_per_page, "token"}};
  std::sort(dims.begin(), dims.end(),
            [](const Dim& a, const Dim& b) { return a.stride < b.stride; });
  std::uint64_t covered = entry_bytes();
  for (const Dim& d : dims) {
    if (d.extent == 1) continue;
    if (d.stride < covered) {
      return bad(fmt::format("{} stride {} overlaps the {} bytes the finer dimensions span",
                             d.name, d.stride, covered));
    }
    if (!mul_add(d.stride, d.extent - 1, covered, covered)) return bad("size overflows 64 bits");
  }
  if (bases.size() != std::size_t{num_layers} * parts()) {
    return bad(fmt::format("{} bases for {} layers x {} parts", bases.size(), num_layers, parts()));
  }
  for (std::size_t i = 0; i < bases.size(); ++i) {
    if (bases[i].region >= num_regions) {
      return bad(fmt::format("base {} names region {} of {}", i, bases[i].region, num_regions));
    }
    std::uint64_t end = 0;
    if (__builtin_add_overflow(bases[i].offset, covered, &end)) {
      return bad(fmt::format("base {} offset {} overflows", i, bases[i].offset));
    }
  }
  return Status::success();
}

std::uint64_t KvLayout::fingerprint() const noexcept {
  // FNV-1a over the geometry both sides must share, with a format tag.
  std::uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](std::uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 0x100000001b3ull;
    }
  };
  mix(0x31766b66);  // "fkv1"
  mix(static_cast<std::uint64_t>(kind));
  mix(num_layers);
  mix(total_kv_heads);
  mix(head_size);
  mix(elem_bytes);
  return h;
}

Result<HeadShard> shard_heads(std::uint32_t total_kv_heads, std::uint32_t tp_size,
                              std::uint32_t rank) {
  if (total_kv_heads == 0 || tp_size == 0 || rank >= tp_size) {
    return Status(Errc::invalid_argument,
                  fmt::format("shard_heads: rank {} of TP {} with {} KV heads", rank, tp_size,
                              total_kv_heads));
  }
  if (total_kv_heads >= tp_size) {
    if (total_kv_heads % tp_size != 0) {
      return Status(Errc::invalid_argument,
                    fmt::format("shard_heads: TP {} does not divide {} KV heads", tp_size,
                                total_kv_heads));
    }
    const std::uint32_t per_rank = total_kv_heads / tp_size;
    return HeadShard{rank * per_rank, per_rank};
  }
  if (tp_size % total_kv_heads != 0) {
    return Status(Errc::invalid_argument,
                  fmt::format("shard_heads: {} KV heads do not divide TP {}", total_kv_heads,
                              tp_size));
  }
  return HeadShard{rank / (tp_size / total_kv_heads), 1};
}

namespace {

KvLayout common(const CacheShape& s, KvKind kind) {
  KvLayout l;
  l.kind = kind;
  l.num_layers = s.num_layers;
  l.num_pages = s.num_pages;
  l.tokens_per_page = s.tokens_per_page;
  l.total_kv_heads = s.total_kv_heads;
  l.head_begin = s.shard.begin;
  l.num_heads = s.shard.count;
  l.head_size = s.head_size;
  l.elem_bytes = s.elem_bytes;
  l.num_regions = s.num_layers;
  return l;
}

// One region per layer; part p of a layer starts p * part_bytes into it.
void per_layer_bases(KvLayout& l, std::uint64_t part_bytes) {
  for (std::uint32_t layer = 0; layer < l.num_layers; ++layer) {
    for (std::uint32_t p = 0; p < l.parts(); ++p) l.bases.push_back({layer, p * part_bytes});
  }
}

}  // namespace

KvLayout vllm_nhd(const CacheShape& s) {
  KvLayout l = common(s, KvKind::separate);
  l.head_stride = l.entry_bytes();
  l.token_stride = l.head_stride * l.num_heads;
  l.page_stride = l.token_stride * l.tokens_per_page;
  per_layer_bases(l, l.page_stride * l.num_pages);
  return l;
}

KvLayout vllm_hnd(const CacheShape& s) {
  KvLayout l = common(s, KvKind::separate);
  l.token_stride = l.entry_bytes();
  l.head_stride = l.token_stride * l.tokens_per_page;
  l.page_stride = l.head_stride * l.num_heads;
  per_layer_bases(l, l.page_stride * l.num_pages);
  return l;
}

KvLayout vllm_cpu(const CacheShape& s) {
  KvLayout l = common(s, KvKind::separate);
  l.token_stride = l.entry_bytes();
  const std::uint64_t block = l.token_stride * l.tokens_per_page;
  l.head_stride = 2 * block;
  l.page_stride = l.head_stride * l.num_heads;
  per_layer_bases(l, block);
  return l;
}

KvLayout fused_hnd(const CacheShape& s) {
  KvLayout l = common(s, KvKind::fused);
  l.token_stride = l.entry_bytes();
  l.head_stride = l.token_stride * l.tokens_per_page;
  l.page_stride = l.head_stride * l.num_heads;
  per_layer_bases(l, 0);
  return l;
}

KvLayout heads_first(const CacheShape& s) {
  KvLayout l = common(s, KvKind::separate);
  l.token_stride = l.entry_bytes();
  l.page_stride = l.token_stride * l.tokens_per_page;
  l.head_stride = l.page_stride * l.num_pages;
  per_layer_bases(l, l.head_stride * l.num_heads);
  return l;
}

KvLayout mla_layout(std::uint32_t num_layers, std::uint32_t num_pages,
                    std::uint32_t tokens_per_page, std::uint32_t latent,
                    std::uint32_t elem_bytes) {
  CacheShape s{num_layers, num_pages, tokens_per_page, 1, HeadShard{0, 1}, latent, elem_bytes};
  KvLayout l = common(s, KvKind::mla);
  l.token_stride = l.entry_bytes();
  l.head_stride = l.token_stride;
  l.page_stride = l.token_stride * l.tokens_per_page;
  per_layer_bases(l, 0);
  return l;
}

}  // namespace fabric::kv
