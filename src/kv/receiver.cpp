#include "fabric/kv/receiver.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <condition_variable>
#include <limits>
#include <atomic>
#include <unordered_map>

#include "link.hpp"

namespace fabric::kv {

struct Receiver::Impl : std::enable_shared_from_this<Receiver::Impl> {
  // A prefill rank, with this receiver's regions registered for it alone.
  struct Source {
    NetAddr addr;
    KvLayout layout;
    std::vector<Registered> regions;
    bool acked = false;
    Status hello_error;
    Clock::time_point last_seen;
    bool alive = true;
    bool fencing = false;
    // fence() has finished: its keys are revoked and its requests failed, so connect() may
    // start a new epoch with it (a starved process that speaks again is not dead for good).
    bool fenced = false;
  };
  struct Leg {
    std::uint32_t source = 0;
    HeadRange heads;
    std::uint64_t expected = 0;
    bool accepted = false;
    bool quiet = false;  // no write of this leg can land any more
  };
  struct Entry {
    std::vector<std::uint32_t> pages;
    std::uint32_t num_tokens = 0;
    std::uint32_t imm = 0;
    std::uint64_t total = 0;
    std::vector<Leg> legs;
    RequestStatus status;
    bool stopping = false;
    bool user_cancel = false;
    bool count_reached = false;
    Status error;
    Clock::time_point stop_deadline;
    std::optional<Clock::time_point> quarantine_until;
  };
  struct Actions {
    std::vector<std::pair<NetAddr, msg::Body>> sends;
    std::vector<std::pair<std::string, RequestStatus>> notes;
  };

  Impl(TransferEngine& e, ReceiverConfig c, ImmReservation block)
      : engine(e), config(std::move(c)), link(e, config.liveness), imms(std::move(block)) {}

  TransferEngine& engine;
  ReceiverConfig config;
  Link link;
  mutable std::mutex mutex;
  mutable std::condition_variable changed;
  std::vector<Source> sources;
  std::unordered_map<std::uint64_t, std::uint32_t> by_instance;
  std::unordered_map<std::string, Entry> entries;
  // Values of `imms` whose expectation is still pending on the engine: a request in flight, or
  // a released one whose writes never all landed (mapped to "", never reused: its expectation
  // would take the next request's arrivals).
  std::unordered_map<std::uint32_t, std::string> by_imm;
  // This receiver's own immediates (kReceiverImms, reserved on the engine, released with it): one
  // per request, carried to the prefill ranks in msg::Request::imm, so they need no range.
  ImmReservation imms;
  std::uint32_t next_imm = 0;  // index into imms, cycling

  // The next value of the block no pending expectation holds.
  Result<std::uint32_t> take_imm() {
    for (std::uint32_t tried = 0; tried < imms.count(); ++tried) {
      const std::uint32_t imm = imms.first() + next_imm;
      next_imm = (next_imm + 1) % imms.count();
      if (!by_imm.contains(imm)) return imm;
    }
    return Status(Errc::out_of_range,
                  fmt::format("KV receiver: every immediate of its block \"{}\" [{:#x}, +{}) is "
                              "held by a request in flight or one whose writes never all landed",
                              imms.owner(), imms.first(), imms.count()));
  }

  // ---------------------------------------------------------------- under mutex

  void note(Actions& a, const std::string& id, Entry& e, RequestStatus s) {
    e.status = s;
    a.notes.emplace_back(id, std::move(s));
  }

  void finish_if_quiet(Actions& a, const std::string& id, Entry& e, Clock::time_point now) {
    if (is_terminal(e.status.state) || !e.stopping) return;
    for (const Leg& l : e.legs) {
      if (!l.quiet) return;
    }
    if (e.quarantine_until && now < *e.quarantine_until) return;
    if (e.user_cancel) {
      note(a, id, e, {State::cancelled, {}});
    } else {
      note(a, id, e, {State::failed, e.error});
    }
  }

