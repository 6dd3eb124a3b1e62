// The transfer plan: every (head, token) entry lands exactly where the destination layout says,
// contiguous entries coalesce, the count does not depend on chunking, and routes cover
// heterogeneous TP, GQA replication and MLA.

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "fabric/kv/plan.hpp"

namespace fabric::kv {
namespace {

constexpr std::uint32_t kHeads = 4;

CacheShape shape(std::uint32_t tpp, HeadShard shard, std::uint32_t pages = 64) {
  return {1, pages, tpp, kHeads, shard, 4, 2};
}

// Applies the runs of (layer 0, part 0) between byte images of the two parts and checks every
// entry of the wanted heads and tokens arrived, and nothing else was touched.
void check_runs(const KvLayout& src, const KvLayout& dst, HeadRange heads, std::uint32_t tokens) {
  auto runs = plan_runs(src, dst, heads, TokenRange{0, tokens});
  ASSERT_TRUE(runs.ok()) << runs.status().to_string();
  const std::uint32_t src_pages_n = (tokens + src.tokens_per_page - 1) / src.tokens_per_page;
  const std::uint32_t dst_pages_n = (tokens + dst.tokens_per_page - 1) / dst.tokens_per_page;
  std::vector<std::uint32_t> src_pages(src_pages_n), dst_pages(dst_pages_n);
  // Scattered, reversed page lists so an index mix-up shows.
  for (std::uint32_t i = 0; i < src_pages_n; ++i) src_pages[i] = src.num_pages - 1 - 2 * i;
  for (std::uint32_t i = 0; i < dst_pages_n; ++i) dst_pages[i] = (3 * i + 1) % dst.num_pages;
  std::vector<std::uint8_t> a(src.span_bytes()), b(dst.span_bytes(), 0xEE);
  std::iota(a.begin(), a.end(), 0);
  for (const Run& r : *runs) {
    const std::uint64_t so = src_pages.at(r.src_page) * src.page_stride + r.src_offset;
    const std::uint64_t d = dst_pages.at(r.dst_page) * dst.page_stride + r.dst_offset;
    ASSERT_LE(so + r.length, a.size());
    ASSERT_LE(d + r.length, b.size());
    std::memcpy(b.data() + d, a.data() + so, r.length);
  }
  std::vector<bool> written(b.size(), false);
  for (std::uint32_t h = heads.begin; h < heads.end; ++h) {
    for (std::uint32_t t = 0; t < tokens; ++t) {
      const std::uint64_t so = src.offset(0, 0, src_pages[t / src.tokens_per_page], h,
                                          t % src.tokens_per_page);
      const std::uint64_t d = dst.offset(0, 0, dst_pages[t / dst.tokens_per_page], h,
                                         t % dst.tokens_per_page);
      ASSERT_EQ(std::memcmp(b.data() + d, a.data() + so, src.entry_bytes()), 0)
          << "head " << h << " token " << t;
      for (std::uint64_t k = 0; k < dst.entry_bytes(); ++k) written[d + k] = true;
    }
  }
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (!written[i]) ASSERT_EQ(b[i], 0xEE) << "byte " << i << " written outside the plan";
  }
}

TEST(KvPlan, SameLayoutCoalescesWholePages) {
  for (auto make : {vllm_hnd, vllm_nhd, fused_hnd}) {
    KvLayout l = make(shape(16, {0, kHeads}));
    auto runs = plan_runs(l, l, {0, kHeads}, {0, 64});
    ASSERT_TRUE(runs.ok());
    EXPECT_EQ(runs->size(), 4u);  // one WRITE per page
    check_runs(l, l, {0, kHeads}, 64);
  }
}

TEST(KvPlan, TailPageIsOneShorterRun) {
  KvLayout l = vllm_hnd(shape(16, {0, kHeads}));
  auto runs = plan_runs(l, l, {0, kHeads}, {0, 40});
  ASSERT_TRUE(runs.ok());
  // HND tail page: per head the 8 tokens are contiguous, heads are not (page not full).
  EXPECT_EQ(runs->size(), 2u + kHeads);
  check_runs(l, l, {0, kHeads}, 40);
}

TEST(KvPlan, HeterogeneousLayoutsPagesAndTp) {
  const HeadShard all{0, kHeads}, low{0, 2}, high{2, 2};
  for (std::uint32_t tokens : {1u, 15u, 16u, 33u, 100u}) {
    SCOPED_TRACE(tokens);
    check_runs(vllm_nhd(shape(16, all)), vllm_hnd(shape(32, high)), {2, 4}, tokens);
    check_runs(vllm_hnd(shape(32, low)), vllm_nhd(shape(16, all)), {0, 2}, tokens);
    check_runs(vllm_cpu(shape(32, all)), heads_first(shape(16, low)), {0, 2}, tokens);
    check_runs(heads_first(shape(64, high)), vllm_cpu(shape(32, all)), {2, 4}, tokens);
    check_runs(fused_hnd(shape(16, all)), fused_hnd(shape(48, high)), {2, 4}, tokens);
  }
  KvLayout m1 = mla_layout(1, 64, 32, 16, 2), m2 = mla_layout(1, 64, 16, 16, 2);
  check_runs(m1, m2, {0, 1}, 70);
}

TEST(KvPlan, CountDoesNotDependOnChunking) {
  KvLayout src = vllm_nhd(shape(16, {0, kHeads})), dst = vllm_hnd(shape(32, {0, 2}));
  const std::uint32_t align = chunk_alignment(src, dst);
  EXPECT_EQ(align, 32u);
  auto whole = plan_runs(src, dst, {0, 2}, {0, 150});
  std::size_t pieces = 0;
  for (std::uint32_t b = 0; b < 150; b += 64) {
    auto part = plan_runs(src, dst, {0, 2}, {b, std::min(150u, b + 64)});
    ASSERT_TRUE(part.ok());
    pieces += part->size();
  }
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->size(), pieces);
  EXPECT_EQ(sender_imm_count(whole->size(), src), whole->size() * 2 + 1);
}

