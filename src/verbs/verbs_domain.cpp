#include "verbs/verbs_domain.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <unistd.h>
#include <tuple>
#include <utility>

#include "common/log.hpp"

namespace fabric::verbs {

namespace {

// Receive work requests are told apart from sends by their wr_id's top bits.
constexpr std::uint64_t kImmRecvTag = 1ull << 63;
constexpr std::uint64_t kMsgRecvTag = 1ull << 62;
constexpr std::uint64_t kTagMask = kImmRecvTag | kMsgRecvTag;

// local_desc carries the lkey, kept non-null so "no descriptor" stays distinct.
constexpr std::uint64_t kDescMark = 1ull << 32;
void* desc_of(std::uint32_t lkey) {
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(kDescMark | lkey));
}
std::uint32_t lkey_of(void* desc) {
  return static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(desc));
}

// Seeded per Domain, not per thread: a forked child must not repeat its
// parent's nonces, PSNs and connection ids.
std::mt19937_64 seeded_rng(const void* self) {
  std::random_device device;
  std::seed_seq seed{device(), device(), static_cast<unsigned>(::getpid()),
                     static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(self)),
                     static_cast<unsigned>(
                         std::chrono::steady_clock::now().time_since_epoch().count())};
  return std::mt19937_64(seed);
}

constexpr const char* kFenced = "the peer was fenced (TransferEngine::fence_peer)";

Status verbs_error(std::string_view call, int rc) {
  return {Errc::provider, fmt::format("{}: {}", call, std::strerror(rc))};
}

class VerbsMemoryRegion final : public domain::MemoryRegion {
 public:
  explicit VerbsMemoryRegion(MrPtr mr) : mr_(std::move(mr)) {}
  [[nodiscard]] void* local_desc() const noexcept override { return desc_of(mr_->lkey); }
  [[nodiscard]] RemoteKey remote_key() const noexcept override {
    return {reinterpret_cast<std::uint64_t>(mr_->addr), mr_->rkey};
  }

 private:
  MrPtr mr_;
};

}  // namespace

Result<std::unique_ptr<VerbsDomain>> VerbsDomain::open(const VerbsConfig& config,
                                                       std::size_t domain_index) {
  std::unique_ptr<VerbsDomain> d(new VerbsDomain());
  if (auto st = d->init(config, domain_index); !st.ok()) return st;
  return d;
}

VerbsDomain::~VerbsDomain() = default;

