// Verbs-only behaviour: the UD handshake (late and lossy peers, missing
// peers), receive-queue pressure from immediates, work-request chain
// boundaries, and queue pairs that go to the error state. Real processes on
// a real verbs driver: these run inside the rxe VM and skip elsewhere.

#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "fabric_test/data.hpp"
#include "fixture.hpp"
#include "remote_target.hpp"
#include "remote_writer.hpp"

namespace fabric::conformance {
namespace {

constexpr std::uint64_t kRegion = 256 * 1024;
constexpr std::uint32_t kImm = 0x7e57;
constexpr std::uint64_t kSrcSeed = 0x7e7b'0000;

class VerbsTest : public ::testing::Test {
 protected:
  void SetUp() override { FABRIC_SKIP_IF_UNAVAILABLE("verbs"); }
  static EngineConfig config() { return engine_config("verbs"); }

  // A write of `length` bytes with kImm from a fresh source region.
  static Status write(TransferEngine& engine, const MrHandle& src, const MrDesc& dst,
                      std::uint64_t length) {
    SingleWrite w;
    w.length = length;
    w.imm = kImm;
    w.src = {src, 0};
    w.dst = {dst, 0};
    auto flag = std::make_shared<CompletionFlag>();
    if (auto st = engine.submit_single_write(w, flag); !st.ok()) return st;
    return flag->wait(kWait);
  }

  // `real` with every remote key altered: the target's NIC refuses a WRITE through it.
  static Result<MrDesc> with_forged_keys(const MrDesc& real) {
    std::vector<RemoteKey> keys(real.keys().begin(), real.keys().end());
    for (auto& key : keys) key.rkey ^= 0x5a5a00;
    return MrDesc::make(real.owner(), real.base(), real.size(), keys);
  }

