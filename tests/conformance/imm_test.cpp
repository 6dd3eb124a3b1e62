// submit_imm: an immediate-only (zero-length) WRITE. Each one arrives exactly
// once and moves no data.

#include <thread>
#include <vector>

#include "fabric_test/data.hpp"
#include "remote_writer.hpp"

namespace fabric::conformance {
namespace {

using ImmOnlyTest = ProviderTest;

TEST_P(ImmOnlyTest, EachSubmitImmArrivesExactlyOnceAndChangesNoData) {
  constexpr std::uint32_t kCount = 200;
  constexpr std::uint32_t kImm = 0x1a2b3c4d;
  RemoteWriter writer(config(), 64, 1);

  ASSERT_ENGINE(engine, config());
  std::vector<std::byte> dst = test::random_bytes(8192, test::kSentinelSeed);
  auto reg = engine->reg_mr(dst.data(), dst.size());
  ASSERT_OK(reg);
  auto counter = engine->imm_counter(kImm);
  ASSERT_OK(counter);
  ASSERT_TRUE(writer.connect(reg->desc));

  const Outcome outcome = writer.imm(kImm, kCount);
  ASSERT_TRUE(outcome.ok()) << outcome.to_string();
  ASSERT_OK((*counter)->wait(kCount, kWait));
  std::this_thread::sleep_for(kQuiet);
  EXPECT_EQ((*counter)->value(), kCount);
  EXPECT_TRUE(test::untouched_outside(dst, {}));
  EXPECT_TRUE(writer.finish().has_value());
}

FABRIC_INSTANTIATE_PROVIDERS(ImmOnlyTest);

}  // namespace
}  // namespace fabric::conformance