Status VerbsDomain::init(const VerbsConfig& config, std::size_t domain_index) {
  config_ = config;
  rng_ = seeded_rng(this);
  // Fault injection for tests: lose the first N handshakes that arrive, as a
  // lossy fabric would, so the retry path runs for real.
  if (const char* drop = std::getenv("FABRIC_VERBS_TEST_DROP_HANDSHAKES")) {
    drop_handshakes_ = static_cast<std::uint32_t>(std::strtoul(drop, nullptr, 10));
  }
  if (config.send_queue_depth == 0 || config.imm_recv_depth == 0 || config.recv_depth == 0 ||
      config.tx_depth == 0) {
    return {Errc::invalid_argument, "verbs: queue depths must be positive"};
  }
  auto port = open_port(config, domain_index);
  if (!port) return port.status();
  port_ = std::move(port).value();
  if (config.max_mtu) {
    ibv_mtu cap = IBV_MTU_256;
    switch (*config.max_mtu) {
      case 256: cap = IBV_MTU_256; break;
      case 512: cap = IBV_MTU_512; break;
      case 1024: cap = IBV_MTU_1024; break;
      case 2048: cap = IBV_MTU_2048; break;
      case 4096: cap = IBV_MTU_4096; break;
      default:
        return {Errc::invalid_argument,
                fmt::format("verbs: max_mtu {} is not 256, 512, 1024, 2048 or 4096",
                            *config.max_mtu)};
    }
    port_.mtu = std::min(port_.mtu, cap);
  }
  ibv_context* ctx = port_.context.get();
  const ibv_device_attr& dev = port_.device_attr;
  // Up to 16 READs in flight per queue pair (mlx5's limit), fewer where the device says so.
  const int rd_atomic = std::clamp(std::min(dev.max_qp_rd_atom, dev.max_qp_init_rd_atom), 1, 16);
  local_ = {port_.port, port_.gid_index, port_.mtu, static_cast<std::uint8_t>(rd_atomic)};

  const auto max_wr = static_cast<std::uint32_t>(dev.max_qp_wr);
  const auto max_srq_wr = static_cast<std::uint32_t>(std::max(dev.max_srq_wr, 1));
  config_.send_queue_depth = std::min(config_.send_queue_depth, max_wr);
  config_.imm_recv_depth = std::min(config_.imm_recv_depth, max_srq_wr);
  config_.recv_depth = std::min(config_.recv_depth, max_srq_wr);
  // Every send, write and receive is signalled: the CQ holds them all.
  const auto max_cqe = static_cast<std::uint32_t>(dev.max_cqe);
  const std::uint32_t rx = config_.imm_recv_depth + config_.recv_depth;
  if (rx + 64 >= max_cqe) {
    return {Errc::invalid_argument,
            fmt::format("verbs: receive depths {} exceed the device's CQ size {}", rx, max_cqe)};
  }
  config_.tx_depth = std::min(config_.tx_depth, max_cqe - rx - 64);

  pd_.reset(ibv_alloc_pd(ctx));
  if (!pd_) return verbs_error("ibv_alloc_pd", errno);
  cq_.reset(ibv_create_cq(ctx, static_cast<int>(config_.tx_depth + rx + 64), nullptr, nullptr, 0));
  if (!cq_) return verbs_error("ibv_create_cq", errno);
  for (auto [srq, depth, name] : {std::tuple{&msg_srq_, config_.recv_depth, "messages"},
                                  std::tuple{&imm_srq_, config_.imm_recv_depth, "immediates"}}) {
    ibv_srq_init_attr attr{};
    attr.attr.max_wr = depth;
    attr.attr.max_sge = 1;
    srq->reset(ibv_create_srq(pd_.get(), &attr));
    if (!*srq) return verbs_error(fmt::format("ibv_create_srq({})", name), errno);
  }
  for (std::uint32_t i = 0; i < config_.imm_recv_depth; ++i) {
    if (auto st = post_imm_recv(i); !st.ok()) return st;
  }
  auto channel = HandshakeChannel::open(ctx, pd_.get(), local_);
  if (!channel) return channel.status();
  handshake_ = std::move(channel).value();

  std::memcpy(self_.gid.data(), port_.gid.raw, self_.gid.size());
  self_.lid = port_.info.lid;
  self_.mtu = static_cast<std::uint8_t>(port_.mtu);
  self_.ud_qpn = handshake_->qpn();
  self_.nonce = rng_();
  address_ = self_.encode();
  next_psn_ = static_cast<std::uint32_t>(rng_()) & 0xffffff;

  limits_.tx_depth = config_.tx_depth;
  limits_.rx_depth = config_.recv_depth;
  limits_.inject_size = 0;
  limits_.needs_local_desc = true;
  limits_.provider = "verbs";
  limits_.reads = true;
  limits_.device = port_.info.device;
  return Status::success();
}

std::string VerbsDomain::peer_name(const Peer& peer) const {
  ibv_gid gid{};
  std::memcpy(gid.raw, peer.address.gid.data(), sizeof gid.raw);
  return fmt::format("peer {} UD QP {:#x}", gid_text(gid), peer.address.ud_qpn);
}

// ------------------------------------------------------------ registration

