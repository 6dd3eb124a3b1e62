#pragma once
// Where one instance's KV cache lives: a byte-addressing descriptor that both sides of a
// transfer exchange, so each can compute the other's addresses and the exact number of writes
// (docs/kv.md#layout).

#include <cstdint>
#include <vector>

#include "fabric/status.hpp"

namespace fabric::kv {

// separate: K and V are two parts, each addressed by its own base per layer.
// fused: one part whose (token, head) entry holds K then V (2 * head_size elements).
// mla: one latent per token (one "head"), replicated on every TP rank.
enum class KvKind : std::uint8_t { separate = 1, fused = 2, mla = 3 };

// The start of one (layer, part): the registration (index into the instance's region list)
// and the byte offset in it of page 0, this rank's first head, token 0.
struct PartBase {
  std::uint32_t region = 0;
  std::uint64_t offset = 0;
  friend bool operator==(const PartBase&, const PartBase&) = default;
};

struct KvLayout {
  KvKind kind = KvKind::separate;
  std::uint32_t num_layers = 0;
  std::uint32_t num_pages = 0;        // pages per (layer, part); page indices must be below
  std::uint32_t tokens_per_page = 0;
  std::uint32_t total_kv_heads = 0;   // the model's KV heads (1 for MLA)
  std::uint32_t head_begin = 0;       // the first global head held in this rank's pages
  std::uint32_t num_heads = 0;        // heads held in this rank's pages
  std::uint32_t head_size = 0;        // elements per head (MLA: the latent width)
  std::uint32_t elem_bytes = 0;       // bytes per element (2 for bf16)
  // Byte distance between consecutive pages, heads (of this rank) and tokens of one part.
  std::uint64_t page_stride = 0;
  std::uint64_t head_stride = 0;
  std::uint64_t token_stride = 0;
  std::uint32_t num_regions = 0;      // registrations the bases refer to
  std::vector<PartBase> bases;        // [layer * parts() + part]

  // 2 for separate K/V, else 1.
  [[nodiscard]] std::uint32_t parts() const noexcept { return kind == KvKind::separate ? 2 : 1; }
  // Bytes of one (token, head) entry of one part.
  [[nodiscard]] std::uint64_t entry_bytes() const noexcept {
    return std::uint64_t{head_size} * elem_bytes * (kind == KvKind::fused ? 2 : 1);
  }
  [[nodiscard]] const PartBase& base(std::uint32_t layer, std::uint32_t part) const {
    return bases.at(std::size_t{layer} * parts() + part);
  }
  // Byte offset, in base(layer, part).region, of (page, global head, token in page).
  [[nodiscard]] std::uint64_t offset(std::uint32_t layer, std::uint32_t part, std::uint32_t page,
                                     std::uint32_t head, std::uint32_t token) const;
  // Bytes one (layer, part) spans from its base: its last entry's end.
  [[nodiscard]] std::uint64_t span_bytes() const noexcept;

  // Self-consistency: counts non-zero, heads within the model's, entries inside their strides
  // without overlap, bases sized layers x parts with regions < num_regions, no overflow.
  [[nodiscard]] Status validate() const;
  // The model geometry two sides must agree on (kind, layers, total heads, head size, element
  // size); strides, page size and this rank's heads may differ.
  [[nodiscard]] std::uint64_t fingerprint() const noexcept;

  friend bool operator==(const KvLayout&, const KvLayout&) = default;
};

// Which global KV heads TP rank `rank` of `tp_size` holds: total/tp contiguous heads when
// total >= tp (tp must divide total), else one head replicated on tp/total ranks (total must
// divide tp).
struct HeadShard {
  std::uint32_t begin = 0;
  std::uint32_t count = 0;
};
[[nodiscard]] Result<HeadShard> shard_heads(std::uint32_t total_kv_heads, std::uint32_t tp_size,
                                            std::uint32_t rank);

// Common layouts, one tensor (registration) per layer, as vLLM allocates them; `region_of_layer`
// is then the layer index. shard is this rank's heads (shard_heads).
struct CacheShape {
  std::uint32_t num_layers = 0;
  std::uint32_t num_pages = 0;
  std::uint32_t tokens_per_page = 0;
  std::uint32_t total_kv_heads = 0;
  HeadShard shard;
  std::uint32_t head_size = 0;
  std::uint32_t elem_bytes = 0;
};
// vLLM flash-attention layout [2, pages, tokens, heads, head_size] per layer.
[[nodiscard]] KvLayout vllm_nhd(const CacheShape& shape);
// vLLM HND layout [2, pages, heads, tokens, head_size] per layer.
[[nodiscard]] KvLayout vllm_hnd(const CacheShape& shape);
// vLLM's CPU attention layout, [pages, heads, tokens, 2 * head_size] per layer, which its
// kernels read as [pages, heads, 2 * tokens, head_size]: in each (page, head) all tokens' K,
// then all tokens' V. Two parts, V based one K block past K.
[[nodiscard]] KvLayout vllm_cpu(const CacheShape& shape);
// K|V fused per entry: [pages, heads, tokens, 2 * head_size] per layer.
[[nodiscard]] KvLayout fused_hnd(const CacheShape& shape);
// Heads before pages: [2, heads, pages, tokens, head_size] per layer (a head's pages are
// contiguous, so a page's tokens of one head are one run).
[[nodiscard]] KvLayout heads_first(const CacheShape& shape);
// MLA: [pages, tokens, latent] per layer, total_kv_heads = 1.
[[nodiscard]] KvLayout mla_layout(std::uint32_t num_layers, std::uint32_t num_pages,
                                  std::uint32_t tokens_per_page, std::uint32_t latent,
                                  std::uint32_t elem_bytes);

}  // namespace fabric::kv
