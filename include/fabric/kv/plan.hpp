#pragma once
// The transfer plan: which bytes of the prefiller's pages go where in the decoder's, as runs
// that are contiguous on both sides, and the exact number of immediates that produces. Both
// sides compute it from the two layouts alone, never from timing (docs/kv.md#counts).

#include <cstdint>
#include <span>
#include <vector>

#include "fabric/kv/layout.hpp"
#include "fabric/status.hpp"

namespace fabric::kv {

struct HeadRange {
  std::uint32_t begin = 0;  // global KV heads [begin, end)
  std::uint32_t end = 0;
  [[nodiscard]] std::uint32_t size() const noexcept { return end - begin; }
  friend bool operator==(const HeadRange&, const HeadRange&) = default;
};

struct TokenRange {
  std::uint32_t begin = 0;  // tokens [begin, end) of the request
  std::uint32_t end = 0;
  friend bool operator==(const TokenRange&, const TokenRange&) = default;
};

// One WRITE of one (layer, part): `length` bytes from the source's page src_page (an index into
// the request's source page list) at src_offset (relative to the page's start) to the
// destination's page dst_page at dst_offset. Runs never cross a page boundary on either side.
struct Run {
  std::uint32_t src_page = 0;
  std::uint32_t dst_page = 0;
  std::uint64_t src_offset = 0;
  std::uint64_t dst_offset = 0;
  std::uint64_t length = 0;
  friend bool operator==(const Run&, const Run&) = default;
};

// The runs of one (layer, part) for `heads` x `tokens`. Heads and tokens that are contiguous on
// both sides coalesce into one run. Errors: different fingerprints, heads outside either side's,
// an empty or inverted range.
[[nodiscard]] Result<std::vector<Run>> plan_runs(const KvLayout& src, const KvLayout& dst,
                                                 HeadRange heads, TokenRange tokens);

// As plan_runs, for a decoder that wants the source's tokens from `src_first` on (the rest it
// holds already, e.g. in its prefix cache): destination token t is source token src_first + t,
// and `tokens` are source tokens, at or past src_first. src_first must be a multiple of
// chunk_alignment(src, dst), so that every run has the same shape as without the shift and both
// sides count the same immediates.
[[nodiscard]] Result<std::vector<Run>> plan_runs(const KvLayout& src, const KvLayout& dst,
                                                 HeadRange heads, TokenRange tokens,
                                                 std::uint32_t src_first);

// Chunked prefill sends a token range in passes; a pass boundary must be a page boundary on both
// sides (a multiple of lcm(tokens_per_page)) so the runs, and so the count, do not depend on how
// the request was chunked.
[[nodiscard]] std::uint32_t chunk_alignment(const KvLayout& src, const KvLayout& dst) noexcept;

// Immediates one sender produces for one request: every layer's runs of every part, plus one
// for its final (tail or immediate-only) write.
[[nodiscard]] std::uint64_t sender_imm_count(std::size_t runs_per_part, const KvLayout& src);

// Heterogeneous parallelism: which source (prefill rank) serves which of the heads a destination
// (decode rank) wants. sources[i] are the heads source i holds. Each wanted head goes to one
// holder; where several hold it (GQA replication, MLA), `spread` picks among them so that
// different decode ranks (spread = their rank) use different prefill ranks. Consecutive heads of
// one source form one route.
struct Route {
  std::uint32_t source = 0;
  HeadRange heads;
  friend bool operator==(const Route&, const Route&) = default;
};
[[nodiscard]] Result<std::vector<Route>> plan_routes(std::span<const HeadRange> sources,
                                                     HeadRange wanted, std::uint64_t spread);

// How many of the destinations (decode ranks, destination i routed with spread i) each source
// serves: the `receivers` a prefill rank passes to Sender::prepare.
[[nodiscard]] Result<std::vector<std::uint32_t>> receivers_per_source(
    std::span<const HeadRange> sources, std::span<const HeadRange> destinations);

}  // namespace fabric::kv
