// RDMA READs through the public API with every Domain a FakeDomain (no provider): single reads
// sharded over two Domains and paged reads land byte-exact; the access bits on the descriptor
// refuse a read of write-only memory at submit; a descriptor that claims read access its keys do
// not have fails at the (fake) owner's key check, reads nothing, and the engine reads on.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "doubles/domain_decorator.hpp"
#include "doubles/fake_domain.hpp"
#include "fabric/fabric.hpp"

namespace fabric {
namespace {

using namespace std::chrono_literals;
constexpr auto kWait = 20s;
constexpr std::size_t kBytes = 1 << 16;

std::byte pattern(std::size_t i) { return static_cast<std::byte>((i * 131 + 7) & 0xFF); }

struct Node {
  std::unique_ptr<TransferEngine> engine;
  std::vector<std::byte> memory = std::vector<std::byte>(kBytes);
};

class ReadsOnFakeDomains : public ::testing::Test {
 protected:
  void SetUp() override { domain::set_test_decorator(fabric_->decorator()); }
  void TearDown() override {
    for (auto& n : nodes_) {
      if (n->engine) n->engine->stop();
    }
    domain::set_test_decorator({});
  }

  Node& add_node(std::uint32_t domains) {
    EngineConfig c;
    c.provider = "shm";  // opened, then replaced by the decorator
    c.domains_per_group = domains;
    c.drain_timeout = 200ms;
    auto engine = TransferEngine::create(c);
    EXPECT_TRUE(engine.ok()) << engine.status().to_string();
    auto node = std::make_unique<Node>();
    if (engine.ok()) node->engine = std::move(engine).value();
    nodes_.push_back(std::move(node));
    return *nodes_.back();
  }

  static Registered reg(Node& n, Access access) {
    auto r = n.engine->reg_mr(n.memory.data(), n.memory.size(), Device::host(), access);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? std::move(r).value() : Registered{};
  }

  static Status run(TransferEngine& e, const SingleRead& r) {
    auto flag = std::make_shared<CompletionFlag>();
    if (Status st = e.submit_single_read(r, flag); !st.ok()) return st;
    Status st = flag->wait(kWait);
    EXPECT_NE(flag->status().code(), Errc::again) << "no completion within kWait";
    return st;
  }

  std::shared_ptr<domain::FakeFabric> fabric_ = domain::FakeFabric::create();
  std::vector<std::unique_ptr<Node>> nodes_;
};

constexpr Access kReadable = Access::remote_write | Access::remote_read;

TEST_F(ReadsOnFakeDomains, SingleAndPagedReadsLandByteExact) {
  Node& owner = add_node(2);
  Node& reader = add_node(2);
  ASSERT_TRUE(owner.engine && reader.engine);
  for (std::size_t i = 0; i < kBytes; ++i) owner.memory[i] = pattern(i);
  const Registered src = reg(owner, kReadable);
  const Registered dst = reg(reader, Access::remote_write);

  // Sharded over both Domains: two READs, one request.
  ASSERT_TRUE(run(*reader.engine, {10'001, {src.desc, 3}, {dst.handle, 5}}).ok());
  for (std::size_t i = 0; i < 10'001; ++i) {
    ASSERT_EQ(reader.memory[5 + i], pattern(3 + i)) << "byte " << i;
  }
  EXPECT_EQ(reader.memory[4], std::byte{0});
  EXPECT_EQ(reader.memory[5 + 10'001], std::byte{0});

  std::fill(reader.memory.begin(), reader.memory.end(), std::byte{0});
  PagedRead pages;
  pages.page_length = 100;
  pages.src = src.desc;
  pages.dst = dst.handle;
  pages.src_pages = {{4, 0, 7}, 128, 1};
  pages.dst_pages = {{0, 1, 2}, 100, 1000};
  auto flag = std::make_shared<CompletionFlag>();
  ASSERT_TRUE(reader.engine->submit_paged_reads(pages, flag).ok());
  ASSERT_TRUE(flag->wait(kWait).ok()) << flag->status().to_string();
  for (std::size_t p = 0; p < 3; ++p) {
    for (std::size_t i = 0; i < 100; ++i) {
      ASSERT_EQ(reader.memory[1000 + p * 100 + i], pattern(1 + pages.src_pages.indices[p] * 128 + i))
          << "page " << p << " byte " << i;
    }
  }
  EXPECT_EQ(reader.memory[999], std::byte{0});
  EXPECT_EQ(reader.memory[1300], std::byte{0});
}

TEST_F(ReadsOnFakeDomains, WriteOnlyMemoryIsRefusedAtSubmitAndAtTheKeys) {
  Node& owner = add_node(1);
  Node& reader = add_node(1);
  ASSERT_TRUE(owner.engine && reader.engine);
  for (std::size_t i = 0; i < kBytes; ++i) owner.memory[i] = pattern(i);
  const Registered write_only = reg(owner, Access::remote_write);
  const Registered readable = reg(owner, kReadable);
  const Registered dst = reg(reader, Access::remote_write);
  EXPECT_FALSE(has_access(write_only.desc.access(), Access::remote_read))
      << "the default registration must not let peers read";

  const Status refused = run(*reader.engine, {64, {write_only.desc, 0}, {dst.handle, 0}});
  EXPECT_EQ(refused.code(), Errc::invalid_argument) << refused.to_string();

  // The same keys under a descriptor that claims read access: the owner's key check refuses.
  const MrDesc& real = write_only.desc;
  auto forged = MrDesc::make(real.owner(), real.base(), real.size(),
                             {real.keys().begin(), real.keys().end()}, real.group(), kReadable);
  ASSERT_TRUE(forged.ok());
  const Status failed = run(*reader.engine, {64, {*forged, 0}, {dst.handle, 0}});
  EXPECT_EQ(failed.code(), Errc::provider) << failed.to_string();
  EXPECT_NE(failed.message().find("not readable"), std::string::npos) << failed.to_string();
  EXPECT_TRUE(std::all_of(reader.memory.begin(), reader.memory.end(),
                          [](std::byte b) { return b == std::byte{0}; }))
      << "a refused READ wrote into the reader's memory";

  ASSERT_TRUE(run(*reader.engine, {64, {readable.desc, 0}, {dst.handle, 0}}).ok());
  EXPECT_EQ(reader.memory[63], pattern(63));
}

}  // namespace
}  // namespace fabric
