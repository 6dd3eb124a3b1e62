#include "fabric/kv/sender.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>
#include <unordered_map>
#include <variant>

#include "link.hpp"
#include "released_ids.hpp"
#include "write_batch.hpp"

namespace fabric::kv {

namespace {

struct ImmWrite {
  std::uint32_t imm = 0;
  MrDesc dst;
};
using Write = std::variant<PagedWrite, SingleWrite, ImmWrite>;

std::uint32_t pages_for(std::uint32_t tokens, std::uint32_t per_page) {
  return (tokens + per_page - 1) / per_page;
}

}  // namespace

struct Sender::Impl : std::enable_shared_from_this<Sender::Impl> {
  struct Peer {
    NetAddr addr;
    KvLayout layout;
    std::vector<MrDesc> regions;
    Clock::time_point last_seen;
    bool alive = true;
  };
  // One decoder's request for one id.
  struct Transfer {
    std::uint64_t peer = 0;
    msg::Request req;
    std::uint32_t align = 1;
    TokenRange cached_range;
    WriteBatch cached;
    std::uint64_t outstanding = 0;
    bool stopping = false;
    bool cancel_requested = false;
    bool peer_dead = false;
    bool tail_posted = false;
    bool ended = false;
    Status error;
    State end = State::waiting;
  };
  struct Entry {
    std::vector<std::uint32_t> pages;
    std::uint32_t num_tokens = 0;
    std::uint32_t receivers = 1;
    std::optional<LocalSlice> tail;
    std::vector<std::uint32_t> done_tokens;  // per layer
    std::vector<std::pair<std::uint32_t, TokenRange>> chunks;  // in the order they were done
    std::vector<std::unique_ptr<Transfer>> transfers;
    RequestStatus status;
    Clock::time_point deadline;
    bool local_cancel = false;
    bool missing_failed = false;
    std::uint32_t declined = 0;  // decoders that said they will not ask (DECLINE)
  };
  struct Early {
    std::uint64_t peer = 0;
    msg::Request req;
    Clock::time_point expires;
  };
  struct Submit {
    Transfer* transfer = nullptr;
    std::string id;
    Write write;
  };
  struct Actions {
    std::vector<Submit> submits;
    std::vector<std::pair<NetAddr, msg::Body>> sends;
    std::vector<std::pair<std::string, RequestStatus>> notes;
  };

  Impl(TransferEngine& e, SenderConfig c)
      : engine(e),
        config(std::move(c)),
        link(e, config.liveness),
        released(config.released_ids_kept) {}

  TransferEngine& engine;
  SenderConfig config;
  Link link;
  ReleasedIds released;
  mutable std::mutex mutex;
  std::unordered_map<std::uint64_t, Peer> peers;
  std::unordered_map<std::string, Entry> entries;
  std::unordered_map<std::string, std::vector<Early>> early;
  // DECLINEs for requests not prepared yet: (decoder, expiry) per id.
  std::unordered_map<std::string, std::vector<std::pair<std::uint64_t, Clock::time_point>>>
      early_declines;

  // ---------------------------------------------------------------- helpers (under mutex)

  void note(Actions& a, const std::string& id, Entry& e, RequestStatus s) {
    e.status = s;
    a.notes.emplace_back(id, std::move(s));
  }

  void reply(Actions& a, std::uint64_t peer, msg::Body body) {
    auto it = peers.find(peer);
    if (it != peers.end() && it->second.alive) a.sends.emplace_back(it->second.addr, std::move(body));
  }