  void begin_stop(Actions& a, const std::string& id, Entry& e, Status why, bool user) {
    if (is_terminal(e.status.state)) return;
    if (user) e.user_cancel = true;
    if (e.error.ok() && !why.ok()) e.error = std::move(why);
    if (!e.stopping) {
      e.stopping = true;
      e.stop_deadline = Clock::now() + link.dead_after();
      for (Leg& l : e.legs) {
        if (!l.quiet && sources[l.source].alive) a.sends.emplace_back(sources[l.source].addr, msg::Cancel{id});
      }
    }
    finish_if_quiet(a, id, e, Clock::now());
  }

  Entry* find_leg(const std::string& id, std::uint32_t source, Leg*& leg) {
    auto it = entries.find(id);
    if (it == entries.end()) return nullptr;
    for (Leg& l : it->second.legs) {
      if (l.source == source) {
        leg = &l;
        return &it->second;
      }
    }
    return nullptr;
  }

  // ---------------------------------------------------------------- events

  void on_message(msg::Message&& m) {
    Actions a;
    {
      std::lock_guard lock(mutex);
      auto s = by_instance.find(m.from_instance);
      if (s == by_instance.end()) return;  // not a source of ours
      Source& src = sources[s->second];
      if (!src.alive) return;  // declared dead and fenced: nothing it says counts
      src.last_seen = Clock::now();
      std::visit([&](auto& body) { handle(a, s->second, body); }, m.body);
    }
    changed.notify_all();
    run(std::move(a));
  }

  void handle(Actions&, std::uint32_t s, msg::HelloAck& h) {
    Source& src = sources[s];
    if (h.layout.fingerprint() != config.layout.fingerprint()) {
      src.hello_error = Status(Errc::invalid_argument,
                               "the prefill rank's layout describes a different model");
      return;
    }
    src.layout = std::move(h.layout);
    src.acked = true;
  }
  void handle(Actions& a, std::uint32_t s, msg::Accept& m) {
    Leg* leg = nullptr;
    Entry* e = find_leg(m.id, s, leg);
    if (e == nullptr) return;
    leg->accepted = true;
    if (e->status.state != State::waiting || e->stopping) return;
    for (const Leg& l : e->legs) {
      if (!l.accepted) return;
    }
    note(a, m.id, *e, {State::transferring, {}});
  }
  void handle(Actions& a, std::uint32_t s, msg::Reject& m) {
    if (m.id.empty()) {
      sources[s].hello_error = m.status;
      return;
    }
    Leg* leg = nullptr;
    Entry* e = find_leg(m.id, s, leg);
    if (e == nullptr) return;
    leg->quiet = true;
    begin_stop(a, m.id, *e,
               Status(m.status.code(), fmt::format("prefill rank {} rejected request {}: {}", s,
                                                   m.id, m.status.message())),
               false);
  }
  void handle(Actions& a, std::uint32_t s, msg::SenderDone& m) {
    Leg* leg = nullptr;
    Entry* e = find_leg(m.id, s, leg);
    if (e == nullptr) return;
    leg->quiet = true;
    if (!m.status.ok()) {
      begin_stop(a, m.id, *e,
                 Status(m.status.code(), fmt::format("prefill rank {} failed request {}: {}", s,
                                                     m.id, m.status.message())),
                 false);
    }
    finish_if_quiet(a, m.id, *e, Clock::now());
  }
  void handle(Actions& a, std::uint32_t s, msg::CancelAck& m) {
    Leg* leg = nullptr;
    Entry* e = find_leg(m.id, s, leg);
    if (e == nullptr) return;
    leg->quiet = true;
    finish_if_quiet(a, m.id, *e, Clock::now());
  }
  void handle(Actions&, std::uint32_t, msg::Heartbeat&) {}
  template <typename T>
  void handle(Actions&, std::uint32_t, T&) {}