Result<std::unique_ptr<domain::MemoryRegion>> VerbsDomain::register_memory(
    const domain::MemorySpan& span, Access access) {
  void* ptr = span.ptr;
  const std::size_t length = span.length;
  int flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_RELAXED_ORDERING;
  if (has_access(access, Access::remote_write)) flags |= IBV_ACCESS_REMOTE_WRITE;
  if (has_access(access, Access::remote_read)) flags |= IBV_ACCESS_REMOTE_READ;
  if (span.dmabuf_fd >= 0) {
    // GPU memory the NIC imports as a dma-buf; iova = the virtual address, so
    // remote addresses work the same as for host memory.
    MrPtr mr(ibv_reg_dmabuf_mr(pd_.get(), span.dmabuf_offset, length,
                               reinterpret_cast<std::uintptr_t>(ptr), span.dmabuf_fd, flags));
    if (mr) {
      log::info("verbs: registered {} bytes of {} memory via dma-buf", length,
                span.device.to_string());
      return std::unique_ptr<domain::MemoryRegion>(new VerbsMemoryRegion(std::move(mr)));
    }
    log::info("verbs: ibv_reg_dmabuf_mr failed ({}); trying nvidia-peermem (ibv_reg_mr)",
              std::strerror(errno));
  }
  // ibv_reg_mr drops RELAXED_ORDERING where the device lacks it (optional
  // flag). For GPU memory it works only with nvidia-peermem loaded.
  MrPtr mr(ibv_reg_mr(pd_.get(), ptr, length, flags));
  if (!mr) {
    return verbs_error(fmt::format("ibv_reg_mr({} bytes of {} memory{})", length,
                                   span.device.to_string(),
                                   span.device.is_host() ? ""
                                                         : "; GPU memory needs dma-buf support "
                                                           "or the nvidia_peermem module"),
                       errno);
  }
  if (!span.device.is_host()) {
    log::info("verbs: registered {} bytes of {} memory via nvidia-peermem", length,
              span.device.to_string());
  }
  return std::unique_ptr<domain::MemoryRegion>(new VerbsMemoryRegion(std::move(mr)));
}

// ------------------------------------------------------------------- peers

