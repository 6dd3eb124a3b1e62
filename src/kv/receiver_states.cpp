// The receiver's request state machine: a request stops (cancel, reject, failure, a fenced
// source), and ends once none of its legs can write any more. quiet_end decides how, from the
// record alone; the rest applies it.

#include "receiver_impl.hpp"

namespace fabric::kv {

std::optional<RequestStatus> Receiver::Impl::quiet_end(const Entry& e, Clock::time_point now) {
  if (is_terminal(e.status.state) || !e.stopping) return std::nullopt;
  for (const Leg& l : e.legs) {
    if (!l.quiet) return std::nullopt;
  }
  // Pages a source that could not be fenced may still write: kept from reuse until then.
  if (e.quarantine_until && now < *e.quarantine_until) return std::nullopt;
  if (e.user_cancel) return RequestStatus{State::cancelled, {}};
  return RequestStatus{State::failed, e.error};
}

void Receiver::Impl::finish_if_quiet(Outbox& a, const std::string& id, Entry& e,
                                     Clock::time_point now) {
  if (auto end = quiet_end(e, now)) a.note(id, e.status, std::move(*end));
}

void Receiver::Impl::begin_stop(Outbox& a, const std::string& id, Entry& e, Status why,
                                bool user) {
  if (is_terminal(e.status.state)) return;
  if (user) e.user_cancel = true;
  if (e.error.ok() && !why.ok()) e.error = std::move(why);
  if (!e.stopping) {
    e.stopping = true;
    e.stop_deadline = Clock::now() + link.dead_after();
    for (const Leg& l : e.legs) {
      if (!l.quiet && sources[l.source].alive) a.send(sources[l.source].addr, msg::Cancel{id});
    }
  }
  finish_if_quiet(a, id, e, Clock::now());
}

Receiver::Impl::Entry* Receiver::Impl::find_leg(const std::string& id, std::uint32_t source,
                                                Leg*& leg) {
  Entry* e = entries.find(id);
  if (e == nullptr) return nullptr;
  for (Leg& l : e->legs) {
    if (l.source == source) {
      leg = &l;
      return e;
    }
  }
  return nullptr;
}

}  // namespace fabric::kv
