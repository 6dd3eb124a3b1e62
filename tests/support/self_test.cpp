// The harness checks itself: a conformance failure should never be a
// harness bug, and a harness failure (a hung child, a dead channel) must be
// reported as such, quickly.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "fabric_test/channel.hpp"
#include "fabric_test/child_process.hpp"
#include "fabric_test/data.hpp"
#include "fabric_test/env.hpp"
#include "fabric_test/proc_inspect.hpp"
#include "fabric_test/sync.hpp"

namespace fabric::test {
namespace {

using namespace std::chrono_literals;

TEST(ChildProcessTest, ExitCodeAndChannelRoundTrip) {
  auto child = spawn_child(
      [](Channel& ch) -> int {
        auto text = ch.recv_string(5s);
        if (!text) return 10;
        return ch.send_string(*text + " back") && ch.send_pod<std::uint64_t>(42) ? 7 : 11;
      },
      10s);
  ASSERT_TRUE(child.channel().send_string("there"));
  EXPECT_EQ(child.channel().recv_string(5s), "there back");
  EXPECT_EQ(child.channel().recv_pod<std::uint64_t>(5s), 42u);
  const auto exit = child.wait_exit(5s);
  EXPECT_EQ(exit.kind, ChildExit::Kind::exited);
  EXPECT_EQ(exit.code, 7) << exit.to_string();
  EXPECT_FALSE(exit.ok());
}

TEST(ChildProcessTest, ThrowingBodyExitsWithCode3) {
  auto child = spawn_child([](Channel&) -> int { throw std::runtime_error("boom"); }, 10s);
  const auto exit = child.wait_exit(5s);
  EXPECT_EQ(exit.code, kChildException) << exit.to_string();
}

TEST(ChildProcessTest, ChildRequireReportsFailure) {
  auto child = spawn_child(
      [](Channel&) -> int {
        CHILD_REQUIRE(1 + 1 == 3, "arithmetic");
        return kChildOk;
      },
      10s);
  EXPECT_EQ(child.wait_exit(5s).code, kChildCheckFailed);
}

TEST(ChildProcessTest, ChildCannotOutliveItsDeadline) {
  const auto begin = std::chrono::steady_clock::now();
  auto child = spawn_child(
      [](Channel& ch) -> int {
        (void)ch.recv_bytes(60s);  // nobody sends: only the alarm ends this
        return kChildOk;
      },
      1s);
  const auto exit = child.wait_exit(10s);
  EXPECT_EQ(exit.kind, ChildExit::Kind::signaled) << exit.to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 5s);
}

TEST(ChildProcessTest, WaitExitKillsOnTimeout) {
  auto child = spawn_child(
      [](Channel& ch) -> int {
        (void)ch.recv_bytes(60s);
        return kChildOk;
      },
      60s);
  const auto exit = child.wait_exit(200ms);
  EXPECT_EQ(exit.kind, ChildExit::Kind::timed_out) << exit.to_string();
  EXPECT_TRUE(child.reaped());
  EXPECT_EQ(::kill(child.pid(), 0), -1) << "child still exists after wait_exit timed out";
}

TEST(ChildProcessTest, ExitedDoesNotWaitAndReapsOnceGone) {
  auto child = spawn_child([](Channel& ch) -> int { return ch.expect("quit", 5s) ? 5 : 1; }, 10s);
  EXPECT_FALSE(child.exited().has_value()) << "a child blocked on its channel has not exited";
  ASSERT_TRUE(child.channel().send_string("quit"));
  // The channel closes when the child exits: its EOF says it is gone, no sleep.
  EXPECT_FALSE(child.channel().recv_bytes(5s).has_value());
  const auto exit = child.wait_exit(5s);
  EXPECT_EQ(exit.code, 5) << exit.to_string();
  const auto again = child.exited();
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->code, 5);
}

TEST(ChannelTest, RecvTimesOutAndDetectsAClosedPeer) {
  auto child = spawn_child([](Channel& ch) -> int { return ch.expect("quit", 5s) ? 0 : 1; }, 10s);
  auto& ch = child.channel();
  const auto begin = std::chrono::steady_clock::now();
  EXPECT_FALSE(ch.recv_bytes(100ms).has_value());
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 2s);
  EXPECT_NE(ch.last_error().find("timed out"), std::string::npos) << ch.last_error();
  ASSERT_TRUE(ch.send_string("quit"));
  EXPECT_FALSE(ch.recv_bytes(5s).has_value());
  EXPECT_NE(ch.last_error().find("closed"), std::string::npos) << ch.last_error();
  EXPECT_TRUE(child.wait_exit(5s).ok());
  EXPECT_FALSE(ch.send_string("anyone?")) << "send to an exited peer must fail, not SIGPIPE";
}