TEST(KvPlan, RefusesDifferentModelsAndForeignHeads) {
  KvLayout a = vllm_nhd(shape(16, {0, kHeads}));
  CacheShape other = shape(16, {0, kHeads});
  other.head_size = 8;
  EXPECT_EQ(plan_runs(a, vllm_nhd(other), {0, 4}, {0, 4}).status().code(), Errc::invalid_argument);
  EXPECT_EQ(plan_runs(a, vllm_nhd(shape(16, {0, 2})), {0, 4}, {0, 4}).status().code(),
            Errc::invalid_argument);
  EXPECT_EQ(plan_runs(a, a, {0, 4}, {5, 5}).status().code(), Errc::invalid_argument);
}

TEST(KvRoutes, PrefillTpSmallerAndLargerThanDecode) {
  // Prefill TP1 -> decode TP2: each decode rank takes its half from the one prefill rank.
  std::vector<HeadRange> p1{{0, 4}};
  auto r = plan_routes(p1, {2, 4}, 1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (std::vector<Route>{{0, {2, 4}}}));
  // Prefill TP4 -> decode TP1 (p > d): four routes, one head each.
  std::vector<HeadRange> p4{{0, 1}, {1, 2}, {2, 3}, {3, 4}};
  r = plan_routes(p4, {0, 4}, 0);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 4u);
  for (std::uint32_t i = 0; i < 4; ++i) EXPECT_EQ((*r)[i], (Route{i, {i, i + 1}}));
  auto counts = receivers_per_source(p1, std::vector<HeadRange>{{0, 2}, {2, 4}});
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(*counts, (std::vector<std::uint32_t>{2}));
}

TEST(KvRoutes, ReplicasAreSpreadOverDecodeRanks) {
  // MLA (or one KV head) on prefill TP4: decode ranks 0..3 each pick a different prefill rank.
  std::vector<HeadRange> replicas(4, HeadRange{0, 1});
  std::vector<HeadRange> decode(4, HeadRange{0, 1});
  auto counts = receivers_per_source(replicas, decode);
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(*counts, (std::vector<std::uint32_t>{1, 1, 1, 1}));
  EXPECT_EQ(plan_routes(replicas, {1, 2}, 0).status().code(), Errc::not_found);
}

}  // namespace
}  // namespace fabric::kv

namespace fabric::kv {
namespace {

// A decoder that holds a prefix asks for the rest only: destination token t is source token
// src_first + t, every entry of the wanted tokens lands, nothing before src_first is written,
// and the count equals the count of the same tokens planned without the shift.
TEST(KvPlan, SourceOffsetSkipsTheHeldPrefix) {
  const KvLayout src = vllm_hnd(shape(16, {0, kHeads}));
  const KvLayout dst = vllm_nhd(shape(32, {0, kHeads}));
  const std::uint32_t first = 64;  // a multiple of lcm(16, 32)
  const std::uint32_t tokens = 70;
  auto runs = plan_runs(src, dst, {0, kHeads}, TokenRange{first, first + tokens}, first);
  ASSERT_TRUE(runs.ok()) << runs.status().to_string();
  auto unshifted = plan_runs(src, dst, {0, kHeads}, TokenRange{first, first + tokens});
  ASSERT_TRUE(unshifted.ok());
  EXPECT_EQ(runs->size(), unshifted->size());
  std::vector<std::uint8_t> a(src.span_bytes()), b(dst.span_bytes(), 0xEE);
  std::iota(a.begin(), a.end(), 0);
  for (const kv::Run& r : *runs) {  // kv::Run, not gtest's Test::Run
    // Source pages index the prefill's whole list, destination pages the decoder's from 0.
    ASSERT_LT(r.dst_page, (tokens + 31) / 32);
    const std::uint64_t so = std::uint64_t{r.src_page} * src.page_stride + r.src_offset;
    const std::uint64_t d = std::uint64_t{r.dst_page} * dst.page_stride + r.dst_offset;
    std::memcpy(b.data() + d, a.data() + so, r.length);
  }
  for (std::uint32_t h = 0; h < kHeads; ++h) {
    for (std::uint32_t t = 0; t < tokens; ++t) {
      const std::uint32_t s = first + t;
      const std::uint64_t so = src.offset(0, 0, s / 16, h, s % 16);
      const std::uint64_t d = dst.offset(0, 0, t / 32, h, t % 32);
      ASSERT_EQ(std::memcmp(b.data() + d, a.data() + so, src.entry_bytes()), 0)
          << "head " << h << " token " << t;
    }
  }
}

TEST(KvPlan, SourceOffsetOffPageBoundaryIsRejected) {
  const KvLayout src = vllm_hnd(shape(16, {0, kHeads}));
  const KvLayout dst = vllm_nhd(shape(32, {0, kHeads}));
  auto runs = plan_runs(src, dst, {0, kHeads}, TokenRange{16, 40}, 16);  // lcm is 32
  ASSERT_FALSE(runs.ok());
  EXPECT_EQ(runs.status().code(), Errc::invalid_argument);
  EXPECT_FALSE(plan_runs(src, dst, {0, kHeads}, TokenRange{0, 40}, 32).ok());  // before it
}

}  // namespace
}  // namespace fabric::kv
