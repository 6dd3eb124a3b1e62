#include "sweep.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "common/stats.hpp"
#include "link.hpp"
#include "pattern.hpp"
#include "read_runs.hpp"
#include "runs.hpp"
#include "scatter.hpp"
#include "side.hpp"
#include "sizes.hpp"
#include "target.hpp"
#include "tcp_link.hpp"

namespace bench {

namespace {

using namespace std::chrono_literals;

std::vector<std::uint64_t> single_sizes(const Options& opt) {
  if (!opt.sizes.empty()) return parse_sizes(opt.sizes, kMaxSingleWrite);
  if (opt.quick) return {4u << 10, 64u << 10, 1u << 20};
  std::vector<std::uint64_t> v;
  for (std::uint64_t s = 4u << 10; s <= kMaxSingleWrite; s *= 4) v.push_back(s);
  return v;
}

std::vector<std::uint64_t> message_sizes(bool quick) {
  if (quick) return {1u << 10};
  return {64, 1u << 10, 4u << 10, 16u << 10, 64u << 10};
}

std::vector<std::uint64_t> page_sizes(bool quick) {
  if (quick) return {4u << 10, 16u << 10};
  std::vector<std::uint64_t> v;
  for (std::uint64_t s = 1u << 10; s <= (64u << 10); s *= 2) v.push_back(s);
  return v;
}

// Enough bytes per round that the fixed costs (pipe round trip, first-write
// connection set-up) fade; bounded so slow providers still finish.
// --round-mib replaces the budget (rate-limited links need smaller rounds).
std::uint64_t iterations_for(std::uint64_t bytes_per_op, bool quick, std::uint64_t round_mib) {
  if (round_mib != 0) {
    return std::clamp<std::uint64_t>((round_mib << 20) / bytes_per_op, 4, 20000);
  }
  const std::uint64_t budget = quick ? (16ull << 20) : (1ull << 30);
  return std::clamp<std::uint64_t>(budget / bytes_per_op, quick ? 4 : 16, 20000);
}

// Bits over time across rounds, for BW average.
bool wants(const Options& opt, const std::string& op) {
  return std::find(opt.ops.begin(), opt.ops.end(), op) != opt.ops.end();
}

struct Mean {
  double bits = 0, seconds = 0;
  void add(const Figures& f) {
    bits += f.gbps * 1e9 * f.seconds;
    seconds += f.seconds;
  }
  double gbps() const { return seconds > 0 ? bits / seconds / 1e9 : 0; }
};

// --duration: the request count that makes a round last `seconds` at the
// rate the warm-up round ran.
std::uint64_t count_for(double seconds, const Figures& warm) {
  const double n = warm.ops_per_s * seconds;
  return static_cast<std::uint64_t>(std::clamp(n, 4.0, static_cast<double>(1u << 24)));
}

class Session {
 public:
  Session(const Options& opt, std::vector<Child>& children, Side& side)
      : opt_(opt), link_(children.front().link), s_(side) {
    for (Child& c : children) {
      Peer p = Peer::parse(c.link.expect("hello", 60s));
      if (s_.raw) p.raw_addr = s_.raw->insert_peer(p.raw_name);
      c.link.send(s_.hello());
      c.link.expect("ok", 60s);
      peers_.push_back(std::move(p));
      links_.push_back(&c.link);
    }
    peer_ = peers_.front();
  }

