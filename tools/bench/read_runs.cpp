#include "read_runs.hpp"

#include <fmt/format.h>

#include <chrono>
#include <stdexcept>

#include "raw/poller.hpp"
#include "window.hpp"

namespace bench {

namespace {
using namespace std::chrono_literals;
}  // namespace

Figures engine_reads(Side& s, const Peer& peer, const WriteRound& r) {
  const bool paged = r.pages != 0;
  fabric::SingleRead single;
  single.length = r.size;
  single.src = {peer.eng_buf, 0};
  single.dst = {s.eng_buf.handle, 0};
  fabric::PagedRead pages;
  if (paged) {
    pages.page_length = r.size;
    pages.src = peer.eng_buf;
    pages.dst = s.eng_buf.handle;
    pages.src_pages.stride = pages.dst_pages.stride = r.size;
    pages.src_pages.indices = dst_page_order(r.pages);
    pages.dst_pages.indices.resize(r.pages);
    for (std::uint32_t i = 0; i < r.pages; ++i) pages.dst_pages.indices[i] = i;
  }
  const std::uint64_t start = now_ns();
  std::vector<std::uint64_t> lat =
      run_windows(r.count, r.window, r.threads, "engine read", [&](const auto& flag) {
        return paged ? s.engine->submit_paged_reads(pages, flag)
                     : s.engine->submit_single_read(single, flag);
      });
  const std::uint64_t elapsed = now_ns() - start;
  return summarize(lat, r.count * r.size * (paged ? r.pages : 1), elapsed);
}

Figures raw_reads(Side& s, const Peer& peer, Link& link, const WriteRound& r) {
  const bool paged = r.pages != 0;
  const std::uint32_t per_batch = paged ? r.pages : 1;
  const std::uint64_t reads = r.count * per_batch;
  // As raw_writes: single reads `window` deep; pages as deep as the provider's queue.
  const std::size_t depth =
      paged ? std::min<std::size_t>(s.raw->tx_depth(), std::size_t{r.window} * r.pages) : r.window;
  std::vector<raw::OpSlot> slots(depth);
  std::vector<raw::OpSlot*> free_slots;
  for (auto& sl : slots) free_slots.push_back(&sl);
  struct Batch {
    std::uint64_t t0 = 0;
    std::uint32_t left = 0;
  };
  std::vector<Batch> batches(r.count);
  const std::vector<std::uint32_t> order =
      paged ? dst_page_order(r.pages) : std::vector<std::uint32_t>{0};

  link.send("raw_wait 1");  // the target polls until the closing write below
  link.expect("ready", 30s);
  std::vector<std::uint64_t> lat;
  lat.reserve(r.count);
  std::uint64_t posted = 0, stray = 0;
  raw::Poller poller(std::chrono::nanoseconds(120s).count());
  auto done = [&](raw::OpSlot* slot) {
    Batch& b = batches[slot->tag];
    if (--b.left == 0) lat.push_back(now_ns() - b.t0);
    free_slots.push_back(slot);
  };
  const std::uint64_t start = now_ns();
  while (lat.size() < r.count) {
    while (posted < reads && !free_slots.empty()) {
      const std::uint64_t batch = posted / per_batch;
      const std::uint32_t page = static_cast<std::uint32_t>(posted % per_batch);
      if (page == 0 && batch >= lat.size() + r.window) break;
      raw::OpSlot* slot = free_slots.back();
      slot->tag = static_cast<std::uint32_t>(batch);
      if (page == 0) batches[batch] = {now_ns(), per_batch};
      const std::uint64_t from = paged ? std::uint64_t{order[page]} * r.size : 0;
      const std::uint64_t into = paged ? std::uint64_t{page} * r.size : 0;
      if (!s.raw->read(s.buf.data + into, r.size, s.raw_buf.desc, peer.raw_addr,
                       peer.raw_buf.addr + from, peer.raw_buf.key, &slot->ctx)) {
        break;
      }
      free_slots.pop_back();
      ++posted;
    }
    poller.drain(*s.raw, kDataImm, stray, done);
  }
  const std::uint64_t elapsed = now_ns() - start;
  // Releases the target's wait: one immediate-only write, then its "done".
  raw::OpSlot closing;
  bool closed = false;
  while (!s.raw->write(s.imm_buf.data, 0, s.raw_imm.desc, kDataImm, peer.raw_addr,
                       peer.raw_imm.addr, peer.raw_imm.key, &closing.ctx)) {
    poller.drain(*s.raw, kDataImm, stray, [&](raw::OpSlot*) { closed = true; });
  }
  while (!closed) poller.drain(*s.raw, kDataImm, stray, [&](raw::OpSlot*) { closed = true; });
  link.expect("done", 120s);
  return summarize(lat, reads * r.size, elapsed);
}

}  // namespace bench
