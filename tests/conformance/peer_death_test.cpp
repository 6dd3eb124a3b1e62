// Peer death: a peer SIGKILLed with sends, single, paged and scatter writes
// outstanding towards it fails every one of them in bounded time
// (EngineConfig::request_timeout), while writes to a live peer keep landing
// byte for byte; afterwards the engine still serves and a restarted peer is
// reachable at once. A writer dying mid-stream leaves its target healthy, and
// stop() with work stuck on a dead peer settles everything in bounded time.
//
// The victim is SIGSTOPped before the requests are submitted, so they are
// genuinely outstanding when SIGKILL lands (a running peer would complete
// most of them first and the test would prove little).
//
// Each test prints a "[peer-death]" line with what it measured (time from
// the kill to the errors, per provider); docs/reliability.md quotes them.
// libfabric 1.17's shm cannot serve other peers once one died with a WRITE
// outstanding (ofiwg/libfabric#9853); that test skips there, saying so.

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "expected_failure.hpp"
#include "fabric_test/data.hpp"
#include "fabric_test/sync.hpp"
#include "fabric_test/victim.hpp"
#include "fixture.hpp"

namespace fabric::conformance {
namespace {

using Clock = std::chrono::steady_clock;
using test::Channel;

constexpr std::uint64_t kRegion = 1 << 20;
constexpr std::uint64_t kSlot = 64 * 1024;  // kRegion / 16
constexpr std::uint32_t kImm = 0xdea7;
constexpr std::chrono::milliseconds kRequestTimeout{1500};
// Callback-thread hop, the worker's idle sleep and a loaded 2-core box.
constexpr std::chrono::milliseconds kMargin{3000};
// How often bounded waits re-check a condition.
constexpr std::chrono::milliseconds kPoll{5};

std::int64_t ms(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

// Order-independent digest of the messages a peer received.
std::uint64_t fnv1a(std::span<const std::byte> bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const std::byte b : bytes) {
    h ^= static_cast<std::uint64_t>(b);
    h *= 0x100000001b3ull;
  }
  return h;
}

// Polls `done` until it holds or `deadline` passes.
template <typename Pred>
bool poll_until(Pred done, Clock::time_point deadline) {
  for (;;) {
    if (done()) return true;
    if (Clock::now() >= deadline) return done();
    std::this_thread::sleep_for(kPoll);
  }
}

// ---------------------------------------------------------------- the peer child

enum class Cmd : std::uint8_t { round = 1, quit = 2 };
struct RoundWire {
  std::uint64_t imms = 0;      // arrivals of kImm to wait for (and consume)
  std::uint64_t messages = 0;  // total messages the peer should have by now
};
struct RoundReply {
  std::uint64_t messages = 0;
  std::uint64_t digest = 0;
};

// A target: a zeroed region with a counter on kImm and a receive pool. With
// `wait_for_start` it creates its engine only on the parent's "start", which
// is how a peer "restarts" after the parent's engine exists (the parent may
// not fork once it has threads).
int peer_main(Channel& ch, const EngineConfig& config, bool wait_for_start) {
  if (wait_for_start) CHILD_REQUIRE(ch.expect("start", std::chrono::seconds(90)), ch.last_error());
  std::vector<std::byte> region(kRegion);
  std::atomic<std::uint64_t> messages{0};
  std::atomic<std::uint64_t> digest{0};
  auto engine = child_engine(config);
  CHILD_REQUIRE(engine != nullptr, "peer engine");
  auto reg = engine->reg_mr(region.data(), region.size());
  CHILD_REQUIRE_OK(reg.status());
  CHILD_REQUIRE_OK(engine->submit_recvs(config.max_message_size, 64,
                                        [&](std::span<const std::byte> m) {
                                          digest.fetch_xor(fnv1a(m));
                                          messages.fetch_add(1);
                                        }));
  auto counter = engine->imm_counter(kImm);
  CHILD_REQUIRE_OK(counter.status());
  CHILD_REQUIRE(ch.send_desc(reg->desc), ch.last_error());

  for (;;) {
    auto cmd = ch.recv_pod<Cmd>(std::chrono::seconds(90));
    CHILD_REQUIRE(cmd.has_value(), "waiting for a command: " + ch.last_error());
    if (*cmd == Cmd::quit) break;
    CHILD_REQUIRE(*cmd == Cmd::round, "unknown command");
    auto want = ch.recv_pod<RoundWire>();
    CHILD_REQUIRE(want.has_value(), ch.last_error());
    Status st = (*counter)->wait_and_consume(want->imms, kWait);
    if (st.ok() && !poll_until([&] { return messages.load() >= want->messages; },
                               Clock::now() + kWait)) {
      st = Status(Errc::timeout, "only " + std::to_string(messages.load()) + " of " +
                                     std::to_string(want->messages) + " messages arrived");
    }
    CHILD_REQUIRE(ch.send_status(st), ch.last_error());
    CHILD_REQUIRE(ch.send_pod(RoundReply{messages.load(), digest.load()}), ch.last_error());
    CHILD_REQUIRE(ch.send_bytes(region), ch.last_error());
  }
  engine->stop();
  engine.reset();
  CHILD_REQUIRE(ch.send_string("bye"), ch.last_error());
  return test::kChildOk;
}

struct Round {
  Status status;
  RoundReply reply;
  std::vector<std::byte> region;
};

class Peer {
 public:
  // Forks the peer. Call before the parent creates its engine.
  Peer(const EngineConfig& config, bool wait_for_start)
      : child_(test::spawn_child(
            [config, wait_for_start](Channel& ch) { return peer_main(ch, config, wait_for_start); },
            kChildLifetime)) {}