  Row scatter(std::size_t npeers) {
    // Peer i is process i mod n (see scatter.hpp): past n processes, peers
    // repeat with their slices at other offsets.
    const std::size_t nproc = std::min(npeers, peers_.size());
    std::vector<Peer> peers;
    for (std::size_t i = 0; i < npeers; ++i) peers.push_back(peers_[i % nproc]);
    const std::vector<Link*> links(links_.begin(), links_.begin() + static_cast<std::ptrdiff_t>(nproc));
    std::vector<fabric::NetAddr> addrs;
    for (const Peer& p : peers) addrs.push_back(p.eng_buf.owner());
    auto group = s_.engine->add_peer_group(addrs);
    if (!group) throw std::runtime_error("add_peer_group: " + group.status().to_string());
    ScatterRound r;
    r.slice = 64u << 10;
    r.count = std::min<std::uint64_t>(iterations(r.slice * npeers), 5000);
    Row row{"scatter", r.slice, npeers, r.count, {}, {}};
    row.has_raw = s_.raw.has_value();  // none with --nics or --backend verbs
    std::vector<fabric::PostTiming> timings;
    Mean engine_mean, raw_mean;
    for (std::uint32_t rep = 0; rep < reps(); ++rep) {
      for (const bool raw : {false, true}) {
        if (raw && !s_.raw) continue;
        fill_pattern(s_.buf.data, r.slice * npeers, ++seed_);
        if (rep == 0) {
          ScatterRound warm = r;
          warm.count = std::max<std::uint64_t>(1, r.count / 8);
          (void)(raw ? raw_scatter(s_, peers, links, warm)
                     : engine_scatter(s_, peers, links, group.value(), warm));
        }
        if (!raw) (void)s_.engine->take_post_timings();
        const ScatterFigures f = raw ? raw_scatter(s_, peers, links, r)
                                     : engine_scatter(s_, peers, links, group.value(), r);
        if (!raw && opt_.breakdown) append_timings(timings);
        (raw ? raw_mean : engine_mean).add(f.f);
        if (f.f.gbps > (raw ? row.raw.gbps : row.engine.gbps)) {
          (raw ? row.raw : row.engine) = f.f;
          (raw ? row.raw_post_p50_ns : row.engine_post_p50_ns) = f.post_ns_p50;
          (raw ? row.raw_post_p99_ns : row.engine_post_p99_ns) = f.post_ns_p99;
        }
        for (std::size_t i = 0; i < npeers; ++i) {
          Link* link = links[i % nproc];
          link->send(fmt::format("sum {} {}", (i / nproc) * r.slice, r.slice));
          const std::string want =
              fmt::format("sum {:x}", checksum(s_.buf.data + i * r.slice, r.slice));
          if (link->expect("sum", 60s) != want) {
            throw std::runtime_error(fmt::format("scatter to {} peers ({}): peer {} bytes differ",
                                                 npeers, raw ? "raw" : "engine", i));
          }
        }
      }
    }
    if (opt_.breakdown) row.breakdown = summarize_breakdown(timings);
    row.engine_avg_gbps = engine_mean.gbps();
    row.raw_avg_gbps = raw_mean.gbps();
    row.verified = true;  // every peer's checksum matched (a mismatch throws)
    return row;
  }