  void on_count(std::uint32_t imm) {
    Actions a;
    {
      std::lock_guard lock(mutex);
      auto id = by_imm.find(imm);
      if (id == by_imm.end()) return;
      auto it = entries.find(id->second);
      by_imm.erase(id);
      if (it == entries.end()) return;
      Entry& e = it->second;
      // Every write of the plan has landed, so none can land any more.
      e.count_reached = true;
      for (Leg& l : e.legs) l.quiet = true;
      if (!e.stopping) {
        note(a, it->first, e, {State::done, {}});
      } else {
        e.quarantine_until.reset();
        finish_if_quiet(a, it->first, e, Clock::now());
      }
    }
    changed.notify_all();
    run(std::move(a));
  }

  // Revokes the source's keys and drops its connection, so that nothing it still sends lands;
  // where the provider cannot fence (shm), its requests' pages are quarantined instead.
  void fence(std::uint32_t s, const std::string& why) {
    NetAddr addr;
    std::vector<Registered> regions;
    {
      std::lock_guard lock(mutex);
      Source& src = sources[s];
      if (src.fencing) return;
      src.fencing = true;
      src.alive = false;
      addr = src.addr;
      regions = std::move(src.regions);
      src.regions.clear();
    }
    spdlog::warn("fabric kv: fencing prefill rank {} ({}): {}", s, addr.describe(), why);
    for (const Registered& r : regions) {
      if (auto st = engine.dereg_mr(r.handle); !st.ok()) {
        spdlog::warn("fabric kv: revoking a region of prefill rank {}: {}", s, st.to_string());
      }
    }
    const Status fenced = engine.fence_peer(addr);
    const bool can_fence = fenced.ok();
    if (!can_fence) {
      spdlog::warn("fabric kv: prefill rank {} cannot be fenced ({}); its pages stay quarantined "
                   "for {} ms",
                   s, fenced.to_string(), config.quarantine.count());
    }
    Actions a;
    {
      std::lock_guard lock(mutex);
      const auto now = Clock::now();
      for (auto& [id, e] : entries) {
        if (is_terminal(e.status.state)) continue;
        bool involved = false;
        for (Leg& l : e.legs) {
          if (l.source != s || l.quiet) continue;
          involved = true;
          l.quiet = true;
        }
        if (!involved) continue;
        if (!can_fence) {
          const auto until = now + config.quarantine;
          if (!e.quarantine_until || *e.quarantine_until < until) e.quarantine_until = until;
        }
        begin_stop(a, id, e,
                   Status(Errc::timeout, fmt::format("prefill rank {} {}", s, why)), false);
      }
      sources[s].fenced = true;
    }
    changed.notify_all();
    run(std::move(a));
  }

  void on_tick(Clock::time_point now) {
    Actions a;
    std::vector<std::pair<std::uint32_t, std::string>> to_fence;
    {
      std::lock_guard lock(mutex);
      for (std::uint32_t s = 0; s < sources.size(); ++s) {
        Source& src = sources[s];
        if (!src.alive || !src.acked) continue;
        if (now - src.last_seen > link.dead_after()) {
          to_fence.emplace_back(s, fmt::format("was silent for {} ms", link.dead_after().count()));
          continue;
        }
        a.sends.emplace_back(src.addr, msg::Heartbeat{});
      }
      for (auto& [id, e] : entries) {
        if (is_terminal(e.status.state) || !e.stopping) continue;
        if (now > e.stop_deadline) {
          for (const Leg& l : e.legs) {
            if (!l.quiet && sources[l.source].alive) {
              to_fence.emplace_back(l.source, fmt::format("did not acknowledge the cancel of {} "
                                                          "within {} ms",
                                                          id, link.dead_after().count()));
            }
          }
        }
        finish_if_quiet(a, id, e, now);
      }
    }
    run(std::move(a));
    for (auto& [s, why] : to_fence) fence(s, why);
    changed.notify_all();
  }

