#include "target.hpp"

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <memory>
#include <optional>
#include <span>
#include <chrono>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "pattern.hpp"
#include "runs.hpp"
#include "stats.hpp"
#include "window.hpp"

namespace bench {

namespace {

using namespace std::chrono_literals;
constexpr auto kRoundLimit = 120s;
constexpr auto kCommandLimit = 300s;

void must(const fabric::Status& st, const char* what) {
  if (!st.ok()) throw std::runtime_error(fmt::format("{}: {}", what, st.to_string()));
}

// Busy-polls the raw CQ until `want` immediates equal to `imm` have arrived;
// our own send completions (pongs) are counted into `tx_done`.
void raw_count(Side& s, std::uint32_t imm, std::uint64_t want, std::uint64_t& tx_done) {
  std::array<fi_cq_data_entry, 64> ev{};
  std::uint64_t got = 0;
  const std::uint64_t deadline = now_ns() + std::chrono::nanoseconds(kRoundLimit).count();
  std::uint32_t spins = 0;
  // At least one poll even for want == 0: that is how pong completions drain.
  do {
    const std::size_t n = s.raw->poll(ev.data(), ev.size());
    for (std::size_t i = 0; i < n; ++i) {
      if ((ev[i].flags & FI_REMOTE_CQ_DATA) != 0 && (ev[i].flags & FI_WRITE) == 0) {
        if (ev[i].data == imm) ++got;
      } else {
        ++tx_done;
      }
    }
    // Pure busy polling, as ib_write_bw's and fi_rma_bw's targets do; on
    // shm this thread also performs the copies (the target drives progress).
    if (n == 0 && ++spins % 4096 == 0 && now_ns() > deadline) {
      throw std::runtime_error(fmt::format("raw: {} of {} immediates in time", got, want));
    }
  } while (got < want);
}

void raw_pong(Side& s, const Peer& peer, std::uint64_t rounds) {
  std::array<raw::OpSlot, 64> slots{};
  std::uint64_t posted = 0, tx_done = 0;
  for (std::uint64_t i = 0; i < rounds; ++i) {
    raw_count(s, kPing, 1, tx_done);
    raw::OpSlot& slot = slots[posted % slots.size()];
    while (!s.raw->write(s.imm_buf.data, 0, s.raw_imm.desc, kPong, peer.raw_addr,
                        peer.raw_imm.addr, peer.raw_imm.key, &slot.ctx)) {
      raw_count(s, kPing, 0, tx_done);
    }
    ++posted;
  }
  // Our last pongs must be finished before the next command reuses slots.
  const std::uint64_t deadline = now_ns() + std::chrono::nanoseconds(kRoundLimit).count();
  while (tx_done < posted) {
    raw_count(s, kPing, 0, tx_done);
    if (now_ns() > deadline) throw std::runtime_error("raw: pong completions missing");
  }
}

// Counts engine SENDs; checksums only the message that completes a round, so
// the receive path is measured, not the checksum.
struct Receiver {
  std::atomic<std::uint64_t> got{0};
  std::atomic<std::uint64_t> mark{0};
  std::atomic<std::uint64_t> mark_sum{0};

