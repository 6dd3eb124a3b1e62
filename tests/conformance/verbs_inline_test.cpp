// Small WRITEs from host memory go inline (VerbsConfig::max_inline_data): the CPU copies their
// bytes into the work request and the device never reads the buffer through its lkey. The
// writer's Domain is wrapped so that every WRITE names a wrong lkey. A WRITE the device reads by
// DMA then fails with a local error; an inlined one lands. That makes the inline
// path observable, and its boundary must be where the Domain says (Limits::inject_size). Runs
// inside the rxe VM and skips elsewhere.

#include <atomic>
#include <cstring>
#include <memory>
#include <vector>

#include "counting_target.hpp"
#include "doubles/domain_decorator.hpp"
#include "doubles/forwarding_domain.hpp"
#include "fabric_test/data.hpp"
#include "fixture.hpp"

namespace fabric::conformance {
namespace {

constexpr std::uint64_t kRegion = 64 * 1024;
constexpr std::uint32_t kImm = 0x11e7;
constexpr std::uint32_t kAskedInline = 64;

// Every WRITE goes to the device with its lkey altered (the descriptor's marks kept); records
// the inline limit the verbs Domain it wraps was granted.
class WrongLkeyDomain final : public domain::ForwardingDomain {
 public:
  explicit WrongLkeyDomain(std::unique_ptr<domain::Domain> inner)
      : ForwardingDomain(std::move(inner)) {
    granted_inline.store(limits().inject_size);
  }
  Status post_write(const domain::WriteDesc& write) override {
    domain::WriteDesc altered = write;
    altered.local_desc = reinterpret_cast<void*>(
        reinterpret_cast<std::uintptr_t>(write.local_desc) ^ std::uintptr_t{0x5a5a00});
    return inner().post_write(altered);
  }
  static inline std::atomic<std::size_t> granted_inline{0};
};

class VerbsInlineTest : public ::testing::Test {
 protected:
  void SetUp() override { FABRIC_SKIP_IF_UNAVAILABLE("verbs"); }
  void TearDown() override { domain::set_test_decorator({}); }

  // Forks the target undecorated, then builds this process's writer with wrong lkeys.
  void start(std::uint32_t max_inline) {
    target_ = std::make_unique<CountingTarget>(engine_config("verbs"), kRegion, kImm);
    domain::set_test_decorator([](std::unique_ptr<domain::Domain> inner) {
      return std::unique_ptr<domain::Domain>(std::make_unique<WrongLkeyDomain>(std::move(inner)));
    });
    EngineConfig cfg = engine_config("verbs");
    cfg.verbs.max_inline_data = max_inline;
    auto created = TransferEngine::create(cfg);
    ASSERT_OK(created);
    engine_ = std::move(created).value();
    auto reg = engine_->reg_mr(src_.data(), src_.size());
    ASSERT_OK(reg);
    src_mr_ = reg->handle;
    ASSERT_TRUE(target_->connect());
  }

  Status write(std::uint64_t length, std::uint64_t dst_offset) {
    SingleWrite w;
    w.length = length;
    w.imm = kImm;
    w.src = {src_mr_, 0};
    w.dst = {target_->dst(), dst_offset};
    auto flag = std::make_shared<CompletionFlag>();
    if (auto st = engine_->submit_single_write(w, flag); !st.ok()) return st;
    return flag->wait(kWait);
  }

  // The device refuses the lkey on its own side: rxe says "local QP operation error", ConnectX
  // "local protection error".
  static void expect_local_key_error(const Status& st, std::uint64_t length) {
    EXPECT_EQ(st.code(), Errc::provider) << length << " bytes: " << st.to_string();
    const bool local = st.message().find("local protection") != std::string::npos ||
                       st.message().find("local QP operation") != std::string::npos;
    EXPECT_TRUE(local) << length << " bytes: " << st.to_string();
  }

  void finish() {
    engine_->stop();
    EXPECT_TRUE(target_->finish());
  }

  std::vector<std::byte> src_ = test::random_bytes(kRegion, 0x11e7'0000);
  std::unique_ptr<CountingTarget> target_;
  std::unique_ptr<TransferEngine> engine_;
  MrHandle src_mr_;
};

TEST_F(VerbsInlineTest, WritesUpToTheInlineLimitLandWithoutTheDeviceReadingTheirBuffer) {
  start(kAskedInline);
  if (HasFatalFailure()) return;
  const std::size_t limit = WrongLkeyDomain::granted_inline.load();
  ASSERT_GE(limit, kAskedInline) << "rxe grants the inline data asked for";

  std::vector<std::byte> expected(kRegion, std::byte{0});
  std::uint64_t offset = 0;
  const std::vector<std::uint64_t> lengths{1, 17, limit};
  for (std::uint64_t length : lengths) {
    ASSERT_OK(write(length, offset)) << length << " bytes inline";
    std::memcpy(expected.data() + offset, src_.data(), length);
    offset += 2 * limit;
  }
  auto region = target_->round(lengths.size());
  ASSERT_TRUE(region.has_value());
  EXPECT_BYTES_EQUAL(*region, expected);

  // One byte past the limit goes by DMA through the wrong lkey, and nothing of it lands.
  expect_local_key_error(write(limit + 1, offset), limit + 1);
  region = target_->round(0);
  ASSERT_TRUE(region.has_value());
  EXPECT_BYTES_EQUAL(*region, expected);
  finish();
}

// The control: with inlining off, even a one-byte WRITE is read through its lkey and fails, so
// the landing above is the inline path's doing.
TEST_F(VerbsInlineTest, WithInliningOffEveryWriteIsReadThroughItsKey) {
  start(0);
  if (HasFatalFailure()) return;
  EXPECT_EQ(WrongLkeyDomain::granted_inline.load(), 0u);
  expect_local_key_error(write(1, 0), 1);
  auto region = target_->round(0);
  ASSERT_TRUE(region.has_value());
  EXPECT_BYTES_EQUAL(*region, std::vector<std::byte>(kRegion, std::byte{0}));
  finish();
}

}  // namespace
}  // namespace fabric::conformance
