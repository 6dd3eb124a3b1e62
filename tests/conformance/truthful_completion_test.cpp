// A completion that says ok means the bytes landed. Once the target process is
// gone (it exited after stopping its engine, or was killed), a small WRITE to
// its stale MrDesc, an immediate-only WRITE and a small SEND to its old
// NetAddr must not report ok: each fails, at submit, at once, or within
// request_timeout. Small operations are the ones providers may complete from
// a local copy (shm's inline and inject paths).

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "remote_target.hpp"

namespace fabric::conformance {
namespace {

constexpr std::uint32_t kImm = 0x7e11;
constexpr auto kRequestTimeout = std::chrono::milliseconds(1500);
// request_timeout, the worker's expiry check and scheduling on a busy machine.
constexpr auto kBound = kRequestTimeout + std::chrono::seconds(3);

class TruthfulCompletionTest : public ProviderTest {
 protected:
  void operations_after_the_peer_is_gone(bool killed) {
    RemoteTarget target(config(), 64 * 1024);
    EngineConfig cfg = config();
    cfg.request_timeout = kRequestTimeout;
    ASSERT_ENGINE(engine, cfg);
    std::vector<std::byte> src(4096, std::byte{0x42});
    auto reg = engine->reg_mr(src.data(), src.size());
    ASSERT_OK(reg);
    ASSERT_TRUE(target.connect());
    const MrDesc stale = target.dst();

    // The peer is in use first: resolved, connected, its region mapped.
    auto first = std::make_shared<CompletionFlag>();
    ASSERT_OK(engine->submit_imm(kImm, stale, first));
    ASSERT_OK(first->wait(kWait));
    ASSERT_EQ(target.imm_arrivals(kImm, 1), 1u);

    if (killed) {
      target.process().kill();
    } else {
      ASSERT_TRUE(target.finish());
    }
    ASSERT_TRUE(target.process().reaped());

    struct Submitted {
      std::string what;
      Status accepted;
      std::shared_ptr<CompletionFlag> flag = std::make_shared<CompletionFlag>();
    };
    std::vector<Submitted> ops(3);
    const auto start = std::chrono::steady_clock::now();
    ops[0].what = "64-byte WRITE with imm to the stale MrDesc";
    SingleWrite w;
    w.length = 64;
    w.imm = kImm;
    w.src = {reg->handle, 0};
    w.dst = {stale, 128};
    ops[0].accepted = engine->submit_single_write(w, ops[0].flag);
    ops[1].what = "immediate-only WRITE to the stale MrDesc";
    ops[1].accepted = engine->submit_imm(kImm, stale, ops[1].flag);
    ops[2].what = "64-byte SEND to the old NetAddr";
    ops[2].accepted =
        engine->submit_send(stale.owner(), std::span<const std::byte>(src.data(), 64), ops[2].flag);

    for (auto& op : ops) {
      if (!op.accepted.ok()) {
        RecordProperty(op.what, "refused at submit: " + op.accepted.to_string());
        std::fprintf(stderr, "[ info ] %s: refused at submit: %s\n", op.what.c_str(),
                     op.accepted.to_string().c_str());
        continue;
      }
      const Status st = op.flag->wait(kWait);
      ASSERT_TRUE(op.flag->done()) << op.what << " never completed";
      EXPECT_FALSE(st.ok()) << op.what << " reported ok, but its peer is gone";
      const auto took = std::chrono::steady_clock::now() - start;
      EXPECT_LE(took, kBound) << op.what << " failed only after "
                              << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                              << " ms";
      RecordProperty(op.what, st.to_string());
      std::fprintf(stderr, "[ info ] %s: %s\n", op.what.c_str(), st.to_string().c_str());
    }
    engine->stop();
  }
};

TEST_P(TruthfulCompletionTest, SmallOperationsToAPeerThatExitedDoNotReportSuccess) {
  operations_after_the_peer_is_gone(false);
}

TEST_P(TruthfulCompletionTest, SmallOperationsToAKilledPeerDoNotReportSuccess) {
  operations_after_the_peer_is_gone(true);
}

FABRIC_INSTANTIATE_PROVIDERS(TruthfulCompletionTest);

}  // namespace
}  // namespace fabric::conformance
