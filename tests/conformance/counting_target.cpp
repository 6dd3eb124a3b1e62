#include "counting_target.hpp"

#include "fabric_test/sync.hpp"

namespace fabric::conformance {

namespace {

int target_body(test::Channel& channel, const EngineConfig& config, std::uint64_t region_size,
                std::uint32_t imm) {
  auto engine = child_engine(config);
  CHILD_REQUIRE(engine != nullptr, "no engine");
  std::vector<std::byte> region(region_size);
  auto reg = engine->reg_mr(region.data(), region.size());
  CHILD_REQUIRE_OK(reg.status());
  auto counter = engine->imm_counter(imm);
  CHILD_REQUIRE_OK(counter.status());
  CHILD_REQUIRE(channel.send_bytes(reg->desc.encode()), "sending the MrDesc");
  for (;;) {
    auto expected = channel.recv_pod<std::uint64_t>(kWait);
    CHILD_REQUIRE(expected.has_value(), "no command from the parent");
    if (*expected == ~std::uint64_t{0}) break;
    CHILD_REQUIRE_OK((*counter)->wait_and_consume(*expected, kWait));
    // Anything beyond the documented count is a contract violation.
    CHILD_REQUIRE(!(*counter)->wait(1, kQuiet).ok(),
                  std::to_string((*counter)->value()) + " surplus immediates");
    CHILD_REQUIRE(channel.send_bytes(region), "sending the region");
  }
  engine->stop();
  return test::kChildOk;
}

}  // namespace

CountingTarget::CountingTarget(const EngineConfig& config, std::uint64_t region_size,
                               std::uint32_t imm)
    : child_(test::spawn_child(
          [config, region_size, imm](test::Channel& channel) {
            return target_body(channel, config, region_size, imm);
          },
          kChildLifetime)) {}

::testing::AssertionResult CountingTarget::connect() {
  auto bytes = child_.channel().recv_bytes(kWait);
  if (!bytes) return ::testing::AssertionFailure() << "target sent no MrDesc";
  auto desc = MrDesc::decode(*bytes);
  if (!desc) return ::testing::AssertionFailure() << desc.status().to_string();
  dst_ = std::move(desc).value();
  return ::testing::AssertionSuccess();
}

std::optional<std::vector<std::byte>> CountingTarget::round(std::uint64_t expected) {
  if (!child_.channel().send_pod(expected)) return std::nullopt;
  return child_.channel().recv_bytes(kWait + kWait);
}

::testing::AssertionResult CountingTarget::finish() {
  child_.channel().send_pod(~std::uint64_t{0});
  const auto exit = child_.wait_exit(kWait);
  if (exit.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "target: " << exit.to_string();
}

}  // namespace fabric::conformance