  Row writes(const std::string& op, std::uint64_t size) {
    const bool paged = op == "paged_write";
    WriteRound r;
    r.size = size;
    r.pages = paged ? opt_.pages : 0;
    r.window = paged ? std::max<std::uint32_t>(1, opt_.window / 16) : opt_.window;
    r.count = opt_.iters != 0 ? opt_.iters : iterations(size * (paged ? r.pages : 1));
    r.threads = opt_.threads;
    if (std::uint64_t{r.pages} * size > s_.buf.size || size > s_.buf.size) {
      throw std::runtime_error("buffer too small for " + op);
    }
    if (opt_.duration_s > 0) {
      // Sized by the engine's warm-up; the raw loop runs the same count.
      fill_pattern(s_.buf.data, paged ? r.pages * size : size, ++seed_);
      WriteRound warm = r;
      warm.count = std::max<std::uint64_t>(1, r.count / 8);
      r.count = count_for(opt_.duration_s, run(false, warm));
    }
    Row row{op, size, paged ? r.pages : 1u, r.count, {}, {}};
    row.has_raw = s_.raw.has_value();  // none with --nics or --backend verbs
    if (s_.unmetered) row.unmetered.emplace();
    Mean engine_mean, raw_mean, unmetered_mean;
    std::vector<fabric::PostTiming> timings;
    std::vector<std::uint64_t> raw_post_calls;
    WriteRound raw_round = r;
    if (opt_.breakdown) {
      raw_post_calls.reserve(reps() * r.count * (paged ? r.pages : 1));
      raw_round.post_call_ns = &raw_post_calls;
    }
    // Engine and raw (and with --metrics-ab the unmetered engine) alternate round by round,
    // and the best round of each is kept: on a shared box a round that lost the CPU to another
    // process says nothing about either code path, and alternating spreads such losses.
    // The two engines swap places every rep, so neither always runs right after raw.
    enum class Mode { engine, unmetered, raw };
    for (std::uint32_t rep = 0; rep < reps(); ++rep) {
      const bool swap = rep % 2 == 1;
      for (const Mode mode : {swap ? Mode::unmetered : Mode::engine,
                              swap ? Mode::engine : Mode::unmetered, Mode::raw}) {
        if (mode == Mode::raw && !s_.raw) continue;
        if (mode == Mode::unmetered && !s_.unmetered) continue;
        const bool raw = mode == Mode::raw;
        const auto round = [&](const WriteRound& wr) {
          return mode == Mode::unmetered ? engine_writes(s_.unmetered_engine(), peer_, link_, wr)
                                         : run(raw, wr);
        };
        fill_pattern(s_.buf.data, paged ? r.pages * size : size, ++seed_);
        if (rep == 0) {
          WriteRound warm = r;
          warm.count = std::max<std::uint64_t>(1, r.count / 8);
          (void)round(warm);
        }
        if (mode == Mode::engine) (void)s_.engine->take_post_timings();  // others' leftovers
        const Figures f = round(raw ? raw_round : r);
        if (mode == Mode::engine && opt_.breakdown) append_timings(timings);
        Figures& best = raw ? row.raw : mode == Mode::unmetered ? *row.unmetered : row.engine;
        if (f.gbps > best.gbps) best = f;
        (raw ? raw_mean : mode == Mode::unmetered ? unmetered_mean : engine_mean).add(f);
        if (!verify(r)) {
          throw std::runtime_error(fmt::format(
              "{} {} B ({}): destination bytes differ", op, size,
              raw ? "raw" : mode == Mode::unmetered ? "engine, metrics off" : "engine"));
        }
      }
    }
    row.unmetered_avg_gbps = unmetered_mean.gbps();
    if (opt_.breakdown) row.breakdown = summarize_breakdown(timings, std::move(raw_post_calls));
    row.engine_avg_gbps = engine_mean.gbps();
    row.raw_avg_gbps = raw_mean.gbps();
    row.verified = true;  // every round's checksum matched (a mismatch throws)
    return row;
  }

  // single_read / paged_read: this side READs the target's buffer, engine and raw rounds
  // alternating as for writes. Before each round the target's buffer gets a fresh pattern (one
  // engine write), ours is cleared, and after it ours must hold that pattern (pages permuted).
  Row reads(const std::string& op, std::uint64_t size) {
    const bool paged = op == "paged_read";
    WriteRound r;
    r.size = size;
    r.pages = paged ? opt_.pages : 0;
    r.window = paged ? std::max<std::uint32_t>(1, opt_.window / 16) : opt_.window;
    r.count = opt_.iters != 0 ? opt_.iters : iterations(size * (paged ? r.pages : 1));
    r.threads = opt_.threads;
    const std::uint64_t len = size * (paged ? r.pages : 1);
    if (len > s_.buf.size) throw std::runtime_error("buffer too small for " + op);
    Row row{op, size, paged ? r.pages : 1u, r.count, {}, {}};
    row.has_raw = s_.raw.has_value();
    Mean engine_mean, raw_mean;
    std::vector<std::byte> source(len);
    for (std::uint32_t rep = 0; rep < reps(); ++rep) {
      for (const bool raw : {false, true}) {
        if (raw && !s_.raw) continue;
        fill_pattern(s_.buf.data, len, ++seed_);
        std::memcpy(source.data(), s_.buf.data, len);
        WriteRound seed_write;
        seed_write.size = len;
        seed_write.count = 1;
        seed_write.window = 1;
        (void)engine_writes(s_, peer_, link_, seed_write);
        std::memset(s_.buf.data, 0, len);
        if (rep == 0) {
          WriteRound warm = r;
          warm.count = std::max<std::uint64_t>(1, r.count / 8);
          (void)(raw ? raw_reads(s_, peer_, link_, warm) : engine_reads(s_, peer_, warm));
        }
        const Figures f = raw ? raw_reads(s_, peer_, link_, r) : engine_reads(s_, peer_, r);
        Figures& best = raw ? row.raw : row.engine;
        if (f.gbps > best.gbps) best = f;
        (raw ? raw_mean : engine_mean).add(f);
        if (!read_back(source, r)) {
          throw std::runtime_error(fmt::format("{} {} B ({}): read bytes differ", op, size,
                                               raw ? "raw" : "engine"));
        }
      }
    }
    row.engine_avg_gbps = engine_mean.gbps();
    row.raw_avg_gbps = raw_mean.gbps();
    row.verified = true;  // every round's bytes matched (a mismatch throws)
    return row;
  }

