// The address-vector bookkeeping of FiDomain: a released entry's handles fail with the reason
// even after the provider gives its index to another peer; completions count only for the
// entry's current generation.
#include "libfabric/av_entries.hpp"
#include "shm_region_file.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <string>

namespace fabric::ofi {
namespace {

TEST(AvEntries, AHandleOfAReleasedEntryFailsWithTheReasonAfterTheIndexIsReused) {
  AvEntries av;
  const auto first = av.adopt("peer-a", 3, nullptr);
  EXPECT_TRUE(av.check(first).ok());
  EXPECT_EQ(av.find("peer-a"), first);

  av.release(3, "peer-a is gone");
  EXPECT_EQ(av.find("peer-a"), AvEntries::kNoPeer);
  const auto second = av.adopt("peer-b", 3, nullptr);  // the provider reuses index 3
  EXPECT_NE(second, first);
  EXPECT_EQ(AvEntries::index_of(second), AvEntries::index_of(first));
  EXPECT_TRUE(av.check(second).ok());

  const Status stale = av.check(first);
  EXPECT_EQ(stale.code(), Errc::provider);
  EXPECT_NE(stale.message().find("stale peer handle"), std::string::npos) << stale.message();
  EXPECT_NE(stale.message().find("peer-a is gone"), std::string::npos) << stale.message();
}

TEST(AvEntries, AHandleOfAnEntryReleasedTwiceSinceFailsWithoutTheLaterPeersReason) {
  AvEntries av;
  const auto first = av.adopt("a", 0, nullptr);
  av.release(0, "a went");
  (void)av.adopt("b", 0, nullptr);
  av.release(0, "b went");
  const Status stale = av.check(first);
  EXPECT_FALSE(stale.ok());
  EXPECT_EQ(stale.message().find("b went"), std::string::npos) << stale.message();
}

TEST(AvEntries, AnUnknownIndexIsStale) {
  AvEntries av;
  EXPECT_FALSE(av.check(7).ok());
  EXPECT_FALSE(av.check(AvEntries::kNoPeer).ok());
}

// A region file named as the engine names shm endpoints, of this very process: the peer is
// gone once the file is unlinked (its endpoint closed).
using RegionFile = test::RegionFile;

std::span<const std::byte> bytes_of(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.c_str()), s.size() + 1};
}

TEST(AvEntries, AGonePeerIsOfferedForReleaseOnlyOnceNothingIsPostedToIt) {
  AvEntries av;
  RegionFile region(::getpid(), "aventriestest");
  ASSERT_EQ(::access(region.path().c_str(), F_OK), 0) << region.path();
  auto watch = ShmPeerLiveness::watch(bytes_of(region.address()));
  ASSERT_NE(watch, nullptr);
  const auto h = av.adopt(region.address(), 2, std::move(watch));
  const auto unwatched = av.adopt("tcp-peer", 0, nullptr);
  EXPECT_TRUE(av.check(h).ok());
  av.posted(h);
  av.posted(unwatched);
  EXPECT_TRUE(av.gone_and_idle().empty());

  ASSERT_EQ(::unlink(region.path().c_str()), 0);
  // check() looks at the peer at most once per kRecheck: ask until it has looked (bounded).
  Status seen = Status::success();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while ((seen = av.check(h)).ok() && std::chrono::steady_clock::now() < deadline) {
  }
  ASSERT_FALSE(seen.ok()) << "the unlinked region file was never noticed";
  EXPECT_NE(seen.message().find("is gone"), std::string::npos) << seen.message();
  EXPECT_TRUE(av.gone_and_idle().empty()) << "offered with an operation still posted to it";
  av.completed(h);
  const auto gone = av.gone_and_idle();
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].index, 2u);
  EXPECT_NE(gone[0].why.find("is gone"), std::string::npos) << gone[0].why;
  av.release(gone[0].index, gone[0].why);
  EXPECT_EQ(av.find(region.address()), AvEntries::kNoPeer);
  const Status stale = av.check(h);
  EXPECT_NE(stale.message().find("stale peer handle"), std::string::npos) << stale.message();
  EXPECT_TRUE(av.gone_and_idle().empty()) << "a released entry offered again";
  EXPECT_EQ(av.in_use(), 1u);  // the unwatched peer stays, posted to or not
  EXPECT_TRUE(av.check(unwatched).ok());
}

TEST(AvEntries, ACompletionForAReleasedGenerationDoesNotCountAgainstItsSuccessor) {
  AvEntries av;
  const auto old_handle = av.adopt("a", 0, nullptr);
  av.posted(old_handle);
  av.release(0, "fenced");
  const auto fresh = av.adopt("b", 0, nullptr);
  av.posted(fresh);
  av.completed(old_handle);  // the fenced operation's late completion
  av.completed(old_handle);
  av.completed(AvEntries::kNoPeer);  // a receive's
  EXPECT_EQ(av.outstanding(fresh), 1u);
  av.completed(fresh);
  av.completed(fresh);
  EXPECT_EQ(av.outstanding(fresh), 0u);
  EXPECT_EQ(av.outstanding(old_handle), 0u);
}

}  // namespace
}  // namespace fabric::ofi
