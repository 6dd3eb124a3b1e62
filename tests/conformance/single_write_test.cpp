// Contiguous WRITEs from a child into the parent: exact bytes at the exact
// place, nothing around it touched, one immediate per write.

#include <cstring>
#include <thread>
#include <vector>

#include "fabric_test/data.hpp"
#include "remote_writer.hpp"

namespace fabric::conformance {
namespace {

constexpr std::uint64_t kSrcSeed = 0x51'0000;
// Odd offsets and guards so nothing relies on alignment.
constexpr std::uint64_t kSrcOffset = 13;
constexpr std::uint64_t kGuard = 4099;

// 1 MiB + 3 ends mid-page; 64 MiB takes the providers' bulk paths. Measured
// on a 2-core box: the whole list costs 2-4 s per provider, tcp and sockets
// included, so every provider gets every size.
const std::vector<std::uint64_t> kSizes = {1, 4096, (1u << 20) + 3, 16u << 20, 64u << 20};

class SingleWriteTest : public ProviderTest {
 protected:
  // Runs every size; `with_imm` selects how the parent learns the data landed.
  void run_sizes(bool with_imm) {
    const auto& sizes = kSizes;
    const std::uint64_t max_len = sizes.back();
    const std::uint64_t dst_size = kGuard + max_len + kGuard;
    RemoteWriter writer(config(), kSrcOffset + max_len, kSrcSeed);

    ASSERT_ENGINE(engine, config());
    const auto src = test::random_bytes(kSrcOffset + max_len, kSrcSeed);
    const auto sentinel = test::random_bytes(dst_size, test::kSentinelSeed);
    std::vector<std::byte> dst(sentinel);
    auto reg = engine->reg_mr(dst.data(), dst.size());
    ASSERT_OK(reg);
    ASSERT_TRUE(writer.connect(reg->desc));

    std::vector<std::shared_ptr<ImmCounter>> counters;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const std::uint64_t len = sizes[i];
      SCOPED_TRACE("length " + std::to_string(len));
      std::memcpy(dst.data(), sentinel.data(), dst.size());
      const std::uint32_t imm = 0x1000 + static_cast<std::uint32_t>(i);
      if (with_imm) {
        auto counter = engine->imm_counter(imm);
        ASSERT_OK(counter);
        counters.push_back(*counter);
      }

      SingleWriteSpec spec;
      spec.length = len;
      spec.src_offset = kSrcOffset;
      spec.dst_offset = kGuard;
      if (with_imm) spec.imm = imm;
      const Outcome outcome = writer.single_write(spec);
      ASSERT_TRUE(outcome.ok()) << outcome.to_string();

      std::vector<std::byte> expected(sentinel);
      std::memcpy(expected.data() + kGuard, src.data() + kSrcOffset, len);
      if (with_imm) {
        // The immediate is the receiver's proof that the whole write landed.
        ASSERT_OK(counters.back()->wait(1, kWait));
        ASSERT_BYTES_EQUAL(dst, expected);
      } else {
        ASSERT_TRUE(test::eventually_equal(dst, expected, kWait));
      }
      const test::ByteRange written{kGuard, len};
      EXPECT_TRUE(test::untouched_outside(dst, std::span(&written, 1)));
    }

    // Exactly one immediate per write, not merely at least one.
    if (with_imm) {
      std::this_thread::sleep_for(kQuiet);
      for (std::size_t i = 0; i < counters.size(); ++i) {
        EXPECT_EQ(counters[i]->value(), 1u)
            << "immediates for the write of " << sizes[i] << " bytes";
      }
    }
    const auto summary = writer.finish();
    EXPECT_TRUE(summary.has_value());
  }
};

TEST_P(SingleWriteTest, WithImmLandsExactlyAndSignalsOnce) { run_sizes(true); }

TEST_P(SingleWriteTest, WithoutImmLandsExactly) { run_sizes(false); }

FABRIC_INSTANTIATE_PROVIDERS(SingleWriteTest);

}  // namespace
}  // namespace fabric::conformance
