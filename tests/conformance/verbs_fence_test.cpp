// TransferEngine::fence_peer on verbs: the queue pairs with the peer go to the error state, so a
// WRITE the peer still sends fails on its side and changes nothing here, and our own requests
// to it fail at once. Runs inside the rxe VM (VerbsFenceTest.*).

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fabric_test/data.hpp"
#include "fixture.hpp"
#include "remote_writer.hpp"

namespace fabric::conformance {
namespace {

constexpr std::uint64_t kLen = 64 * 1024;
constexpr std::uint32_t kImm = 0xfe7c;
constexpr std::uint64_t kSrcSeed = 0xfe7c'0000;

class VerbsFenceTest : public ::testing::Test {
 protected:
  void SetUp() override { FABRIC_SKIP_IF_UNAVAILABLE("verbs"); }
};

Outcome write_at(RemoteWriter& writer, std::uint64_t offset) {
  SingleWriteSpec spec;
  spec.length = kLen;
  spec.imm = kImm;
  spec.src_offset = offset;
  spec.dst_offset = offset;
  return writer.single_write(spec);
}

TEST_F(VerbsFenceTest, AFencedPeersWriteFailsOnItsSideAndChangesNothingHere) {
  EngineConfig cfg = engine_config("verbs");
  cfg.request_timeout = std::chrono::seconds(3);  // bounds the writer's wait for its fenced WRITE
  RemoteWriter writer(cfg, 3 * kLen, kSrcSeed);
  ASSERT_ENGINE(engine, cfg);
  std::vector<std::byte> dst = test::random_bytes(3 * kLen, test::kSentinelSeed);
  auto reg = engine->reg_mr(dst.data(), dst.size());
  ASSERT_OK(reg);
  auto counter = engine->imm_counter(kImm);
  ASSERT_OK(counter);
  ASSERT_TRUE(writer.connect(reg->desc));

  // Connected and landing before the fence.
  const Outcome before = write_at(writer, 0);
  ASSERT_TRUE(before.ok()) << before.to_string();
  ASSERT_OK((*counter)->wait(1, kWait));
  std::vector<std::byte> expected = test::random_bytes(3 * kLen, test::kSentinelSeed);
  const auto src = test::random_bytes(3 * kLen, kSrcSeed);
  std::memcpy(expected.data(), src.data(), kLen);
  ASSERT_BYTES_EQUAL(dst, expected);

  ASSERT_OK(engine->fence_peer(writer.addr()));

  // On the writer's still-connected queue pair: our end is in the error state and drops it.
  // How the writer learns differs by device: a NIC's responder drops silently and the writer's
  // retries run out (retry_count x ACK timeout, about 0.5 s); rxe 6.1 kept it pending, so
  // the writer's request_timeout is what bounds it here.
  const Outcome after = write_at(writer, kLen);
  EXPECT_FALSE(after.ok()) << "a WRITE after the fence completed ok";
  EXPECT_TRUE(after.accepted) << after.to_string();
  EXPECT_TRUE(after.status.code() == Errc::timeout || after.status.code() == Errc::provider)
      << after.to_string();
  std::printf("the writer's WRITE after the fence: %s\n", after.to_string().c_str());

  std::this_thread::sleep_for(kQuiet);  // a negative check: nothing late arrives
  EXPECT_BYTES_EQUAL(dst, expected);
  EXPECT_EQ((*counter)->value(), 1u) << "immediates after the fence";

  // Our own requests to the fenced peer fail at once, naming the fence.
  const std::vector<std::byte> message(64, std::byte{7});
  auto sent = std::make_shared<CompletionFlag>();
  const Status submitted = engine->submit_send(writer.addr(), message, sent);
  const Status send_status = submitted.ok() ? sent->wait(kWait) : submitted;
  EXPECT_FALSE(send_status.ok());
  EXPECT_NE(send_status.message().find("fenced"), std::string::npos) << send_status.to_string();
  EXPECT_OK(engine->fence_peer(writer.addr()));  // idempotent

  engine->stop();
  EXPECT_TRUE(writer.finish().has_value());
}

}  // namespace
}  // namespace fabric::conformance
