// Requests are checked against the registrations before anything is posted:
// a bad range or handle is rejected at submit with an error naming the bad
// value, and not one byte or immediate of that request reaches the target.

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "remote_target.hpp"

namespace fabric::conformance {
namespace {

constexpr std::uint64_t kSrcSize = 8192;
constexpr std::uint64_t kDstSize = 16384;
// Every rejected request carries this imm; the target must count none of it.
constexpr std::uint32_t kImm = 0x0bad;
constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Whether `message` names `value`, in decimal or 0x-hex.
bool names(const std::string& message, std::uint64_t value) {
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(value));
  return message.find(std::to_string(value)) != std::string::npos ||
         lower(message).find(hex) != std::string::npos;
}

// Rejected as out of range, naming at least one of `values`.
::testing::AssertionResult out_of_range_naming(const Status& st,
                                               std::initializer_list<std::uint64_t> values) {
  if (st.ok()) return ::testing::AssertionFailure() << "accepted";
  if (st.code() != Errc::out_of_range) {
    return ::testing::AssertionFailure() << "expected out_of_range, got " << st.to_string();
  }
  for (const auto v : values) {
    if (names(st.message(), v)) return ::testing::AssertionSuccess();
  }
  std::string list;
  for (const auto v : values) list += (list.empty() ? "" : " or ") + std::to_string(v);
  return ::testing::AssertionFailure()
         << "message \"" << st.message() << "\" names none of " << list;
}

class ValidationTest : public RemoteTargetTest {
 protected:
  void SetUp() override { set_up(kDstSize, kSrcSize, std::byte{0x77}); }

  SingleWrite single(std::uint64_t length, std::uint64_t src_off, std::uint64_t dst_off) const {
    SingleWrite w;
    w.length = length;
    w.imm = kImm;
    w.src = {src_mr_, src_off};
    w.dst = {target_->dst(), dst_off};
    return w;
  }
  PagedWrite paged(Pages src, Pages dst, std::uint64_t page_length = 64) const {
    PagedWrite w;
    w.page_length = page_length;
    w.imm = kImm;
    w.src = src_mr_;
    w.src_pages = std::move(src);
    w.dst = target_->dst();
    w.dst_pages = std::move(dst);
    return w;
  }
  Status submit(const SingleWrite& w) { return engine_->submit_single_write(w, OnDone(done_)); }
  Status submit(const PagedWrite& w) { return engine_->submit_paged_writes(w, OnDone(done_)); }

