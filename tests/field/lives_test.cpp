// More incarnations of a peer than shm's address vector holds (256) reach one engine, and a
// handle kept from a dead one fails cleanly instead of reaching whichever peer holds its entry
// now (docs/reliability.md, finding 9: the 257th incarnation in `make soak` was refused).
// The incarnations are engine lives in one peer process (peer_lives.cpp), an engine start each
// rather than a process start, so 300 of them take seconds. Every life registers the same
// memory at the same address, so a stale handle reaching a later life would land its WRITE:
// the area the stale requests aim at is checked after each of them.
//
// The first life is kept two ways: in a peer group (whose handles the engine keeps for its
// lifetime) and, on shm, as the descriptor of single WRITEs (the engine's peer cache). On shm
// its entry is released once its endpoint is found closed; on tcp, where nothing watches a
// peer, once it is fenced (its TCP address, a port, may be bound again by a later life, so
// only the peer group is tried there).

#include <cstring>

#include "fabric_test/data.hpp"
#include "field_test.hpp"
#include "peer_process.hpp"
#include "shared_region.hpp"

namespace fabric::field {
namespace {

constexpr int kLives = 300;
constexpr std::uint64_t kWrite = 8192;
constexpr std::uint64_t kSlots = 16;  // life i writes slot i % kSlots
constexpr std::uint64_t kStaleOffset = kSlots * kWrite;

class PeerLives : public FieldTest {};

TEST_P(PeerLives, ThreeHundredIncarnationsReachOneEngineAndAStaleHandleFailsCleanly) {
  auto engine = make_engine();
  ASSERT_NE(engine, nullptr);
  std::vector<std::byte> src(kWrite);
  auto reg = engine->reg_mr(src.data(), src.size());
  ASSERT_TRUE(reg.ok()) << reg.status().to_string();
  SharedRegion region = SharedRegion::create(kStaleOffset + kWrite);
  const std::span<std::byte> stale_area = region.data().subspan(kStaleOffset, kWrite);
  test::fill_random(stale_area, test::kSentinelSeed);
  auto lives = spawn_peer(PeerSpec{"lives", provider(), region.fd()});
  auto& ch = lives.channel();
  const auto started = Clock::now();

  std::optional<MrDesc> first;
  std::optional<PeerGroupHandle> first_group;
  int stale_failed = 0, stale_named = 0;
  std::string stale_message;
  // A request through the first life's handles: it must fail, within the bound, and change
  // nothing in the memory every life registers.
  auto try_stale = [&](const char* how, auto submit) {
    auto done = std::make_shared<CompletionFlag>();
    Status st = submit(done);
    if (st.ok()) st = done->wait(kRequestTimeout + kMargin);
    ASSERT_NE(st.code(), Errc::timeout) << how << ": no completion within the bound";
    ASSERT_FALSE(st.ok()) << how << ": a request to a dead incarnation reported ok";
    ASSERT_TRUE(test::bytes_equal(stale_area, test::random_bytes(kWrite, test::kSentinelSeed)))
        << how << " landed in a later incarnation's memory";
    ++stale_failed;
    if (st.message().find("stale peer handle") != std::string::npos) {
      ++stale_named;
      if (stale_message.empty()) stale_message = st.to_string();
    }
  };

  for (int life = 0; life < kLives; ++life) {
    auto desc = ch.recv_desc(kWait);
    ASSERT_TRUE(desc.has_value()) << "life " << life << ": " << ch.last_error();
    test::fill_random(src, static_cast<std::uint64_t>(life) + 1);
    const std::uint64_t slot = (life % kSlots) * kWrite;
    auto done = std::make_shared<CompletionFlag>();
    if (life == 0) {
      first = *desc;
      auto group = engine->add_peer_group({desc->owner()});
      ASSERT_TRUE(group.ok()) << group.status().to_string();
      first_group = *group;
      Scatter sc;
      sc.group = *group;
      sc.src = reg->handle;
      sc.slices.push_back({*desc, kWrite, 0, slot});
      ASSERT_TRUE(engine->submit_scatter(sc, done).ok());
    } else {
      SingleWrite w;
      w.length = kWrite;
      w.src = {reg->handle, 0};
      w.dst = {*desc, slot};
      ASSERT_TRUE(engine->submit_single_write(w, done).ok());
    }
    const Status wrote = done->wait(kWait);
    ASSERT_TRUE(wrote.ok()) << "life " << life << ": " << wrote.to_string();
    ASSERT_TRUE(test::bytes_equal(region.data().subspan(slot, kWrite), src)) << "life " << life;

    if (life == 1 && !shm()) {
      // The first life has stopped (its successor is up): shut it out as a KV receiver does.
      const Status fenced = engine->fence_peer(first->owner());
      ASSERT_TRUE(fenced.ok()) << fenced.to_string();
    }
    if (life > 0) {
      try_stale("a scatter through the first life's peer group", [&](auto flag) {
        Scatter sc;
        sc.group = *first_group;
        sc.src = reg->handle;
        sc.slices.push_back({*first, kWrite, 0, kStaleOffset});
        return engine->submit_scatter(sc, flag);
      });
      if (shm()) {
        try_stale("a WRITE to the first life's descriptor", [&](auto flag) {
          SingleWrite w;
          w.length = kWrite;
          w.src = {reg->handle, 0};
          w.dst = {*first, kStaleOffset};
          return engine->submit_single_write(w, flag);
        });
      }
      if (HasFatalFailure()) return;
    }
    ASSERT_TRUE(ch.send_string(life + 1 < kLives ? "next" : "quit")) << ch.last_error();
  }
  EXPECT_TRUE(ch.expect("bye", kWait)) << ch.last_error();
  EXPECT_TRUE(lives.wait_exit(kWait).ok());
  std::printf("[field] lives/%s: %d incarnations reached one engine in %lld ms, each WRITE "
              "byte-exact; %d requests through the first one's handles failed, %d of them as a "
              "stale handle (the first: \"%s\"), none landed\n",
              provider().c_str(), kLives, static_cast<long long>(ms(Clock::now() - started)),
              stale_failed, stale_named, stale_message.c_str());
  // The first life's entry was released (shm: found gone; tcp: fenced) and its handles said so.
  EXPECT_GT(stale_named, 0);
  engine->stop();
}

FABRIC_FIELD_PROVIDERS(PeerLives);

}  // namespace
}  // namespace fabric::field
