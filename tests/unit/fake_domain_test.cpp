// The FakeDomain double itself behaves as a provider would where the engine tests rely on it:
// WRITEs land only inside a registration under its key, immediates follow landed bytes, a
// message longer than the posted receive fails that receive, and faults fire as configured.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "doubles/fake_domain.hpp"

namespace fabric::domain {
namespace {

std::vector<Event> drain(Domain& d, std::size_t want, int max_polls = 1000) {
  std::vector<Event> got;
  std::array<Event, 8> out;
  for (int i = 0; i < max_polls && got.size() < want; ++i) {
    const std::size_t n = d.poll(out);
    got.insert(got.end(), out.begin(), out.begin() + static_cast<std::ptrdiff_t>(n));
  }
  return got;
}

class FakeDomainTest : public ::testing::Test {
 protected:
  // A writer that resolved a target with dst_ registered for remote writes.
  void open_pair() {
    writer_ = fabric_->open();
    target_ = fabric_->open();
    auto region = target_->register_memory(MemorySpan::host(dst_.data(), dst_.size()),
                                           Access::remote_write);
    ASSERT_TRUE(region.ok());
    region_ = std::move(region).value();
    key_ = region_->remote_key();
    auto peer = writer_->resolve_peer(target_->address());
    ASSERT_TRUE(peer.ok());
    peer_ = *peer;
  }

