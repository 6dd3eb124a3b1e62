// What the sender does on a decoder's message, a write's completion and a tick (silent decoders, expired early requests, decoders that never asked).

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "sender_impl.hpp"

namespace fabric::kv {

void Sender::Impl::on_message(msg::Message&& m) {
  Actions a;
  {
    std::lock_guard lock(mutex);
    (void)peers.heard(m.from_instance, Clock::now());
    std::visit([&](auto& body) { handle(a, m.from_instance, body); }, m.body);
  }
  run(std::move(a));
}

void Sender::Impl::handle(Actions& a, std::uint64_t from, msg::Hello& h) {
  if (h.from.instance_id() != from) return;
  if (h.layout.fingerprint() != config.layout.fingerprint()) {
    a.send(h.from, msg::Reject{"", Status(Errc::invalid_argument,
                                          "the decoder's layout describes a different model")});
    return;
  }
  // A decoder that says HELLO again (restarted with the same instance) starts afresh.
  Peer p;
  p.addr = h.from;
  p.last_seen = Clock::now();
  p.joined = true;
  if (auto w = link.watch(h.from); w.ok()) {
    p.watch = std::move(w).value();
  } else {
    spdlog::warn("fabric kv: decoder {} is judged by its KV messages only: {}", h.from.describe(),
                 w.status().to_string());
  }
  p.layout = std::move(h.layout);
  p.regions = std::move(h.regions);
  a.send(p.addr, msg::HelloAck{engine.main_address(), config.layout});
  peers.put(std::move(p));
}

void Sender::Impl::handle(Actions& a, std::uint64_t from, msg::Request& q) {
  const Peer* p = peers.find(from);
  if (p == nullptr || !p->alive) {
    spdlog::warn("fabric kv: request {} from an unknown or dead decoder dropped", q.id);
    return;
  }
  std::string id = q.id;
  Entry* e = entries.find(id);
  if (e == nullptr) {
    if (auto end = released.find(id)) {
      reply(a, from,
            msg::Reject{id, Status(Errc::not_found,
                                   fmt::format("request {} ended {} and was released on this "
                                               "prefiller before this decoder asked",
                                               id, state_name(*end)))});
      return;
    }
    early[id].push_back({from, std::move(q), Clock::now() + config.receiver_timeout});
    return;
  }
  accept(a, id, *e, from, std::move(q));
}

void Sender::Impl::handle(Actions& a, std::uint64_t from, msg::Cancel& c) {
  if (auto ea = early.find(c.id); ea != early.end()) {
    std::erase_if(ea->second, [&](const Early& x) { return x.peer == from; });
    if (ea->second.empty()) early.erase(ea);
  }
  if (Entry* e = entries.find(c.id)) {
    for (auto& t : e->transfers) {
      if (t->peer == from && !t->ended) {
        t->cancel_requested = true;
        stop_transfer(*t, Status::success());
        check_transfer(a, c.id, *e, *t);
        return;
      }
    }
  }
  reply(a, from, msg::CancelAck{c.id});  // nothing of it was posted
}

void Sender::Impl::handle(Actions& a, std::uint64_t from, msg::Decline& d) {
  Entry* e = entries.find(d.id);
  if (e == nullptr) {
    if (released.find(d.id)) return;  // nothing left to stop holding
    early_declines[d.id].emplace_back(from, Clock::now() + config.receiver_timeout);
    return;
  }
  decline(a, d.id, *e, from);
}

void Sender::Impl::on_write_done(Transfer* t, const std::string& id, const Status& st) {
  Actions a;
  {
    std::lock_guard lock(mutex);
    Entry* e = entries.find(id);
    if (e == nullptr) return;
    --t->outstanding;
    if (!st.ok()) stop_transfer(*t, st);
    check_transfer(a, id, *e, *t);
  }
  run(std::move(a));
}

void Sender::Impl::on_tick(Clock::time_point now) {
  Actions a;
  {
    std::lock_guard lock(mutex);
    peers.pulse(now, link.dead_after(), [&](std::uint32_t index) {
      Peer& p = peers[index];
      p.alive = false;
      spdlog::warn("fabric kv: decoder {} silent for {} ms: its requests fail", p.addr.describe(),
                   link.dead_after().count());
      const std::uint64_t instance = p.addr.instance_id();
      for (auto& [id, e] : entries) {
        for (auto& t : e.transfers) {
          if (t->peer == instance && !t->ended) {
            t->peer_dead = true;
            stop_transfer(*t, Status(Errc::timeout, "the decoder died"));
            check_transfer(a, id, e, *t);
          }
        }
      }
    });
    for (auto it = early.begin(); it != early.end();) {
      std::erase_if(it->second, [&](const Early& x) {
        if (now < x.expires) return false;
        reply(a, x.peer,
              msg::Reject{it->first, Status(Errc::not_found, "no such request on this prefiller")});
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

}  // namespace fabric::kv