  // Both sides write `size` to each other at once (engine only). Same count
  // as the unidirectional row of this size, so its raw row is the reference.
  Row bidir(const Row& uni) {
    WriteRound r;
    r.size = uni.size;
    r.window = opt_.window;
    r.count = uni.iterations;
    r.threads = opt_.threads;
    Row row{"single_write_bidir", r.size, 1, r.count, {}, {}};
    row.has_raw = false;
    Mean out_mean, in_mean;
    for (std::uint32_t rep = 0; rep < reps(); ++rep) {
      fill_pattern(s_.buf.data, r.size, ++seed_);
      if (rep == 0) {
        WriteRound warm = r;
        warm.count = std::max<std::uint64_t>(1, r.count / 8);
        (void)engine_bidir_writes(s_, peer_, link_, warm);
      }
      const BidirFigures f = engine_bidir_writes(s_, peer_, link_, r);
      if (!f.verified || !verify(r)) {
        throw std::runtime_error(
            fmt::format("single_write_bidir {} B: destination bytes differ", r.size));
      }
      const double sum = f.out.gbps + f.in.gbps;
      out_mean.add(f.out);
      in_mean.add(f.in);
      if (sum > row.engine.gbps) {
        row.engine = f.out;
        row.engine.gbps = sum;
        row.out_gbps = f.out.gbps;
        row.in_gbps = f.in.gbps;
      }
    }
    // Both directions ran at once: their average rates add.
    row.engine_avg_gbps = out_mean.gbps() + in_mean.gbps();
    row.verified = true;
    return row;
  }

  Row imm() {
    const std::uint64_t n = opt_.quick ? 200 : 5000;
    Row row{"imm", 0, 1, n, {}, {}};
    row.has_raw = s_.raw.has_value();  // none with --nics or --backend verbs
    row.verified = true;  // every pong was counted (nothing else to check)
    const bool progress = opt_.imm_wait == "progress";
    (void)engine_imm_rtt(s_, peer_, link_, 50, progress);
    row.engine = engine_imm_rtt(s_, peer_, link_, n, progress);
    if (!s_.raw) return row;
    (void)raw_imm_rtt(s_, peer_, link_, 50);
    row.raw = raw_imm_rtt(s_, peer_, link_, n);
    return row;
  }