  // A second connect() to a rank already known: its index once the first one's handshake
  // succeeded (waiting for it while in flight), its error if that failed.
  Result<std::uint32_t> join_connect(std::uint32_t index, const NetAddr& sender,
                                     std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex);
    // By index, never by reference: another connect() may grow `sources` while this waits.
    const bool settled = changed.wait_for(lock, timeout, [&] {
      return sources[index].acked || !sources[index].alive || !sources[index].hello_error.ok();
    });
    const Source& s = sources[index];
    if (s.acked && s.alive) return index;
    if (!settled) {
      return Status(Errc::timeout, fmt::format("KV receiver: prefill rank {} did not answer "
                                               "within {} ms",
                                               sender.describe(), timeout.count()));
    }
    return Status(Errc::invalid_argument,
                  fmt::format("KV receiver: prefill rank {} failed before ({}); a restarted rank "
                              "has a new address",
                              sender.describe(),
                              s.hello_error.ok() ? std::string("dead") : s.hello_error.to_string()));
  }

  void run(Actions a) {
    for (auto& [to, body] : a.sends) {
      if (auto st = link.send(to, body); !st.ok()) {
        spdlog::warn("fabric kv: send to {} failed: {}", to.describe(), st.to_string());
      }
    }
    for (auto& [id, s] : a.notes) {
      if (config.on_state) config.on_state(id, s);
    }
  }
};