TEST(ChannelTest, LargeFramesAndStatusesCross) {
  auto child = spawn_child(
      [](Channel& ch) -> int {
        auto frame = ch.recv_bytes(10s);
        if (!frame || !bytes_equal(*frame, random_bytes(8 << 20, 9))) return 1;
        return ch.send_status(Status(Errc::out_of_range, "offset 99")) ? 0 : 2;
      },
      20s);
  ASSERT_TRUE(child.channel().send_bytes(random_bytes(8 << 20, 9), 10s));
  auto st = child.channel().recv_status(10s);
  ASSERT_TRUE(st.has_value()) << child.channel().last_error();
  EXPECT_EQ(st->code(), Errc::out_of_range);
  EXPECT_EQ(st->message(), "offset 99");
  EXPECT_TRUE(child.wait_exit(5s).ok());
}

TEST(DataTest, FillRandomIsDeterministicAndSeedDependent) {
  EXPECT_EQ(random_bytes(1001, 5), random_bytes(1001, 5));
  EXPECT_NE(random_bytes(64, 5), random_bytes(64, 6));
  const auto long_run = random_bytes(100, 5);
  const auto short_run = random_bytes(13, 5);
  EXPECT_TRUE(std::equal(short_run.begin(), short_run.end(), long_run.begin()))
      << "a prefix must not depend on the span's length";
}

TEST(DataTest, BytesEqualReportsTheFirstMismatch) {
  auto a = random_bytes(4096, 1);
  auto b = a;
  b[1234] ^= std::byte{1};
  b[3000] ^= std::byte{1};
  const auto r = bytes_equal(a, b);
  ASSERT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("first at offset 1234"), std::string::npos)
      << r.message();
  EXPECT_NE(std::string(r.message()).find("2 of 4096"), std::string::npos) << r.message();
}

TEST(DataTest, UntouchedOutsideIgnoresWrittenRanges) {
  auto buf = random_bytes(1000, kSentinelSeed);
  buf[100] = ~buf[100];
  const ByteRange written{90, 20};
  EXPECT_TRUE(untouched_outside(buf, std::span(&written, 1)));
  buf[110] = ~buf[110];
  EXPECT_FALSE(untouched_outside(buf, std::span(&written, 1)));

  // Unsorted, overlapping, and running past the end.
  auto other = random_bytes(1000, kSentinelSeed);
  other[5] = ~other[5];
  other[500] = ~other[500];
  other[999] = ~other[999];
  const std::vector<ByteRange> ranges = {{400, 200}, {0, 10}, {450, 10}, {990, 1000}};
  EXPECT_TRUE(untouched_outside(other, ranges));
  other[10] = ~other[10];
  const auto r = untouched_outside(other, ranges);
  EXPECT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("first at offset 10"), std::string::npos) << r.message();
}

TEST(ProcInspectTest, FindsABoundLoopbackSocket) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);

  bool found = false;
  for (const auto& s : inet_sockets_of(::getpid())) {
    if (s.port == ntohs(addr.sin_port)) {
      found = true;
      EXPECT_EQ(s.address, "127.0.0.1");
      EXPECT_TRUE(s.loopback);
      EXPECT_FALSE(s.unbound);
    }
  }
  ::close(fd);
  EXPECT_TRUE(found) << "our listening socket was not listed";
}

TEST(ProcInspectTest, NameMentionsPidMatchesWholeNumbersOnly) {
  EXPECT_TRUE(name_mentions_pid("fi_shm_1234_0", 1234));
  EXPECT_TRUE(name_mentions_pid("1234", 1234));
  EXPECT_FALSE(name_mentions_pid("fi_12345", 1234));
  EXPECT_FALSE(name_mentions_pid("fi_01234", 1234));
}

TEST(EnvTest, LoopbackEnvironmentIsSet) {
  ::setenv("FI_PROVIDER", "verbs", 1);
  use_loopback_environment();
  EXPECT_STREQ(::getenv("FI_TCP_IFACE"), "lo");
  EXPECT_STREQ(::getenv("FI_SOCKETS_IFACE"), "lo");
  EXPECT_EQ(::getenv("FI_PROVIDER"), nullptr);
}

TEST(SyncTest, WaitableCountWaitsBounded) {
  WaitableCount count;
  EXPECT_FALSE(count.wait_for(1, 10ms));
  count.add(2);
  EXPECT_TRUE(count.wait_for(2, 10ms));
}

}  // namespace
}  // namespace fabric::test