  // The sendrecv row of `size`, and with `addressed` the sendrecv_addressed row of the same
  // messages on a channel: their rounds alternate, so both rows see the same machine.
  std::vector<Row> sendrecv(std::uint64_t size, bool addressed) {
    WriteRound r;
    r.size = size;
    r.window = opt_.window;
    r.count = std::min<std::uint64_t>(iterations(size), opt_.quick ? 2000 : 20000);
    std::vector<Row> rows;
    std::vector<Mean> means(addressed ? 2 : 1);
    for (const char* op : {"sendrecv", "sendrecv_addressed"}) {
      if (rows.size() == means.size()) break;
      rows.push_back(Row{op, size, 1, r.count, {}, {}, true});
      rows.back().has_raw = false;
    }
    const ChannelRoute* via = addressed ? &channel_route() : nullptr;
    // The channel header takes part of max_message_size: no addressed row above what is left.
    if (via != nullptr && size > via->channel->max_message_size()) {
      rows.pop_back();
      means.pop_back();
    }
    for (std::uint32_t rep = 0; rep < reps(); ++rep) {
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const ChannelRoute* route = i == 1 ? via : nullptr;
        fill_pattern(s_.buf.data, size, ++seed_);
        bool ok = true;
        if (rep == 0) {
          WriteRound warm = r;
          warm.count = std::max<std::uint64_t>(1, r.count / 8);
          (void)engine_sends(s_, peer_, link_, warm, ok, route);
        }
        const Figures f = engine_sends(s_, peer_, link_, r, ok, route);
        if (!ok) {
          throw std::runtime_error(fmt::format("{} {} B: message bytes differ", rows[i].op, size));
        }
        means[i].add(f);
        if (f.gbps > rows[i].engine.gbps) rows[i].engine = f;
      }
    }
    for (std::size_t i = 0; i < rows.size(); ++i) rows[i].engine_avg_gbps = means[i].gbps();
    return rows;
  }

  // The target's channel engine and our channel to it, opened once.
  const ChannelRoute& channel_route() {
    if (!route_.channel) {
      link_.send("chan_open");
      const std::string reply = link_.expect("chan", 60s);
      auto to = fabric::NetAddr::parse(reply.substr(reply.find(' ') + 1));
      if (!to) throw std::runtime_error("chan_open: " + to.status().to_string());
      auto opened = s_.engine->channel("bench", [](const fabric::ChannelMessage&) {});
      if (!opened) throw std::runtime_error("channel 'bench': " + opened.status().to_string());
      channel_ = std::move(opened).value();
      route_.channel = &channel_;
      route_.to = std::move(to).value();
    }
    return route_;
  }

  void bye() {
    for (Link* l : links_) l->send("bye");
  }
  std::uint32_t reps() const { return opt_.reps != 0 ? opt_.reps : (opt_.quick ? 1 : 3); }
  std::uint64_t iterations(std::uint64_t bytes_per_op) const {
    return iterations_for(bytes_per_op, opt_.quick, opt_.round_mib);
  }

 private:
  void append_timings(std::vector<fabric::PostTiming>& into) {
    auto taken = s_.engine->take_post_timings();
    into.insert(into.end(), taken.begin(), taken.end());
  }

  Figures run(bool raw, const WriteRound& r) {
    return raw ? raw_writes(s_, peer_, link_, r) : engine_writes(s_, peer_, link_, r);
  }

  bool verify(const WriteRound& r) {
    Checksum want;
    std::uint64_t len = r.size;
    if (r.pages == 0) {
      want.add(s_.buf.data, r.size);
    } else {
      const auto order = dst_page_order(r.pages);
      std::vector<std::uint32_t> src_of(r.pages);
      for (std::uint32_t i = 0; i < r.pages; ++i) src_of[order[i]] = i;
      for (std::uint32_t d = 0; d < r.pages; ++d) want.add(s_.buf.data + src_of[d] * r.size, r.size);
      len = r.size * r.pages;
    }
    link_.send(fmt::format("sum 0 {}", len));
    return link_.expect("sum", 60s) == fmt::format("sum {:x}", want.value());
  }

  // Whether our buffer holds what a read round should have brought from `source`.
  bool read_back(const std::vector<std::byte>& source, const WriteRound& r) const {
    if (r.pages == 0) return std::memcmp(s_.buf.data, source.data(), r.size) == 0;
    const auto order = dst_page_order(r.pages);
    for (std::uint32_t i = 0; i < r.pages; ++i) {
      if (std::memcmp(s_.buf.data + std::uint64_t{i} * r.size,
                      source.data() + std::uint64_t{order[i]} * r.size, r.size) != 0) {
        return false;
      }
    }
    return true;
  }