  ::testing::AssertionResult start() {
    if (child_.channel().send_string("start")) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << child_.channel().last_error();
  }
  ::testing::AssertionResult connect() {
    auto desc = child_.channel().recv_desc(kWait);
    if (!desc) {
      return ::testing::AssertionFailure()
             << "peer did not send its MrDesc: " << child_.channel().last_error();
    }
    dst_ = *desc;
    return ::testing::AssertionSuccess();
  }
  [[nodiscard]] const MrDesc& dst() const { return dst_; }
  [[nodiscard]] const NetAddr& addr() const { return dst_.owner(); }

  std::optional<Round> round(std::uint64_t imms, std::uint64_t messages) {
    auto& ch = child_.channel();
    if (!ch.send_pod(Cmd::round) || !ch.send_pod(RoundWire{imms, messages})) return std::nullopt;
    Round r;
    auto st = ch.recv_status(kWait + kWait);
    auto reply = st ? ch.recv_pod<RoundReply>() : std::nullopt;
    auto region = reply ? ch.recv_bytes() : std::nullopt;
    if (!region) return std::nullopt;
    return Round{*st, *reply, std::move(*region)};
  }

  ::testing::AssertionResult finish() {
    auto& ch = child_.channel();
    if (!ch.send_pod(Cmd::quit) || !ch.expect("bye", kWait)) {
      return ::testing::AssertionFailure() << "peer did not stop cleanly: " << ch.last_error()
                                           << "; process " << child_.wait_exit(kWait).to_string();
    }
    const auto exit = child_.wait_exit(kWait);
    if (!exit.ok()) return ::testing::AssertionFailure() << "peer process " << exit.to_string();
    return ::testing::AssertionSuccess();
  }

  [[nodiscard]] ChildProcess& process() { return child_; }