  Status validate(const Entry& e, const Peer& p, const msg::Request& q, Transfer& t) {
    const KvLayout& mine = config.layout;
    if (q.fingerprint != mine.fingerprint()) {
      return {Errc::invalid_argument,
              fmt::format("layout fingerprint {:016x} differs from the prefiller's {:016x}",
                          q.fingerprint, mine.fingerprint())};
    }
    // A prefix is fine: a decoder may compute the last prompt token itself; and it may start
    // past a prefix it holds already (src_first).
    if (q.num_tokens == 0 || std::uint64_t{q.src_first} + q.num_tokens > e.num_tokens) {
      return {Errc::invalid_argument,
              fmt::format("request for {} tokens from token {}, the prefill has {}", q.num_tokens,
                          q.src_first, e.num_tokens)};
    }
    if (q.pages.size() != pages_for(q.num_tokens, p.layout.tokens_per_page)) {
      return {Errc::invalid_argument,
              fmt::format("{} destination pages for {} tokens of {} per page", q.pages.size(),
                          q.num_tokens, p.layout.tokens_per_page)};
    }
    for (std::size_t i = 0; i < q.pages.size(); ++i) {
      if (q.pages[i] >= p.layout.num_pages) {
        return {Errc::out_of_range, fmt::format("destination page {} (position {}) of {}",
                                                q.pages[i], i, p.layout.num_pages)};
      }
    }
    const TokenRange wanted{q.src_first, q.src_first + q.num_tokens};
    auto runs = plan_runs(mine, p.layout, q.heads, wanted, q.src_first);
    if (!runs.ok()) return runs.status();
    const std::uint64_t expected = sender_imm_count(runs->size(), mine);
    if (expected != q.expected_imms) {
      return {Errc::invalid_argument,
              fmt::format("the decoder expects {} immediates, this prefiller's plan makes {}",
                          q.expected_imms, expected)};
    }
    if (e.pages.size() == pages_for(e.num_tokens, mine.tokens_per_page)) {
      auto batch = make_batch(mine, e.pages, p.layout, q.pages, *runs);
      if (!batch.ok()) return batch.status();
      t.cached_range = wanted;
      t.cached = std::move(*batch);
    }  // else pages still to come (add_pages): each chunk plans its own batch
    t.align = chunk_alignment(mine, p.layout);
    for (const auto& [layer, range] : e.chunks) {
      const std::uint32_t end = std::min(range.end, wanted.end);
      if (end != wanted.end && end > wanted.begin && end % t.align != 0) {
        return {Errc::invalid_argument,
                fmt::format("a chunk ends at token {}, not a multiple of {}", range.end, t.align)};
      }
    }
    if (q.writes_tail && e.tail && q.tail_bytes > e.tail->mr.size() - std::min<std::uint64_t>(
                                                       e.tail->offset, e.tail->mr.size())) {
      return {Errc::out_of_range, fmt::format("tail of {} bytes, the prefiller has {}",
                                              q.tail_bytes, e.tail->mr.size() - e.tail->offset)};
    }
    return Status::success();
  }

  // Queues the writes of (layer, range) for t.
  Status queue_chunk(Actions& a, const std::string& id, Entry& e, Transfer& t,
                     std::uint32_t layer, TokenRange range) {
    const Peer& p = peers.at(t.peer);
    // Only the tokens the decoder wants: [src_first, src_first + num_tokens).
    range.begin = std::max(range.begin, t.req.src_first);
    range.end = std::min(range.end, wanted_end(t));
    if (range.begin >= range.end) return Status::success();  // outside what the decoder wants
    if (!(t.cached_range == range)) {
      auto runs = plan_runs(config.layout, p.layout, t.req.heads, range, t.req.src_first);
      if (!runs.ok()) return runs.status();
      auto batch = make_batch(config.layout, e.pages, p.layout, t.req.pages, *runs);
      if (!batch.ok()) return batch.status();
      t.cached = std::move(*batch);
      t.cached_range = range;
    }
    for (std::uint32_t part = 0; part < config.layout.parts(); ++part) {
      const MrHandle& src = config.regions[config.layout.base(layer, part).region];
      const MrDesc& dst = p.regions[p.layout.base(layer, part).region];
      for (const auto& g : t.cached.groups) {
        a.submits.push_back({&t, id, paged_write(t.cached, g, config.layout, p.layout, layer, part,
                                                 src, dst, t.req.imm)});
        ++t.outstanding;
      }
    }
    return Status::success();
  }

  // One past the last source token the decoder wants.
  static std::uint32_t wanted_end(const Transfer& t) { return t.req.src_first + t.req.num_tokens; }

  // Every layer has been written up to the decoder's last wanted token: the tail may follow.
  static bool ready_for_tail(const Entry& e, const Transfer& t) {
    if (t.tail_posted) return false;
    for (std::uint32_t d : e.done_tokens) {
      if (d < wanted_end(t)) return false;
    }
    return true;
  }