  const Options& opt_;
  Link& link_;
  Side& s_;
  Peer peer_;
  std::vector<Peer> peers_;
  std::vector<Link*> links_;
  fabric::Channel channel_;  // sendrecv_addressed, opened by channel_route()
  ChannelRoute route_;
  std::uint64_t seed_ = 0;
};

// One line per row, with the time the rest of the sweep should take.
void progress(std::chrono::steady_clock::time_point start, std::size_t k, std::size_t total,
              const Row& row) {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double eta = elapsed / static_cast<double>(k) * static_cast<double>(total - k);
  const std::string raw = row.has_raw ? fmt::format("raw {:8.2f} Gbit/s {:9.0f} req/s", row.raw.gbps,
                                                    row.raw.ops_per_s)
                                      : std::string("raw -");
  fmt::print(stderr, "[{}/{} ETA {:.0f} s] {:<18} {:>9}  engine {:8.2f} Gbit/s {:9.0f} req/s  {}\n",
             k, total, eta, row.op, tools::human_bytes(row.size), row.engine.gbps,
             row.engine.ops_per_s, raw);
}

}  // namespace

static SideConfig side_config(const Options& opt) {
  SideConfig cfg;
  cfg.provider = opt.provider;
  cfg.bind_address = opt.bind;
  cfg.busy_poll = opt.busy_poll;
  cfg.post_on_submit = opt.post_on_submit;
  cfg.metrics = opt.metrics;
  cfg.metrics_ab = opt.metrics_ab;
  cfg.metrics_aa = opt.metrics_aa;
  cfg.verbs = opt.backend == "verbs";
  cfg.verbs_ack_timeout = opt.verbs_ack_timeout;
  cfg.verbs_max_inline = opt.verbs_max_inline;
  cfg.nics = opt.nics;
  cfg.groups = opt.groups;
  cfg.request_timeout_ms = opt.request_timeout_ms;
  cfg.buffer_bytes = std::max<std::size_t>(kMaxSingleWrite, std::size_t{opt.pages} * (64u << 10));
  // --bidir: the reverse direction uses the upper half (runs.hpp bidir_offset).
  if (opt.bidir) cfg.buffer_bytes *= 2;
  return cfg;
}