  std::shared_ptr<FakeFabric> fabric_ = FakeFabric::create();
  std::vector<std::byte> src_ = std::vector<std::byte>(256, std::byte{0x5A});
  std::vector<std::byte> dst_ = std::vector<std::byte>(256, std::byte{0});
  std::unique_ptr<FakeDomain> writer_, target_;
  std::unique_ptr<MemoryRegion> region_;
  RemoteKey key_;
  PeerHandle peer_ = 0;
};

TEST_F(FakeDomainTest, WriteLandsInsideTheRegionAndRaisesTheImmediateAtTheTarget) {
  ASSERT_NO_FATAL_FAILURE(open_pair());
  ASSERT_NE(writer_->address().size(), 0u);
  ASSERT_FALSE(std::equal(writer_->address().begin(), writer_->address().end(),
                          target_->address().begin(), target_->address().end()));
  WriteDesc w{src_.data(), 100, nullptr, peer_, key_.addr_base + 10, key_.rkey, 0xABCDu, 7};
  ASSERT_TRUE(writer_->post_write(w).ok());

  const auto tx = drain(*writer_, 1);
  ASSERT_EQ(tx.size(), 1u);
  EXPECT_EQ(tx[0].kind, Event::Kind::tx_done);
  EXPECT_EQ(tx[0].token, 7u);
  EXPECT_TRUE(tx[0].status.ok()) << tx[0].status.to_string();
  const auto rx = drain(*target_, 1);
  ASSERT_EQ(rx.size(), 1u);
  EXPECT_EQ(rx[0].kind, Event::Kind::imm_arrived);
  EXPECT_EQ(rx[0].imm, 0xABCDu);
  EXPECT_EQ(dst_[9], std::byte{0});
  EXPECT_EQ(dst_[10], std::byte{0x5A});
  EXPECT_EQ(dst_[109], std::byte{0x5A});
  EXPECT_EQ(dst_[110], std::byte{0});
}

TEST_F(FakeDomainTest, WriteWithAWrongKeyOrOutsideTheRegionCompletesWithAnErrorAndLandsNothing) {
  ASSERT_NO_FATAL_FAILURE(open_pair());
  const std::vector<WriteDesc> bad = {
      {src_.data(), 16, nullptr, peer_, key_.addr_base, key_.rkey + 1000, 1u, 1},   // wrong key
      {src_.data(), 16, nullptr, peer_, key_.addr_base + 250, key_.rkey, 1u, 2},    // past the end
      {src_.data(), 16, nullptr, peer_, key_.addr_base - 8, key_.rkey, 1u, 3},      // before it
  };
  for (const auto& w : bad) ASSERT_TRUE(writer_->post_write(w).ok());
  const auto tx = drain(*writer_, bad.size());
  ASSERT_EQ(tx.size(), bad.size());
  for (const auto& e : tx) {
    EXPECT_EQ(e.status.code(), Errc::provider) << e.token;
    EXPECT_NE(e.status.message().find("remote access"), std::string::npos);
  }
  EXPECT_TRUE(drain(*target_, 1, 10).empty());  // no immediate for bytes that did not land
  EXPECT_EQ(std::count(dst_.begin(), dst_.end(), std::byte{0}), 256);
  EXPECT_EQ(writer_->stats().remote_errors.load(), bad.size());

  region_.reset();  // deregistered: the old key is refused too
  ASSERT_TRUE(writer_->post_write({src_.data(), 16, nullptr, peer_, key_.addr_base, key_.rkey,
                                  std::nullopt, 4})
                  .ok());
  const auto late = drain(*writer_, 1);
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(late[0].status.code(), Errc::provider);
}

TEST_F(FakeDomainTest, MessagesFillPostedReceivesAndATooLongOneFailsItsReceive) {
  auto sender = fabric_->open();
  auto receiver = fabric_->open();
  std::vector<std::byte> small(8), big(64);
  auto peer = sender->resolve_peer(receiver->address());
  ASSERT_TRUE(peer.ok());
  // Sent before any receive is posted: held until one is.
  ASSERT_TRUE(sender->post_send(*peer, src_.data(), 32, nullptr, 1).ok());
  ASSERT_TRUE(receiver->post_recv(big.data(), big.size(), nullptr, 10).ok());
  ASSERT_TRUE(receiver->post_recv(small.data(), small.size(), nullptr, 11).ok());
  ASSERT_TRUE(sender->post_send(*peer, src_.data(), 32, nullptr, 2).ok());
  const auto rx = drain(*receiver, 2);
  ASSERT_EQ(rx.size(), 2u);
  EXPECT_EQ(rx[0].token, 10u);
  EXPECT_TRUE(rx[0].status.ok());
  EXPECT_EQ(rx[0].length, 32u);
  EXPECT_EQ(big[31], std::byte{0x5A});
  EXPECT_EQ(rx[1].token, 11u);
  EXPECT_EQ(rx[1].status.code(), Errc::provider);
  EXPECT_NE(rx[1].status.message().find("truncated"), std::string::npos);
  EXPECT_EQ(drain(*sender, 2).size(), 2u);
}

TEST_F(FakeDomainTest, FaultsRefuseTheNthWriteDropAPeerAndDelayCompletions) {
  FakeOptions options;
  options.tx_depth = 2;
  options.faults.fail_write_nth = 2;
  options.faults.fail_write_code = Errc::provider;
  options.faults.delay_polls = 3;
  auto target = fabric_->open();
  auto dead = fabric_->open();
  options.faults.drop_to = {std::vector<std::byte>(dead->address().begin(), dead->address().end())};
  auto writer = fabric_->open(options);
  auto region = target->register_memory(MemorySpan::host(dst_.data(), dst_.size()),
                                        Access::remote_write);
  ASSERT_TRUE(region.ok());
  const RemoteKey key = (*region)->remote_key();
  auto to_target = writer->resolve_peer(target->address());
  auto to_dead = writer->resolve_peer(dead->address());
  ASSERT_TRUE(to_target.ok() && to_dead.ok());
  WriteDesc w{src_.data(), 8, nullptr, *to_target, key.addr_base, key.rkey, std::nullopt, 1};
  ASSERT_TRUE(writer->post_write(w).ok());
  EXPECT_EQ(writer->post_write(w).code(), Errc::provider);  // the 2nd: refused
  w.peer = *to_dead;
  ASSERT_TRUE(writer->post_write(w).ok());                  // swallowed
  EXPECT_EQ(writer->post_write(w).code(), Errc::again);     // tx_depth 2 reached
  std::array<Event, 4> out;
  EXPECT_EQ(writer->poll(out), 0u);  // polls 1 and 2: still delayed
  EXPECT_EQ(writer->poll(out), 0u);
  ASSERT_EQ(writer->poll(out), 1u);  // poll 3: the first write's completion
  EXPECT_TRUE(out[0].status.ok());
  EXPECT_TRUE(drain(*writer, 1, 50).empty());  // the dropped one never comes
  EXPECT_EQ(writer->stats().dropped.load(), 1u);
  EXPECT_EQ(writer->stats().injected.load(), 1u);
  // One queue slot came back; the dropped write holds the other for good.
  EXPECT_TRUE(writer->post_write(w).ok());
  EXPECT_EQ(writer->post_write(w).code(), Errc::again);
}

}  // namespace
}  // namespace fabric::domain