  void queue_tail(Actions& a, const std::string& id, Entry& e, Transfer& t) {
    const Peer& p = peers.at(t.peer);
    t.tail_posted = true;
    ++t.outstanding;
    if (t.req.writes_tail && e.tail && t.req.tail_bytes > 0) {
      SingleWrite w;
      w.length = t.req.tail_bytes;
      w.imm = t.req.imm;
      w.src = *e.tail;
      w.dst = RemoteSlice{t.req.tail, t.req.tail_offset};
      w.routing = WriteRouting::pinned(0);  // one immediate, as the plan counts
      a.submits.push_back({&t, id, w});
    } else {
      a.submits.push_back({&t, id, ImmWrite{t.req.imm, p.regions.front()}});
    }
  }

  void stop_transfer(Transfer& t, Status why) {
    if (t.error.ok() && !why.ok()) t.error = std::move(why);
    t.stopping = true;
  }

  void check_transfer(Actions& a, const std::string& id, Entry& e, Transfer& t) {
    if (t.ended || t.outstanding > 0) return;
    if (t.cancel_requested) {
      reply(a, t.peer, msg::CancelAck{id});
      t.end = State::cancelled;
    } else if (t.peer_dead) {
      t.end = State::failed;
    } else if (!t.error.ok()) {
      reply(a, t.peer, msg::SenderDone{id, t.error});
      t.end = State::failed;
    } else if (e.local_cancel) {
      reply(a, t.peer, msg::SenderDone{id, Status(Errc::cancelled, "the prefiller cancelled")});
      t.end = State::cancelled;
    } else if (t.tail_posted) {
      reply(a, t.peer, msg::SenderDone{id, Status::success()});
      t.end = State::done;
    } else {
      return;
    }
    t.ended = true;
    check_entry(a, id, e);
  }

  void check_entry(Actions& a, const std::string& id, Entry& e) {
    if (is_terminal(e.status.state)) return;
    const bool all_here = e.transfers.size() + e.declined >= e.receivers;
    if (!all_here && !e.local_cancel && !e.missing_failed) return;
    for (const auto& t : e.transfers) {
      if (!t->ended) return;
    }
    RequestStatus s{State::done, {}};
    if (e.local_cancel) {
      s = {State::cancelled, {}};
    } else if (e.missing_failed) {
      s = {State::failed, Status(Errc::timeout,
                                 fmt::format("{} of {} decoders asked for request {} in time",
                                             e.transfers.size(), e.receivers, id))};
    } else {
      for (const auto& t : e.transfers) {
        if (t->end == State::failed) {
          s = {State::failed, t->peer_dead ? Status(Errc::timeout, "the decoder died") : t->error};
          break;
        }
        if (t->end == State::cancelled) s = {State::cancelled, {}};
      }
    }
    note(a, id, e, s);
  }

  void accept(Actions& a, const std::string& id, Entry& e, std::uint64_t peer, msg::Request q) {
    if (is_terminal(e.status.state) || e.local_cancel ||
        e.transfers.size() + e.declined >= e.receivers) {
      reply(a, peer, msg::Reject{id, Status(Errc::invalid_argument,
                                            fmt::format("request {} is not open for another "
                                                        "decoder here",
                                                        id))});
      return;
    }
    auto t = std::make_unique<Transfer>();
    t->peer = peer;
    t->req = std::move(q);
    if (auto st = validate(e, peers.at(peer), t->req, *t); !st.ok()) {
      reply(a, peer, msg::Reject{id, st});
      return;
    }
    Transfer& tr = *e.transfers.emplace_back(std::move(t));
    reply(a, peer, msg::Accept{id});
    if (e.status.state == State::waiting) note(a, id, e, {State::transferring, {}});
    for (const auto& [layer, range] : e.chunks) {
      if (auto st = queue_chunk(a, id, e, tr, layer, range); !st.ok()) {
        stop_transfer(tr, st);
        break;
      }
    }
    if (!tr.stopping && ready_for_tail(e, tr)) queue_tail(a, id, e, tr);
    check_transfer(a, id, e, tr);
  }

  // ---------------------------------------------------------------- events