  void expect_nothing_was_sent() { RemoteTargetTest::expect_nothing_was_sent(kImm); }

};

TEST_P(ValidationTest, SingleWriteRangesAreCheckedBeforeAnythingIsSent) {
  EXPECT_TRUE(out_of_range_naming(submit(single(1, kSrcSize, 0)), {kSrcSize})) << "src offset";
  EXPECT_TRUE(out_of_range_naming(submit(single(1, 0, kDstSize)), {kDstSize})) << "dst offset";
  EXPECT_TRUE(out_of_range_naming(submit(single(kSrcSize + 1, 0, 0)), {kSrcSize + 1}))
      << "length beyond the source";
  EXPECT_TRUE(out_of_range_naming(submit(single(kSrcSize, 0, kDstSize - kSrcSize + 1)),
                                  {kDstSize - kSrcSize + 1, kSrcSize}))
      << "dst range crossing the end by one byte";
  EXPECT_TRUE(out_of_range_naming(submit(single(2, kMax, 0)), {kMax})) << "src offset UINT64_MAX";
  EXPECT_TRUE(out_of_range_naming(submit(single(2, 0, kMax)), {kMax})) << "dst offset UINT64_MAX";
  // offset + length wraps to a small number: a naive end check would pass.
  EXPECT_TRUE(out_of_range_naming(submit(single(4, 0, kMax - 1)), {kMax - 1, 4}))
      << "dst offset + length overflows";
  EXPECT_TRUE(out_of_range_naming(submit(single(kMax, 0, 0)), {kMax})) << "length UINT64_MAX";
  expect_nothing_was_sent();
}

TEST_P(ValidationTest, PagedWriteRangesAreCheckedBeforeAnythingIsSent) {
  // Page 0 of each request is valid: rejecting must not post it anyway.
  EXPECT_TRUE(
      out_of_range_naming(submit(paged({{0, 1, 1000000}, 64, 0}, {{0, 1, 2}, 64, 0})), {1000000}))
      << "src page index";
  EXPECT_TRUE(
      out_of_range_naming(submit(paged({{0, 1, 2}, 64, 0}, {{0, 1, 7777777}, 64, 0})), {7777777}))
      << "dst page index";
  EXPECT_TRUE(out_of_range_naming(submit(paged({{0, 1}, 64, 0}, {{0, 256}, 64, 0})), {256}))
      << "dst page index one past the end";
  // 2 * 2^63 wraps to 0: a naive multiply would land page 1 on offset 0.
  EXPECT_TRUE(
      out_of_range_naming(submit(paged({{0, 1}, 64, 0}, {{0, 2}, std::uint64_t{1} << 63, 0})),
                          {2, std::uint64_t{1} << 63}))
      << "dst index * stride overflows";
  EXPECT_TRUE(out_of_range_naming(submit(paged({{0}, 64, 0}, {{0}, 64, kMax})), {kMax}))
      << "dst offset UINT64_MAX";
  EXPECT_TRUE(out_of_range_naming(submit(paged({{0}, 64, kMax}, {{0}, 64, 0})), {kMax}))
      << "src offset UINT64_MAX";
  EXPECT_TRUE(out_of_range_naming(submit(paged({{0}, 64, 0}, {{0}, 64, 0}, kDstSize + 1)),
                                  {kDstSize + 1, kSrcSize + 1}))
      << "page_length beyond both regions";

  const Status mismatch = submit(paged({{0, 1}, 64, 0}, {{0}, 64, 0}));
  EXPECT_EQ(mismatch.code(), Errc::invalid_argument)
      << "index lists of different lengths: " << mismatch.to_string();
  expect_nothing_was_sent();
}

TEST_P(ValidationTest, UnusableHandlesAreRejected) {
  SingleWrite empty_src = single(64, 0, 0);
  empty_src.src.mr = MrHandle{};
  const Status st1 = submit(empty_src);
  EXPECT_FALSE(st1.ok()) << "empty MrHandle as source was accepted";

  std::vector<std::byte> other(4096);
  auto reg = engine_->reg_mr(other.data(), other.size());
  ASSERT_OK(reg);
  ASSERT_OK(engine_->dereg_mr(reg->handle));
  EXPECT_FALSE(reg->handle.valid()) << "MrHandle::valid() after dereg_mr";
  SingleWrite stale_src = single(64, 0, 0);
  stale_src.src.mr = reg->handle;
  const Status st2 = submit(stale_src);
  EXPECT_FALSE(st2.ok()) << "deregistered MrHandle as source was accepted";

  PagedWrite stale_paged = paged({{0}, 64, 0}, {{0}, 64, 0});
  stale_paged.src = reg->handle;
  EXPECT_FALSE(submit(stale_paged).ok()) << "deregistered MrHandle as paged source was accepted";

  SingleWrite empty_dst = single(64, 0, 0);
  empty_dst.dst.mr = MrDesc{};
  EXPECT_FALSE(submit(empty_dst).ok()) << "empty MrDesc as destination was accepted";
  EXPECT_FALSE(engine_->submit_imm(kImm, MrDesc{}, OnDone(done_)).ok())
      << "submit_imm to an empty MrDesc was accepted";
  expect_nothing_was_sent();
}

FABRIC_INSTANTIATE_PROVIDERS(ValidationTest);

}  // namespace
}  // namespace fabric::conformance