  void on_message(std::span<const std::byte> m) {
    const std::uint64_t n = got.fetch_add(1, std::memory_order_acq_rel) + 1;
    if (n == mark.load(std::memory_order_acquire)) {
      mark_sum.store(checksum(m.data(), m.size()), std::memory_order_release);
    }
  }
};

}  // namespace

int run_target(const SideConfig& cfg, Link& link) {
  Side s(cfg);
  link.send(s.hello());
  Peer peer = Peer::parse(link.recv(60s));
  if (s.raw) peer.raw_addr = s.raw->insert_peer(peer.raw_name);
  Receiver recv;
  // sendrecv_addressed: a second engine like ours that receives on a channel (an engine receives
  // either raw or on channels), opened on the first chan_open so other sweeps pay nothing.
  Receiver chan_recv;
  std::unique_ptr<fabric::TransferEngine> chan_engine;
  std::optional<fabric::Channel> chan;
  must(s.engine->submit_recvs(s.engine->config().max_message_size, 64,
                              [&recv](std::span<const std::byte> m) { recv.on_message(m); }),
       "submit_recvs");
  link.send("ok");
  std::uint64_t stray_tx = 0;

  while (true) {
    std::istringstream cmd(link.recv(kCommandLimit));
    std::string verb;
    std::uint64_t a = 0, b = 0;
    cmd >> verb >> a >> b;
    if (verb == "bye") break;
    if (verb == "eng_wait") {
      link.send("ready");
      // The engine's own wait (spin, yield, then 20 us sleeps), as an application would
      // wait for a round of writes: a yield loop here took CPU from the target's worker, which
      // is the thread that reads tcp's bytes off the socket (2 CPUs, 4 busy threads).
      must(s.data_counter->wait_and_consume(a, kRoundLimit), "engine immediates");
      link.send("done");
    } else if (verb == "raw_wait") {
      link.send("ready");
      raw_count(s, kDataImm, a, stray_tx);
      link.send("done");
    } else if (verb == "eng_bidir") {
      // a writes of b bytes each way; this side's from (and the initiator's
      // into) the upper half, the initiator's into our lower half.
      std::uint64_t window = 0, back_at = 0;
      cmd >> window >> back_at;
      const std::uint64_t src_at = bidir_offset(s.buf.size);
      if (!cmd || window == 0 || b > src_at || b > back_at) {
        throw std::runtime_error(fmt::format(
            "eng_bidir: {} B does not fit half of this side's {} B buffer (start the server "
            "with --bidir)", b, s.buf.size));
      }
      fill_pattern(s.buf.data + src_at, b, a ^ (b << 20) ^ 0xb1d1);
      fabric::SingleWrite w;
      w.length = b;
      w.imm = kDataImm;
      w.src = {s.eng_buf.handle, src_at};
      w.dst = {peer.eng_buf, back_at};
      link.send("ready");
      const std::uint64_t start = now_ns();
      (void)run_window(a, window, "target write (bidir)", [&](const auto& flag) {
        return s.engine->submit_single_write(w, flag);
      });
      const std::uint64_t elapsed = now_ns() - start;
      must(spin_consume(*s.data_counter, a, kRoundLimit), "engine immediates (bidir)");
      link.send(fmt::format("done {} {:x}", elapsed, checksum(s.buf.data + src_at, b)));
    } else if (verb == "sum") {
      if (a + b > s.buf.size) throw std::runtime_error("sum outside the buffer");
      link.send(fmt::format("sum {:x}", checksum(s.buf.data + a, b)));
    } else if (verb == "eng_pong") {
      // b: the initiator's --imm-wait (1: progress the engine while waiting).
      fabric::TransferEngine* progress = b != 0 ? s.engine.get() : nullptr;
      link.send("ready");
      for (std::uint64_t i = 0; i < a; ++i) {
        must(spin_consume(*s.ping_counter, 1, kRoundLimit, progress), "waiting for a ping");
        must(s.engine->submit_imm(kPong, peer.eng_imm, fabric::OnDone{}), "pong");
      }
      link.send("done");
    } else if (verb == "chan_open") {
      if (!chan_engine) {
        auto created = fabric::TransferEngine::create(s.engine->config());
        must(created.status(), "the channel engine");
        chan_engine = std::move(created).value();
        auto opened = chan_engine->channel(
            "bench", [&chan_recv](const fabric::ChannelMessage& m) { chan_recv.on_message(m.data); });
        must(opened.status(), "channel 'bench'");
        chan.emplace(std::move(opened).value());
      }
      link.send("chan " + chan_engine->main_address().to_string());
    } else if (verb == "eng_recv" || verb == "chan_recv") {
      Receiver& rx = verb == "eng_recv" ? recv : chan_recv;
      if (verb == "chan_recv" && !chan) throw std::runtime_error("chan_recv before chan_open");
      const std::uint64_t goal = rx.got.load() + a;
      rx.mark_sum.store(0);
      rx.mark.store(goal);
      link.send("ready");
      const std::uint64_t deadline = now_ns() + std::chrono::nanoseconds(kRoundLimit).count();
      while (rx.got.load(std::memory_order_acquire) < goal || rx.mark_sum.load() == 0) {
        if (now_ns() > deadline) throw std::runtime_error("engine: messages missing");
        std::this_thread::yield();
      }
      link.send(fmt::format("done {:x}", rx.mark_sum.load()));
    } else if (verb == "raw_pong") {
      link.send("ready");
      raw_pong(s, peer, a);
      link.send("done");
    } else {
      throw std::runtime_error("unknown command: " + verb);
    }
  }
  return 0;
}

}  // namespace bench
