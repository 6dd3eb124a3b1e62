#include "scatter.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "raw/poller.hpp"
#include "window.hpp"

namespace bench {

namespace {

using namespace std::chrono_literals;

// Each process expects the immediates of every slice it holds.
void start_round(const std::vector<Link*>& links, const char* verb, std::size_t peers,
                 std::uint64_t count) {
  const std::size_t n = links.size();
  for (std::size_t l = 0; l < n; ++l) {
    const std::uint64_t slices = peers / n + (l < peers % n ? 1 : 0);
    links[l]->send(fmt::format("{} {}", verb, count * slices));
  }
  for (Link* l : links) l->expect("ready", 30s);
}

void finish_round(const std::vector<Link*>& links) {
  for (Link* l : links) l->expect("done", 120s);
}

std::uint64_t dst_offset(std::size_t peer, const std::vector<Link*>& links,
                         const ScatterRound& r) {
  return (peer / links.size()) * r.slice;
}

std::pair<double, double> post_percentiles(std::vector<std::uint64_t>& v) {
  Figures f = summarize(v, 0, 1);
  return {f.p50_us * 1e3, f.p99_us * 1e3};
}

}  // namespace

ScatterFigures engine_scatter(Side& s, const std::vector<Peer>& peers,
                              const std::vector<Link*>& links, fabric::PeerGroupHandle group,
                              const ScatterRound& r) {
  fabric::Scatter sc;
  sc.group = group;
  sc.src = s.eng_buf.handle;
  sc.imm = kDataImm;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    sc.slices.push_back({peers[i].eng_buf, r.slice, i * r.slice, dst_offset(i, links, r)});
  }
  start_round(links, "eng_wait", peers.size(), r.count);
  std::vector<std::uint64_t> post;
  post.reserve(r.count);
  const std::uint64_t start = now_ns();
  std::vector<std::uint64_t> lat =
      run_window(r.count, r.window, "scatter", [&](const auto& flag) {
        const std::uint64_t t0 = now_ns();
        const fabric::Status st = s.engine->submit_scatter(sc, flag);
        if (st.ok()) post.push_back(now_ns() - t0);
        return st;
      });
  finish_round(links);
  ScatterFigures out;
  out.f = summarize(lat, r.count * r.slice * peers.size(), now_ns() - start);
  std::tie(out.post_ns_p50, out.post_ns_p99) = post_percentiles(post);
  return out;
}

ScatterFigures raw_scatter(Side& s, const std::vector<Peer>& peers,
                           const std::vector<Link*>& links, const ScatterRound& r) {
  const std::size_t P = peers.size();
  std::vector<raw::OpSlot> slots(std::size_t{r.window} * P);
  std::vector<raw::OpSlot*> free_slots;
  for (auto& sl : slots) free_slots.push_back(&sl);
  struct Batch {
    std::uint64_t t0 = 0;
    std::size_t left = 0;
  };
  std::vector<Batch> batches(r.count);
  std::vector<std::uint64_t> lat, post;
  lat.reserve(r.count);
  post.reserve(r.count);
  std::uint64_t stray = 0, next = 0;
  raw::Poller poller(std::chrono::nanoseconds(120s).count());
  auto done = [&](raw::OpSlot* slot) {
    Batch& b = batches[slot->tag];
    if (--b.left == 0) lat.push_back(now_ns() - b.t0);
    free_slots.push_back(slot);
  };
  start_round(links, "raw_wait", P, r.count);
  const std::uint64_t start = now_ns();
  while (lat.size() < r.count) {
    // A whole scatter is posted at once, like one submit_scatter call.
    if (next < r.count && free_slots.size() >= P) {
      const std::uint64_t t0 = now_ns();
      batches[next] = {t0, P};
      for (std::size_t i = 0; i < P; ++i) {
        // Taken before posting: a drain while retrying may return other slots.
        raw::OpSlot* slot = free_slots.back();
        free_slots.pop_back();
        slot->tag = static_cast<std::uint32_t>(next);
        while (!s.raw->write(s.buf.data + i * r.slice, r.slice, s.raw_buf.desc, kDataImm,
                            peers[i].raw_addr, peers[i].raw_buf.addr + dst_offset(i, links, r),
                            peers[i].raw_buf.key,
                            &slot->ctx)) {
          poller.drain(*s.raw, kDataImm, stray, done);
        }
      }
      post.push_back(now_ns() - t0);
      ++next;
    }
    poller.drain(*s.raw, kDataImm, stray, done);
  }
  finish_round(links);
  ScatterFigures out;
  out.f = summarize(lat, r.count * r.slice * P, now_ns() - start);
  std::tie(out.post_ns_p50, out.post_ns_p99) = post_percentiles(post);
  return out;
}

}  // namespace bench
