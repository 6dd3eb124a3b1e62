// Edge cases with a written contract (docs/api.md, "Edge cases"): requests
// that are empty or zero-sized, an expectation of zero arrivals, a
// registration without remote rights, a provider name with a NUL byte. One
// engine writes and sends to itself: every case is about the engine's own
// rules, not about a second process.

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "fabric_test/sync.hpp"
#include "fixture.hpp"

namespace fabric::conformance {
namespace {

constexpr std::uint64_t kRegion = 16384;

class EdgeCaseTest : public ProviderTest {
 protected:
  void SetUp() override {
    ProviderTest::SetUp();
    if (IsSkipped()) return;
    auto engine = TransferEngine::create(config());
    ASSERT_OK(engine);
    engine_ = std::move(engine).value();
    src_.assign(kRegion, std::byte{0x5c});
    dst_.assign(kRegion, std::byte{0});
    auto src = engine_->reg_mr(src_.data(), src_.size());
    ASSERT_OK(src);
    src_mr_ = src->handle;
    auto dst = engine_->reg_mr(dst_.data(), dst_.size());
    ASSERT_OK(dst);
    dst_desc_ = dst->desc;
  }
  void TearDown() override {
    if (engine_) engine_->stop();
  }

  // An imm's counter, made before anything carrying it is sent.
  std::shared_ptr<ImmCounter> counter(std::uint32_t imm) {
    auto made = engine_->imm_counter(imm);
    EXPECT_OK(made);
    return made ? *made : std::make_shared<ImmCounter>(imm);
  }
  // One paged write from src_ to dst_, submitted and waited for (bounded).
  Status paged(std::uint32_t imm, std::uint64_t page_length, Pages src, Pages dst) {
    PagedWrite w;
    w.page_length = page_length;
    w.imm = imm;
    w.src = src_mr_;
    w.src_pages = std::move(src);
    w.dst = dst_desc_;
    w.dst_pages = std::move(dst);
    auto flag = std::make_shared<CompletionFlag>();
    if (Status st = engine_->submit_paged_writes(w, flag); !st.ok()) return st;
    return flag->wait(kWait);
  }
  [[nodiscard]] bool dst_untouched() const {
    for (auto b : dst_) {
      if (b != std::byte{0}) return false;
    }
    return true;
  }

