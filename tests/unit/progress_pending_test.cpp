// Domain::progress_pending() on the libfabric backend: tcp;ofi_rxm moves an inbound WRITE's
// bytes only while its CQ is polled, so the worker must not sleep while they wait; and it
// must be able to sleep again once they are in, even after the peer has gone (a closed
// socket stays readable: that must not keep the worker awake for good). Domain::wait_fd(),
// which the worker sleeps on, must turn readable when bytes reach a target nobody polls.

#include <gtest/gtest.h>
#include <poll.h>

#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "libfabric/fi_domain.hpp"

namespace fabric::ofi {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::uint32_t kImm = 42;
constexpr std::size_t kBytes = 32u << 20;  // many socket buffers' worth

std::unique_ptr<FiDomain> open_or_skip(const std::string& provider) {
  ProviderQuery q;
  q.provider = provider;
  q.bind_address = "127.0.0.1";
  auto d = FiDomain::open(q);
  if (!d) return nullptr;
  return std::move(d).value();
}

struct Counts {
  std::size_t imms = 0;
  std::size_t tx_done = 0;
};

void poll_into(FiDomain& d, Counts& c) {
  std::array<domain::Event, 32> ev;
  const std::size_t n = d.poll(ev);
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_TRUE(ev[i].status.ok()) << ev[i].status.to_string();
    if (ev[i].kind == domain::Event::Kind::imm_arrived && ev[i].imm == kImm) ++c.imms;
    if (ev[i].kind == domain::Event::Kind::tx_done) ++c.tx_done;
  }
}

// Polls `d` until progress_pending() has said false `quiet` times in a row; false if it
// never settles within `limit`.
bool settles(FiDomain& d, std::chrono::milliseconds limit, int quiet = 200) {
  const auto deadline = Clock::now() + limit;
  Counts ignored;
  int in_a_row = 0;
  while (Clock::now() < deadline) {
    poll_into(d, ignored);
    in_a_row = d.progress_pending() ? 0 : in_a_row + 1;
    if (in_a_row >= quiet) return true;
  }
  return false;
}

// A writer and a target on tcp;ofi_rxm, each with a 32 MiB registered buffer, peers already.
class ProgressPendingOnTcp : public ::testing::Test {
 protected:
  void SetUp() override {
    writer = open_or_skip("tcp");
    target = open_or_skip("tcp");
    if (!writer || !target) GTEST_SKIP() << "the tcp;ofi_rxm provider is not available";
    auto s = writer->register_memory(domain::MemorySpan::host(src.data(), src.size()),
                                     Access::remote_write);
    auto d = target->register_memory(domain::MemorySpan::host(dst.data(), dst.size()),
                                     Access::remote_write);
    ASSERT_TRUE(s && d);
    src_mr = std::move(s).value();
    dst_mr = std::move(d).value();
    auto resolved = writer->resolve_peer(target->address());
    ASSERT_TRUE(resolved) << resolved.status().to_string();
    peer = resolved.value();
    ASSERT_TRUE(target->resolve_peer(writer->address()));
  }

  // A WRITE of the first `length` bytes of src to the start of dst, with kImm.
  domain::WriteDesc write(std::size_t length, domain::Token token) const {
    const RemoteKey key = dst_mr->remote_key();
    domain::WriteDesc w;
    w.local = src.data();
    w.length = length;
    w.local_desc = src_mr->local_desc();
    w.peer = peer;
    w.remote_addr = key.addr_base;
    w.rkey = key.rkey;
    w.imm = kImm;
    w.token = token;
    return w;
  }

  // rxm answers `again` while it connects to a new peer: poll both ends and retry.
  Status post_first(const domain::WriteDesc& w) {
    Status posted = writer->post_write(w);
    while (posted.code() == Errc::again && Clock::now() < deadline) {
      poll_into(*writer, at_writer);
      poll_into(*target, at_target);
      posted = writer->post_write(w);
    }
    return posted;
  }