Receiver::Receiver(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

Receiver::~Receiver() {
  impl_->link.stop();
  std::lock_guard lock(impl_->mutex);
  for (auto& s : impl_->sources) {
    for (auto& r : s.regions) (void)impl_->engine.dereg_mr(r.handle);
  }
}

Result<std::unique_ptr<Receiver>> Receiver::create(TransferEngine& engine, ReceiverConfig config) {
  if (auto st = config.layout.validate(); !st.ok()) return st;
  if (config.regions.size() < config.layout.num_regions) {
    return Status(Errc::invalid_argument,
                  fmt::format("KV receiver: {} regions for a layout of {}", config.regions.size(),
                              config.layout.num_regions));
  }
  const std::uint64_t span = config.layout.span_bytes();
  for (const PartBase& b : config.layout.bases) {
    const RegionMemory& r = config.regions[b.region];
    if (r.ptr == nullptr || b.offset + span > r.length) {
      return Status(Errc::out_of_range,
                    fmt::format("KV receiver: region {} ({} bytes) cannot hold a part of {} bytes "
                                "at offset {}",
                                b.region, r.length, span, b.offset));
    }
  }
  // A name per receiver: two receivers on one engine get disjoint blocks.
  static std::atomic<std::uint64_t> receivers{0};
  auto block = engine.reserve_imms(kReceiverImms, fmt::format("kv.receiver#{}", ++receivers));
  if (!block.ok()) {
    return Status(block.status().code(),
                  "KV receiver: reserving its immediates: " + block.status().message());
  }
  auto impl = std::make_shared<Impl>(engine, std::move(config), std::move(block).value());
  if (auto st = impl->link.start_for(impl); !st.ok()) return st;
  return std::unique_ptr<Receiver>(new Receiver(std::move(impl)));
}

Result<std::uint32_t> Receiver::connect(const NetAddr& sender, std::chrono::milliseconds timeout) {
  auto& im = *impl_;
  std::uint32_t index = 0;
  {
    std::unique_lock lock(im.mutex);
    if (auto it = im.by_instance.find(sender.instance_id()); it != im.by_instance.end()) {
      if (!im.sources[it->second].fenced) {
        lock.unlock();
        return im.join_connect(it->second, sender, timeout);
      }
      // Declared dead and fenced, and asked for again (a process that was stopped or starved
      // and runs again): a new epoch under the same index. The fence revoked the old epoch's
      // keys, so nothing it still had in flight can land; the handshake below registers fresh
      // regions for it. On verbs the fenced instance refuses the handshake (docs/kv.md).
      index = it->second;
      spdlog::info("fabric kv: prefill rank {} ({}) speaks again after its fence: re-admitted "
                   "with new keys",
                   index, sender.describe());
      im.sources[index] = Impl::Source{sender, {}, {}, false, {}, Clock::now(), true, false};
    } else {
      index = static_cast<std::uint32_t>(im.sources.size());
      im.sources.push_back(Impl::Source{sender, {}, {}, false, {}, Clock::now(), true, false});
      im.by_instance[sender.instance_id()] = index;
    }
  }
  // One registration per region for this sender: fencing it revokes these keys only.
  // One batch: a worker round trip per region cost most of connect on a loaded host (docs/kv.md).
  std::vector<MemoryRange> ranges;
  for (const RegionMemory& r : im.config.regions) ranges.push_back({r.ptr, r.length, r.device});
  auto registered = im.engine.reg_mrs(ranges);
  if (!registered.ok()) {
    {
      std::lock_guard lock(im.mutex);
      im.sources[index].alive = false;
    }
    im.changed.notify_all();  // a concurrent connect() to the same rank waits on this one
    return registered.status();
  }
  std::vector<Registered> regions = std::move(registered).value();
  std::vector<MrDesc> descs;
  for (const Registered& r : regions) descs.push_back(r.desc);
  {
    std::lock_guard lock(im.mutex);
    im.sources[index].regions = std::move(regions);
  }
  if (auto st = im.link.send(sender, msg::Hello{im.engine.main_address(), im.config.layout, descs});
      !st.ok()) {
    {
      std::lock_guard lock(im.mutex);
      im.sources[index].alive = false;
    }
    im.changed.notify_all();
    return st;
  }
  std::unique_lock lock(im.mutex);
  const bool answered = im.changed.wait_for(lock, timeout, [&] {
    return im.sources[index].acked || !im.sources[index].hello_error.ok();
  });
  Impl::Source& s = im.sources[index];
  if (!answered || !s.hello_error.ok()) {
    s.alive = false;
    const Status refused = s.hello_error;  // `s` may move once the lock is dropped
    lock.unlock();
    im.changed.notify_all();
    return answered ? refused
                    : Status(Errc::timeout, fmt::format("KV receiver: prefill rank {} did not "
                                                        "answer within {} ms",
                                                        sender.describe(), timeout.count()));
  }
  s.last_seen = Clock::now();
  return index;
}

Result<KvLayout> Receiver::source_layout(std::uint32_t source) const {
  std::lock_guard lock(impl_->mutex);
  if (source >= impl_->sources.size() || !impl_->sources[source].acked) {
    return Status(Errc::not_found, fmt::format("KV receiver: no connected source {}", source));
  }
  return impl_->sources[source].layout;
}

Result<std::uint64_t> Receiver::request(std::string id, std::vector<std::uint32_t> pages,
                                        std::uint32_t num_tokens,
                                        std::span<const std::uint32_t> source_list,
                                        std::optional<Tail> tail, std::uint32_t src_first) {
  auto& im = *impl_;
  const KvLayout& mine = im.config.layout;
  if (id.empty() || id.size() > msg::kMaxIdBytes) {
    return Status(Errc::invalid_argument, "KV receiver: request ids are 1-256 bytes");
  }
  if (num_tokens == 0 || source_list.empty() ||
      std::uint64_t{src_first} + num_tokens > std::numeric_limits<std::uint32_t>::max()) {
    return Status(Errc::invalid_argument, "KV receiver: a request needs tokens and sources");
  }
  if (pages.size() != (num_tokens + mine.tokens_per_page - 1) / mine.tokens_per_page) {
    return Status(Errc::invalid_argument,
                  fmt::format("KV receiver: {} pages for {} tokens of {} per page", pages.size(),
                              num_tokens, mine.tokens_per_page));
  }
  for (std::size_t i = 0; i < pages.size(); ++i) {
    if (pages[i] >= mine.num_pages) {
      return Status(Errc::out_of_range, fmt::format("KV receiver: page {} (position {}) of {}",
                                                    pages[i], i, mine.num_pages));
    }
  }
  if (tail) {
    if (tail->region >= im.config.regions.size() ||
        tail->offset + tail->bytes > im.config.regions[tail->region].length) {
      return Status(Errc::out_of_range, "KV receiver: tail outside its region");
    }
  }
  Impl::Entry entry;
  std::vector<std::pair<NetAddr, msg::Request>> sends;
  std::uint32_t imm = 0;
  std::uint64_t total = 0;
  {
    std::lock_guard lock(im.mutex);
    if (im.entries.contains(id)) {
      return Status(Errc::invalid_argument, fmt::format("KV receiver: request {} exists", id));
    }
    std::vector<HeadRange> held;
    for (std::uint32_t s : source_list) {
      if (s >= im.sources.size() || !im.sources[s].acked) {
        return Status(Errc::not_found, fmt::format("KV receiver: source {} is not connected", s));
      }
      if (!im.sources[s].alive) {
        return Status(Errc::invalid_argument, fmt::format("KV receiver: source {} is dead", s));
      }
      const KvLayout& l = im.sources[s].layout;
      held.push_back({l.head_begin, l.head_begin + l.num_heads});
    }
    auto routes = plan_routes(held, HeadRange{mine.head_begin, mine.head_begin + mine.num_heads},
                              im.config.spread);
    if (!routes.ok()) return routes.status();
    auto taken = im.take_imm();
    if (!taken.ok()) return taken.status();
    imm = *taken;
    for (std::size_t i = 0; i < routes->size(); ++i) {
      const Route& r = (*routes)[i];
      const std::uint32_t s = source_list[r.source];
      const KvLayout& src = im.sources[s].layout;
      auto runs = plan_runs(src, mine, r.heads, TokenRange{src_first, src_first + num_tokens},
                            src_first);
      if (!runs.ok()) return runs.status();
      Impl::Leg leg{s, r.heads, sender_imm_count(runs->size(), src), false, false};
      entry.total += leg.expected;
      msg::Request q;
      q.id = id;
      q.imm = imm;
      q.fingerprint = mine.fingerprint();
      q.num_tokens = num_tokens;
      q.src_first = src_first;
      q.heads = r.heads;
      q.expected_imms = leg.expected;
      if (tail && i == 0) {
        q.writes_tail = true;
        q.tail = im.sources[s].regions[tail->region].desc;
        q.tail_offset = tail->offset;
        q.tail_bytes = tail->bytes;
      }
      q.pages = pages;
      sends.emplace_back(im.sources[s].addr, std::move(q));
      entry.legs.push_back(leg);
    }
    entry.pages = std::move(pages);
    entry.num_tokens = num_tokens;
    entry.imm = imm;
    total = entry.total;
    im.entries.emplace(id, std::move(entry));
    im.by_imm[imm] = id;
  }
  std::weak_ptr<Impl> weak = impl_;
  if (auto st = im.engine.expect_imm_count(
          imm, total, [weak](std::uint32_t value, std::uint64_t) {
            if (auto self = weak.lock()) self->on_count(value);
          });
      !st.ok()) {
    std::lock_guard lock(im.mutex);
    im.entries.erase(id);
    im.by_imm.erase(imm);
    return st;
  }
  Impl::Actions a;
  for (auto& [to, q] : sends) {
    if (auto st = im.link.send(to, q); !st.ok()) {
      std::lock_guard lock(im.mutex);
      auto it = im.entries.find(id);
      if (it == im.entries.end()) break;
      auto& e = it->second;
      for (auto& l : e.legs) {
        if (im.sources[l.source].addr == to) l.quiet = true;  // never sent
      }
      im.begin_stop(a, id, e, Status(st.code(), "KV receiver: sending the request: " + st.message()),
                    false);
    }
  }
  im.run(std::move(a));
  return total;
}

Status Receiver::decline(std::string_view id, std::span<const std::uint32_t> source_list) {
  auto& im = *impl_;
  if (id.empty() || id.size() > msg::kMaxIdBytes) {
    return Status(Errc::invalid_argument, "KV receiver: request ids are 1-256 bytes");
  }
  std::vector<NetAddr> to;
  {
    std::lock_guard lock(im.mutex);
    for (std::uint32_t s : source_list) {
      if (s >= im.sources.size() || !im.sources[s].acked) {
        return Status(Errc::not_found, fmt::format("KV receiver: source {} is not connected", s));
      }
      if (!im.sources[s].alive) {
        return Status(Errc::invalid_argument, fmt::format("KV receiver: source {} is dead", s));
      }
      to.push_back(im.sources[s].addr);
    }
  }
  for (const NetAddr& addr : to) {
    if (auto st = im.link.send(addr, msg::Decline{std::string(id)}); !st.ok()) return st;
  }
  return Status::success();
}

Status Receiver::cancel(std::string_view id) {
  auto& im = *impl_;
  Impl::Actions a;
  {
    std::lock_guard lock(im.mutex);
    std::string key(id);
    auto it = im.entries.find(key);
    if (it == im.entries.end()) return {Errc::not_found, fmt::format("KV receiver: no request {}", id)};
    im.begin_stop(a, key, it->second, Status::success(), true);
  }
  im.changed.notify_all();
  im.run(std::move(a));
  return Status::success();
}

Result<RequestStatus> Receiver::poll(std::string_view id) const {
  std::lock_guard lock(impl_->mutex);
  auto it = impl_->entries.find(std::string(id));
  if (it == impl_->entries.end()) {
    return Status(Errc::not_found, fmt::format("KV receiver: no request {}", id));
  }
  return it->second.status;
}

Result<RequestStatus> Receiver::wait(std::string_view id, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(impl_->mutex);
  std::string key(id);
  const auto deadline = Clock::now() + timeout;
  while (true) {
    auto it = impl_->entries.find(key);
    if (it == impl_->entries.end()) {
      return Status(Errc::not_found, fmt::format("KV receiver: no request {}", id));
    }
    if (is_terminal(it->second.status.state)) return it->second.status;
    if (impl_->changed.wait_until(lock, deadline) == std::cv_status::timeout) {
      // Look the entry up again: `it` may have been erased while the lock was released.
      auto again = impl_->entries.find(key);
      if (again == impl_->entries.end()) {
        return Status(Errc::not_found, fmt::format("KV receiver: no request {}", id));
      }
      if (is_terminal(again->second.status.state)) return again->second.status;
      return Status(Errc::timeout, fmt::format("KV receiver: request {} still {} after {} ms", id,
                                               state_name(again->second.status.state),
                                               timeout.count()));
    }
  }
}

Status Receiver::release(std::string_view id) {
  std::lock_guard lock(impl_->mutex);
  auto it = impl_->entries.find(std::string(id));
  if (it == impl_->entries.end()) return {Errc::not_found, fmt::format("KV receiver: no request {}", id)};
  if (!is_terminal(it->second.status.state)) {
    return {Errc::invalid_argument, fmt::format("KV receiver: request {} is still {}", id,
                                                state_name(it->second.status.state))};
  }
  // Reached: on_count freed the value already (a newer request may hold it now). Not reached:
  // its expectation stays pending on the engine, so the value is never reused.
  if (!it->second.count_reached) impl_->by_imm[it->second.imm].clear();
  impl_->entries.erase(it);
  return Status::success();
}

std::size_t Receiver::active_requests() const {
  std::lock_guard lock(impl_->mutex);
  std::size_t n = 0;
  for (const auto& [id, e] : impl_->entries) n += is_terminal(e.status.state) ? 0 : 1;
  return n;
}

std::string_view state_name(State s) noexcept {
  switch (s) {
    case State::waiting: return "waiting";
    case State::transferring: return "transferring";
    case State::done: return "done";
    case State::failed: return "failed";
    case State::cancelled: return "cancelled";
  }
  return "unknown";
}

}  // namespace fabric::kv