  std::vector<std::byte> src_;
  std::vector<std::byte> dst_;
  MrHandle src_mr_;
  MrDesc dst_desc_;
  std::unique_ptr<TransferEngine> engine_;
};

TEST_P(EdgeCaseTest, ExpectingZeroArrivalsFiresAtOnceAndTakesNothing) {
  constexpr std::uint32_t kImm = 0xe0;
  test::WaitableCount fired;
  std::atomic<std::uint64_t> reported{99};
  // Declared after what the callback touches: the engine stops (joining its
  // callback thread) before those go out of scope.
  const StopGuard stop_guard(engine_.get());
  ASSERT_OK(engine_->expect_imm_count(kImm, 0, [&](std::uint32_t, std::uint64_t count) {
    reported = count;
    fired.add();
  }));
  ASSERT_TRUE(fired.wait_for(1, kWait)) << "expect_imm_count(imm, 0) did not fire";
  EXPECT_EQ(reported.load(), 0u);

  // It took nothing: the next arrival serves the next expectation.
  auto flag = std::make_shared<CompletionFlag>();
  ASSERT_OK(engine_->submit_imm(kImm, dst_desc_, flag));
  ASSERT_OK(flag->wait(kWait));
  ASSERT_OK(engine_->expect_imm_count(kImm, 1, [&](std::uint32_t, std::uint64_t) { fired.add(); }));
  EXPECT_TRUE(fired.wait_for(2, kWait)) << "the arrival after expect(0) did not serve expect(1)";

  // Behind a pending expectation it waits its turn (FIFO), like any other.
  constexpr std::uint32_t kImm2 = 0xe1;
  std::mutex mutex;
  std::vector<int> order;
  ASSERT_OK(engine_->expect_imm_count(kImm2, 1, [&](std::uint32_t, std::uint64_t) {
    std::lock_guard lock(mutex);
    order.push_back(1);
    fired.add();
  }));
  ASSERT_OK(engine_->expect_imm_count(kImm2, 0, [&](std::uint32_t, std::uint64_t) {
    std::lock_guard lock(mutex);
    order.push_back(0);
    fired.add();
  }));
  EXPECT_FALSE(fired.wait_for(3, kQuiet)) << "expect(0) overtook a pending expect(1)";
  auto second = std::make_shared<CompletionFlag>();
  ASSERT_OK(engine_->submit_imm(kImm2, dst_desc_, second));
  ASSERT_OK(second->wait(kWait));
  ASSERT_TRUE(fired.wait_for(4, kWait));
  std::lock_guard lock(mutex);
  EXPECT_EQ(order, (std::vector<int>{1, 0}));
}

TEST_P(EdgeCaseTest, APagedWriteOfZeroPagesCompletesOkAndSendsNothing) {
  constexpr std::uint32_t kImm = 0xe2;
  auto imms = counter(kImm);
  EXPECT_OK(paged(kImm, 64, {}, {}));
  EXPECT_EQ(imms->wait(1, kQuiet).code(), Errc::timeout) << "an immediate for zero pages";
  EXPECT_TRUE(dst_untouched());
}

TEST_P(EdgeCaseTest, PagesOfLengthZeroEachCarryTheImmAndNoBytes) {
  constexpr std::uint32_t kImm = 0xe3;
  auto imms = counter(kImm);
  EXPECT_OK(paged(kImm, 0, {{0, 1, 2}, 64, 0}, {{5, 6, 7}, 64, 0}));
  EXPECT_OK(imms->wait(3, kWait));
  EXPECT_EQ(imms->wait(4, kQuiet).code(), Errc::timeout) << "more than one immediate per page";
  EXPECT_TRUE(dst_untouched());
}

TEST_P(EdgeCaseTest, AnEmptyScatterOrBarrierCompletesOkAndSendsNothing) {
  constexpr std::uint32_t kImm = 0xe4;
  auto imms = counter(kImm);
  Scatter s;
  s.src = src_mr_;
  s.imm = kImm;
  auto scattered = std::make_shared<CompletionFlag>();
  ASSERT_OK(engine_->submit_scatter(s, scattered));
  EXPECT_OK(scattered->wait(kWait));
  Barrier b;
  b.imm = kImm;
  auto barrier = std::make_shared<CompletionFlag>();
  ASSERT_OK(engine_->submit_barrier(b, barrier));
  EXPECT_OK(barrier->wait(kWait));
  EXPECT_EQ(imms->wait(1, kQuiet).code(), Errc::timeout) << "an immediate from an empty request";
  EXPECT_TRUE(dst_untouched());
}

TEST_P(EdgeCaseTest, AZeroLengthSendArrivesAsAnEmptyMessage) {
  test::WaitableCount received;
  std::atomic<std::size_t> size{999};
  const StopGuard stop_guard(engine_.get());
  ASSERT_OK(engine_->submit_recvs(engine_->config().max_message_size, 4,
                                  [&](std::span<const std::byte> data) {
                                    size = data.size();
                                    received.add();
                                  }));
  auto flag = std::make_shared<CompletionFlag>();
  ASSERT_OK(engine_->submit_send(engine_->main_address(), {}, flag));
  EXPECT_OK(flag->wait(kWait));
  ASSERT_TRUE(received.wait_for(1, kWait)) << "the empty message never arrived";
  EXPECT_EQ(size.load(), 0u);
  EXPECT_FALSE(received.wait_for(2, kQuiet)) << "one empty SEND arrived twice";
}

TEST_P(EdgeCaseTest, ARegistrationWithoutAccessBitsIsALocalSource) {
  std::vector<std::byte> local(4096, std::byte{0x6d});
  auto reg = engine_->reg_mr(local.data(), local.size(), Device::host(), static_cast<Access>(0));
  ASSERT_OK(reg);
  EXPECT_FALSE(reg->desc.empty()) << "the descriptor exists; remote peers get no right through it";
  SingleWrite w;
  w.length = local.size();
  w.src = {reg->handle, 0};
  w.dst = {dst_desc_, 1024};
  auto flag = std::make_shared<CompletionFlag>();
  ASSERT_OK(engine_->submit_single_write(w, flag));
  ASSERT_OK(flag->wait(kWait));
  EXPECT_EQ(std::memcmp(dst_.data() + 1024, local.data(), local.size()), 0);
  EXPECT_OK(engine_->dereg_mr(reg->handle));
}

TEST_P(EdgeCaseTest, AProviderNameWithANulByteIsMalformed) {
  const NetAddr& self = engine_->main_address();
  std::vector<std::vector<std::byte>> addrs;
  for (std::size_t i = 0; i < self.num_domains(); ++i) {
    const auto d = self.domain_address(i);
    addrs.emplace_back(d.begin(), d.end());
  }
  std::string name = self.provider();
  name.insert(1, 1, '\0');
  auto made = NetAddr::make(self.backend(), name, self.instance_id(), self.max_message_size(),
                            addrs);
  ASSERT_FALSE(made.ok()) << "a provider name with a NUL byte was accepted";
  EXPECT_EQ(made.status().code(), Errc::malformed) << made.status().to_string();
  EXPECT_NE(made.status().message().find("NUL"), std::string::npos) << made.status().to_string();
}

FABRIC_INSTANTIATE_PROVIDERS(EdgeCaseTest);

}  // namespace
}  // namespace fabric::conformance
