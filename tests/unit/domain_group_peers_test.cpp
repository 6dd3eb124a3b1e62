// DomainGroup's peer cache answers a descriptor with the handles of the engine its bytes name,
// whether the owner is the very object it checked before (the fast path that skips the byte
// compare) or another engine under the same instance id (a forged or corrupted descriptor).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "doubles/fake_domain.hpp"
#include "engine/domain_group.hpp"
#include "fabric/memory.hpp"

namespace fabric::engine {
namespace {

constexpr std::uint64_t kInstance = 7;

class DomainGroupPeers : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::unique_ptr<domain::Domain>> domains;
    domains.push_back(fabric_->open());
    ASSERT_TRUE(group_.adopt(std::move(domains)).ok());
    first_ = fabric_->open();
    second_ = fabric_->open();
  }

  // A descriptor whose owner claims kInstance and lives at `target`'s address.
  static MrDesc desc_at(const domain::FakeDomain& target) {
    const auto address = target.address();
    auto owner = NetAddr::make(Backend::libfabric, "fake", kInstance, 4096,
                               {std::vector<std::byte>(address.begin(), address.end())});
    EXPECT_TRUE(owner.ok());
    auto desc = MrDesc::make(std::move(owner).value(), 0x1000, 64, {RemoteKey{0x1000, 1}});
    EXPECT_TRUE(desc.ok());
    return std::move(desc).value();
  }

  domain::PeerHandle resolve(const MrDesc& desc) {
    domain::PeerHandle handle = ~domain::PeerHandle{0};
    EXPECT_TRUE(group_.resolve_owner(desc, &handle).ok());
    return handle;
  }

  std::shared_ptr<domain::FakeFabric> fabric_ = domain::FakeFabric::create();
  DomainGroup group_;
  std::unique_ptr<domain::FakeDomain> first_, second_;
};

TEST_F(DomainGroupPeers, TheSameDescriptorAgainGetsTheSameHandle) {
  const MrDesc desc = desc_at(*first_);
  const domain::PeerHandle handle = resolve(desc);
  EXPECT_EQ(resolve(desc), handle);
  const MrDesc copy = desc;  // shares the owner object
  EXPECT_EQ(resolve(copy), handle);
  // Equal bytes in another object: compared, and equal.
  auto decoded = MrDesc::decode(desc.encode());
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(resolve(*decoded), handle);
}

TEST_F(DomainGroupPeers, AnotherEngineUnderAKnownInstanceIdNeverGetsTheCachedHandles) {
  const MrDesc genuine = desc_at(*first_);
  const MrDesc impostor = desc_at(*second_);  // same instance id, other address
  const domain::PeerHandle genuine_handle = resolve(genuine);
  EXPECT_EQ(resolve(genuine), genuine_handle);  // now cached as checked
  const domain::PeerHandle impostor_handle = resolve(impostor);
  EXPECT_NE(impostor_handle, genuine_handle);
  // The genuine descriptor, checked before the impostor replaced it, is compared again.
  EXPECT_EQ(resolve(genuine), genuine_handle);
  EXPECT_EQ(resolve(impostor), impostor_handle);
}

}  // namespace
}  // namespace fabric::engine
