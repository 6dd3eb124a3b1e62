// What the receiver does on a prefill rank's message, a request's completed count and a tick
// (silent ranks, ranks that do not acknowledge a cancel).

#include <fmt/format.h>

#include "receiver_impl.hpp"

namespace fabric::kv {

void Receiver::Impl::on_message(msg::Message&& m) {
  Outbox a;
  {
    std::lock_guard lock(mutex);
    const auto s = sources.heard(m.from_instance, Clock::now());
    if (!s) return;                  // not a source of ours
    if (!sources[*s].alive) return;  // declared dead and fenced: nothing it says counts
    std::visit([&](auto& body) { handle(a, *s, body); }, m.body);
  }
  changed.notify_all();
  deliver(a);
}

void Receiver::Impl::handle(Outbox&, std::uint32_t s, msg::HelloAck& h) {
  Source& src = sources[s];
  if (h.layout.fingerprint() != config.layout.fingerprint()) {
    src.hello_error =
        Status(Errc::invalid_argument, "the prefill rank's layout describes a different model");
    return;
  }
  src.layout = std::move(h.layout);
  src.joined = true;
}

void Receiver::Impl::handle(Outbox& a, std::uint32_t s, msg::Accept& m) {
  Leg* leg = nullptr;
  Entry* e = find_leg(m.id, s, leg);
  if (e == nullptr) return;
  leg->accepted = true;
  if (e->status.state != State::waiting || e->stopping) return;
  for (const Leg& l : e->legs) {
    if (!l.accepted) return;
  }
  a.note(m.id, e->status, {State::transferring, {}});
}

void Receiver::Impl::handle(Outbox& a, std::uint32_t s, msg::Reject& m) {
  if (m.id.empty()) {  // the HELLO was refused
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

void Receiver::Impl::handle(Outbox& a, std::uint32_t s, msg::SenderDone& m) {
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

void Receiver::Impl::handle(Outbox& a, std::uint32_t s, msg::CancelAck& m) {
  Leg* leg = nullptr;
  Entry* e = find_leg(m.id, s, leg);
  if (e == nullptr) return;
  leg->quiet = true;
  finish_if_quiet(a, m.id, *e, Clock::now());
}

void Receiver::Impl::on_count(std::uint32_t imm) {
  Outbox a;
  {
    std::lock_guard lock(mutex);
    auto id = by_imm.find(imm);
    if (id == by_imm.end()) return;
    const std::string key = std::move(id->second);
    by_imm.erase(id);
    Entry* e = entries.find(key);
    if (e == nullptr) return;
    // Every write of the plan has landed, so none can land any more.
    e->count_reached = true;
    for (Leg& l : e->legs) l.quiet = true;
    if (!e->stopping) {
      a.note(key, e->status, {State::done, {}});
    } else {
      e->quarantine_until.reset();
      finish_if_quiet(a, key, *e, Clock::now());
    }
  }
  changed.notify_all();
  deliver(a);
}

void Receiver::Impl::on_tick(Clock::time_point now) {
  Outbox a;
  std::vector<std::pair<std::uint32_t, std::string>> to_fence;
  {
    std::lock_guard lock(mutex);
    // A silent rank stays alive until fence() (outside the mutex) revokes its keys.
    sources.pulse(now, link.dead_after(), [&](std::uint32_t s) {
      to_fence.emplace_back(s, fmt::format("was silent for {} ms", link.dead_after().count()));
    });
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
  deliver(a);
  for (auto& [s, why] : to_fence) fence(s, why);
  changed.notify_all();
}

}  // namespace fabric::kv