  void on_message(msg::Message&& m) {
    Actions a;
    {
      std::lock_guard lock(mutex);
      auto it = peers.find(m.from_instance);
      if (it != peers.end()) it->second.last_seen = Clock::now();
      std::visit([&](auto& body) { handle(a, m.from_instance, body); }, m.body);
    }
    run(std::move(a));
  }

  void handle(Actions& a, std::uint64_t from, msg::Hello& h) {
    if (h.from.instance_id() != from) return;
    if (h.layout.fingerprint() != config.layout.fingerprint()) {
      a.sends.emplace_back(h.from, msg::Reject{"", Status(Errc::invalid_argument,
                                                          "the decoder's layout describes a "
                                                          "different model")});
      return;
    }
    peers[from] = Peer{h.from, std::move(h.layout), std::move(h.regions), Clock::now(), true};
    a.sends.emplace_back(peers[from].addr, msg::HelloAck{engine.main_address(), config.layout});
  }
  void handle(Actions& a, std::uint64_t from, msg::Request& q) {
    auto p = peers.find(from);
    if (p == peers.end() || !p->second.alive) {
      spdlog::warn("fabric kv: request {} from an unknown or dead decoder dropped", q.id);
      return;
    }
    std::string id = q.id;
    auto e = entries.find(id);
    if (e == entries.end()) {
      if (auto end = released.find(id)) {
        reply(a, from, msg::Reject{id, Status(Errc::not_found,
                                              fmt::format("request {} ended {} and was released "
                                                          "on this prefiller before this decoder "
                                                          "asked",
                                                          id, state_name(*end)))});
        return;
      }
      early[id].push_back({from, std::move(q), Clock::now() + config.receiver_timeout});
      return;
    }
    accept(a, id, e->second, from, std::move(q));
  }
  void handle(Actions& a, std::uint64_t from, msg::Cancel& c) {
    if (auto ea = early.find(c.id); ea != early.end()) {
      std::erase_if(ea->second, [&](const Early& x) { return x.peer == from; });
      if (ea->second.empty()) early.erase(ea);
    }
    auto e = entries.find(c.id);
    if (e != entries.end()) {
      for (auto& t : e->second.transfers) {
        if (t->peer == from && !t->ended) {
          t->cancel_requested = true;
          stop_transfer(*t, Status::success());
          check_transfer(a, c.id, e->second, *t);
          return;
        }
      }
    }
    reply(a, from, msg::CancelAck{c.id});  // nothing of it was posted
  }
  void handle(Actions& a, std::uint64_t from, msg::Decline& d) {
    auto e = entries.find(d.id);
    if (e == entries.end()) {
      if (released.find(d.id)) return;  // nothing left to stop holding
      early_declines[d.id].emplace_back(from, Clock::now() + config.receiver_timeout);
      return;
    }
    decline(a, d.id, e->second, from);
  }
  // A decoder that will not ask: one receiver fewer to wait for. A decoder that asked already
  // is not declining (its transfer runs or ended); nor is a second DECLINE from one decoder.
  void decline(Actions& a, const std::string& id, Entry& e, std::uint64_t from) {
    for (const auto& t : e.transfers) {
      if (t->peer == from) return;
    }
    if (is_terminal(e.status.state) || e.transfers.size() + e.declined >= e.receivers) return;
    ++e.declined;
    check_entry(a, id, e);
  }
  void handle(Actions&, std::uint64_t, msg::Heartbeat&) {}
  template <typename T>
  void handle(Actions&, std::uint64_t, T&) {}  // not for a sender

  void on_write_done(Transfer* t, const std::string& id, const Status& st) {
    Actions a;
    {
      std::lock_guard lock(mutex);
      auto e = entries.find(id);
      if (e == entries.end()) return;
      --t->outstanding;
      if (!st.ok()) stop_transfer(*t, st);
      check_transfer(a, id, e->second, *t);
    }
    run(std::move(a));
  }

