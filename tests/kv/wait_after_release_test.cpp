// Receiver::wait looks its request up again after the condition variable times out: while it
// slept (its mutex released) the request may have ended and been released, erasing the entry it
// had found. The fix of d221eb6 (names the state from a fresh lookup); before it, the timeout
// message read the erased entry: a use after free that returned `timeout` for a request that no
// longer exists. during_next_wait puts the end and the release inside the wait, every run.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "during_next_wait.hpp"
#include "fabric/engine.hpp"
#include "fabric/kv/receiver.hpp"
#include "fabric/kv/sender.hpp"

namespace fabric::kv {
namespace {

using namespace std::chrono_literals;

constexpr auto kWait = 60s;  // a bound only: each wait below ends on its event

std::unique_ptr<TransferEngine> engine() {
  EngineConfig ec;
  ec.provider = "shm";
  auto e = TransferEngine::create(ec);
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  return e.ok() ? std::move(*e) : nullptr;
}

TEST(KvReceiverWait, ARequestReleasedWhileTheWaitSleptIsNotFoundAtTheTimeout) {
  const KvLayout layout = vllm_cpu({2, 8, 16, 4, {0, 4}, 32, 2});
  std::vector<std::byte> prefill_memory(layout.span_bytes() + 4096);
  std::vector<std::byte> decode_memory(layout.span_bytes() + 4096);
  auto prefill_engine = engine();
  auto decode_engine = engine();
  ASSERT_TRUE(prefill_engine && decode_engine);
  auto mr = prefill_engine->reg_mr(prefill_memory.data(), prefill_memory.size());
  ASSERT_TRUE(mr.ok()) << mr.status().to_string();
  SenderConfig sc;
  sc.layout = layout;
  sc.regions.assign(layout.num_regions, mr->handle);
  auto sender = Sender::create(*prefill_engine, sc);
  ASSERT_TRUE(sender.ok()) << sender.status().to_string();
  ReceiverConfig rc;
  rc.layout = layout;
  rc.regions.assign(layout.num_regions, RegionMemory{decode_memory.data(), decode_memory.size()});
  auto created = Receiver::create(*decode_engine, rc);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  Receiver& receiver = **created;
  auto source = receiver.connect(prefill_engine->main_address(), kWait);
  ASSERT_TRUE(source.ok()) << source.status().to_string();

  // The prefiller never prepares "r": the request stays waiting until it is cancelled.
  const std::uint32_t sources[] = {*source};
  ASSERT_TRUE(receiver.request("r", {0, 1}, 20, sources).ok());

  // Inside the wait below, its mutex released: the request is cancelled (the prefiller
  // acknowledges at once: it holds only the ask) and released, so its entry is erased.
  test::during_next_wait([&] {
    ASSERT_TRUE(receiver.cancel("r").ok());
    auto ended = receiver.wait("r", kWait);
    ASSERT_TRUE(ended.ok()) << ended.status().to_string();
    ASSERT_EQ(ended->state, State::cancelled) << ended->error.to_string();
    auto released = receiver.release("r");
    ASSERT_TRUE(released.ok()) << released.to_string();
  });
  // A zero timeout: the deadline has passed when the condition variable returns, whatever the
  // hook took, so the wait takes its timeout path with the entry gone.
  auto late = receiver.wait("r", 0ms);
  ASSERT_TRUE(test::next_wait_hook_ran())
      << "wait() did not sleep in pthread_cond_clockwait: the hook cannot reach it any more";
  ASSERT_FALSE(late.ok()) << "state " << state_name(late->state);
  EXPECT_EQ(late.status().code(), Errc::not_found) << late.status().to_string();
  EXPECT_EQ(receiver.active_requests(), 0u);
}

}  // namespace
}  // namespace fabric::kv
