// Paged WRITEs: page i goes from src.offset + src.indices[i]*src.stride to
// dst.offset + dst.indices[i]*dst.stride, P pages give exactly P immediates,
// and the gaps between pages stay untouched.

#include <algorithm>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "fabric_test/data.hpp"
#include "remote_writer.hpp"

namespace fabric::conformance {
namespace {

constexpr std::uint64_t kSrcSeed = 0x9a9e'0000;

// `count` distinct indices drawn from [0, range) in shuffled order, so pages
// are neither contiguous nor sorted.
std::vector<std::uint32_t> shuffled_indices(std::uint32_t count, std::uint32_t range,
                                            std::uint64_t seed) {
  std::vector<std::uint32_t> all(range);
  std::iota(all.begin(), all.end(), 0u);
  std::uint64_t state = seed;
  for (std::uint32_t i = range - 1; i > 0; --i) {
    std::swap(all[i], all[test::splitmix64(state) % (i + 1)]);
  }
  all.resize(count);
  return all;
}

struct Geometry {
  std::uint32_t pages;
  std::uint64_t page_length;
  std::uint64_t src_stride, src_offset;
  std::uint32_t src_range;  // src indices come from [0, src_range)
  std::uint64_t dst_stride, dst_offset;
  std::uint32_t dst_range;
};

class PagedWriteTest : public ProviderTest {
 protected:
  void run(const Geometry& g, bool with_imm) {
    const std::uint64_t src_size = g.src_offset + g.src_range * g.src_stride + g.page_length;
    const std::uint64_t dst_size = g.dst_offset + g.dst_range * g.dst_stride + g.page_length + 97;
    RemoteWriter writer(config(), src_size, kSrcSeed);

    ASSERT_ENGINE(engine, config());
    const auto src = test::random_bytes(src_size, kSrcSeed);
    std::vector<std::byte> dst = test::random_bytes(dst_size, test::kSentinelSeed);
    auto reg = engine->reg_mr(dst.data(), dst.size());
    ASSERT_OK(reg);
    constexpr std::uint32_t kImm = 0xbeef;
    std::shared_ptr<ImmCounter> counter;
    if (with_imm) {
      auto made = engine->imm_counter(kImm);
      ASSERT_OK(made);
      counter = *made;
    }
    ASSERT_TRUE(writer.connect(reg->desc));

    PagedWriteSpec spec;
    spec.page_length = g.page_length;
    if (with_imm) spec.imm = kImm;
    spec.src = {shuffled_indices(g.pages, g.src_range, 1), g.src_stride, g.src_offset};
    spec.dst = {shuffled_indices(g.pages, g.dst_range, 2), g.dst_stride, g.dst_offset};
    const Outcome outcome = writer.paged_write(spec);
    ASSERT_TRUE(outcome.ok()) << outcome.to_string();

    std::vector<std::byte> expected = test::random_bytes(dst_size, test::kSentinelSeed);
    std::vector<test::ByteRange> written;
    for (std::uint32_t i = 0; i < g.pages; ++i) {
      const auto from = g.src_offset + spec.src.indices[i] * g.src_stride;
      const auto to = g.dst_offset + spec.dst.indices[i] * g.dst_stride;
      std::memcpy(expected.data() + to, src.data() + from, g.page_length);
      written.push_back({to, g.page_length});
    }
    if (with_imm) {
      ASSERT_OK(counter->wait(g.pages, kWait));
      EXPECT_BYTES_EQUAL(dst, expected);
      std::this_thread::sleep_for(kQuiet);
      EXPECT_EQ(counter->value(), g.pages) << "immediates for " << g.pages << " pages";
    } else {
      EXPECT_TRUE(test::eventually_equal(dst, expected, kWait));
    }
    EXPECT_TRUE(test::untouched_outside(dst, written));
    EXPECT_TRUE(writer.finish().has_value());
  }
};

TEST_P(PagedWriteTest, ShuffledPagesLandAtTheirIndicesWithOneImmPerPage) {
  // page_length below both strides: gaps on both sides; different offsets.
  run({.pages = 64,
       .page_length = 1000,
       .src_stride = 1024,
       .src_offset = 24,
       .src_range = 128,
       .dst_stride = 1536,
       .dst_offset = 100,
       .dst_range = 192},
      true);
}

TEST_P(PagedWriteTest, TinyPagesWithoutImmLandAtTheirIndices) {
  // Source pages packed (stride == page_length), destination spread wide.
  run({.pages = 300,
       .page_length = 7,
       .src_stride = 7,
       .src_offset = 3,
       .src_range = 300,
       .dst_stride = 64,
       .dst_offset = 5,
       .dst_range = 1200},
      false);
}

FABRIC_INSTANTIATE_PROVIDERS(PagedWriteTest);

}  // namespace
}  // namespace fabric::conformance