 private:
  ChildProcess child_;
  MrDesc dst_;
};

// ---------------------------------------------------------------- requests and outcomes

enum class Kind : std::uint8_t { send, single, paged, scatter };
const char* kind_name(Kind k) {
  switch (k) {
    case Kind::send: return "send";
    case Kind::single: return "single";
    case Kind::paged: return "paged";
    case Kind::scatter: return "scatter";
  }
  return "?";
}

// "kind code=n, ..." for failure messages and the measured-figures line.
std::string summary(const std::map<std::string, int>& counts) {
  std::string out;
  for (const auto& [k, n] : counts) out += (out.empty() ? "" : ", ") + k + "=" + std::to_string(n);
  return out;
}

// One submission's completion, written by the callback thread.
struct Outcome {
  Kind kind = Kind::send;
  std::atomic<int> calls{0};
  std::atomic<bool> done{false};
  bool ok = false;
  Errc code = Errc::ok;
  std::string text;
  Clock::time_point at;
};

using Outcomes = std::vector<std::unique_ptr<Outcome>>;

OnDone record(Outcome& o) {
  return OnDone([&o](const Status& st) {
    if (o.calls.fetch_add(1) == 0) {
      o.ok = st.ok();
      o.code = st.code();
      o.text = st.to_string();
      o.at = Clock::now();
      o.done.store(true, std::memory_order_release);
    }
  });
}

// Submits a mix of every request kind towards `victim`; nothing waits.
::testing::AssertionResult submit_mix(TransferEngine& engine, const MrHandle& src,
                                      const MrDesc& victim, Outcomes& out) {
  constexpr int kSends = 48;
  constexpr int kSingles = 48;
  constexpr int kPaged = 16;
  constexpr int kScatters = 16;
  auto add = [&](Kind kind, const std::function<Status(OnDone)>& submit) {
    out.push_back(std::make_unique<Outcome>());
    out.back()->kind = kind;
    Outcome& o = *out.back();
    return test::submit_with_retry([&] { return submit(record(o)); }, kWait);
  };
  for (int i = 0; i < kSends; ++i) {
    const auto message = test::random_bytes(4096, 0x5e9d0000u + i);
    const Status st =
        add(Kind::send, [&](OnDone d) { return engine.submit_send(victim.owner(), message, d); });
    if (!st.ok()) return ::testing::AssertionFailure() << "send " << i << ": " << st.to_string();
  }
  // 12 MiB in all: more than loopback TCP buffers hold, so a frozen peer
  // leaves them outstanding on the IP providers too.
  constexpr std::uint64_t kBig = kRegion / 4;
  for (int i = 0; i < kSingles; ++i) {
    SingleWrite w;
    w.length = kBig;
    w.imm = kImm;
    w.src = {src, (i % 4) * kBig};
    w.dst = {victim, ((i + 1) % 4) * kBig};
    const Status st = add(Kind::single, [&](OnDone d) { return engine.submit_single_write(w, d); });
    if (!st.ok()) return ::testing::AssertionFailure() << "single " << i << ": " << st.to_string();
  }
  for (int i = 0; i < kPaged; ++i) {
    PagedWrite w;
    w.page_length = 4096;
    w.imm = kImm;
    w.src = src;
    w.src_pages = {{0, 3, 5, 7, 11, 13, 17, 19}, 8192, static_cast<std::uint64_t>(i) * 64};
    w.dst = victim;
    w.dst_pages = {{1, 2, 4, 8, 16, 32, 64, 100}, 8192, 0};
    const Status st = add(Kind::paged, [&](OnDone d) { return engine.submit_paged_writes(w, d); });
    if (!st.ok()) return ::testing::AssertionFailure() << "paged " << i << ": " << st.to_string();
  }
  for (int i = 0; i < kScatters; ++i) {
    Scatter s;
    s.src = src;
    s.imm = kImm;
    s.slices = {{victim, 16 * 1024, 0, static_cast<std::uint64_t>(i) * 32 * 1024},
                {victim, 16 * 1024, 16 * 1024, static_cast<std::uint64_t>(i) * 32 * 1024 + 16384}};
    const Status st = add(Kind::scatter, [&](OnDone d) { return engine.submit_scatter(s, d); });
    if (!st.ok()) return ::testing::AssertionFailure() << "scatter " << i << ": " << st.to_string();
  }
  return ::testing::AssertionSuccess();
}

// Waits (bounded by `limit`) until no request of `out` has completed for
// `quiet`. A provider may have finished an operation (shm completes inline
// ones as soon as they are queued to the peer) before the worker reports it;
// this keeps such requests out of the "outstanding at the kill" set.
void settle(const Outcomes& out, std::chrono::milliseconds quiet, std::chrono::milliseconds limit) {
  auto count = [&] {
    std::size_t n = 0;
    for (const auto& o : out) n += o->done.load(std::memory_order_acquire) ? 1 : 0;
    return n;
  };
  const auto deadline = Clock::now() + limit;
  std::size_t last = count();
  auto last_change = Clock::now();
  while (Clock::now() < deadline && Clock::now() - last_change < quiet) {
    std::this_thread::sleep_for(kPoll);
    if (const std::size_t n = count(); n != last) {
      last = n;
      last_change = Clock::now();
    }
  }
}

// One imm-carrying write and one send to the victim, then a round trip: the
// connection exists before anything is measured.
::testing::AssertionResult warm_up(TransferEngine& engine, const MrHandle& src, Peer& peer,
                                   std::uint64_t& messages_sent) {
  SingleWrite w;
  w.length = 4096;
  w.imm = kImm;
  w.src = {src, 0};
  w.dst = {peer.dst(), 0};
  auto flag = std::make_shared<CompletionFlag>();
  if (Status st = engine.submit_single_write(w, flag); !st.ok()) {
    return ::testing::AssertionFailure() << "warm-up write: " << st.to_string();
  }
  if (Status st = flag->wait(kWait); !st.ok()) {
    return ::testing::AssertionFailure() << "warm-up write: " << st.to_string();
  }
  const auto message = test::random_bytes(64, 0x3a3a);
  auto sent = std::make_shared<CompletionFlag>();
  if (Status st = engine.submit_send(peer.addr(), message, sent); !st.ok()) {
    return ::testing::AssertionFailure() << "warm-up send: " << st.to_string();
  }
  if (Status st = sent->wait(kWait); !st.ok()) {
    return ::testing::AssertionFailure() << "warm-up send: " << st.to_string();
  }
  ++messages_sent;
  auto r = peer.round(1, messages_sent);
  if (!r) return ::testing::AssertionFailure() << "warm-up round: no reply";
  if (!r->status.ok()) return ::testing::AssertionFailure() << "warm-up round: " << r->status.to_string();
  return ::testing::AssertionSuccess();
}

// Writes `slot` of `live` with fresh bytes (and sends it a message), waits for
// local completion, then fetches its region and compares every byte with the
// parent's shadow of what it must hold.
class LiveWriter {
 public:
  LiveWriter(TransferEngine& engine, std::vector<std::byte>& src, const MrHandle& src_mr,
             Peer& live)
      : engine_(engine), src_(src), src_mr_(src_mr), live_(live), shadow_(kRegion) {}

  // Submits the write and the send and waits for their local completion.
  ::testing::AssertionResult write(std::uint64_t slot, std::uint64_t seed) {
    if (auto submitted = submit(slot, seed); !submitted) return submitted;
    return wait();
  }

