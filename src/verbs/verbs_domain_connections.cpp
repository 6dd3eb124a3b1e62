// A VerbsDomain's connections: the UD handshake that connects a peer's lanes, its retries and
// timeout, replies to lost replies, and how a connection breaks (docs/verbs.md).

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <utility>

#include "common/log.hpp"
#include "verbs/verbs_domain.hpp"

namespace fabric::verbs {

Result<std::unique_ptr<Connection>> VerbsDomain::new_connection(Peer& peer, bool initiator) {
  auto conn = std::make_unique<Connection>();
  conn->initiator = initiator;
  conn->peer = &peer;
  for (Lane* lane : {&conn->msg, &conn->write}) {
    ibv_srq* srq = lane == &conn->msg ? msg_srq_.get() : imm_srq_.get();
    auto qp = create_rc_qp(pd_.get(), cq_.get(), srq, config_.send_queue_depth,
                           config_.max_inline_data);
    if (!qp) return qp.status();
    lane->qp = std::move(qp->qp);
    lane->psn = next_psn_;
    next_psn_ = (next_psn_ + 0x10000) & 0xffffff;
  }
  return conn;
}

Status VerbsDomain::send_handshake(Peer& peer, const Connection& conn, Handshake::Type type) {
  Handshake m;
  m.type = type;
  m.conn_id = conn.id;
  m.sender = self_;
  m.receiver_nonce = peer.address.nonce;
  m.msg_qpn = conn.msg.qp->qp_num;
  m.write_qpn = conn.write.qp->qp_num;
  m.msg_psn = conn.msg.psn;
  m.write_psn = conn.write.psn;
  return handshake_->send(m, peer.ah.get(), peer.address.ud_qpn);
}

Status VerbsDomain::start_connect(Peer& peer) {
  if (peer.outgoing && peer.outgoing->state != ConnectionState::broken) return Status::success();
  if (peer.outgoing) retire(std::move(peer.outgoing));
  auto conn = new_connection(peer, true);
  if (!conn) return conn.status();
  peer.outgoing = std::move(conn).value();
  Connection& c = *peer.outgoing;
  c.id = rng_();
  const auto now = Clock::now();
  c.deadline = now + config_.connect_timeout;
  c.next_retry = now;  // the first request goes out on the next poll
  if (std::find(connecting_.begin(), connecting_.end(), &peer) == connecting_.end()) {
    connecting_.push_back(&peer);
  }
  log::debug("verbs: connecting to {} (connection {:#x})", peer_name(peer), c.id);
  return Status::success();
}

Status VerbsDomain::connect_lanes(Connection& conn, const Handshake& remote) {
  const RemoteEnd msg{&conn.peer->address, remote.msg_qpn, remote.msg_psn};
  const RemoteEnd write{&conn.peer->address, remote.write_qpn, remote.write_psn};
  if (auto st = connect_rc_qp(conn.msg.qp.get(), local_, msg, conn.msg.psn, config_); !st.ok()) {
    return st;
  }
  return connect_rc_qp(conn.write.qp.get(), local_, write, conn.write.psn, config_);
}

void VerbsDomain::on_handshake(const Handshake& message) {
  if (drop_handshakes_ > 0) {
    --drop_handshakes_;
    log::debug("verbs: dropped a handshake (FABRIC_VERBS_TEST_DROP_HANDSHAKES)");
    return;
  }
  if (message.receiver_nonce != self_.nonce) {
    log::debug("verbs: dropped a handshake meant for another Domain instance");
    return;
  }
  auto peer = find_or_add_peer(message.sender);
  if (!peer) {
    log::warn("verbs: handshake from an unreachable peer: {}", peer.status().message());
    return;
  }
  if (message.type == Handshake::Type::request) {
    on_request(**peer, message);
  } else {
    on_reply(**peer, message);
  }
}

void VerbsDomain::on_request(Peer& peer, const Handshake& message) {
  if (peer.fenced) {
    // No reply: the fenced peer's requests wait for it, then fail by its connect_timeout.
    log::debug("verbs: refused a handshake from fenced {}", peer_name(peer));
    return;
  }
  if (peer.incoming && peer.incoming->id == message.conn_id) {
    // Our reply was lost: the queue pairs are connected already, say so again.
    (void)send_handshake(peer, *peer.incoming, Handshake::Type::reply);
    return;
  }
  // The peer keeps one connection to us; a new one means it gave up the old.
  if (peer.incoming) {
    break_connection(*peer.incoming, "replaced by the peer's new connection");
    retire(std::move(peer.incoming));
  }
  auto conn = new_connection(peer, false);
  if (!conn) {
    log::warn("verbs: cannot accept {}: {}", peer_name(peer), conn.status().message());
    return;
  }
  (*conn)->id = message.conn_id;
  if (auto st = connect_lanes(**conn, message); !st.ok()) {
    log::warn("verbs: cannot accept {}: {}", peer_name(peer), st.message());
    return;
  }
  (*conn)->state = ConnectionState::ready;
  peer.incoming = std::move(conn).value();
  (void)send_handshake(peer, *peer.incoming, Handshake::Type::reply);
}

void VerbsDomain::on_reply(Peer& peer, const Handshake& message) {
  Connection* conn = peer.outgoing.get();
  if (conn == nullptr || conn->id != message.conn_id ||
      conn->state != ConnectionState::connecting) {
    return;
  }
  if (auto st = connect_lanes(*conn, message); !st.ok()) {
    break_connection(*conn, st.message());
    fail_queued(peer, st);
    return;
  }
  became_ready(*conn);
}

void VerbsDomain::became_ready(Connection& conn) {
  conn.state = ConnectionState::ready;
  Peer& peer = *conn.peer;
  log::debug("verbs: connected to {} (connection {:#x})", peer_name(peer), conn.id);
  if (!peer.queued.empty() && !peer.waiting) {
    peer.waiting = true;
    waiting_peers_.push_back(&peer);
  }
}

void VerbsDomain::break_connection(Connection& conn, const std::string& why) {
  if (conn.state == ConnectionState::broken) return;
  const bool was_ready = conn.state == ConnectionState::ready;
  conn.state = ConnectionState::broken;
  conn.failure = why;
  std::erase(to_ring_, &conn);
  if (conn.initiator) broken_peers_.push_back(conn.peer);
  if (was_ready || !conn.initiator) {
    log::warn("verbs: connection {:#x} with {} failed: {}", conn.id, peer_name(*conn.peer), why);
  }
  // WRITEs still waiting for their doorbell never reach the device: fail them here.
  for (Lane* lane : {&conn.msg, &conn.write}) {
    for (std::size_t i = 0; i < lane->chained; ++i) {
      const std::uint64_t slot = lane->chain[i].wr_id;
      emit({domain::Event::Kind::tx_done, tx_slots_[slot].token, 0, 0,
            Status(Errc::provider, fmt::format("not posted: {}", why))});
      free_tx_.push_back(slot);
      --lane->outstanding;
    }
    lane->chained = 0;
    // The device flushes what was posted, each with IBV_WC_WR_FLUSH_ERR.
    if (lane->qp) {
      if (auto st = fail_qp(lane->qp.get()); !st.ok()) log::warn("{}", st.message());
    }
  }
}

void VerbsDomain::retire(std::unique_ptr<Connection> conn) {
  if (conn->outstanding() > 0) retired_.push_back(std::move(conn));
}

void VerbsDomain::progress_connections(Clock::time_point now) {
  for (auto& message : handshake_->poll()) on_handshake(message);
  std::erase_if(connecting_, [&](Peer* peer) {
    Connection* conn = peer->outgoing.get();
    if (conn == nullptr || conn->state != ConnectionState::connecting) return true;
    if (now >= conn->deadline) {
      const auto why = fmt::format(
          "verbs: no handshake reply from {} within connect_timeout ({} ms): peer gone or "
          "unreachable",
          peer_name(*peer), config_.connect_timeout.count());
      break_connection(*conn, why);
      fail_queued(*peer, Status(Errc::timeout, why));
      retire(std::move(peer->outgoing));
      return true;
    }
    if (now >= conn->next_retry) {
      Status st = send_handshake(*peer, *conn, Handshake::Type::request);
      if (!st.ok() && st.code() != Errc::again) log::debug("handshake: {}", st.message());
      conn->next_retry = now + config_.handshake_retry;
    }
    return false;
  });
}

}  // namespace fabric::verbs