  void on_tick(Clock::time_point now) {
    Actions a;
    {
      std::lock_guard lock(mutex);
      for (auto& [instance, p] : peers) {
        if (!p.alive) continue;
        if (now - p.last_seen > link.dead_after()) {
          p.alive = false;
          spdlog::warn("fabric kv: decoder {} silent for {} ms: its requests fail",
                       p.addr.describe(), link.dead_after().count());
          for (auto& [id, e] : entries) {
            for (auto& t : e.transfers) {
              if (t->peer == instance && !t->ended) {
                t->peer_dead = true;
                stop_transfer(*t, Status(Errc::timeout, "the decoder died"));
                check_transfer(a, id, e, *t);
              }
            }
          }
          continue;
        }
        a.sends.emplace_back(p.addr, msg::Heartbeat{});
      }
      for (auto it = early.begin(); it != early.end();) {
        std::erase_if(it->second, [&](const Early& x) {
          if (now < x.expires) return false;
          reply(a, x.peer, msg::Reject{it->first, Status(Errc::not_found,
                                                         "no such request on this prefiller")});
          return true;
        });
        it = it->second.empty() ? early.erase(it) : std::next(it);
      }
      for (auto it = early_declines.begin(); it != early_declines.end();) {
        std::erase_if(it->second, [&](const auto& x) { return now >= x.second; });
        it = it->second.empty() ? early_declines.erase(it) : std::next(it);
      }
      for (auto& [id, e] : entries) {
        if (!is_terminal(e.status.state) && !e.missing_failed && now > e.deadline &&
            e.transfers.size() + e.declined < e.receivers) {
          e.missing_failed = true;
          check_entry(a, id, e);
        }
      }
    }
    run(std::move(a));
  }

  // ---------------------------------------------------------------- outside the mutex

  Status submit(const Submit& s, OnDone done) {
    return std::visit(
        [&](const auto& w) -> Status {
          using T = std::decay_t<decltype(w)>;
          if constexpr (std::is_same_v<T, PagedWrite>) {
            return engine.submit_paged_writes(w, std::move(done));
          } else if constexpr (std::is_same_v<T, SingleWrite>) {
            return engine.submit_single_write(w, std::move(done));
          } else {
            return engine.submit_imm(w.imm, w.dst, std::move(done));
          }
        },
        s.write);
  }

