// A provider call that does not return (libfabric 1.17's shm spins on a lock that a stopped or
// killed peer holds in our region; docs/reliability.md#shm-locks) must not hang the engine's
// control calls or stop(). A decorator Domain blocks the worker inside poll() on demand.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "doubles/domain_decorator.hpp"
#include "doubles/forwarding_domain.hpp"
#include "engine/abandoned.hpp"
#include "fabric/fabric.hpp"

namespace fabric {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// What the test holds the worker with; shared with the (possibly leaked) Domain.
struct Gate {
  std::mutex mutex;
  std::condition_variable cv;
  bool closed = false;
  std::atomic<bool> worker_inside{false};

  void close() {
    std::lock_guard lock(mutex);
    closed = true;
  }
  void open() {
    {
      std::lock_guard lock(mutex);
      closed = false;
    }
    cv.notify_all();
  }
  // Bounded, so a failed test never leaves a thread parked for good.
  void pass() {
    std::unique_lock lock(mutex);
    if (!closed) return;
    worker_inside = true;
    cv.wait_for(lock, 120s, [this] { return !closed; });
    worker_inside = false;
  }
};

class GatedDomain final : public domain::ForwardingDomain {
 public:
  GatedDomain(std::unique_ptr<domain::Domain> inner, std::shared_ptr<Gate> gate)
      : ForwardingDomain(std::move(inner)), gate_(std::move(gate)) {}
  std::size_t poll(std::span<domain::Event> out) override {
    gate_->pass();
    return inner().poll(out);
  }

 private:
  std::shared_ptr<Gate> gate_;
};

class StuckProvider : public ::testing::Test {
 protected:
  void SetUp() override {
    domain::set_test_decorator([gate = gate_](std::unique_ptr<domain::Domain> inner) {
      return std::unique_ptr<domain::Domain>(std::make_unique<GatedDomain>(std::move(inner), gate));
    });
  }
  void TearDown() override {
    gate_->open();
    domain::set_test_decorator({});
  }
  bool wait_until_worker_inside() {
    const auto deadline = Clock::now() + 10s;
    while (!gate_->worker_inside) {
      if (Clock::now() >= deadline) return false;
      std::this_thread::yield();
    }
    return true;
  }
  static EngineConfig config() {
    EngineConfig c;
    c.provider = "shm";
    c.control_timeout = 500ms;
    c.drain_timeout = 200ms;
    c.stuck_worker_grace = 1s;
    return c;
  }

  std::shared_ptr<Gate> gate_ = std::make_shared<Gate>();
};

TEST_F(StuckProvider, ControlCallsTimeOutWhileTheWorkerIsInsideTheProvider) {
  auto engine = TransferEngine::create(config());
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  std::vector<std::byte> memory(4096);
  auto reg = (*engine)->reg_mr(memory.data(), memory.size());
  ASSERT_TRUE(reg.ok()) << reg.status().to_string();

  gate_->close();
  ASSERT_TRUE(wait_until_worker_inside());
  const auto before = Clock::now();
  const Status st = (*engine)->dereg_mr(reg->handle);
  EXPECT_EQ(st.code(), Errc::timeout) << st.to_string();
  EXPECT_LT(Clock::now() - before, 5s);

  gate_->open();  // the provider lets go: the engine works again
  auto again = (*engine)->reg_mr(memory.data(), memory.size());
  EXPECT_TRUE(again.ok()) << again.status().to_string();
  (*engine)->stop();
}

TEST_F(StuckProvider, StopReturnsInBoundedTimeAndLeavesTheStuckWorkerBehind) {
  auto engine = TransferEngine::create(config());
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  gate_->close();
  ASSERT_TRUE(wait_until_worker_inside());
  const auto before = Clock::now();
  (*engine)->stop();
  const auto took = Clock::now() - before;
  EXPECT_LT(took, config().drain_timeout + config().stuck_worker_grace + 5s);  // + slack
  EXPECT_TRUE(gate_->worker_inside);  // stop() did not wait for it
  // Everything after stop() is refused cleanly, not a crash on what was left behind.
  std::vector<std::byte> memory(64);
  EXPECT_EQ((*engine)->reg_mr(memory.data(), memory.size()).status().code(), Errc::shutdown);
  EXPECT_EQ((*engine)->outstanding_requests(), 0u);
  EXPECT_TRUE((*engine)->take_post_timings().empty());
  engine->reset();
  // Released, the left-behind worker finishes its shutdown on its own.
  gate_->open();
  EXPECT_TRUE(fabric::engine::wait_for_abandoned_workers(30s));
}

}  // namespace
}  // namespace fabric