Result<VerbsDomain::Peer*> VerbsDomain::find_or_add_peer(const VerbsAddress& address) {
  const auto bytes = address.encode();
  std::string key(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (auto it = peer_index_.find(key); it != peer_index_.end()) return peers_[it->second].get();
  auto ah = create_ah(pd_.get(), local_, address);
  if (!ah) return ah.status();
  auto peer = std::make_unique<Peer>();
  peer->handle = peers_.size();
  peer->address = address;
  peer->ah = std::move(ah).value();
  peer_index_.emplace(std::move(key), peer->handle);
  peers_.push_back(std::move(peer));
  return peers_.back().get();
}

Result<domain::PeerHandle> VerbsDomain::resolve_peer(std::span<const std::byte> address) {
  auto decoded = VerbsAddress::decode(address);
  if (!decoded) {
    return Status(Errc::invalid_argument,
                  fmt::format("not a verbs peer address: {}", decoded.status().message()));
  }
  auto peer = find_or_add_peer(*decoded);
  if (!peer) return peer.status();
  return (*peer)->handle;
}

// ------------------------------------------------------------- connections

Result<std::unique_ptr<VerbsDomain::Connection>> VerbsDomain::new_connection(Peer& peer,
                                                                             bool initiator) {
  auto conn = std::make_unique<Connection>();
  conn->initiator = initiator;
  conn->peer = &peer;
  for (Lane* lane : {&conn->msg, &conn->write}) {
    ibv_srq* srq = lane == &conn->msg ? msg_srq_.get() : imm_srq_.get();
    auto qp = create_rc_qp(pd_.get(), cq_.get(), srq, config_.send_queue_depth);
    if (!qp) return qp.status();
    lane->qp = std::move(qp).value();
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
  if (peer.outgoing && peer.outgoing->state != State::broken) return Status::success();
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
  (*conn)->state = State::ready;
  peer.incoming = std::move(conn).value();
  (void)send_handshake(peer, *peer.incoming, Handshake::Type::reply);
}

void VerbsDomain::on_reply(Peer& peer, const Handshake& message) {
  Connection* conn = peer.outgoing.get();
  if (conn == nullptr || conn->id != message.conn_id || conn->state != State::connecting) return;
  if (auto st = connect_lanes(*conn, message); !st.ok()) {
    break_connection(*conn, st.message());
    fail_queued(peer, st);
    return;
  }
  became_ready(*conn);
}

void VerbsDomain::became_ready(Connection& conn) {
  conn.state = State::ready;
  Peer& peer = *conn.peer;
  log::debug("verbs: connected to {} (connection {:#x})", peer_name(peer), conn.id);
  if (!peer.queued.empty() && !peer.waiting) {
    peer.waiting = true;
    waiting_peers_.push_back(&peer);
  }
}

void VerbsDomain::break_connection(Connection& conn, const std::string& why) {
  if (conn.state == State::broken) return;
  const bool was_ready = conn.state == State::ready;
  conn.state = State::broken;
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

Status VerbsDomain::fence_peer(std::span<const std::byte> address) {
  auto decoded = VerbsAddress::decode(address);
  if (!decoded) {
    return {Errc::invalid_argument,
            fmt::format("fence_peer: not a verbs peer address: {}", decoded.status().message())};
  }
  // A peer never seen here is recorded too: its handshakes are refused from now on.
  auto found = find_or_add_peer(*decoded);
  if (!found) return found.status();
  Peer& peer = **found;
  if (peer.fenced) return Status::success();
  peer.fenced = true;
  fail_queued(peer, Status(Errc::provider, kFenced));
  std::erase(connecting_, &peer);
  std::erase(waiting_peers_, &peer);
  peer.waiting = false;
  for (std::unique_ptr<Connection>* conn : {&peer.outgoing, &peer.incoming}) {
    if (!*conn) continue;
    // The error state is the fence: the device drops what the peer still sends to these queue
    // pairs (its WRITEs fail on its side once its retries run out) and flushes what we posted.
    break_connection(**conn, kFenced);
    fenced_connections_.push_back(std::move(*conn));
  }
  log::info("verbs: fenced {}", peer_name(peer));
  return Status::success();
}

void VerbsDomain::retire(std::unique_ptr<Connection> conn) {
  if (conn->outstanding() > 0) retired_.push_back(std::move(conn));
}

void VerbsDomain::fail_queued(Peer& peer, const Status& status) {
  for (const Queued& q : peer.queued) {
    emit({domain::Event::Kind::tx_done, q.write.token, 0, 0, status});
  }
  peer.queued.clear();
}

void VerbsDomain::progress_connections(Clock::time_point now) {
  for (auto& message : handshake_->poll()) on_handshake(message);
  std::erase_if(connecting_, [&](Peer* peer) {
    Connection* conn = peer->outgoing.get();
    if (conn == nullptr || conn->state != State::connecting) return true;
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

// ------------------------------------------------------------------ posting

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

Status VerbsDomain::post_write(const domain::WriteDesc& write) {
  if (write.peer >= peers_.size()) {
    return {Errc::invalid_argument, fmt::format("unknown verbs peer handle {}", write.peer)};
  }
  Peer& peer = *peers_[write.peer];
  if (peer.fenced) return {Errc::provider, kFenced};
  if (peer.outgoing && peer.outgoing->state == State::ready && peer.queued.empty()) {
    return post_write_on(*peer.outgoing, write);
  }
  if (auto st = start_connect(peer); !st.ok()) return st;
  peer.queued.push_back({Queued::Kind::write, write, nullptr});
  return Status::success();
}

Status VerbsDomain::post_read(const domain::ReadDesc& read) {
  if (read.peer >= peers_.size()) {
    return {Errc::invalid_argument, fmt::format("unknown verbs peer handle {}", read.peer)};
  }
  Peer& peer = *peers_[read.peer];
  if (peer.fenced) return {Errc::provider, kFenced};
  if (peer.outgoing && peer.outgoing->state == State::ready && peer.queued.empty()) {
    return post_read_on(*peer.outgoing, read);
  }
  if (auto st = start_connect(peer); !st.ok()) return st;
  peer.queued.push_back(Queued::of(read));
  return Status::success();
}

Status VerbsDomain::post_send(domain::PeerHandle handle, const void* buf, std::size_t length,
                              void* desc, domain::Token token) {
  if (handle >= peers_.size()) {
    return {Errc::invalid_argument, fmt::format("unknown verbs peer handle {}", handle)};
  }
  Peer& peer = *peers_[handle];
  if (peer.fenced) return {Errc::provider, kFenced};
  if (peer.outgoing && peer.outgoing->state == State::ready && peer.queued.empty()) {
    return post_send_on(*peer.outgoing, buf, length, desc, token);
  }
  if (auto st = start_connect(peer); !st.ok()) return st;
  domain::WriteDesc q;
  q.local = buf;
  q.length = length;
  q.local_desc = desc;
  q.token = token;
  peer.queued.push_back({Queued::Kind::send, q, nullptr});
  return Status::success();
}

Status VerbsDomain::post_write_on(Connection& conn, const domain::WriteDesc& w) {
  Lane& lane = conn.write;
  if (lane.outstanding >= config_.send_queue_depth) return {Errc::again, {}};
  const std::size_t i = lane.chained;
  ibv_sge& sge = lane.sges[i];
  sge.addr = reinterpret_cast<std::uintptr_t>(w.local);
  sge.length = static_cast<std::uint32_t>(w.length);
  sge.lkey = lkey_of(w.local_desc);
  ibv_send_wr& wr = lane.chain[i];
  wr = {};
  wr.wr_id = acquire_tx(w.token, &conn, false);
  wr.sg_list = w.length > 0 ? &sge : nullptr;
  wr.num_sge = w.length > 0 ? 1 : 0;
  wr.opcode = w.imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  if (w.imm) wr.imm_data = htonl(*w.imm);
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = w.remote_addr;
  wr.wr.rdma.rkey = static_cast<std::uint32_t>(w.rkey);
  ++lane.chained;
  ++lane.outstanding;
  if (lane.chained == 1) to_ring_.push_back(&conn);
  if (lane.chained == kMaxChain) return ring(conn, lane);
  return Status::success();
}

// On the write lane, chained like the WRITEs: the READ's responder is the peer's end of our
// outgoing connection, and the data lands in `local` before the completion is reported.
Status VerbsDomain::post_read_on(Connection& conn, const domain::ReadDesc& r) {
  Lane& lane = conn.write;
  if (lane.outstanding >= config_.send_queue_depth) return {Errc::again, {}};
  const std::size_t i = lane.chained;
  ibv_sge& sge = lane.sges[i];
  sge.addr = reinterpret_cast<std::uintptr_t>(r.local);
  sge.length = static_cast<std::uint32_t>(r.length);
  sge.lkey = lkey_of(r.local_desc);
  ibv_send_wr& wr = lane.chain[i];
  wr = {};
  wr.wr_id = acquire_tx(r.token, &conn, false);
  tx_slots_[wr.wr_id].read = true;
  wr.sg_list = r.length > 0 ? &sge : nullptr;
  wr.num_sge = r.length > 0 ? 1 : 0;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = r.remote_addr;
  wr.wr.rdma.rkey = static_cast<std::uint32_t>(r.rkey);
  ++lane.chained;
  ++lane.outstanding;
  if (lane.chained == 1) to_ring_.push_back(&conn);
  if (lane.chained == kMaxChain) return ring(conn, lane);
  return Status::success();
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
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(lane.qp.get(), &wr, &bad); rc != 0) {
    free_tx_.push_back(slot);
    return verbs_error(fmt::format("ibv_post_send(SEND to {})", peer_name(*conn.peer)), rc);
  }
  ++lane.outstanding;
  return Status::success();
}

Status VerbsDomain::ring(Connection& conn, Lane& lane) {
  if (lane.chained == 0) return Status::success();
  for (std::size_t i = 0; i + 1 < lane.chained; ++i) lane.chain[i].next = &lane.chain[i + 1];
  lane.chain[lane.chained - 1].next = nullptr;
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(lane.qp.get(), lane.chain.data(), &bad);
  const std::size_t count = lane.chained;
  lane.chained = 0;
  if (rc == 0) return Status::success();
  // The chain up to bad went to the device; from bad on, nothing did.
  const auto why = fmt::format("ibv_post_send(WRITE to {}): {}", peer_name(*conn.peer),
                               std::strerror(rc));
  bool unposted = false;
  for (std::size_t i = 0; i < count; ++i) {
    if (&lane.chain[i] == bad) unposted = true;
    if (!unposted) continue;
    const std::uint64_t slot = lane.chain[i].wr_id;
    emit({domain::Event::Kind::tx_done, tx_slots_[slot].token, 0, 0,
          Status(Errc::provider, why)});
    free_tx_.push_back(slot);
    --lane.outstanding;
  }
  break_connection(conn, why);
  return Status::success();  // the failures arrive as events, like any other
}

void VerbsDomain::ring_all() {
  // ring() may break a connection, which edits to_ring_.
  std::vector<Connection*> batch;
  batch.swap(to_ring_);
  for (Connection* conn : batch) {
    if (conn->state != State::broken) (void)ring(*conn, conn->write);
  }
}

Status VerbsDomain::post_queued(Peer& peer, const Queued& q) {
  switch (q.kind) {
    case Queued::Kind::send:
      return post_send_on(*peer.outgoing, q.write.local, q.write.length, q.write.local_desc,
                          q.write.token);
    case Queued::Kind::read:
      return post_read_on(*peer.outgoing, q.read());
    case Queued::Kind::write:
      break;
  }
  return post_write_on(*peer.outgoing, q.write);
}

void VerbsDomain::drain_queues() {
  std::erase_if(waiting_peers_, [&](Peer* peer) {
    if (!peer->outgoing || peer->outgoing->state != State::ready) {
      peer->waiting = false;
      return true;
    }
    while (!peer->queued.empty()) {
      Status st = post_queued(*peer, peer->queued.front());
      if (st.code() == Errc::again) return false;
      if (!st.ok()) emit({domain::Event::Kind::tx_done, peer->queued.front().write.token, 0, 0, st});
      peer->queued.pop_front();
    }
    peer->waiting = false;
    return true;
  });
}

Status VerbsDomain::post_recv(void* buf, std::size_t length, void* desc, domain::Token token) {
  std::uint64_t slot = 0;
  if (free_recv_.empty()) {
    slot = recv_tokens_.size();
    recv_tokens_.push_back(token);
  } else {
    slot = free_recv_.back();
    free_recv_.pop_back();
    recv_tokens_[slot] = token;
  }
  ibv_sge sge{};
  sge.addr = reinterpret_cast<std::uintptr_t>(buf);
  sge.length = static_cast<std::uint32_t>(length);
  sge.lkey = lkey_of(desc);
  ibv_recv_wr wr{};
  wr.wr_id = kMsgRecvTag | slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_srq_recv(msg_srq_.get(), &wr, &bad); rc != 0) {
    free_recv_.push_back(slot);
    if (rc == ENOMEM) return {Errc::again, {}};
    return verbs_error("ibv_post_srq_recv", rc);
  }
  return Status::success();
}

Status VerbsDomain::post_imm_recv(std::uint32_t slot) {
  ibv_recv_wr wr{};
  wr.wr_id = kImmRecvTag | slot;
  wr.num_sge = 0;  // a WRITE_WITH_IMM's data goes to the written region, not here
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_srq_recv(imm_srq_.get(), &wr, &bad); rc != 0) {
    return verbs_error("ibv_post_srq_recv(immediates)", rc);
  }
  return Status::success();
}

// -------------------------------------------------------------- completions

void VerbsDomain::on_completion(const ibv_wc& wc) {
  if ((wc.wr_id & kImmRecvTag) != 0) {
    if (wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
      emit({domain::Event::Kind::imm_arrived, 0, ntohl(wc.imm_data), 0, Status::success()});
    } else if (wc.status != IBV_WC_SUCCESS) {
      log::warn("verbs: immediate receive failed: {}", ibv_wc_status_str(wc.status));
    }
    if (auto st = post_imm_recv(static_cast<std::uint32_t>(wc.wr_id & ~kTagMask)); !st.ok()) {
      log::warn("{}", st.message());
    }
    return;
  }
  if ((wc.wr_id & kMsgRecvTag) != 0) {
    const std::uint64_t slot = wc.wr_id & ~kTagMask;
    Status status;
    if (wc.status != IBV_WC_SUCCESS) {
      status = Status(Errc::provider,
                      fmt::format("verbs receive: {}", ibv_wc_status_str(wc.status)));
    }
    emit({domain::Event::Kind::recv_done, recv_tokens_[slot], 0, wc.byte_len, std::move(status)});
    free_recv_.push_back(slot);
    return;
  }
  TxSlot& slot = tx_slots_[wc.wr_id];
  Connection& conn = *slot.connection;
  Lane& lane = slot.on_msg_lane ? conn.msg : conn.write;
  --lane.outstanding;
  Status status;
  if (wc.status != IBV_WC_SUCCESS) {
    std::string text = fmt::format("verbs {}: {} (vendor error {:#x}) with {}",
                                   slot.on_msg_lane ? "SEND" : slot.read ? "READ" : "WRITE",
                                   ibv_wc_status_str(wc.status), wc.vendor_err,
                                   peer_name(*conn.peer));
    if (wc.status == IBV_WC_WR_FLUSH_ERR && !conn.failure.empty()) {
      text += fmt::format(" after: {}", conn.failure);
    }
    status = Status(Errc::provider, text);
    break_connection(conn, text);
  }
  emit({domain::Event::Kind::tx_done, slot.token, 0, 0, std::move(status)});
  free_tx_.push_back(wc.wr_id);
}

std::size_t VerbsDomain::poll(std::span<domain::Event> out) {
  ring_all();
  if (events_.size() < out.size()) {
    progress_connections(Clock::now());
    drain_queues();
    ring_all();
    std::array<ibv_wc, 32> wcs{};
    const int want = static_cast<int>(std::min(wcs.size(), out.size() - events_.size()));
    const int n = ibv_poll_cq(cq_.get(), want, wcs.data());
    for (int i = 0; i < n; ++i) on_completion(wcs[static_cast<std::size_t>(i)]);
    if (n < 0) log::warn("ibv_poll_cq failed");
  }
  // Broken outgoing connections leave their peer; requests still queued for
  // it reconnect at once (and fail by connect_timeout if the peer is gone).
  for (Peer* peer : std::exchange(broken_peers_, {})) {
    if (!peer->outgoing || peer->outgoing->state != State::broken) continue;
    retire(std::move(peer->outgoing));
    if (!peer->queued.empty()) {
      if (auto st = start_connect(*peer); !st.ok()) fail_queued(*peer, st);
    }
  }
  std::erase_if(retired_, [](const auto& conn) { return conn->outstanding() == 0; });

  std::size_t produced = 0;
  while (produced < out.size() && !events_.empty()) {
    out[produced++] = std::move(events_.front());
    events_.pop_front();
  }
  return produced;
}

}  // namespace fabric::verbs
