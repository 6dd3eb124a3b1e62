// A window of requests to one peer deeper than the link drains within request_timeout: the last
// request waits far longer than request_timeout behind the others, yet the peer is healthy and
// completes them one after another. None may be failed as "peer dead" (found on netbed, where a
// 1 Gbit/s link drained a 512 MiB window in seconds); every byte must land.

#include <cstring>
#include <memory>
#include <vector>

#include "fabric_test/data.hpp"
#include "fixture.hpp"

namespace fabric::conformance {
namespace {

constexpr std::size_t kWriteBytes = 1 << 20;
constexpr std::size_t kWrites = 384;  // 384 MiB: well over request_timeout on any provider here
constexpr auto kRequestTimeout = std::chrono::milliseconds(100);

using DeepWindowTest = ProviderTest;

TEST_P(DeepWindowTest, RequestsQueuedBehindAHealthyPeerOutlastRequestTimeoutAndAllLand) {
  if (provider() == "udp" || provider() == "verbs") {
    GTEST_SKIP() << provider() << ": hundreds of MiB take minutes on this provider here";
  }
  EngineConfig cfg = config();
  cfg.request_timeout = kRequestTimeout;
  ASSERT_ENGINE(engine, cfg);
  std::vector<std::byte> src(kWriteBytes);
  std::vector<std::byte> dst(kWrites * kWriteBytes);
  test::fill_random(src, 0xdee9);
  auto src_reg = engine->reg_mr(src.data(), src.size());
  ASSERT_OK(src_reg);
  auto dst_reg = engine->reg_mr(dst.data(), dst.size());
  ASSERT_OK(dst_reg);

  std::vector<std::shared_ptr<CompletionFlag>> flags;
  const auto started = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < kWrites; ++i) {
    SingleWrite w;
    w.length = kWriteBytes;
    w.src = {src_reg->handle, 0};
    w.dst = {dst_reg->desc, i * kWriteBytes};
    flags.push_back(std::make_shared<CompletionFlag>());
    ASSERT_OK(engine->submit_single_write(w, flags.back()));
  }
  for (std::size_t i = 0; i < kWrites; ++i) {
    ASSERT_OK(flags[i]->wait(kWait)) << "write " << i;
  }
  const auto took = std::chrono::steady_clock::now() - started;
  RecordProperty("window_ms",
                 std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
  for (std::size_t i = 0; i < kWrites; ++i) {
    ASSERT_EQ(std::memcmp(dst.data() + i * kWriteBytes, src.data(), kWriteBytes), 0)
        << "write " << i;
  }
  engine->stop();
}

FABRIC_INSTANTIATE_PROVIDERS(DeepWindowTest);

}  // namespace
}  // namespace fabric::conformance
