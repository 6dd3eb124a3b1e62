#include "remote_target.hpp"

#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "fabric_test/data.hpp"

namespace fabric::conformance {

namespace {
using test::Channel;

enum class Op : std::uint8_t { count = 1, untouched = 2, dereg = 3, quit = 4 };
struct CountWire {
  std::uint64_t expected;
  std::uint32_t imm;
};

int target_main(Channel& ch, const EngineConfig& config, std::uint64_t size) {
  auto engine = child_engine(config);
  CHILD_REQUIRE(engine != nullptr, "target engine");
  std::vector<std::byte> region(size);
  test::fill_random(region, test::kSentinelSeed);
  auto reg = engine->reg_mr(region.data(), region.size());
  CHILD_REQUIRE_OK(reg.status());
  CHILD_REQUIRE(ch.send_desc(reg->desc), ch.last_error());

  std::map<std::uint32_t, std::shared_ptr<ImmCounter>> counters;
  for (;;) {
    auto op = ch.recv_pod<Op>(std::chrono::seconds(90));
    CHILD_REQUIRE(op.has_value(), "waiting for a command: " + ch.last_error());
    switch (*op) {
      case Op::count: {
        auto w = ch.recv_pod<CountWire>();
        CHILD_REQUIRE(w.has_value(), ch.last_error());
        auto& counter = counters[w->imm];
        if (!counter) {
          auto made = engine->imm_counter(w->imm);
          CHILD_REQUIRE_OK(made.status());
          counter = *made;
        }
        (void)counter->wait(w->expected, kWait);
        // Surplus arrivals would land during this window.
        std::this_thread::sleep_for(kQuiet);
        const std::uint64_t seen = counter->value();
        CHILD_REQUIRE(counter->try_consume(seen), "consume what was counted");
        CHILD_REQUIRE(ch.send_pod(seen), ch.last_error());
        break;
      }
      case Op::untouched: {
        const auto result = test::untouched_outside(region, {});
        CHILD_REQUIRE(ch.send_string(result ? "" : result.message()), ch.last_error());
        break;
      }
      case Op::dereg: {
        CHILD_REQUIRE(ch.send_status(engine->dereg_mr(reg->handle)), ch.last_error());
        break;
      }
      case Op::quit: {
        engine->stop();
        engine.reset();
        CHILD_REQUIRE(ch.send_string("bye"), ch.last_error());
        return test::kChildOk;
      }
      default:
        CHILD_REQUIRE(false, "unknown command " + std::to_string(static_cast<int>(*op)));
    }
  }
}
}  // namespace

RemoteTarget::RemoteTarget(const EngineConfig& config, std::uint64_t region_size)
    : child_(test::spawn_child(
          [config, region_size](Channel& ch) { return target_main(ch, config, region_size); },
          kChildLifetime)) {}

::testing::AssertionResult RemoteTarget::connect() {
  auto desc = child_.channel().recv_desc(kWait);
  if (!desc) {
    return ::testing::AssertionFailure()
           << "target did not send its MrDesc: " << child_.channel().last_error();
  }
  dst_ = *desc;
  return ::testing::AssertionSuccess();
}

std::optional<std::uint64_t> RemoteTarget::imm_arrivals(std::uint32_t imm, std::uint64_t expected) {
  auto& ch = child_.channel();
  if (!ch.send_pod(Op::count) || !ch.send_pod(CountWire{expected, imm})) return std::nullopt;
  return ch.recv_pod<std::uint64_t>(kWait + kWait);
}

::testing::AssertionResult RemoteTarget::untouched() {
  auto& ch = child_.channel();
  if (!ch.send_pod(Op::untouched)) return ::testing::AssertionFailure() << ch.last_error();
  auto report = ch.recv_string();
  if (!report) return ::testing::AssertionFailure() << ch.last_error();
  if (!report->empty()) return ::testing::AssertionFailure() << "target region: " << *report;
  return ::testing::AssertionSuccess();
}

Status RemoteTarget::dereg() {
  auto& ch = child_.channel();
  if (!ch.send_pod(Op::dereg)) return Status(Errc::timeout, ch.last_error());
  auto status = ch.recv_status();
  if (!status) return Status(Errc::timeout, "no reply from target: " + ch.last_error());
  return *status;
}

::testing::AssertionResult RemoteTarget::finish() {
  auto& ch = child_.channel();
  if (!ch.send_pod(Op::quit) || !ch.expect("bye", kWait)) {
    return ::testing::AssertionFailure() << "target did not stop cleanly: " << ch.last_error()
                                         << "; process " << child_.wait_exit(kWait).to_string();
  }
  const auto exit = child_.wait_exit(kWait);
  if (!exit.ok()) return ::testing::AssertionFailure() << "target process " << exit.to_string();
  return ::testing::AssertionSuccess();
}

void RemoteTargetTest::set_up(std::uint64_t dst_size, std::uint64_t src_size,
                              std::byte src_fill) {
  ProviderTest::SetUp();
  if (IsSkipped()) return;
  target_ = std::make_unique<RemoteTarget>(config(), dst_size);
  auto engine = TransferEngine::create(config());
  ASSERT_OK(engine);
  engine_ = std::move(engine).value();
  src_.assign(src_size, src_fill);
  auto reg = engine_->reg_mr(src_.data(), src_.size());
  ASSERT_OK(reg);
  src_mr_ = reg->handle;
  ASSERT_TRUE(target_->connect());
}

void RemoteTargetTest::TearDown() {
  if (engine_) engine_->stop();
  if (target_) {
    EXPECT_TRUE(target_->finish());
  }
}

void RemoteTargetTest::expect_nothing_was_sent(std::uint32_t imm) {
  auto flag = std::make_shared<CompletionFlag>();
  ASSERT_OK(engine_->submit_imm(imm, target_->dst(), flag));
  ASSERT_OK(flag->wait(kWait));
  EXPECT_EQ(target_->imm_arrivals(imm, 1), 1u) << "arrivals of the rejected requests' imm";
  EXPECT_TRUE(target_->untouched());
  EXPECT_EQ(done_->completed(), 0u) << "on_done ran for a rejected submission";
}

}  // namespace fabric::conformance
