#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "pattern.hpp"
#include "runs.hpp"
#include "window.hpp"

namespace bench {

namespace {

using namespace std::chrono_literals;

void must(const fabric::Status& st, const char* what) {
  if (!st.ok()) throw std::runtime_error(fmt::format("{}: {}", what, st.to_string()));
}

fabric::PagedWrite paged_request(const WriteEngine& e, const Peer& peer, const WriteRound& r) {
  fabric::PagedWrite w;
  w.page_length = r.size;
  w.imm = kDataImm;
  w.src = e.buf;
  w.dst = peer.eng_buf;
  w.src_pages.stride = w.dst_pages.stride = r.size;
  w.src_pages.indices.resize(r.pages);
  for (std::uint32_t i = 0; i < r.pages; ++i) w.src_pages.indices[i] = i;
  w.dst_pages.indices = dst_page_order(r.pages);
  return w;
}

}  // namespace

std::vector<std::uint32_t> dst_page_order(std::uint32_t pages) {
  std::vector<std::uint32_t> out(pages);
  constexpr std::uint64_t kStride = 7919;  // prime: coprime with every page count but its multiples
  const bool coprime = pages % kStride != 0;
  for (std::uint32_t i = 0; i < pages; ++i) {
    out[i] = coprime ? static_cast<std::uint32_t>((i * kStride) % pages) : pages - 1 - i;
  }
  return out;
}

Figures engine_writes(Side& s, const Peer& peer, Link& link, const WriteRound& r) {
  return engine_writes(s.metered(), peer, link, r);
}

Figures engine_writes(const WriteEngine& e, const Peer& peer, Link& link, const WriteRound& r) {
  const std::uint64_t imms_per_op = r.pages == 0 ? 1 : r.pages;
  fabric::SingleWrite single;
  single.length = r.size;
  single.imm = kDataImm;
  single.src = {e.buf, 0};
  single.dst = {peer.eng_buf, 0};
  const fabric::PagedWrite paged = r.pages == 0 ? fabric::PagedWrite{} : paged_request(e, peer, r);
  // --groups: group g's copy of the buffer into the peer's group g, the groups in turn.
  std::vector<fabric::SingleWrite> by_group{single};
  const auto& group_bufs = *e.group_bufs;
  for (std::size_t g = 0; g < group_bufs.size() && g < peer.group_bufs.size(); ++g) {
    by_group.push_back(single);
    by_group.back().src = {group_bufs[g].handle, 0};
    by_group.back().dst = {peer.group_bufs[g], 0};
  }
  std::atomic<std::uint64_t> next{0};

  link.send(fmt::format("eng_wait {}", r.count * imms_per_op));
  link.expect("ready", 30s);

  const std::uint64_t start = now_ns();
  std::vector<std::uint64_t> lat =
      run_windows(r.count, r.window, r.threads, "engine write", [&](const auto& flag) {
        if (r.pages != 0) return e.engine->submit_paged_writes(paged, flag);
        const std::uint64_t i = next.fetch_add(1, std::memory_order_relaxed);
        return e.engine->submit_single_write(by_group[i % by_group.size()], flag);
      });
  link.expect("done", 120s);
  const std::uint64_t elapsed = now_ns() - start;
  return summarize(lat, r.count * r.size * imms_per_op, elapsed);
}

BidirFigures engine_bidir_writes(Side& s, const Peer& peer, Link& link, const WriteRound& r) {
  const std::uint64_t back_at = bidir_offset(s.buf.size);
  if (r.size > back_at) {
    throw std::runtime_error(fmt::format("--bidir: {} B does not fit half of the {} B buffer",
                                         r.size, s.buf.size));
  }
  fabric::SingleWrite single;
  single.length = r.size;
  single.imm = kDataImm;
  single.src = {s.eng_buf.handle, 0};
  single.dst = {peer.eng_buf, 0};
  // Cleared first, so a round whose writes did not land cannot pass on the
  // bytes of the one before.
  std::memset(s.buf.data + back_at, 0, r.size);
  // The target fills its source, then says ready and starts writing; ours
  // start as soon as we read that, so the two directions overlap.
  link.send(fmt::format("eng_bidir {} {} {} {}", r.count, r.size, r.window, back_at));
  link.expect("ready", 30s);
  const std::uint64_t start = now_ns();
  std::vector<std::uint64_t> lat =
      run_windows(r.count, r.window, r.threads, "engine write (bidir)", [&](const auto& flag) {
        return s.engine->submit_single_write(single, flag);
      });
  const std::uint64_t out_ns = now_ns() - start;
  must(spin_consume(*s.data_counter, r.count, 120s), "the target's writes");
  std::istringstream done(link.expect("done", 120s));
  std::string word, sum;
  std::uint64_t in_ns = 0;
  done >> word >> in_ns >> sum;
  BidirFigures f;
  f.out = summarize(lat, r.count * r.size, out_ns);
  std::vector<std::uint64_t> none;
  f.in = summarize(none, r.count * r.size, in_ns);
  f.in.ops = r.count;
  f.in.ops_per_s = in_ns > 0 ? static_cast<double>(r.count) / (static_cast<double>(in_ns) / 1e9) : 0;
  f.verified = sum == fmt::format("{:x}", checksum(s.buf.data + back_at, r.size));
  return f;
}

Figures engine_sends(Side& s, const Peer& peer, Link& link, const WriteRound& r,
                     bool& verified, const ChannelRoute* via) {
  const fabric::NetAddr& to = peer.eng_buf.owner();
  const std::span<const std::byte> msg(s.buf.data, r.size);
  link.send(fmt::format("{} {}", via != nullptr ? "chan_recv" : "eng_recv", r.count));
  link.expect("ready", 30s);
  const std::uint64_t start = now_ns();
  std::vector<std::uint64_t> lat =
      via != nullptr
          ? run_window(r.count, r.window, "channel send",
                       [&](const auto& flag) { return via->channel->send(via->to, msg, flag); })
          : run_window(r.count, r.window, "engine send",
                       [&](const auto& flag) { return s.engine->submit_send(to, msg, flag); });
  const std::string done = link.expect("done", 120s);
  const std::uint64_t elapsed = now_ns() - start;
  verified = done == fmt::format("done {:x}", checksum(s.buf.data, r.size));
  return summarize(lat, r.count * r.size, elapsed);
}

Figures engine_imm_rtt(Side& s, const Peer& peer, Link& link, std::uint64_t count,
                       bool caller_progress) {
  fabric::TransferEngine* progress = caller_progress ? s.engine.get() : nullptr;
  link.send(fmt::format("eng_pong {} {}", count, caller_progress ? 1 : 0));
  link.expect("ready", 30s);
  std::vector<std::uint64_t> lat;
  lat.reserve(count);
  const std::uint64_t start = now_ns();
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::uint64_t t0 = now_ns();
    must(s.engine->submit_imm(kPing, peer.eng_imm, fabric::OnDone{}), "ping");
    must(spin_consume(*s.pong_counter, 1, 30s, progress), "waiting for a pong");
    lat.push_back(now_ns() - t0);
  }
  const std::uint64_t elapsed = now_ns() - start;
  link.expect("done", 30s);
  return summarize(lat, 0, elapsed);
}

}  // namespace bench
