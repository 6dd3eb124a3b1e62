// A peer that stops answering without dying (SIGSTOP), then resumes (SIGCONT): every request
// to it ends within request_timeout (an error) or lands (shm copies into a stopped process's
// memory itself, so its writes may truly complete: checked in that memory); after SIGCONT,
// new traffic to the same peer lands byte-exact. The reports: a decode or prefill worker
// paused by the host, swap or a debugger; vllm#49238's stale endpoint.

#include <signal.h>

#include <cstring>

#include "fabric_test/data.hpp"
#include "field_test.hpp"
#include "messages.hpp"
#include "peer_process.hpp"

namespace fabric::field {
namespace {

constexpr std::uint64_t kWrite = 64 * 1024;
constexpr int kWrites = 8;
constexpr int kSends = 4;
// Short, so the case that waits it out stays cheap.
constexpr std::chrono::milliseconds kStopTimeout{1500};

struct Outcome {
  std::shared_ptr<CompletionFlag> flag = std::make_shared<CompletionFlag>();
  Clock::time_point submitted;
  std::uint64_t dst_offset = 0;  // writes
  std::uint64_t seq = 0;         // sends
  bool send = false;
};

class PeerStopped : public FieldTest {};

TEST_P(PeerStopped, RequestsExpireWithinTheTimeoutAndTrafficResumesAfterSigcont) {
  auto engine = make_engine(kStopTimeout);
  ASSERT_NE(engine, nullptr);
  std::vector<std::byte> src = test::random_bytes(kWrites * kWrite, 0x5709);
  auto reg = engine->reg_mr(src.data(), src.size());
  ASSERT_TRUE(reg.ok()) << reg.status().to_string();
  auto peer = std::make_shared<Incarnation>(0, provider());
  ASSERT_TRUE(peer->connect());

  std::uint64_t next_seq = 0;
  // A round: kWrites WRITEs into chunks `first`.. and kSends SENDs, submitted back to back.
  auto round = [&](std::uint32_t first) {
    std::vector<Outcome> out(kWrites + kSends);
    for (int i = 0; i < kWrites; ++i) {
      SingleWrite w;
      w.length = kWrite;
      w.src = {reg->handle, i * kWrite};
      out[i].dst_offset = (first + i) * kChunk;
      w.dst = {peer->dst(), out[i].dst_offset};
      out[i].submitted = Clock::now();
      EXPECT_TRUE(engine->submit_single_write(w, out[i].flag).ok());
    }
    for (int i = kWrites; i < kWrites + kSends; ++i) {
      out[i].send = true;
      out[i].seq = next_seq++;
      out[i].submitted = Clock::now();
      EXPECT_TRUE(engine->submit_send(peer->addr(), make_message(out[i].seq, 0, 2048), out[i].flag).ok());
    }
    return out;
  };
  // Each outcome: ok (a WRITE's bytes are in the peer's memory) or an error, within `bound`.
  struct Tally {
    int ok = 0, failed = 0;
    std::int64_t slowest_ms = 0;
    std::string first_error;
  };
  auto settle = [&](std::vector<Outcome>& out, std::chrono::milliseconds bound) {
    Tally t;
    for (int i = 0; i < static_cast<int>(out.size()); ++i) {
      const Status st = out[i].flag->wait(bound - (Clock::now() - out[i].submitted));
      EXPECT_TRUE(out[i].flag->done()) << "request " << i << " still outstanding after " << bound.count() << " ms";
      t.slowest_ms = std::max(t.slowest_ms, ms(Clock::now() - out[i].submitted));
      if (!st.ok()) {
        ++t.failed;
        if (t.first_error.empty()) t.first_error = st.to_string();
        continue;
      }
      ++t.ok;
      if (out[i].send) {
        peer->record_ok_send(out[i].seq);
      } else {
        EXPECT_EQ(std::memcmp(peer->memory().data() + out[i].dst_offset, src.data() + i * kWrite, kWrite), 0)
            << "WRITE " << i << " reported ok does not hold its bytes";
      }
    }
    return t;
  };

  auto before = round(0);
  const Tally warm = settle(before, kWait);
  ASSERT_EQ(warm.failed, 0) << warm.first_error;

  ASSERT_EQ(::kill(peer->process().pid(), SIGSTOP), 0);
  const auto stop_deadline = Clock::now() + kWait;
  while (!is_stopped(peer->process().pid()) && Clock::now() < stop_deadline) {
    std::this_thread::yield();  // polls the process state, bounded
  }
  ASSERT_TRUE(is_stopped(peer->process().pid()));
  auto frozen = round(kWrites);
  const auto bound = kStopTimeout + kMargin;
  const Tally during = settle(frozen, bound);
  ASSERT_EQ(::kill(peer->process().pid(), SIGCONT), 0);

  auto after = round(2 * kWrites);
  const Tally resumed = settle(after, kWait);
  std::printf("[field] stop-cont/%s: while stopped %d ok (landed, checked) and %d failed (%s), "
              "the last ended %lld ms after its submission (bound %lld ms); after SIGCONT %d of "
              "%d ok\n",
              provider().c_str(), during.ok, during.failed, during.first_error.c_str(),
              static_cast<long long>(during.slowest_ms), static_cast<long long>(bound.count()),
              resumed.ok, kWrites + kSends);
  EXPECT_LE(during.slowest_ms, bound.count());
  EXPECT_EQ(resumed.failed, 0) << "after SIGCONT: " << resumed.first_error;
  EXPECT_TRUE(peer->quit()) << "SENDs reported ok (before, during or after the stop) must arrive";
}

FABRIC_FIELD_PROVIDERS(PeerStopped);

}  // namespace
}  // namespace fabric::field