SweepResult run_sweep(const Options& opt) {
  SideConfig cfg = side_config(opt);

  const bool scatter = std::find(opt.ops.begin(), opt.ops.end(), "scatter") != opt.ops.end();
  // Fork first: the targets must not inherit engine threads or provider state.
  std::vector<Child> children;
  const unsigned ncpu = std::max(1u, std::thread::hardware_concurrency());
  for (const std::string& server : opt.connect) {
    children.push_back(Child{std::nullopt, connect_link(server)});
  }
  const std::size_t forked = !opt.connect.empty() ? 0 : scatter ? 4 : 1;
  const std::size_t processes = opt.connect.empty() ? forked : children.size();
  std::vector<std::size_t> peer_counts;
  for (std::size_t p : {1, 2, 4}) {
    if (p <= processes) peer_counts.push_back(p);
  }
  // 8 … 64 peers reuse the processes, each slice at its own offset (scatter.hpp).
  for (std::size_t p : {8, 16, 32, 64}) peer_counts.push_back(p);
  for (std::size_t i = 0; i < forked; ++i) {
    SideConfig target_cfg = cfg;
    if (opt.pin_processes) target_cfg.pin_cpu = static_cast<int>((1 + i) % ncpu);
    children.push_back(
        fork_child([target_cfg](Link& link) { return run_target(target_cfg, link); }));
  }
  if (opt.pin_processes) cfg.pin_cpu = 0;
  cfg.record_post_timings = opt.breakdown;  // the initiator only: targets post nothing timed
  SweepResult result;
  try {
    Side side(cfg);
    Session session(opt, children, side);
    result.provider = side.raw ? side.raw->provider_name() : side.engine->main_address().provider();
    result.delivery_complete = engine_uses_delivery_complete(opt.provider);
    std::size_t total = 0;
    for (const auto& op : opt.ops) {
      total += op == "single_write" ? single_sizes(opt).size() * (opt.bidir ? 2 : 1)
               : op == "single_read" ? single_sizes(opt).size()
               : op == "paged_write" || op == "paged_read" ? page_sizes(opt.quick).size()
               : op == "sendrecv" || op == "sendrecv_addressed" ? message_sizes(opt.quick).size()
               : op == "scatter"     ? peer_counts.size()
                                     : 1;
    }
    const auto start = std::chrono::steady_clock::now();
    for (const auto& op : opt.ops) {
      if (op == "imm") {
        result.rows.push_back(session.imm());
        progress(start, result.rows.size(), total, result.rows.back());
        continue;
      }
      if (op == "scatter") {
        for (std::size_t p : peer_counts) {
          result.rows.push_back(session.scatter(p));
          progress(start, result.rows.size(), total, result.rows.back());
        }
        continue;
      }
      if (op == "sendrecv" || op == "sendrecv_addressed") {
        // sendrecv_addressed runs inside the sendrecv sweep, alternating with it.
        const bool addressed = wants(opt, "sendrecv_addressed");
        if (op == "sendrecv_addressed" && wants(opt, "sendrecv")) continue;
        for (auto size : message_sizes(opt.quick)) {
          for (Row& row : session.sendrecv(size, addressed)) {
            if (row.op == "sendrecv" && !wants(opt, "sendrecv")) continue;
            result.rows.push_back(std::move(row));
            progress(start, result.rows.size(), total, result.rows.back());
          }
        }
        continue;
      }
      if (op == "single_read" || op == "paged_read") {
        for (auto size : op == "single_read" ? single_sizes(opt) : page_sizes(opt.quick)) {
          result.rows.push_back(session.reads(op, size));
          progress(start, result.rows.size(), total, result.rows.back());
        }
        continue;
      }
      if (op != "single_write" && op != "paged_write") throw std::runtime_error("unknown op " + op);
      for (auto size : op == "single_write" ? single_sizes(opt) : page_sizes(opt.quick)) {
        result.rows.push_back(session.writes(op, size));
        progress(start, result.rows.size(), total, result.rows.back());
        if (op == "single_write" && opt.bidir) {
          result.rows.push_back(session.bidir(result.rows.back()));
          progress(start, result.rows.size(), total, result.rows.back());
        }
      }
    }
    if (opt.print_metrics) result.metrics = side.engine->metrics();
    session.bye();
  } catch (...) {
    // Ask each target to leave first: a killed one leaves its shm regions behind in /dev/shm.
    // One still inside a round never reads it; the bound then kills it.
    for (Child& c : children) {
      try {
        c.link.send("bye");
      } catch (const std::exception&) {  // that target is gone already
      }
    }
    (void)reap_all(children, std::chrono::steady_clock::now() + 2s);
    throw;
  }
  // A target that fails after its last command (its engine's shutdown, say) has nobody to
  // tell but its exit status.
  if (const std::string failed = reap_all(children, std::chrono::steady_clock::now() + 30s);
      !failed.empty()) {
    throw std::runtime_error(failed);
  }
  return result;
}

int serve(const Options& opt) {
  SideConfig cfg = side_config(opt);
  try {
    tools::Listener listener(tools::parse_host_port(opt.listen));
    fmt::print("listening on {}\n", listener.address().to_string());
    std::fflush(stdout);
    Link link = link_over(listener.accept(std::chrono::minutes(5)));
    return run_target(cfg, link);
  } catch (const std::exception& e) {
    fmt::print(stderr, "fabric-bench server: {}\n", e.what());
    return 1;
  }
}

}  // namespace bench