  void run(Actions a) {
    while (true) {
      for (auto& [to, body] : a.sends) {
        if (auto st = link.send(to, body); !st.ok()) {
          spdlog::warn("fabric kv: send to {} failed: {}", to.describe(), st.to_string());
        }
      }
      for (auto& [id, s] : a.notes) {
        if (config.on_state) config.on_state(id, s);
      }
      if (a.submits.empty()) return;
      Actions next;
      std::weak_ptr<Impl> weak = weak_from_this();
      for (auto& s : a.submits) {
        Transfer* t = s.transfer;
        std::string id = s.id;
        auto done = [weak, t, id](const Status& st) {
          if (auto self = weak.lock()) self->on_write_done(t, id, st);
        };
        Status st = submit(s, OnDone(DoneCallback(done)));
        // Back-pressure: the engine finishes requests on its own threads, so retrying frees up.
        const auto give_up = Clock::now() + engine.config().control_timeout;
        while (st.code() == Errc::again && Clock::now() < give_up) {
          std::this_thread::yield();
          st = submit(s, OnDone(DoneCallback(done)));
        }
        if (!st.ok()) {
          std::lock_guard lock(mutex);
          auto e = entries.find(id);
          if (e == entries.end()) continue;
          --t->outstanding;
          stop_transfer(*t, st);
          check_transfer(next, id, e->second, *t);
        }
      }
      a = std::move(next);
    }
  }
};

Sender::Sender(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

Sender::~Sender() { impl_->link.stop(); }

Result<std::unique_ptr<Sender>> Sender::create(TransferEngine& engine, SenderConfig config) {
  if (auto st = config.layout.validate(); !st.ok()) return st;
  if (config.regions.size() != config.layout.num_regions) {
    return Status(Errc::invalid_argument,
                  fmt::format("KV sender: {} regions for a layout of {}", config.regions.size(),
                              config.layout.num_regions));
  }
  const std::uint64_t span = config.layout.span_bytes();
  for (const PartBase& b : config.layout.bases) {
    const MrHandle& r = config.regions[b.region];
    if (!r.valid() || b.offset + span > r.size()) {
      return Status(Errc::out_of_range,
                    fmt::format("KV sender: region {} ({} bytes) cannot hold a part of {} bytes "
                                "at offset {}",
                                b.region, r.valid() ? r.size() : 0, span, b.offset));
    }
  }
  auto impl = std::make_shared<Impl>(engine, std::move(config));
  if (auto st = impl->link.start_for(impl); !st.ok()) return st;
  return std::unique_ptr<Sender>(new Sender(std::move(impl)));
}

Status Sender::prepare(std::string id, std::vector<std::uint32_t> pages, std::uint32_t num_tokens,
                       std::uint32_t receivers, std::optional<LocalSlice> tail) {
  auto& im = *impl_;
  const KvLayout& l = im.config.layout;
  if (id.empty() || id.size() > msg::kMaxIdBytes) {
    return {Errc::invalid_argument, "KV sender: request ids are 1-256 bytes"};
  }
  if (num_tokens == 0 || receivers == 0) {
    return {Errc::invalid_argument, "KV sender: a request needs tokens and a receiver"};
  }
  // Fewer pages than the tokens need: the rest come by add_pages (vLLM allocates a prompt's
  // blocks chunk by chunk), before the layer_done that covers them.
  if (pages.size() > pages_for(num_tokens, l.tokens_per_page)) {
    return {Errc::invalid_argument, fmt::format("KV sender: {} pages for {} tokens of {} per page",
                                                pages.size(), num_tokens, l.tokens_per_page)};
  }
  for (std::size_t i = 0; i < pages.size(); ++i) {
    if (pages[i] >= l.num_pages) {
      return {Errc::out_of_range,
              fmt::format("KV sender: page {} (position {}) of {}", pages[i], i, l.num_pages)};
    }
  }
  if (tail && !tail->mr.valid()) return {Errc::invalid_argument, "KV sender: invalid tail handle"};
  Impl::Actions a;
  {
    std::lock_guard lock(im.mutex);
    if (im.entries.contains(id)) {
      return {Errc::invalid_argument, fmt::format("KV sender: request {} exists", id)};
    }
    im.released.forget(id);
    Impl::Entry& e = im.entries[id];
    e.pages = std::move(pages);
    e.num_tokens = num_tokens;
    e.receivers = receivers;
    e.tail = tail;
    e.done_tokens.assign(l.num_layers, 0);
    e.deadline = Clock::now() + im.config.receiver_timeout;
    if (auto ea = im.early.find(id); ea != im.early.end()) {
      auto waiting = std::move(ea->second);
      im.early.erase(ea);
      for (auto& x : waiting) im.accept(a, id, e, x.peer, std::move(x.req));
    }
    if (auto ed = im.early_declines.find(id); ed != im.early_declines.end()) {
      auto declines = std::move(ed->second);
      im.early_declines.erase(ed);
      for (const auto& [peer, expires] : declines) im.decline(a, id, e, peer);
    }
  }
  im.run(std::move(a));
  return Status::success();
}

Status Sender::layer_done(std::string_view id, std::uint32_t layer) {
  return layer_done(id, layer, TokenRange{0, 0});
}

Status Sender::layer_done(std::string_view id, std::uint32_t layer, TokenRange tokens) {
  auto& im = *impl_;
  Impl::Actions a;
  {
    std::lock_guard lock(im.mutex);
    std::string key(id);
    auto it = im.entries.find(key);
    if (it == im.entries.end()) return {Errc::not_found, fmt::format("KV sender: no request {}", id)};
    Impl::Entry& e = it->second;
    if (layer >= e.done_tokens.size()) {
      return {Errc::out_of_range,
              fmt::format("KV sender: layer {} of {}", layer, e.done_tokens.size())};
    }
    if (tokens.begin == 0 && tokens.end == 0) tokens = TokenRange{e.done_tokens[layer], e.num_tokens};
    if (tokens.begin != e.done_tokens[layer] || tokens.end <= tokens.begin ||
        tokens.end > e.num_tokens) {
      return {Errc::invalid_argument,
              fmt::format("KV sender: layer {} chunk [{}, {}) does not continue at token {} of {}",
                          layer, tokens.begin, tokens.end, e.done_tokens[layer], e.num_tokens)};
    }
    if (pages_for(tokens.end, im.config.layout.tokens_per_page) > e.pages.size()) {
      return {Errc::invalid_argument,
              fmt::format("KV sender: layer {} chunk [{}, {}) reaches past the {} pages given "
                          "(add_pages first)",
                          layer, tokens.begin, tokens.end, e.pages.size())};
    }
    for (const auto& t : e.transfers) {
      const std::uint32_t end = std::min(tokens.end, Impl::wanted_end(*t));
      if (end != Impl::wanted_end(*t) && end > t->req.src_first && end % t->align != 0) {
        return {Errc::invalid_argument,
                fmt::format("KV sender: chunk end {} is not a multiple of {} (both sides' page "
                            "boundaries)",
                            tokens.end, t->align)};
      }
    }
    if (is_terminal(e.status.state) || e.local_cancel) return Status::success();  // nothing to do
    e.done_tokens[layer] = tokens.end;
    e.chunks.emplace_back(layer, tokens);
    for (auto& t : e.transfers) {
      if (t->stopping || t->ended) continue;
      if (auto st = im.queue_chunk(a, key, e, *t, layer, tokens); !st.ok()) {
        im.stop_transfer(*t, st);
        im.check_transfer(a, key, e, *t);
        continue;
      }
      if (im.ready_for_tail(e, *t)) im.queue_tail(a, key, e, *t);
    }
  }
  im.run(std::move(a));
  return Status::success();
}

Status Sender::add_pages(std::string_view id, std::vector<std::uint32_t> pages) {
  auto& im = *impl_;
  const KvLayout& l = im.config.layout;
  std::lock_guard lock(im.mutex);
  auto it = im.entries.find(std::string(id));
  if (it == im.entries.end()) return {Errc::not_found, fmt::format("KV sender: no request {}", id)};
  Impl::Entry& e = it->second;
  if (e.pages.size() + pages.size() > pages_for(e.num_tokens, l.tokens_per_page)) {
    return {Errc::invalid_argument,
            fmt::format("KV sender: {} more pages for request {} that has {} of the {} its {} "
                        "tokens need",
                        pages.size(), id, e.pages.size(), pages_for(e.num_tokens, l.tokens_per_page),
                        e.num_tokens)};
  }
  for (std::size_t i = 0; i < pages.size(); ++i) {
    if (pages[i] >= l.num_pages) {
      return {Errc::out_of_range, fmt::format("KV sender: page {} (position {}) of {}", pages[i],
                                              e.pages.size() + i, l.num_pages)};
    }
  }
  e.pages.insert(e.pages.end(), pages.begin(), pages.end());
  return Status::success();
}

Status Sender::cancel(std::string_view id) {
  auto& im = *impl_;
  Impl::Actions a;
  {
    std::lock_guard lock(im.mutex);
    std::string key(id);
    auto it = im.entries.find(key);
    if (it == im.entries.end()) return {Errc::not_found, fmt::format("KV sender: no request {}", id)};
    Impl::Entry& e = it->second;
    if (is_terminal(e.status.state)) return Status::success();
    e.local_cancel = true;
    for (auto& t : e.transfers) {
      im.stop_transfer(*t, Status::success());
      im.check_transfer(a, key, e, *t);
    }
    im.check_entry(a, key, e);
  }
  im.run(std::move(a));
  return Status::success();
}

Result<RequestStatus> Sender::poll(std::string_view id) const {
  std::lock_guard lock(impl_->mutex);
  auto it = impl_->entries.find(std::string(id));
  if (it == impl_->entries.end()) {
    return Status(Errc::not_found, fmt::format("KV sender: no request {}", id));
  }
  return it->second.status;
}

Status Sender::release(std::string_view id) {
  std::lock_guard lock(impl_->mutex);
  auto it = impl_->entries.find(std::string(id));
  if (it == impl_->entries.end()) return {Errc::not_found, fmt::format("KV sender: no request {}", id)};
  if (!is_terminal(it->second.status.state)) {
    return {Errc::invalid_argument,
            fmt::format("KV sender: request {} is still {}", id,
                        state_name(it->second.status.state))};
  }
  impl_->released.add(it->first, it->second.status.state);
  impl_->entries.erase(it);
  return Status::success();
}

std::size_t Sender::active_requests() const {
  std::lock_guard lock(impl_->mutex);
  std::size_t n = 0;
  for (const auto& [id, e] : impl_->entries) n += is_terminal(e.status.state) ? 0 : 1;
  return n;
}

}  // namespace fabric::kv
