// The raw baseline's rounds: the same patterns as engine_runs.cpp, posted
// straight to the endpoint from this thread with a busy-polled CQ.

#include <fmt/format.h>

#include <array>
#include <chrono>
#include <stdexcept>

#include "raw/poller.hpp"
#include "runs.hpp"

namespace bench {

namespace {

using namespace std::chrono_literals;
using raw::Poller;

struct Batch {
  std::uint64_t t0 = 0;
  std::uint32_t left = 0;
};

}  // namespace

Figures raw_writes(Side& s, const Peer& peer, Link& link, const WriteRound& r) {
  const bool paged = r.pages != 0;
  const std::uint32_t per_batch = paged ? r.pages : 1;
  const std::uint64_t writes = r.count * per_batch;
  // Single writes: `window` writes deep, like the engine's requests. Pages:
  // as deep as the provider's queue, which is what the engine's worker does.
  const std::size_t depth =
      paged ? std::min<std::size_t>(s.raw->tx_depth(), std::size_t{r.window} * r.pages) : r.window;
  std::vector<raw::OpSlot> slots(depth);
  std::vector<raw::OpSlot*> free_slots;
  for (auto& sl : slots) free_slots.push_back(&sl);
  std::vector<Batch> batches(r.count);
  const std::vector<std::uint32_t> order = paged ? dst_page_order(r.pages) : std::vector<std::uint32_t>{0};

  link.send(fmt::format("raw_wait {}", writes));
  link.expect("ready", 30s);

  std::vector<std::uint64_t> lat;
  lat.reserve(r.count);
  std::uint64_t posted = 0, stray = 0;
  Poller poller(std::chrono::nanoseconds(120s).count());
  const std::uint64_t start = now_ns();
  auto done = [&](raw::OpSlot* slot) {
    Batch& b = batches[slot->tag];
    if (--b.left == 0) lat.push_back(now_ns() - b.t0);
    free_slots.push_back(slot);
  };
  while (lat.size() < r.count) {
    while (posted < writes && !free_slots.empty()) {
      const std::uint64_t batch = posted / per_batch;
      const std::uint32_t page = static_cast<std::uint32_t>(posted % per_batch);
      // Batches in flight are bounded by the window too.
      if (page == 0 && batch >= lat.size() + r.window) break;
      raw::OpSlot* slot = free_slots.back();
      slot->tag = static_cast<std::uint32_t>(batch);
      if (page == 0) batches[batch] = {now_ns(), per_batch};
      const std::uint64_t src = paged ? std::uint64_t{page} * r.size : 0;
      const std::uint64_t dst = paged ? std::uint64_t{order[page]} * r.size : 0;
      const std::uint64_t call = r.post_call_ns != nullptr ? now_ns() : 0;
      if (!s.raw->write(s.buf.data + src, r.size, s.raw_buf.desc, kDataImm, peer.raw_addr,
                       peer.raw_buf.addr + dst, peer.raw_buf.key, &slot->ctx)) {
        break;
      }
      if (r.post_call_ns != nullptr) r.post_call_ns->push_back(now_ns() - call);
      free_slots.pop_back();
      ++posted;
    }
    poller.drain(*s.raw, kDataImm, stray, done);
  }
  link.expect("done", 120s);
  const std::uint64_t elapsed = now_ns() - start;
  return summarize(lat, writes * r.size, elapsed);
}

Figures raw_imm_rtt(Side& s, const Peer& peer, Link& link, std::uint64_t count) {
  link.send(fmt::format("raw_pong {}", count));
  link.expect("ready", 30s);
  std::array<raw::OpSlot, 64> slots{};
  std::vector<std::uint64_t> lat;
  lat.reserve(count);
  std::uint64_t posted = 0, completed = 0, pongs = 0;
  Poller poller(std::chrono::nanoseconds(120s).count());
  auto done = [&](raw::OpSlot*) { ++completed; };
  const std::uint64_t start = now_ns();
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::uint64_t t0 = now_ns();
    raw::OpSlot& slot = slots[posted % slots.size()];
    while (!s.raw->write(s.imm_buf.data, 0, s.raw_imm.desc, kPing, peer.raw_addr,
                        peer.raw_imm.addr, peer.raw_imm.key, &slot.ctx)) {
      poller.drain(*s.raw, kPong, pongs, done);
    }
    ++posted;
    while (pongs <= i) poller.drain(*s.raw, kPong, pongs, done);
    lat.push_back(now_ns() - t0);
  }
  const std::uint64_t elapsed = now_ns() - start;
  while (completed < posted) poller.drain(*s.raw, kPong, pongs, done);
  link.expect("done", 30s);
  return summarize(lat, 0, elapsed);
}

}  // namespace bench
