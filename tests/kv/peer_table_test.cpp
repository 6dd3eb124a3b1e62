// PeerTable: the peers and their liveness, as the Sender and Receiver keep them.

#include "peers.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

namespace fabric::kv {
namespace {

using namespace std::chrono_literals;

struct Peer : PeerLife {
  int epoch = 0;
};

Peer peer(std::uint64_t instance, int epoch, Clock::time_point seen, bool joined = true) {
  Peer p;
  p.addr = NetAddr::make(Backend::libfabric, "shm", instance, 4096, {{std::byte{1}}}).value();
  p.last_seen = seen;
  p.joined = joined;
  p.epoch = epoch;
  return p;
}

TEST(KvPeerTable, APeerAddedAgainKeepsItsIndex) {
  PeerTable<Peer> peers;
  const auto now = Clock::now();
  EXPECT_EQ(peers.put(peer(7, 1, now)), 0u);
  EXPECT_EQ(peers.put(peer(9, 1, now)), 1u);
  peers[0].alive = false;
  EXPECT_EQ(peers.put(peer(7, 2, now)), 0u);  // a new epoch of instance 7
  EXPECT_EQ(peers.size(), 2u);
  EXPECT_EQ(peers[0].epoch, 2);
  EXPECT_TRUE(peers[0].alive);
  EXPECT_EQ(peers.index_of(9), 1u);
  EXPECT_FALSE(peers.index_of(8).has_value());
  EXPECT_EQ(peers.find(8), nullptr);
}

TEST(KvPeerTable, OnlyALivePeerIsHeard) {
  PeerTable<Peer> peers;
  const auto then = Clock::now();
  peers.put(peer(7, 1, then));
  peers.put(peer(9, 1, then));
  peers[1].alive = false;
  const auto later = then + 5s;
  EXPECT_EQ(peers.heard(7, later), 0u);
  EXPECT_EQ(peers[0].last_seen, later);
  EXPECT_EQ(peers.heard(9, later), 1u);  // known, but its silence does not end
  EXPECT_EQ(peers[1].last_seen, then);
  EXPECT_FALSE(peers.heard(8, later).has_value());
}

TEST(KvPeerTable, PulseReportsLiveJoinedPeersSilentPastTheBoundAndSendsNothing) {
  PeerTable<Peer> peers;
  const auto now = Clock::now();
  peers.put(peer(1, 1, now));         // heard just now
  peers.put(peer(2, 1, now - 10s));   // silent: reported
  peers.put(peer(3, 1, now - 10s));   // silent but dead already: nothing
  peers.put(peer(4, 1, now, false));  // handshake not finished: nothing
  peers.put(peer(5, 1, now - 10s, false));  // silent, but not joined: nothing
  peers[2].alive = false;
  std::vector<std::uint32_t> silent;
  peers.pulse(now, std::chrono::milliseconds(6000), [&](std::uint32_t i) { silent.push_back(i); });
  EXPECT_EQ(silent, std::vector<std::uint32_t>{1});
  // Without an engine watch, last_heard() is the last KV message.
  EXPECT_EQ(peers[1].last_heard(), now - 10s);
}

}  // namespace
}  // namespace fabric::kv
