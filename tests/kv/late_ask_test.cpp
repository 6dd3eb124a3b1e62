// A decoder whose ask reaches the prefiller after the request was released (its step stalled
// past receiver_timeout, so the prefiller expired and freed it) hears "released" at once, not
// after receiver_timeout: the prefiller keeps a bounded memory of released ids.

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fabric/engine.hpp"
#include "fabric/kv/receiver.hpp"
#include "fabric/kv/sender.hpp"

namespace fabric::kv {
namespace {

using namespace std::chrono_literals;

// Far past every wait below: an ask that waited for it would fail the test by its bound.
constexpr auto kReceiverTimeout = 10min;
constexpr auto kWait = 60s;
constexpr std::uint32_t kTokens = 20;

std::unique_ptr<TransferEngine> engine() {
  EngineConfig ec;
  ec.provider = "shm";
  return TransferEngine::create(ec).value();
}

struct PrefillAndDecode {
  // The sender's states by id, from on_state. First, so that it outlives the engines whose
  // threads report them.
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::string, State> sender_states;
  KvLayout layout = vllm_cpu({2, 8, 16, 4, {0, 4}, 32, 2});
  std::vector<std::byte> prefill_memory = std::vector<std::byte>(layout.span_bytes() + 4096);
  std::vector<std::byte> decode_memory = std::vector<std::byte>(layout.span_bytes() + 4096);
  std::unique_ptr<TransferEngine> prefill_engine = engine();
  std::unique_ptr<TransferEngine> decode_engine = engine();
  std::unique_ptr<Sender> sender;
  std::unique_ptr<Receiver> receiver;
  std::uint32_t source = 0;

  void SetUp(std::size_t released_ids_kept) {
    auto mr = prefill_engine->reg_mr(prefill_memory.data(), prefill_memory.size());
    ASSERT_TRUE(mr.ok()) << mr.status().to_string();
    SenderConfig sc;
    sc.layout = layout;
    sc.regions.assign(layout.num_regions, mr->handle);
    sc.receiver_timeout = kReceiverTimeout;
    sc.released_ids_kept = released_ids_kept;
    sc.on_state = [this](const std::string& id, const RequestStatus& st) {
      {
        std::lock_guard lock(mutex);
        sender_states[id] = st.state;
      }
      changed.notify_all();
    };
    auto s = Sender::create(*prefill_engine, sc);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    sender = std::move(*s);
    ReceiverConfig rc;
    rc.layout = layout;
    rc.regions.assign(layout.num_regions, RegionMemory{decode_memory.data(), decode_memory.size()});
    auto r = Receiver::create(*decode_engine, rc);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    receiver = std::move(*r);
    auto idx = receiver->connect(prefill_engine->main_address(), kWait);
    ASSERT_TRUE(idx.ok()) << idx.status().to_string();
    source = *idx;
  }

  void Prefill(const std::string& id) {
    ASSERT_TRUE(sender->prepare(id, {0, 1}, kTokens).ok());
    for (std::uint32_t l = 0; l < layout.num_layers; ++l) ASSERT_TRUE(sender->layer_done(id, l).ok());
  }
  Result<RequestStatus> Ask(const std::string& id) {
    const std::uint32_t sources[] = {source};
    auto expected = receiver->request(id, {2, 3}, kTokens, sources);
    if (!expected.ok()) return expected.status();
    return receiver->wait(id, kWait);
  }
  // Releases `id` on both sides. The decoder sees it done when the last write lands; the
  // prefiller once that write's completion comes back, which may be later: waited for.
  void Release(const std::string& id) {
    ASSERT_TRUE(receiver->release(id).ok());
    {
      std::unique_lock lock(mutex);
      ASSERT_TRUE(changed.wait_for(lock, kWait, [&] {
        auto it = sender_states.find(id);
        return it != sender_states.end() && is_terminal(it->second);
      })) << "the prefiller did not end " << id;
      sender_states.erase(id);
    }
    auto released = sender->release(id);
    ASSERT_TRUE(released.ok()) << released.to_string();
  }
};

TEST(KvLateAsk, AskForAReleasedRequestIsRejectedAtOnce) {
  PrefillAndDecode pd;
  ASSERT_NO_FATAL_FAILURE(pd.SetUp(16));
  ASSERT_NO_FATAL_FAILURE(pd.Prefill("r1"));
  auto first = pd.Ask("r1");
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  ASSERT_EQ(first->state, State::done) << first->error.to_string();
  ASSERT_NO_FATAL_FAILURE(pd.Release("r1"));

  auto late = pd.Ask("r1");
  ASSERT_TRUE(late.ok()) << late.status().to_string();
  EXPECT_EQ(late->state, State::failed);
  EXPECT_EQ(late->error.code(), Errc::not_found) << late->error.to_string();
  EXPECT_NE(late->error.message().find("released"), std::string::npos) << late->error.to_string();
  EXPECT_EQ(pd.sender->active_requests(), 0u);
}

TEST(KvLateAsk, AReleasedIdPreparedAgainIsServed) {
  PrefillAndDecode pd;
  ASSERT_NO_FATAL_FAILURE(pd.SetUp(16));
  ASSERT_NO_FATAL_FAILURE(pd.Prefill("r1"));
  auto first = pd.Ask("r1");
  ASSERT_TRUE(first.ok() && first->state == State::done);
  ASSERT_NO_FATAL_FAILURE(pd.Release("r1"));

  ASSERT_NO_FATAL_FAILURE(pd.Prefill("r1"));
  auto again = pd.Ask("r1");
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(again->state, State::done) << again->error.to_string();
}

TEST(KvLateAsk, WithNoMemoryALateAskWaitsForAPrepare) {
  // released_ids_kept = 0 restores the old behaviour: the ask is held as one that came early,
  // and a prepare of the id (a retried request) serves it.
  PrefillAndDecode pd;
  ASSERT_NO_FATAL_FAILURE(pd.SetUp(0));
  ASSERT_NO_FATAL_FAILURE(pd.Prefill("r1"));
  auto first = pd.Ask("r1");
  ASSERT_TRUE(first.ok() && first->state == State::done);
  ASSERT_NO_FATAL_FAILURE(pd.Release("r1"));

  const std::uint32_t sources[] = {pd.source};
  ASSERT_TRUE(pd.receiver->request("r1", {2, 3}, kTokens, sources).ok());
  // Not rejected: still waiting after a while (no reject can come before receiver_timeout).
  auto held = pd.receiver->wait("r1", 2s);
  ASSERT_FALSE(held.ok()) << state_name(held->state) << " " << held->error.to_string();
  EXPECT_EQ(held.status().code(), Errc::timeout) << held.status().to_string();
  ASSERT_NO_FATAL_FAILURE(pd.Prefill("r1"));
  auto served = pd.receiver->wait("r1", kWait);
  ASSERT_TRUE(served.ok()) << served.status().to_string();
  EXPECT_EQ(served->state, State::done) << served->error.to_string();
}

}  // namespace
}  // namespace fabric::kv
