// The sender's request state machine: when a transfer and a request end, and how. The decisions
// are pure functions of the records (transfer_end, request_end); the rest applies them.

#include <fmt/format.h>

#include "sender_impl.hpp"

namespace fabric::kv {

std::optional<Sender::Impl::TransferEnd> Sender::Impl::transfer_end(const std::string& id,
                                                                    const Transfer& t,
                                                                    bool local_cancel) {
  if (t.cancel_requested) return TransferEnd{State::cancelled, msg::CancelAck{id}};
  if (t.peer_dead) return TransferEnd{State::failed, std::nullopt};
  if (!t.error.ok()) return TransferEnd{State::failed, msg::SenderDone{id, t.error}};
  if (local_cancel) {
    return TransferEnd{State::cancelled,
                       msg::SenderDone{id, Status(Errc::cancelled, "the prefiller cancelled")}};
  }
  if (t.tail_posted) return TransferEnd{State::done, msg::SenderDone{id, Status::success()}};
  return std::nullopt;
}

std::optional<RequestStatus> Sender::Impl::request_end(const std::string& id, const Entry& e) {
  if (is_terminal(e.status.state)) return std::nullopt;  // ended before: reported once
  const bool all_here = e.transfers.size() + e.declined >= e.receivers;
  if (!all_here && !e.local_cancel && !e.missing_failed) return std::nullopt;
  for (const auto& t : e.transfers) {
    if (!t->ended) return std::nullopt;
  }
  if (e.local_cancel) return RequestStatus{State::cancelled, {}};
  if (e.missing_failed) {
    return RequestStatus{State::failed,
                         Status(Errc::timeout,
                                fmt::format("{} of {} decoders asked for request {} in time",
                                            e.transfers.size(), e.receivers, id))};
  }
  RequestStatus s{State::done, {}};
  for (const auto& t : e.transfers) {
    if (t->end == State::failed) {
      return RequestStatus{State::failed,
                           t->peer_dead ? Status(Errc::timeout, "the decoder died") : t->error};
    }
    if (t->end == State::cancelled) s = {State::cancelled, {}};
  }
  return s;
}

void Sender::Impl::reply(Actions& a, std::uint64_t peer, msg::Body body) {
  const Peer* p = peers.find(peer);
  if (p != nullptr && p->alive) a.send(p->addr, std::move(body));
}

void Sender::Impl::stop_transfer(Transfer& t, Status why) {
  if (t.error.ok() && !why.ok()) t.error = std::move(why);
  t.stopping = true;
}

void Sender::Impl::check_transfer(Actions& a, const std::string& id, Entry& e, Transfer& t) {
  if (t.ended || t.outstanding > 0) return;
  auto end = transfer_end(id, t, e.local_cancel);
  if (!end) return;
  if (end->reply) reply(a, t.peer, std::move(*end->reply));
  t.end = end->state;
  t.ended = true;
  check_entry(a, id, e);
}

void Sender::Impl::check_entry(Actions& a, const std::string& id, Entry& e) {
  if (auto end = request_end(id, e)) a.note(id, e.status, std::move(*end));
}

}  // namespace fabric::kv
