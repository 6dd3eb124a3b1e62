// A healthy provider drains a deep queue in the order it was posted, at the link's rate: the
// last WRITE of a full queue waits for every one before it, far longer than the bound after
// which the engine takes a request its provider keeps for good (6 x request_timeout). That bound
// must count from when the WRITEs ahead of it have completed, not from the request's start:
// CI failed DeepWindowTest/tcp under a sanitizer with "the provider holds them" for a WRITE
// behind 1 GiB of others. A decorator releases the shm provider's send completions one per
// kPerCompletion, as a slow link would.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "doubles/domain_decorator.hpp"
#include "doubles/forwarding_domain.hpp"
#include "fabric/fabric.hpp"

namespace fabric {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kWait = 60s;
constexpr auto kRequestTimeout = 50ms;
constexpr auto kPerCompletion = 2ms;
constexpr std::size_t kWrites = 256;  // 512 ms of link: the last waits 10 request_timeouts
constexpr std::size_t kWriteBytes = 4096;

// Send completions leave in the order the provider gave them, one per `per_completion` while
// any are owed; every other event passes at once. Only the worker polls (one thread).
class SlowLinkDomain final : public domain::ForwardingDomain {
 public:
  SlowLinkDomain(std::unique_ptr<domain::Domain> inner, Clock::duration per_completion)
      : ForwardingDomain(std::move(inner)), per_completion_(per_completion) {}

  std::size_t poll(std::span<domain::Event> out) override {
    std::array<domain::Event, 64> in;
    const std::size_t got = inner().poll(std::span(in).first(std::min(in.size(), out.size())));
    const auto now = Clock::now();
    std::size_t n = 0;
    for (std::size_t i = 0; i < got; ++i) {
      if (in[i].kind != domain::Event::Kind::tx_done) {
        out[n++] = std::move(in[i]);
        continue;
      }
      // An idle link owes nothing: the first of a new backlog leaves one interval from now.
      if (held_.empty()) next_release_ = std::max(next_release_, now + per_completion_);
      held_.push_back(std::move(in[i]));
    }
    while (n < out.size() && !held_.empty() && now >= next_release_) {
      out[n++] = std::move(held_.front());
      held_.pop_front();
      next_release_ += per_completion_;
    }
    return n;
  }

 private:
  Clock::duration per_completion_;
  Clock::time_point next_release_{};
  std::deque<domain::Event> held_;
};

class SlowLink : public ::testing::Test {
 protected:
  void SetUp() override {
    domain::set_test_decorator([](std::unique_ptr<domain::Domain> inner) {
      return std::unique_ptr<domain::Domain>(
          std::make_unique<SlowLinkDomain>(std::move(inner), kPerCompletion));
    });
  }
  void TearDown() override { domain::set_test_decorator({}); }
};

TEST_F(SlowLink, WritesQueuedInTheProviderBehindOthersOutlastTheHeldBoundAndAllLand) {
  // Before the engine: a failed assertion stops it (destroyed first) before they are freed.
  std::vector<std::byte> src(kWriteBytes);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = std::byte(1 + i % 251);
  std::vector<std::byte> dst(kWrites * kWriteBytes);
  EngineConfig config;
  config.provider = "shm";
  config.request_timeout = kRequestTimeout;
  auto created = TransferEngine::create(config);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  auto engine = std::move(created).value();

  auto src_reg = engine->reg_mr(src.data(), src.size());
  ASSERT_TRUE(src_reg.ok()) << src_reg.status().to_string();
  auto dst_reg = engine->reg_mr(dst.data(), dst.size());
  ASSERT_TRUE(dst_reg.ok()) << dst_reg.status().to_string();

  std::vector<std::shared_ptr<CompletionFlag>> flags;
  const auto started = Clock::now();
  for (std::size_t i = 0; i < kWrites; ++i) {
    SingleWrite w;
    w.length = kWriteBytes;
    w.src = {src_reg->handle, 0};
    w.dst = {dst_reg->desc, i * kWriteBytes};
    flags.push_back(std::make_shared<CompletionFlag>());
    ASSERT_TRUE(engine->submit_single_write(w, flags.back()).ok());
  }
  for (std::size_t i = 0; i < kWrites; ++i) {
    const Status st = flags[i]->wait(kWait);
    ASSERT_TRUE(st.ok()) << "write " << i << ": " << st.to_string();
  }
  // The test's premise, which load only makes truer: the last waited past the held bound.
  EXPECT_GT(Clock::now() - started, 6 * kRequestTimeout);
  for (std::size_t i = 0; i < kWrites; ++i) {
    ASSERT_EQ(std::memcmp(dst.data() + i * kWriteBytes, src.data(), kWriteBytes), 0)
        << "slot " << i;
  }
  engine->stop();
}

}  // namespace
}  // namespace fabric
