// Posting SENDs, WRITEs and READs on a VerbsDomain: straight onto a ready connection, WRITEs and
// READs chained onto one doorbell, or queued while the peer connects.

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "verbs/verbs_domain.hpp"
#include "verbs/verbs_error.hpp"
#include "verbs/work_request_ids.hpp"

namespace fabric::verbs {

std::uint64_t VerbsDomain::acquire_tx(domain::Token token, Connection* conn, bool msg_lane) {
  std::uint64_t slot = 0;
  if (free_tx_.empty()) {
    slot = tx_slots_.size();
    tx_slots_.emplace_back();
  } else {
    slot = free_tx_.back();
    free_tx_.pop_back();
  }
  tx_slots_[slot] = {token, conn, msg_lane, false};
  return slot;
}

Result<Peer*> VerbsDomain::peer_for_request(domain::PeerHandle handle) {
  if (handle >= peers_.size()) {
    return Status(Errc::invalid_argument, fmt::format("unknown verbs peer handle {}", handle));
  }
  Peer* peer = peers_[handle].get();
  if (peer->fenced) return Status(Errc::provider, kFencedPeer);
  return peer;
}

// Requests queued before it must go first, so a new one may skip the queue only when it is empty.
bool VerbsDomain::posts_now(const Peer& peer) {
  return peer.outgoing && peer.outgoing->state == ConnectionState::ready && peer.queued.empty();
}

Status VerbsDomain::queue_request(Peer& peer, const QueuedRequest& request) {
  if (auto st = start_connect(peer); !st.ok()) return st;
  peer.queued.push_back(request);
  return Status::success();
}

Status VerbsDomain::post_write(const domain::WriteDesc& write) {
  auto peer = peer_for_request(write.peer);
  if (!peer) return peer.status();
  if (posts_now(**peer)) return post_write_on(*(*peer)->outgoing, write);
  return queue_request(**peer, {QueuedRequest::Kind::write, write, nullptr});
}

Status VerbsDomain::post_read(const domain::ReadDesc& read) {
  auto peer = peer_for_request(read.peer);
  if (!peer) return peer.status();
  if (posts_now(**peer)) return post_read_on(*(*peer)->outgoing, read);
  return queue_request(**peer, QueuedRequest::of(read));
}

Status VerbsDomain::post_send(domain::PeerHandle handle, const void* buf, std::size_t length,
                              void* desc, domain::Token token) {
  auto peer = peer_for_request(handle);
  if (!peer) return peer.status();
  if (posts_now(**peer)) return post_send_on(*(*peer)->outgoing, buf, length, desc, token);
  domain::WriteDesc q;
  q.local = buf;
  q.length = length;
  q.local_desc = desc;
  q.token = token;
  return queue_request(**peer, {QueuedRequest::Kind::send, q, nullptr});
}

// Small WRITEs and SENDs from host memory carry their bytes in the work request: the device
// then reads no buffer, and the lkey is not used. GPU memory goes by DMA (the CPU cannot read it).
// `limit` is what the device granted at open; every queue pair asks for exactly that.
namespace {
unsigned inline_flag(std::uint32_t limit, std::size_t length, void* desc) {
  const bool inlined = length > 0 && length <= limit && host_memory(desc);
  return inlined ? static_cast<unsigned>(IBV_SEND_INLINE) : 0U;
}
}  // namespace

// The write lane's next chain entry with its buffer and a TxSlot; the caller sets the opcode and
// the remote end, then calls chained().
ibv_send_wr& VerbsDomain::next_in_chain(Connection& conn, const void* local, std::size_t length,
                                        void* desc, domain::Token token) {
  Lane& lane = conn.write;
  const std::size_t i = lane.chained;
  ibv_sge& sge = lane.sges[i];
  sge.addr = reinterpret_cast<std::uintptr_t>(local);
  sge.length = static_cast<std::uint32_t>(length);
  sge.lkey = lkey_of(desc);
  ibv_send_wr& wr = lane.chain[i];
  wr = {};
  wr.wr_id = acquire_tx(token, &conn, false);
  wr.sg_list = length > 0 ? &sge : nullptr;
  wr.num_sge = length > 0 ? 1 : 0;
  wr.send_flags = IBV_SEND_SIGNALED;
  return wr;
}

// The entry next_in_chain filled joins the chain; a full chain rings the doorbell now, a
// shorter one at the next ring_all().
Status VerbsDomain::chained(Connection& conn) {
  Lane& lane = conn.write;
  ++lane.chained;
  ++lane.outstanding;
  if (lane.chained == 1) to_ring_.push_back(&conn);
  if (lane.chained == kMaxChain) return ring(conn, lane);
  return Status::success();
}

Status VerbsDomain::post_write_on(Connection& conn, const domain::WriteDesc& w) {
  if (conn.write.outstanding >= config_.send_queue_depth) return {Errc::again, {}};
  ibv_send_wr& wr = next_in_chain(conn, w.local, w.length, w.local_desc, w.token);
  wr.opcode = w.imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  wr.send_flags |= inline_flag(config_.max_inline_data, w.length, w.local_desc);
  if (w.imm) wr.imm_data = htonl(*w.imm);
  wr.wr.rdma.remote_addr = w.remote_addr;
  wr.wr.rdma.rkey = static_cast<std::uint32_t>(w.rkey);
  return chained(conn);
}

// On the write lane, chained like the WRITEs: the READ's responder is the peer's end of our
// outgoing connection, and the data lands in `local` before the completion is reported.
Status VerbsDomain::post_read_on(Connection& conn, const domain::ReadDesc& r) {
  if (conn.write.outstanding >= config_.send_queue_depth) return {Errc::again, {}};
  ibv_send_wr& wr = next_in_chain(conn, r.local, r.length, r.local_desc, r.token);
  tx_slots_[wr.wr_id].read = true;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.wr.rdma.remote_addr = r.remote_addr;
  wr.wr.rdma.rkey = static_cast<std::uint32_t>(r.rkey);
  return chained(conn);
}

Status VerbsDomain::post_send_on(Connection& conn, const void* buf, std::size_t length, void* desc,
                                 domain::Token token) {
  Lane& lane = conn.msg;
  if (lane.outstanding >= config_.send_queue_depth) return {Errc::again, {}};
  ibv_sge sge{};
  sge.addr = reinterpret_cast<std::uintptr_t>(buf);
  sge.length = static_cast<std::uint32_t>(length);
  sge.lkey = lkey_of(desc);
  ibv_send_wr wr{};
  const std::uint64_t slot = acquire_tx(token, &conn, true);
  wr.wr_id = slot;
  wr.sg_list = length > 0 ? &sge : nullptr;
  wr.num_sge = length > 0 ? 1 : 0;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED | inline_flag(config_.max_inline_data, length, desc);
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(lane.qp.get(), &wr, &bad); rc != 0) {
    free_tx_.push_back(slot);
    return verbs_error(fmt::format("ibv_post_send(SEND to {})", peer_name(*conn.peer)), rc);
  }
  ++lane.outstanding;
  return Status::success();
}