  // Submits the write and the send; wait() collects their completions.
  ::testing::AssertionResult submit(std::uint64_t slot, std::uint64_t seed) {
    // The source slot is private to this writer, so rewriting it is safe.
    const std::uint64_t src_off = kRegion + (slot % 4) * kSlot;
    test::fill_random(std::span(src_).subspan(src_off, kSlot), seed);
    std::copy_n(src_.begin() + static_cast<std::ptrdiff_t>(src_off), kSlot,
                shadow_.begin() + static_cast<std::ptrdiff_t>(slot * kSlot));
    SingleWrite w;
    w.length = kSlot;
    w.imm = kImm;
    w.src = {src_mr_, src_off};
    w.dst = {live_.dst(), slot * kSlot};
    written_ = std::make_shared<CompletionFlag>();
    if (Status st = engine_.submit_single_write(w, written_); !st.ok()) {
      return ::testing::AssertionFailure() << "live write: " << st.to_string();
    }
    const auto message = test::random_bytes(1000, seed ^ 0xfeed);
    sent_ = std::make_shared<CompletionFlag>();
    if (Status st = engine_.submit_send(live_.addr(), message, sent_); !st.ok()) {
      return ::testing::AssertionFailure() << "live send: " << st.to_string();
    }
    digest_ ^= fnv1a(message);
    ++messages_;
    ++pending_imms_;
    return ::testing::AssertionSuccess();
  }

  ::testing::AssertionResult wait() {
    if (Status st = written_->wait(kWait); !st.ok()) {
      return ::testing::AssertionFailure() << "live write completed with " << st.to_string();
    }
    if (Status st = sent_->wait(kWait); !st.ok()) {
      return ::testing::AssertionFailure() << "live send completed with " << st.to_string();
    }
    return ::testing::AssertionSuccess();
  }

  // After wait() failed: the last write and send were each reported, bounded by
  // request_timeout, and whichever failed says why.
  ::testing::AssertionResult reported() const {
    for (const auto& [what, flag] : {std::pair{"write", written_}, std::pair{"send", sent_}}) {
      (void)flag->wait(kWait);
      if (!flag->done()) {
        return ::testing::AssertionFailure() << "the live " << what << " was never reported";
      }
      if (flag->status().ok()) continue;
      if (auto clear = reported_as_failure(flag->status()); !clear) {
        return clear << " (live " << what << ")";
      }
    }
    return ::testing::AssertionSuccess();
  }

  // The live peer's view: every imm and message arrived, every byte right.
  ::testing::AssertionResult verify() {
    auto r = live_.round(pending_imms_, messages_);
    if (!r) return ::testing::AssertionFailure() << "live peer did not answer";
    pending_imms_ = 0;
    if (!r->status.ok()) return ::testing::AssertionFailure() << "live peer: " << r->status.to_string();
    if (r->reply.messages != messages_ || r->reply.digest != digest_) {
      return ::testing::AssertionFailure()
             << "live peer got " << r->reply.messages << " messages (digest " << r->reply.digest
             << "), expected " << messages_ << " (digest " << digest_ << ")";
    }
    return test::bytes_equal(r->region, shadow_);
  }

  void account_warm_up(std::uint64_t messages, std::span<const std::byte> written) {
    messages_ = messages;
    digest_ = fnv1a(test::random_bytes(64, 0x3a3a));
    std::copy(written.begin(), written.end(), shadow_.begin());
  }

