// Thousands of WRITEs submitted back to back: every one completes exactly
// once on the writer, every immediate arrives exactly once, every byte lands.

#include <cstring>
#include <thread>
#include <vector>

#include "fabric_test/data.hpp"
#include "remote_writer.hpp"

namespace fabric::conformance {
namespace {

using InFlightTest = ProviderTest;

TEST_P(InFlightTest, ThousandsOfWritesCompleteExactlyOnce) {
  constexpr std::uint32_t kWrites = 2000;
  constexpr std::uint64_t kLength = 200;
  // Destination slots wider than the writes, so the sentinel between them
  // catches any write that strays.
  constexpr std::uint64_t kDstStride = 256;
  constexpr std::uint64_t kSrcSeed = 0x1f11;
  constexpr std::uint32_t kImm = 0x2000;
  RemoteWriter writer(config(), kWrites * kLength, kSrcSeed);

  ASSERT_ENGINE(engine, config());
  std::vector<std::byte> dst = test::random_bytes(kWrites * kDstStride, test::kSentinelSeed);
  auto reg = engine->reg_mr(dst.data(), dst.size());
  ASSERT_OK(reg);
  auto counter = engine->imm_counter(kImm);
  ASSERT_OK(counter);
  ASSERT_TRUE(writer.connect(reg->desc));

  const BurstResult burst = writer.burst({.count = kWrites,
                                          .length = kLength,
                                          .imm = kImm,
                                          .src_stride = kLength,
                                          .dst_stride = kDstStride});
  EXPECT_OK(burst.first_error);
  EXPECT_EQ(burst.submitted, kWrites);
  EXPECT_EQ(burst.completed, kWrites) << "completions on the writer";
  EXPECT_EQ(burst.failed, 0u);
  EXPECT_EQ(burst.completed_later, kWrites) << "completions kept arriving after all were done";

  EXPECT_OK((*counter)->wait(kWrites, kWait));
  std::this_thread::sleep_for(kQuiet);
  EXPECT_EQ((*counter)->value(), kWrites) << "immediates at the target";

  const auto src = test::random_bytes(kWrites * kLength, kSrcSeed);
  std::vector<std::byte> expected = test::random_bytes(dst.size(), test::kSentinelSeed);
  for (std::uint32_t i = 0; i < kWrites; ++i) {
    std::memcpy(expected.data() + i * kDstStride, src.data() + i * kLength, kLength);
  }
  EXPECT_BYTES_EQUAL(dst, expected);

  const auto summary = writer.finish();
  ASSERT_TRUE(summary.has_value());
  EXPECT_EQ(summary->burst_completed, summary->burst_submitted)
      << "completions counted after the writer's engine stopped";
}

FABRIC_INSTANTIATE_PROVIDERS(InFlightTest);

}  // namespace
}  // namespace fabric::conformance