// Only the chain's last entry is signalled: RC completes a queue pair's work requests in order,
// so its completion says that the WRITEs before it landed, and the device makes one completion
// per doorbell instead of one per WRITE. READs stay signalled (their data must be in place when
// reported, which their own completion says). A failed WRITE still completes on its own, with
// its error, and so does every entry flushed after it.
void VerbsDomain::signal_chain_end(Lane& lane) {
  TxSlot& tail = tx_slots_[lane.chain[lane.chained - 1].wr_id];
  tail.covers = 0;
  for (std::size_t i = 0; i + 1 < lane.chained; ++i) {
    ibv_send_wr& wr = lane.chain[i];
    wr.next = &lane.chain[i + 1];
    if (wr.opcode == IBV_WR_RDMA_READ) continue;
    wr.send_flags &= ~static_cast<unsigned>(IBV_SEND_SIGNALED);
    tx_slots_[wr.wr_id].unsignalled = true;
    tail.covered[tail.covers++] = wr.wr_id;
  }
  lane.chain[lane.chained - 1].next = nullptr;
}

Status VerbsDomain::ring(Connection& conn, Lane& lane) {
  if (lane.chained == 0) return Status::success();
  signal_chain_end(lane);
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(lane.qp.get(), lane.chain.data(), &bad);
  const std::size_t count = lane.chained;
  lane.chained = 0;
  if (rc == 0) return Status::success();
  // The chain up to bad went to the device; from bad on, nothing did, including the signalled
  // last entry. The unsignalled ones that went may have landed or may be flushed by the break
  // below: they fail now, and a completion of their own, if one comes, is dropped (reported).
  // Their slots are not reused, since such a completion may still name them; at most
  // kMaxChain - 1 per failed doorbell, which ibv_post_send gives only for a queue pair that
  // cannot take work (the queue depth is checked before chaining).
  const auto why = fmt::format("ibv_post_send(WRITE to {}): {}", peer_name(*conn.peer),
                               std::strerror(rc));
  bool unposted = false;
  for (std::size_t i = 0; i < count; ++i) {
    if (&lane.chain[i] == bad) unposted = true;
    const std::uint64_t slot = lane.chain[i].wr_id;
    TxSlot& tx = tx_slots_[slot];
    if (!unposted && !tx.unsignalled) continue;
    emit({domain::Event::Kind::tx_done, tx.token, 0, 0,
          Status(Errc::provider, unposted ? why : fmt::format("outcome unknown: {}", why))});
    --lane.outstanding;
    if (unposted) {
      free_tx_.push_back(slot);
    } else {
      tx.reported = true;
      tx.connection = nullptr;
    }
  }
  break_connection(conn, why);
  return Status::success();  // the failures arrive as events, like any other
}

void VerbsDomain::ring_all() {
  // ring() may break a connection, which edits to_ring_.
  std::vector<Connection*> batch;
  batch.swap(to_ring_);
  for (Connection* conn : batch) {
    if (conn->state != ConnectionState::broken) (void)ring(*conn, conn->write);
  }
}

Status VerbsDomain::post_queued(Peer& peer, const QueuedRequest& q) {
  switch (q.kind) {
    case QueuedRequest::Kind::send:
      return post_send_on(*peer.outgoing, q.write.local, q.write.length, q.write.local_desc,
                          q.write.token);
    case QueuedRequest::Kind::read:
      return post_read_on(*peer.outgoing, q.read());
    case QueuedRequest::Kind::write:
      break;
  }
  return post_write_on(*peer.outgoing, q.write);
}

void VerbsDomain::drain_queues() {
  std::erase_if(waiting_peers_, [&](Peer* peer) {
    if (!peer->outgoing || peer->outgoing->state != ConnectionState::ready) {
      peer->waiting = false;
      return true;
    }
    while (!peer->queued.empty()) {
      Status st = post_queued(*peer, peer->queued.front());
      if (st.code() == Errc::again) return false;
      if (!st.ok()) {
        emit({domain::Event::Kind::tx_done, peer->queued.front().write.token, 0, 0, st});
      }
      peer->queued.pop_front();
    }
    peer->waiting = false;
    return true;
  });
}

}  // namespace fabric::verbs