 private:
  TransferEngine& engine_;
  std::vector<std::byte>& src_;
  const MrHandle& src_mr_;
  Peer& live_;
  std::vector<std::byte> shadow_;
  std::uint64_t messages_ = 0;
  std::uint64_t digest_ = 0;
  std::uint64_t pending_imms_ = 0;
  std::shared_ptr<CompletionFlag> written_;
  std::shared_ptr<CompletionFlag> sent_;
};

// Whether the peer's NIC takes RDMA traffic without its process running (a
// frozen peer still receives).
bool one_sided_delivery(const std::string& provider) { return provider == "verbs"; }

EngineConfig death_config(const std::string& provider) {
  EngineConfig config = engine_config(provider);
  config.request_timeout = kRequestTimeout;
  return config;
}

// Receives a frozen verbs victim keeps posted for immediates.
constexpr std::uint32_t kFrozenVictimImmReceives = 16;

// The settings of a peer that gets SIGSTOPped: it polls rarely while idle
// (fabric_test/victim.hpp), and on verbs it has few receives for immediates.
// There its NIC keeps taking WRITEs while its process is stopped, so what was
// still outstanding when it was killed depended on how fast rxe ran (none of
// the 128 requests on a fast machine). Its receives used up and not replaced,
// the writer's RNR retries (rnr_retry 7: without end) hold the rest back, as
// a stopped receiving process does on the other providers.
EngineConfig frozen_victim_config(const EngineConfig& cfg) {
  EngineConfig config = test::victim_config(cfg);
  if (config.provider == "verbs") config.verbs.imm_recv_depth = kFrozenVictimImmReceives;
  return config;
}

using PeerDeathTest = ProviderTest;

TEST_P(PeerDeathTest, OutstandingRequestsToAKilledPeerFailInBoundedTimeWhileOthersServe) {
  const EngineConfig cfg = death_config(provider());
  Peer victim(frozen_victim_config(cfg), false);
  Peer live(cfg, false);
  Peer restarted(cfg, true);

  ASSERT_ENGINE(engine, cfg);
  // [0, kRegion): sources of the victim's requests; [kRegion, +4 slots): the live writer's.
  std::vector<std::byte> src(kRegion + 4 * kSlot);
  test::fill_random(src, 0xd1e);
  Outcomes outcomes;
  const StopGuard stop_guard(engine.get());
  auto reg = engine->reg_mr(src.data(), src.size());
  ASSERT_OK(reg);
  ASSERT_TRUE(victim.connect());
  ASSERT_TRUE(live.connect());

  std::uint64_t victim_messages = 0;
  std::uint64_t live_messages = 0;
  ASSERT_TRUE(warm_up(*engine, reg->handle, victim, victim_messages));
  ASSERT_TRUE(warm_up(*engine, reg->handle, live, live_messages));
  LiveWriter writer(*engine, src, reg->handle, live);
  writer.account_warm_up(live_messages, std::span(src).first(4096));

  ASSERT_EQ(::kill(victim.process().pid(), SIGSTOP), 0);
  ASSERT_TRUE(submit_mix(*engine, reg->handle, victim.dst(), outcomes));
  // Well inside request_timeout, so what is outstanding now still is at the kill.
  settle(outcomes, std::chrono::milliseconds(50), std::chrono::milliseconds(400));

  // Taken before the kill: on the IP providers the errors arrive within the
  // millisecond the kernel resets the connections.
  std::vector<const Outcome*> outstanding;
  std::map<std::string, int> done_before_kill;
  for (const auto& o : outcomes) {
    if (o->done.load(std::memory_order_acquire)) {
      ++done_before_kill[std::string(kind_name(o->kind)) + (o->ok ? " ok" : " failed")];
    } else {
      outstanding.push_back(o.get());
    }
  }
  if (outstanding.empty() && provider() == "shm") {
    // Which protocol shm uses towards a peer depends on timing at first
    // contact; over its CMA path the writer copies into the stopped peer's
    // memory itself, so nothing is left outstanding to fail. The rest (the
    // live peer served across the kill, the restarted peer reached) is still
    // checked.
    std::printf("[peer-death] provider=shm completed all %zu requests to the stopped peer "
                "before the kill (CMA); no request is left to fail this run\n",
                outcomes.size());
  } else {
    ASSERT_FALSE(outstanding.empty())
        << "every request to the frozen peer had completed before it was killed; nothing to test";
  }
  // A write and a send to the live peer are in flight while the victim dies.
  ASSERT_TRUE(writer.submit(1, 101));
  const auto killed_at = Clock::now();
  const auto exit = victim.process().kill();
  ASSERT_EQ(exit.kind, test::ChildExit::Kind::signaled) << exit.to_string();

  // Keep serving the live peer while the dead one's requests wait to fail.
  const auto bound = kRequestTimeout + kMargin;
  auto all_done = [&] {
    for (const Outcome* o : outstanding) {
      if (!o->done.load(std::memory_order_acquire)) return false;
    }
    return true;
  };
  int live_rounds_during_outage = 0;
  // Set when the provider stops completing anything once a peer died (shm).
  std::string provider_wedged;
  if (auto across = writer.wait(); !across && provider() == "shm") {
    provider_wedged = across.message();
  } else {
    ASSERT_TRUE(across) << "the live write in flight across the kill";
    ASSERT_TRUE(writer.verify()) << "the live write in flight across the kill";
  }
  const auto across_ms = ms(Clock::now() - killed_at);
  for (std::uint64_t slot = 2; provider_wedged.empty() && !all_done() && Clock::now() < killed_at + bound; ++slot) {
    auto written = writer.write(2 + slot % 14, 1000 + slot);
    if (!written && provider() == "shm") {
      provider_wedged = written.message();
      break;
    }
    ASSERT_TRUE(written) << "live round " << slot;
    ASSERT_TRUE(writer.verify()) << "live round " << slot;
    if (!all_done()) ++live_rounds_during_outage;
  }
  ASSERT_TRUE(poll_until(all_done, killed_at + bound + kWait))
      << "requests to the killed peer still outstanding after "
      << ms(bound + kWait) << " ms";

  Clock::duration first = Clock::duration::max();
  Clock::duration last = Clock::duration::zero();
  std::map<std::string, int> per_kind;
  for (const Outcome* o : outstanding) {
    EXPECT_EQ(o->calls.load(), 1) << kind_name(o->kind);
    // Clamped: an error may beat the reaping of the victim by a hair.
    const auto took = std::max(o->at - killed_at, Clock::duration::zero());
    first = std::min(first, took);
    last = std::max(last, took);
    ++per_kind[std::string(kind_name(o->kind)) + " " + std::string(errc_name(o->code))];
  }
  if (outstanding.empty()) first = Clock::duration::zero();
  // On verbs the target's NIC (here rxe in its kernel) accepts WRITEs and
  // SENDs into posted buffers while its process is stopped: requests delivered
  // before the kill rightly succeed. Elsewhere the peer's process does the
  // receiving, so nothing can succeed once it is stopped.
  if (!one_sided_delivery(provider())) {
    EXPECT_EQ(per_kind.count("send ok") + per_kind.count("single ok") +
                  per_kind.count("paged ok") + per_kind.count("scatter ok"),
              0u)
        << "requests to the killed peer completed successfully after the kill: "
        << summary(per_kind);
  }
  EXPECT_LE(last, bound) << "the last request to the killed peer failed " << ms(last)
                         << " ms after the kill; request_timeout is " << kRequestTimeout.count()
                         << " ms";
  const std::string breakdown = summary(per_kind);
  const std::string before = summary(done_before_kill);
  std::printf("[peer-death] provider=%s request_timeout=%lld ms outstanding_at_kill=%zu/%zu "
              "first_error=%lld ms last_error=%lld ms live_write_across_kill=%s after %lld ms "
              "live_rounds_during_outage=%d errors: %s; done before kill: %s\n",
              provider().c_str(), static_cast<long long>(kRequestTimeout.count()),
              outstanding.size(), outcomes.size(), static_cast<long long>(ms(first)),
              static_cast<long long>(ms(last)), provider_wedged.empty() ? "ok" : "FAILED",
              static_cast<long long>(across_ms), live_rounds_during_outage, breakdown.c_str(),
              before.empty() ? "none" : before.c_str());
  std::fflush(stdout);
  RecordProperty("outstanding_at_kill", static_cast<int>(outstanding.size()));
  RecordProperty("first_error_ms", static_cast<int>(ms(first)));
  RecordProperty("last_error_ms", static_cast<int>(ms(last)));
  RecordProperty("live_write_across_kill_ms", static_cast<int>(across_ms));
  RecordProperty("live_rounds_during_outage", live_rounds_during_outage);
  RecordProperty("errors", breakdown);

  // The engine still serves: a new write (and send) to the live peer.
  if (provider_wedged.empty()) {
    auto written = writer.write(0, 0xaf7e0001);
    if (!written && provider() == "shm") {
      provider_wedged = written.message();
    } else {
      ASSERT_TRUE(written);
      ASSERT_TRUE(writer.verify());
    }
  }
  if (!provider_wedged.empty()) {
    // libfabric 1.17's shm retires completions in the order of one response
    // queue per endpoint (ofiwg/libfabric#9853): a WRITE whose target died
    // before answering holds back every later non-inline completion, to any
    // peer, until the endpoint is closed. The requests above all failed in
    // bounded time; serving other peers afterwards is what shm cannot do.
    record_expected_failure(
        "shm", "after the peer died, a 64 KiB write to a live peer never completed (" +
                   provider_wedged + "); the dead peer's " + std::to_string(outstanding.size()) +
                   " requests did fail within " + std::to_string(ms(last)) + " ms");
    EXPECT_TRUE(writer.reported()) << "the live write and send the wedged endpoint holds";
    return;
  }


  // A restarted peer (new process, new address) is reachable at once.
  ASSERT_TRUE(restarted.start());
  ASSERT_TRUE(restarted.connect());
  EXPECT_NE(restarted.addr().instance_id(), victim.addr().instance_id());
  const auto reach_begin = Clock::now();
  SingleWrite w;
  w.length = kSlot;
  w.imm = kImm;
  w.src = {reg->handle, 3 * kSlot};
  w.dst = {restarted.dst(), 7 * kSlot};
  auto flag = std::make_shared<CompletionFlag>();
  ASSERT_OK(engine->submit_single_write(w, flag));
  ASSERT_OK(flag->wait(kWait));
  const auto reach_ms = ms(Clock::now() - reach_begin);
  auto r = restarted.round(1, 0);
  ASSERT_TRUE(r.has_value());
  ASSERT_OK(r->status);
  std::vector<std::byte> expected(kRegion);
  std::copy_n(src.begin() + 3 * kSlot, kSlot, expected.begin() + 7 * kSlot);
  EXPECT_BYTES_EQUAL(r->region, expected);
  std::printf("[peer-death] provider=%s restarted peer: first write completed in %lld ms\n",
              provider().c_str(), static_cast<long long>(reach_ms));
  RecordProperty("restarted_first_write_ms", static_cast<int>(reach_ms));

  EXPECT_TRUE(live.finish());
  EXPECT_TRUE(restarted.finish());
}

// ---------------------------------------------------------------- a dying writer

enum class WriterMode : std::uint8_t { stream, once };
constexpr std::uint32_t kStreamImm = 0x57ea;
constexpr std::uint32_t kAfterImm = 0xaf7e;
constexpr std::uint64_t kAfterSeed = 0xaf7e5eed;

// `stream`: writes and sends into the parent until killed. `once`: on
// "start", writes kAfterSeed's bytes with kAfterImm and sends them too, then
// reports both outcomes and waits for "quit".
int writer_main(Channel& ch, const EngineConfig& config, WriterMode mode) {
  if (mode == WriterMode::once) {
    CHILD_REQUIRE(ch.expect("start", std::chrono::seconds(90)), ch.last_error());
  }
  std::vector<std::byte> src(kRegion);
  test::fill_random(src, mode == WriterMode::once ? kAfterSeed : 0x51);
  auto engine = child_engine(config);
  CHILD_REQUIRE(engine != nullptr, "writer engine");
  auto reg = engine->reg_mr(src.data(), src.size());
  CHILD_REQUIRE_OK(reg.status());
  auto dst = ch.recv_desc(kWait);
  CHILD_REQUIRE(dst.has_value(), ch.last_error());

  if (mode == WriterMode::once) {
    SingleWrite w;
    w.length = kSlot;
    w.imm = kAfterImm;
    w.src = {reg->handle, 0};
    w.dst = {*dst, 0};
    auto flag = std::make_shared<CompletionFlag>();
    CHILD_REQUIRE_OK(engine->submit_single_write(w, flag));
    auto sent = std::make_shared<CompletionFlag>();
    CHILD_REQUIRE_OK(engine->submit_send(dst->owner(), std::span(src).first(1000), sent));
    CHILD_REQUIRE(ch.send_status(flag->wait(kWait)), ch.last_error());
    CHILD_REQUIRE(ch.send_status(sent->wait(kWait)), ch.last_error());
    CHILD_REQUIRE(ch.expect("quit", std::chrono::seconds(90)), ch.last_error());
    engine->stop();
    return test::kChildOk;
  }

  auto counter = std::make_shared<CompletionCounter>();
  std::uint64_t submitted = 0;
  bool announced = false;
  // Bounded by the child's alarm(); the parent kills it long before.
  for (std::uint64_t i = 0;; ++i) {
    // A window keeps the stream from piling up unbounded work.
    while (submitted - counter->completed() > 64) std::this_thread::yield();
    SingleWrite w;
    w.length = kSlot;
    w.imm = kStreamImm;
    w.src = {reg->handle, (i % 16) * kSlot};
    w.dst = {*dst, ((i + 3) % 8) * kSlot};
    CHILD_REQUIRE_OK(test::submit_with_retry([&] { return engine->submit_single_write(w, counter); }));
    CHILD_REQUIRE_OK(test::submit_with_retry(
        [&] { return engine->submit_send(dst->owner(), std::span(src).first(512), counter); }));
    submitted += 2;
    if (!announced && counter->completed() >= 32) {
      CHILD_REQUIRE(ch.send_string("streaming"), ch.last_error());
      announced = true;
    }
  }
}

TEST_P(PeerDeathTest, AWriterKilledMidStreamLeavesItsTargetHealthy) {
  const EngineConfig cfg = death_config(provider());
  auto stream = test::spawn_child([cfg](Channel& ch) { return writer_main(ch, cfg, WriterMode::stream); },
                                  kChildLifetime);
  auto after = test::spawn_child([cfg](Channel& ch) { return writer_main(ch, cfg, WriterMode::once); },
                                 kChildLifetime);

  ASSERT_ENGINE(engine, cfg);
  // Half for the stream, half for the writer that comes after it.
  std::vector<std::byte> region(kRegion);
  std::vector<std::byte> after_region(kSlot);
  test::WaitableCount messages;
  std::atomic<std::uint64_t> after_digest{0};
  const auto after_message = test::random_bytes(kSlot, kAfterSeed);
  const StopGuard stop_guard(engine.get());
  ASSERT_OK(engine->submit_recvs(cfg.max_message_size, 64, [&](std::span<const std::byte> m) {
    if (m.size() == 1000) after_digest.store(fnv1a(m));
    messages.add();
  }));
  auto reg = engine->reg_mr(region.data(), region.size());
  ASSERT_OK(reg);
  auto after_reg = engine->reg_mr(after_region.data(), after_region.size());
  ASSERT_OK(after_reg);
  auto stream_imms = engine->imm_counter(kStreamImm);
  ASSERT_OK(stream_imms);
  auto after_imms = engine->imm_counter(kAfterImm);
  ASSERT_OK(after_imms);

  ASSERT_TRUE(stream.channel().send_desc(reg->desc));
  ASSERT_TRUE(stream.channel().expect("streaming", kWait)) << stream.channel().last_error();
  ASSERT_OK((*stream_imms)->wait(16, kWait));
  ASSERT_TRUE(messages.wait_for(16, kWait));
  const auto exit = stream.kill();
  ASSERT_EQ(exit.kind, test::ChildExit::Kind::signaled) << exit.to_string();
  const auto messages_at_kill = messages.value();

  // A new writer right away: its write and send land exactly, the counters count.
  const auto begin = Clock::now();
  ASSERT_TRUE(after.channel().send_string("start"));
  ASSERT_TRUE(after.channel().send_desc(after_reg->desc));
  auto write_status = after.channel().recv_status(kWait + kWait);
  ASSERT_TRUE(write_status.has_value()) << after.channel().last_error();
  if (!write_status->ok() && provider() == "shm") {
    // libfabric 1.17's shm: a writer killed in the middle of a transfer can
    // leave the target's endpoint unable to serve anyone else (the receiving
    // side of ofiwg/libfabric#9853), or hold the lock of this engine's shm
    // region that the next writer's post must take (docs/reliability.md#shm-locks):
    // then that writer's worker waits in the provider and not even its
    // request_timeout is kept. Seen in 3 of about 18 runs here.
    record_expected_failure("shm", "after a writer was killed mid-stream, the next writer's "
                                   "write to this engine did not complete (" +
                                       write_status->to_string() + ")");
    return;
  }
  EXPECT_OK(*write_status);
  auto send_status = after.channel().recv_status(kWait);
  ASSERT_TRUE(send_status.has_value()) << after.channel().last_error();
  EXPECT_OK(*send_status);
  ASSERT_OK((*after_imms)->wait_and_consume(1, kWait));
  EXPECT_BYTES_EQUAL(after_region, std::span(after_message).first(kSlot));
  ASSERT_TRUE(poll_until([&] { return after_digest.load() != 0; }, Clock::now() + kWait));
  EXPECT_EQ(after_digest.load(), fnv1a(std::span(after_message).first(1000)));
  std::printf("[peer-death] provider=%s writer killed after %llu messages; the next writer was "
              "served in %lld ms\n",
              provider().c_str(), static_cast<unsigned long long>(messages_at_kill),
              static_cast<long long>(ms(Clock::now() - begin)));
  EXPECT_TRUE(after.channel().send_string("quit"));
  const auto after_exit = after.wait_exit(kWait);
  EXPECT_TRUE(after_exit.ok()) << after_exit.to_string();

  // A dead writer leaves nothing that holds stop() up.
  const auto stop_begin = Clock::now();
  engine->stop();
  EXPECT_LE(Clock::now() - stop_begin, cfg.drain_timeout + kMargin);
}

// ---------------------------------------------------------------- stop()

// `kill_first`: SIGKILL the frozen victim, then stop(). Otherwise stop() runs
// while it is frozen (then it is killed): on the IP providers a kill is
// noticed at once and leaves nothing outstanding, a frozen peer keeps every
// request outstanding for stop() to settle.
void stop_with_work_outstanding(const std::string& provider, bool kill_first) {
  EngineConfig cfg = death_config(provider);
  // Far beyond the test: only stop() may settle the requests.
  cfg.request_timeout = std::chrono::seconds(60);
  Peer victim(frozen_victim_config(cfg), false);

  ASSERT_ENGINE(engine, cfg);
  std::vector<std::byte> src(kRegion);
  test::fill_random(src, 0x570);
  Outcomes outcomes;
  const StopGuard stop_guard(engine.get());
  auto reg = engine->reg_mr(src.data(), src.size());
  ASSERT_OK(reg);
  ASSERT_TRUE(victim.connect());
  std::uint64_t messages = 0;
  ASSERT_TRUE(warm_up(*engine, reg->handle, victim, messages));

  ASSERT_EQ(::kill(victim.process().pid(), SIGSTOP), 0);
  ASSERT_TRUE(submit_mix(*engine, reg->handle, victim.dst(), outcomes));
  settle(outcomes, std::chrono::milliseconds(50), std::chrono::milliseconds(1000));
  std::size_t outstanding = 0;
  std::map<const Outcome*, bool> was_done;
  for (const auto& o : outcomes) {
    was_done[o.get()] = o->done.load();
    outstanding += was_done[o.get()] ? 0 : 1;
  }
  if (kill_first) (void)victim.process().kill();

  const auto begin = Clock::now();
  engine->stop();
  const auto took = Clock::now() - begin;
  if (!kill_first) (void)victim.process().kill();
  EXPECT_LE(took, cfg.drain_timeout + kMargin)
      << "stop() took " << ms(took) << " ms with " << outstanding << " requests outstanding";
  // Callbacks run on the callback thread, which stop() joins: all are in.
  std::map<std::string, int> per_kind;
  for (const auto& o : outcomes) {
    EXPECT_EQ(o->calls.load(), 1) << kind_name(o->kind) << " delivered " << o->calls.load()
                                  << " times";
    if (!was_done[o.get()]) {
      ++per_kind[std::string(kind_name(o->kind)) + " " + std::string(errc_name(o->code))];
      // A frozen peer is alive: what its kernel or shared memory took during
      // stop()'s drain may rightly complete. A killed one can take nothing.
      if (kill_first && !one_sided_delivery(provider)) {
        EXPECT_FALSE(o->ok) << kind_name(o->kind) << " outstanding to a dead peer at stop() "
                            << "reported success";
      }
    }
  }
  std::printf("[peer-death] provider=%s stop() with %zu of %zu requests outstanding to a %s "
              "peer took %lld ms; they ended: %s\n",
              provider.c_str(), outstanding, outcomes.size(), kill_first ? "killed" : "frozen", static_cast<long long>(ms(took)),
              summary(per_kind).c_str());
  ::testing::Test::RecordProperty("stop_ms", static_cast<int>(ms(took)));
  ::testing::Test::RecordProperty("outstanding_at_stop", static_cast<int>(outstanding));
  engine->stop();
  std::this_thread::sleep_for(kQuiet);  // a negative check: nothing more may arrive
  for (const auto& o : outcomes) EXPECT_EQ(o->calls.load(), 1);
}

TEST_P(PeerDeathTest, StopWithWorkOutstandingToAKilledPeerSettlesEverythingInBoundedTime) {
  stop_with_work_outstanding(provider(), true);
}

TEST_P(PeerDeathTest, StopWithWorkOutstandingToAFrozenPeerSettlesEverythingInBoundedTime) {
  stop_with_work_outstanding(provider(), false);
}

FABRIC_INSTANTIATE_PROVIDERS(PeerDeathTest);

}  // namespace
}  // namespace fabric::conformance