  // Writer child → parent paged write of `pages` pages with one imm each;
  // checks bytes, the exact count, and that nothing else was touched.
  void paged_into_parent(const EngineConfig& cfg, std::uint32_t pages, std::uint64_t page_length) {
    const std::uint64_t stride = page_length + 13;
    const std::uint64_t src_size = pages * stride + page_length;
    const std::uint64_t dst_size = pages * stride * 2 + page_length;
    RemoteWriter writer(cfg, src_size, kSrcSeed + pages);
    ASSERT_ENGINE(engine, cfg);
    const auto src = test::random_bytes(src_size, kSrcSeed + pages);
    std::vector<std::byte> dst = test::random_bytes(dst_size, test::kSentinelSeed);
    auto reg = engine->reg_mr(dst.data(), dst.size());
    ASSERT_OK(reg);
    auto counter = engine->imm_counter(kImm);
    ASSERT_OK(counter);
    ASSERT_TRUE(writer.connect(reg->desc));

    PagedWriteSpec spec;
    spec.page_length = page_length;
    spec.imm = kImm;
    spec.src.stride = stride;
    spec.dst.stride = stride * 2;
    for (std::uint32_t i = 0; i < pages; ++i) {
      spec.src.indices.push_back((i * 7) % pages);  // 7 is coprime to every count used
      spec.dst.indices.push_back(pages - 1 - i);
    }
    const Outcome outcome = writer.paged_write(spec);
    ASSERT_TRUE(outcome.ok()) << pages << " pages: " << outcome.to_string();
    ASSERT_OK((*counter)->wait(pages, kWait));

    std::vector<std::byte> expected = test::random_bytes(dst_size, test::kSentinelSeed);
    for (std::uint32_t i = 0; i < pages; ++i) {
      std::memcpy(expected.data() + spec.dst.indices[i] * spec.dst.stride,
                  src.data() + spec.src.indices[i] * spec.src.stride, page_length);
    }
    EXPECT_BYTES_EQUAL(dst, expected);
    std::this_thread::sleep_for(kQuiet);  // a negative check: no surplus arrives
    EXPECT_EQ((*counter)->value(), pages) << "immediates for " << pages << " pages";
    EXPECT_TRUE(writer.finish().has_value());
  }
};

// The target is stopped (SIGSTOP) when the first request goes out: its
// handshake requests wait in its UD receive queue, the writer keeps resending,
// and once the target runs again the connection forms and the write lands.
TEST_F(VerbsTest, HandshakeWaitsForAPeerThatStartsLate) {
  RemoteTarget target(config(), kRegion);
  ASSERT_ENGINE(engine, config());
  std::vector<std::byte> src(kRegion, std::byte{0x42});
  auto reg = engine->reg_mr(src.data(), src.size());
  ASSERT_OK(reg);
  ASSERT_TRUE(target.connect());

  ASSERT_EQ(::kill(target.process().pid(), SIGSTOP), 0);
  SingleWrite w;
  w.length = 4096;
  w.imm = kImm;
  w.src = {reg->handle, 0};
  w.dst = {target.dst(), 0};
  auto flag = std::make_shared<CompletionFlag>();
  ASSERT_OK(engine->submit_single_write(w, flag));
  // While the peer is stopped nothing can complete (a bounded negative check).
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_FALSE(flag->done()) << "a write completed while its target was stopped";
  ASSERT_EQ(::kill(target.process().pid(), SIGCONT), 0);
  ASSERT_OK(flag->wait(kWait));
  EXPECT_EQ(target.imm_arrivals(kImm, 1), 1u);
  engine->stop();
  EXPECT_TRUE(target.finish());
}

// The target loses its first three incoming handshakes (a lossy fabric):
// only the writer's retries can connect.
TEST_F(VerbsTest, HandshakeIsRetriedUntilAnsweredWhenDatagramsAreLost) {
  ASSERT_EQ(::setenv("FABRIC_VERBS_TEST_DROP_HANDSHAKES", "3", 1), 0);
  RemoteTarget target(config(), kRegion);
  ASSERT_EQ(::unsetenv("FABRIC_VERBS_TEST_DROP_HANDSHAKES"), 0);
  ASSERT_ENGINE(engine, config());
  std::vector<std::byte> src(kRegion, std::byte{0x43});
  auto reg = engine->reg_mr(src.data(), src.size());
  ASSERT_OK(reg);
  ASSERT_TRUE(target.connect());
  ASSERT_OK(write(*engine, reg->handle, target.dst(), 64 * 1024));
  EXPECT_EQ(target.imm_arrivals(kImm, 1), 1u);
  engine->stop();
  EXPECT_TRUE(target.finish());
}

// A peer that is gone before the first request: the handshake is never
// answered, and the queued requests fail with a clear error once
// connect_timeout passes (request_timeout is set far beyond it).
TEST_F(VerbsTest, ConnectingToAMissingPeerFailsQueuedRequestsAfterConnectTimeout) {
  EngineConfig cfg = config();
  cfg.verbs.connect_timeout = std::chrono::milliseconds(1000);
  cfg.request_timeout = std::chrono::milliseconds(15000);
  RemoteTarget target(cfg, kRegion);
  ASSERT_ENGINE(engine, cfg);
  std::vector<std::byte> src(kRegion, std::byte{0x44});
  auto reg = engine->reg_mr(src.data(), src.size());
  ASSERT_OK(reg);
  ASSERT_TRUE(target.connect());
  target.process().kill();

  const auto start = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<CompletionFlag>> flags;
  for (int i = 0; i < 8; ++i) {
    SingleWrite w;
    w.length = 1024;
    w.imm = kImm;
    w.src = {reg->handle, 0};
    w.dst = {target.dst(), static_cast<std::uint64_t>(i) * 1024};
    flags.push_back(std::make_shared<CompletionFlag>());
    ASSERT_OK(engine->submit_single_write(w, flags.back()));
  }
  for (auto& flag : flags) {
    const Status st = flag->wait(kWait);
    ASSERT_TRUE(flag->done()) << "a request to a missing peer never completed";
    EXPECT_EQ(st.code(), Errc::timeout) << st.to_string();
    EXPECT_NE(st.message().find("no handshake reply"), std::string::npos) << st.to_string();
  }
  const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  RecordProperty("time_to_error_ms", static_cast<int>(elapsed.count()));
  EXPECT_LT(elapsed, cfg.request_timeout) << "failed by request_timeout, not connect_timeout";
}

// 3000 WRITE_WITH_IMMs against a receiver that keeps only 16 receive work
// requests posted for immediates: RNR retries hold the burst back, nothing
// is lost or counted twice.
TEST_F(VerbsTest, ImmBurstLargerThanTheReceiveQueueArrivesExactly) {
  EngineConfig cfg = config();
  cfg.verbs.imm_recv_depth = 16;
  paged_into_parent(cfg, 3000, 64);
}

// Paged writes go to the device in chains of up to four work requests per
// doorbell: 1..9 pages cross every chain boundary (full, partial, several).
TEST_F(VerbsTest, PagedWritesOfOneToNinePagesCrossEveryChainBoundary) {
  for (std::uint32_t pages = 1; pages <= 9; ++pages) {
    SCOPED_TRACE(::testing::Message() << pages << " pages");
    paged_into_parent(config(), pages, 4096 + pages);
    if (HasFatalFailure()) return;
  }
}

// A WRITE with a wrong rkey puts the queue pair into the error state: that
// request fails with the verbs status text, a second target is served
// throughout, and the next request to the first target reconnects and lands.
TEST_F(VerbsTest, QueuePairErrorFailsItsRequestThenTheNextRequestReconnects) {
  RemoteTarget bad_target(config(), kRegion);
  RemoteTarget good_target(config(), kRegion);
  ASSERT_ENGINE(engine, config());
  std::vector<std::byte> src(kRegion, std::byte{0x45});
  auto reg = engine->reg_mr(src.data(), src.size());
  ASSERT_OK(reg);
  ASSERT_TRUE(bad_target.connect());
  ASSERT_TRUE(good_target.connect());
  ASSERT_OK(write(*engine, reg->handle, bad_target.dst(), 1024));  // connected and working
  ASSERT_EQ(bad_target.imm_arrivals(kImm, 1), 1u);

  const MrDesc& real = bad_target.dst();
  auto forged = with_forged_keys(real);
  ASSERT_OK(forged);

  SingleWrite w;
  w.length = 8192;
  w.imm = kImm;
  w.src = {reg->handle, 0};
  w.dst = {*forged, 0};
  auto failed = std::make_shared<CompletionFlag>();
  ASSERT_OK(engine->submit_single_write(w, failed));
  // Meanwhile another peer is served.
  ASSERT_OK(write(*engine, reg->handle, good_target.dst(), kRegion));
  const Status st = failed->wait(kWait);
  ASSERT_TRUE(failed->done());
  EXPECT_EQ(st.code(), Errc::provider) << st.to_string();
  EXPECT_NE(st.message().find("remote access error"), std::string::npos) << st.to_string();
  RecordProperty("qp_error_status", st.to_string());

  ASSERT_OK(write(*engine, reg->handle, bad_target.dst(), 4096));  // reconnects
  EXPECT_EQ(bad_target.imm_arrivals(kImm, 1), 1u);
  EXPECT_EQ(good_target.imm_arrivals(kImm, 1), 1u);
  ASSERT_OK(write(*engine, reg->handle, good_target.dst(), 4096));
  EXPECT_EQ(good_target.imm_arrivals(kImm, 1), 1u);
  engine->stop();
  EXPECT_TRUE(bad_target.finish());
  EXPECT_TRUE(good_target.finish());
}

// WRITEs go out in chains of up to four and only a chain's last one is
// signalled (docs/verbs.md). A scatter of four slices to one peer is one
// chain; one slice carries a forged key. Whatever its place, the request must
// fail with the remote access error (every WRITE of the chain accounted for:
// a lost one would leave it to request_timeout), the slices before it land,
// none after it does, and the next request reconnects.
TEST_F(VerbsTest, AForgedKeyAnywhereInAChainFailsItsRequestAndOnlyTheWritesBeforeItLand) {
  constexpr std::uint64_t kSlice = 4096;
  RemoteTarget target(config(), kRegion);
  ASSERT_ENGINE(engine, config());
  std::vector<std::byte> src(kRegion, std::byte{0x46});
  auto reg = engine->reg_mr(src.data(), src.size());
  ASSERT_OK(reg);
  ASSERT_TRUE(target.connect());
  ASSERT_OK(write(*engine, reg->handle, target.dst(), 1024));
  ASSERT_EQ(target.imm_arrivals(kImm, 1), 1u);

  const MrDesc& real = target.dst();
  auto forged = with_forged_keys(real);
  ASSERT_OK(forged);

  for (std::uint64_t bad = 0; bad < 4; ++bad) {
    Scatter s;
    s.src = reg->handle;
    s.imm = kImm;
    for (std::uint64_t i = 0; i < 4; ++i) {
      s.slices.push_back({i == bad ? *forged : real, kSlice, i * kSlice, i * kSlice});
    }
    auto failed = std::make_shared<CompletionFlag>();
    ASSERT_OK(engine->submit_scatter(s, failed));
    const Status st = failed->wait(kWait);
    ASSERT_TRUE(failed->done()) << "forged slice " << bad << ": the scatter never completed";
    EXPECT_EQ(st.code(), Errc::provider) << "forged slice " << bad << ": " << st.to_string();
    EXPECT_NE(st.message().find("remote access error"), std::string::npos)
        << "forged slice " << bad << ": " << st.to_string();
    EXPECT_EQ(target.imm_arrivals(kImm, bad), bad) << "slices landed before forged slice " << bad;
    ASSERT_OK(write(*engine, reg->handle, target.dst(), kSlice)) << "after forged slice " << bad;
    EXPECT_EQ(target.imm_arrivals(kImm, 1), 1u) << "after forged slice " << bad;
  }
  engine->stop();
  EXPECT_TRUE(target.finish());
}

}  // namespace
}  // namespace fabric::conformance
