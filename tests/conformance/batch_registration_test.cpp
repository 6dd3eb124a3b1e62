// reg_mrs registers many regions in one worker pass: each result is a registration as good as
// reg_mr's (a peer's WRITE into it lands exactly), in the order given, and bad input or a
// failing range fails the whole batch with that range named.

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "fabric_test/data.hpp"
#include "remote_writer.hpp"

namespace fabric::conformance {
namespace {

constexpr std::uint64_t kRegion = 64 * 1024 + 5;  // odd: nothing relies on alignment
constexpr std::size_t kWriters = 3;

using BatchRegistrationTest = ProviderTest;

TEST_P(BatchRegistrationTest, EveryRegionOfTheBatchReceivesItsWriterExactly) {
  std::vector<std::unique_ptr<RemoteWriter>> writers;
  for (std::size_t i = 0; i < kWriters; ++i) {
    writers.push_back(std::make_unique<RemoteWriter>(config(), kRegion, 0xba7c'0000 + i));
  }
  ASSERT_ENGINE(engine, config());
  std::vector<std::vector<std::byte>> dst;
  std::vector<MemoryRange> ranges;
  for (std::size_t i = 0; i < kWriters; ++i) {
    dst.push_back(test::random_bytes(kRegion, test::kSentinelSeed + i));
    ranges.push_back({dst.back().data(), dst.back().size()});
  }
  auto regs = engine->reg_mrs(ranges);
  ASSERT_OK(regs);
  ASSERT_EQ(regs->size(), kWriters);
  for (std::size_t i = 0; i < kWriters; ++i) {
    const Registered& r = (*regs)[i];
    EXPECT_EQ(r.handle.data(), dst[i].data()) << "range " << i;
    EXPECT_EQ(r.handle.size(), kRegion) << "range " << i;
    EXPECT_EQ(r.desc.size(), kRegion) << "range " << i;
    EXPECT_EQ(r.desc.owner(), engine->main_address()) << "range " << i;
    ASSERT_TRUE(writers[i]->connect(r.desc));
  }
  for (std::size_t i = 0; i < kWriters; ++i) {
    SCOPED_TRACE("region " + std::to_string(i));
    const std::uint32_t imm = 0xba70 + static_cast<std::uint32_t>(i);
    auto counter = engine->imm_counter(imm);
    ASSERT_OK(counter);
    SingleWriteSpec spec;
    spec.length = kRegion;
    spec.imm = imm;
    const Outcome outcome = writers[i]->single_write(spec);
    ASSERT_TRUE(outcome.ok()) << outcome.to_string();
    ASSERT_OK((*counter)->wait(1, kWait));
    ASSERT_BYTES_EQUAL(dst[i], test::random_bytes(kRegion, 0xba7c'0000 + i));
  }
  for (const Registered& r : *regs) EXPECT_OK(engine->dereg_mr(r.handle));
  engine->stop();
  for (auto& w : writers) EXPECT_TRUE(w->finish().has_value());
}

TEST_P(BatchRegistrationTest, BadRangesAreRefusedWithTheirIndex) {
  ASSERT_ENGINE(engine, config());
  std::vector<std::byte> buf(8192);
  const std::array<std::pair<std::string, std::vector<MemoryRange>>, 2> cases = {{
      {"a null pointer", {{buf.data(), 4096}, {nullptr, 4096}}},
      {"zero bytes", {{buf.data(), 4096}, {buf.data() + 4096, 4096}, {buf.data(), 0}}},
  }};
  for (const auto& [name, ranges] : cases) {
    auto regs = engine->reg_mrs(ranges);
    ASSERT_FALSE(regs.ok()) << name;
    EXPECT_EQ(regs.status().code(), Errc::invalid_argument) << name;
    const std::string index = "range " + std::to_string(ranges.size() - 1);
    EXPECT_NE(regs.status().message().find(index), std::string::npos)
        << name << ": " << regs.status().to_string();
  }
  const MemoryRange one{buf.data(), buf.size()};
  auto unknown = engine->reg_mrs(std::span(&one, 1), Access::remote_write | Access{1u << 7});
  EXPECT_EQ(unknown.status().code(), Errc::invalid_argument);
  auto empty = engine->reg_mrs({});
  ASSERT_OK(empty);
  EXPECT_TRUE(empty->empty());
}

TEST_P(BatchRegistrationTest, AFailureMidBatchFailsTheWholeBatchNamingTheRange) {
  ASSERT_ENGINE(engine, config());
  std::vector<std::byte> a(4096), b(4096);
  // Host memory passed as a CUDA device's: the worker refuses it after range 0 registered.
  const std::vector<MemoryRange> ranges = {{a.data(), a.size()},
                                           {b.data(), b.size(), Device::cuda(0)}};
  auto regs = engine->reg_mrs(ranges);
  ASSERT_FALSE(regs.ok());
  EXPECT_NE(regs.status().message().find("reg_mrs range 1"), std::string::npos)
      << regs.status().to_string();
  // The engine is still usable for the good range on its own.
  auto again = engine->reg_mrs(std::span(ranges).first(1));
  ASSERT_OK(again);
  EXPECT_OK(engine->dereg_mr(again->front().handle));
}

FABRIC_INSTANTIATE_PROVIDERS(BatchRegistrationTest);

}  // namespace
}  // namespace fabric::conformance