  // Polls both ends until `imms` immediates arrived and `tx` writes completed, or the deadline.
  void poll_both_until(std::size_t imms, std::size_t tx) {
    while ((at_target.imms < imms || at_writer.tx_done < tx) && Clock::now() < deadline) {
      poll_into(*writer, at_writer);
      poll_into(*target, at_target);
    }
  }

  std::unique_ptr<FiDomain> writer, target;
  std::vector<std::byte> src = std::vector<std::byte>(kBytes, std::byte{0x5a});
  std::vector<std::byte> dst = std::vector<std::byte>(kBytes, std::byte{0});
  std::unique_ptr<domain::MemoryRegion> src_mr, dst_mr;
  domain::PeerHandle peer{};
  Counts at_writer, at_target;
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(30);
};

TEST_F(ProgressPendingOnTcp, SaysSoWhileAWritesBytesWaitAndSettlesAfterwardsAndAfterThePeerLeaves) {
  const Status posted = post_first(write(kBytes, 1));
  ASSERT_TRUE(posted.ok()) << posted.to_string();

  // One thread drives both ends, the target asked between the writer's progress (which puts
  // bytes on the socket) and its own poll (which takes them off).
  bool seen_pending = false;
  while ((at_target.imms == 0 || at_writer.tx_done == 0) && Clock::now() < deadline) {
    poll_into(*writer, at_writer);
    seen_pending |= target->progress_pending();
    poll_into(*target, at_target);
  }
  ASSERT_EQ(at_target.imms, 1u) << "the write did not arrive in 30 s";
  ASSERT_EQ(at_writer.tx_done, 1u);
  EXPECT_EQ(std::memcmp(src.data(), dst.data(), kBytes), 0);
  EXPECT_TRUE(seen_pending) << "32 MiB crossed the socket without progress_pending() saying so";

  EXPECT_TRUE(settles(*target, std::chrono::seconds(5))) << "target, after the write";
  EXPECT_TRUE(settles(*writer, std::chrono::seconds(5))) << "writer, after the write";

  // The writer goes away: its socket closes under the target.
  src_mr.reset();
  writer->close_endpoint();
  writer.reset();
  EXPECT_TRUE(settles(*target, std::chrono::seconds(5)))
      << "a closed peer socket keeps progress_pending() true";
}

TEST_F(ProgressPendingOnTcp, WaitFdTurnsReadableWhenAWritesBytesReachATargetNobodyPolls) {
  ASSERT_GE(target->wait_fd(), 0) << "tcp's CQ was opened without a wait fd";
  // A first small write, both ends polled, so that the connection is up.
  const Status posted = post_first(write(64, 1));
  ASSERT_TRUE(posted.ok()) << posted.to_string();
  poll_both_until(1, 1);
  ASSERT_EQ(at_target.imms, 1u);
  // The target goes quiet: progress_pending() says false, which arms its fd (fi_trywait).
  ASSERT_TRUE(settles(*target, std::chrono::seconds(5)));
  pollfd fd{target->wait_fd(), POLLIN, 0};
  ASSERT_EQ(::poll(&fd, 1, 0), 0) << "the wait fd is readable with nothing on the way";

  // Now only the writer is polled: its bytes fill the target's socket.
  ASSERT_TRUE(writer->post_write(write(kBytes, 2)).ok());
  bool readable = false;
  while (!readable && Clock::now() < deadline) {
    poll_into(*writer, at_writer);
    readable = ::poll(&fd, 1, 0) > 0;
  }
  EXPECT_TRUE(readable) << "bytes reached the target's socket but its wait fd stayed quiet";
  poll_both_until(2, 2);
  ASSERT_EQ(at_target.imms, 2u) << "the write did not arrive in 30 s";
  EXPECT_EQ(std::memcmp(src.data(), dst.data(), kBytes), 0);
}

TEST(ProgressPending, ShmHasNothingToSayAndSaysFalse) {
  auto d = open_or_skip("shm");
  if (!d) GTEST_SKIP() << "the shm provider is not available";
  EXPECT_FALSE(d->progress_pending());
}

}  // namespace
}  // namespace fabric::ofi
