// The layout descriptor: vLLM's and the other layouts expressed in it, validation of bad ones,
// and what the fingerprint covers.

#include <gtest/gtest.h>

#include "fabric/kv/layout.hpp"

namespace fabric::kv {
namespace {

CacheShape shape(HeadShard shard = {0, 4}) { return {3, 10, 16, 4, shard, 8, 2}; }

TEST(KvLayout, VllmNhdPlacesHeadsInsideTokens) {
  KvLayout l = vllm_nhd(shape());
  ASSERT_TRUE(l.validate().ok()) << l.validate().to_string();
  EXPECT_EQ(l.entry_bytes(), 16u);
  EXPECT_EQ(l.head_stride, 16u);
  EXPECT_EQ(l.token_stride, 64u);
  EXPECT_EQ(l.page_stride, 64u * 16);
  // V follows K's pages in the same tensor.
  EXPECT_EQ(l.base(1, 1).region, 1u);
  EXPECT_EQ(l.base(1, 1).offset, 10u * 64 * 16);
  EXPECT_EQ(l.offset(2, 0, 3, 2, 5), 3u * 1024 + 2 * 16 + 5 * 64);
}

TEST(KvLayout, VllmCpuInterleavesKAndVPerHead) {
  KvLayout l = vllm_cpu(shape());
  ASSERT_TRUE(l.validate().ok());
  // [pages, heads, 2 * tokens, head_size]: K block then V block per (page, head).
  EXPECT_EQ(l.token_stride, 16u);
  EXPECT_EQ(l.head_stride, 2u * 16 * 16);
  EXPECT_EQ(l.base(0, 1).offset, 16u * 16);
  EXPECT_EQ(l.page_stride, 4u * 2 * 16 * 16);
}

TEST(KvLayout, HeadsFirstAndMlaValidate) {
  EXPECT_TRUE(heads_first(shape()).validate().ok());
  EXPECT_TRUE(vllm_hnd(shape()).validate().ok());
  EXPECT_TRUE(fused_hnd(shape()).validate().ok());
  KvLayout m = mla_layout(2, 8, 32, 64, 2);
  EXPECT_TRUE(m.validate().ok()) << m.validate().to_string();
  EXPECT_EQ(m.parts(), 1u);
  EXPECT_EQ(m.num_heads, 1u);
}

TEST(KvLayout, RejectsOverlapsBadHeadsAndBases) {
  KvLayout l = vllm_hnd(shape());
  l.token_stride = 8;  // entries of 16 bytes overlap
  EXPECT_EQ(l.validate().code(), Errc::invalid_argument);
  l = vllm_hnd(shape());
  l.head_begin = 2;  // [2, 6) of 4 heads
  EXPECT_EQ(l.validate().code(), Errc::invalid_argument);
  l = vllm_hnd(shape());
  l.bases.pop_back();
  EXPECT_EQ(l.validate().code(), Errc::invalid_argument);
  l = vllm_hnd(shape());
  l.bases[0].region = 99;
  EXPECT_EQ(l.validate().code(), Errc::invalid_argument);
  l = vllm_hnd(shape());
  l.tokens_per_page = 0;
  EXPECT_EQ(l.validate().code(), Errc::invalid_argument);
  KvLayout m = mla_layout(2, 8, 32, 64, 2);
  m.total_kv_heads = 2;
  EXPECT_EQ(m.validate().code(), Errc::invalid_argument);
}

TEST(KvLayout, FingerprintCoversTheModelNotThePlacement) {
  const auto a = vllm_nhd(shape());
  EXPECT_EQ(a.fingerprint(), vllm_hnd(shape({2, 2})).fingerprint());
  CacheShape other = shape();
  other.tokens_per_page = 32;
  EXPECT_EQ(a.fingerprint(), vllm_cpu(other).fingerprint());
  other = shape();
  other.head_size = 16;
  EXPECT_NE(a.fingerprint(), vllm_nhd(other).fingerprint());
  other = shape();
  other.num_layers = 4;
  EXPECT_NE(a.fingerprint(), vllm_nhd(other).fingerprint());
  EXPECT_NE(a.fingerprint(), fused_hnd(shape()).fingerprint());  // another kind
}

TEST(KvShardHeads, SplitsOrReplicates) {
  auto s = shard_heads(8, 4, 3);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->begin, 6u);
  EXPECT_EQ(s->count, 2u);
  s = shard_heads(2, 8, 5);  // 4 ranks per head
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->begin, 1u);
  EXPECT_EQ(s->count, 1u);
  EXPECT_FALSE(shard_heads(6, 4, 0).ok());
  EXPECT_FALSE(shard_heads(3, 4, 0).ok());
  EXPECT_FALSE(shard_heads(4, 4, 4).ok());
}

}  // namespace
}  // namespace fabric::kv
