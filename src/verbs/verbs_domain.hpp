#pragma once
// A Domain on one ibverbs port: RC queue pairs per peer, connected lazily by
// a handshake over a UD queue pair (docs/verbs.md).
//
// Per peer and direction two RC queue pairs: SEND/RECV on one,
// WRITE/WRITE_WITH_IMM on the other. Requests go only on the connection this
// Domain initiated; the peer's connection to us only receives. That keeps
// every queue pair with one owner who decides when it is usable, so neither
// side ever posts to a queue pair the other end has not finished connecting.
// Both kinds of arrival consume receive work requests in posting order, so each
// kind gets its own shared receive queue: message buffers on one, buffer-less
// receives for immediates on the other.
//
// One class, its parts in one file each, named above each group of members.

#include <infiniband/verbs.h>

#include <array>
#include <chrono>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "domain/domain.hpp"
#include "fabric/verbs_config.hpp"
#include "verbs/connection.hpp"
#include "verbs/device.hpp"
#include "verbs/handshake_channel.hpp"
#include "verbs/ib_handles.hpp"
#include "verbs/queue_pair.hpp"
#include "verbs/wire_format.hpp"

namespace fabric::verbs {

class VerbsDomain final : public domain::Domain {
 public:
  static Result<std::unique_ptr<VerbsDomain>> open(const VerbsConfig& config,
                                                   std::size_t domain_index);
  ~VerbsDomain() override;

  [[nodiscard]] std::span<const std::byte> address() const noexcept override { return address_; }
  [[nodiscard]] const domain::Limits& limits() const noexcept override { return limits_; }

  // verbs_domain_registration.cpp
  Result<std::unique_ptr<domain::MemoryRegion>> register_memory(const domain::MemorySpan& span,
                                                                Access access) override;
  // verbs_domain_peers.cpp
  Result<domain::PeerHandle> resolve_peer(std::span<const std::byte> address) override;
  // Moves both connections with the peer to the error state, fails what is queued or posted to
  // it, and refuses the peer's later handshakes: that peer instance is shut out for good.
  Status fence_peer(std::span<const std::byte> address) override;
  // verbs_domain_posting.cpp
  Status post_write(const domain::WriteDesc& write) override;
  Status post_read(const domain::ReadDesc& read) override;
  Status post_send(domain::PeerHandle peer, const void* buf, std::size_t length, void* desc,
                   domain::Token token) override;
  // verbs_domain_receives.cpp
  Status post_recv(void* buf, std::size_t length, void* desc, domain::Token token) override;
  // verbs_domain.cpp
  std::size_t poll(std::span<domain::Event> out) override;

 private:
  using Clock = std::chrono::steady_clock;

  struct TxSlot {
    domain::Token token = 0;
    Connection* connection = nullptr;
    bool on_msg_lane = false;
    bool read = false;  // an RDMA READ (for the error text)
    // Selective signalling (verbs_domain_posting.cpp, ring): a WRITE posted without
    // IBV_SEND_SIGNALED completes when the signalled entry that ends its chain does, which lists
    // it in `covered` and frees it. Its own completion comes only with an error; `reported`
    // keeps it from being reported twice.
    bool unsignalled = false;
    bool reported = false;
    std::uint8_t covers = 0;
    std::array<std::uint64_t, kMaxChain - 1> covered{};
  };

  VerbsDomain() = default;
  // verbs_domain.cpp: opening the port and the queues, and the poll that drives the rest.
  Status init(const VerbsConfig& config, std::size_t domain_index);
  std::string peer_name(const Peer& peer) const;
  void emit(domain::Event event) { events_.push_back(std::move(event)); }

  // verbs_domain_peers.cpp: the peer table, and what becomes of a peer's queued requests.
  Result<Peer*> find_or_add_peer(const VerbsAddress& address);
  void fail_queued(Peer& peer, const Status& status);

  // verbs_domain_connections.cpp: the UD handshake that connects a peer's lanes, its retries
  // and timeout, and how a connection breaks.
  Status start_connect(Peer& peer);
  Result<std::unique_ptr<Connection>> new_connection(Peer& peer, bool initiator);
  Status send_handshake(Peer& peer, const Connection& conn, Handshake::Type type);
  void on_handshake(const Handshake& message);
  void on_request(Peer& peer, const Handshake& message);
  void on_reply(Peer& peer, const Handshake& message);
  Status connect_lanes(Connection& conn, const Handshake& remote);
  void became_ready(Connection& conn);
  void break_connection(Connection& conn, const std::string& why);
  void progress_connections(Clock::time_point now);
  void retire(std::unique_ptr<Connection> conn);

  // verbs_domain_posting.cpp: SENDs, WRITEs and READs: straight onto a ready connection (WRITEs
  // and READs chained onto one doorbell), or queued until it is ready.
  Result<Peer*> peer_for_request(domain::PeerHandle handle);
  static bool posts_now(const Peer& peer);
  Status queue_request(Peer& peer, const QueuedRequest& request);
  Status post_queued(Peer& peer, const QueuedRequest& request);
  Status post_write_on(Connection& conn, const domain::WriteDesc& write);
  Status post_read_on(Connection& conn, const domain::ReadDesc& read);
  ibv_send_wr& next_in_chain(Connection& conn, const void* local, std::size_t length, void* desc,
                             domain::Token token);
  Status chained(Connection& conn);
  Status post_send_on(Connection& conn, const void* buf, std::size_t length, void* desc,
                      domain::Token token);
  void drain_queues();
  void signal_chain_end(Lane& lane);
  Status ring(Connection& conn, Lane& lane);
  void ring_all();
  std::uint64_t acquire_tx(domain::Token token, Connection* conn, bool msg_lane);

  // verbs_domain_receives.cpp: receive work requests on the two shared receive queues.
  Status post_imm_recv(std::uint32_t slot);

  // verbs_domain_completions.cpp: completions into Events; failed ones break their connection.
  void on_completion(const ibv_wc& wc);
  Status failure_of(const ibv_wc& wc, const TxSlot& slot);

  VerbsConfig config_;
  OpenedPort port_;
  LocalPort local_;
  PdPtr pd_;
  CqPtr cq_;
  SrqPtr msg_srq_;
  SrqPtr imm_srq_;
  std::unique_ptr<HandshakeChannel> handshake_;
  VerbsAddress self_;
  std::vector<std::byte> address_;
  domain::Limits limits_;

  std::deque<std::unique_ptr<Peer>> peers_;  // PeerHandle = index
  std::unordered_map<std::string, domain::PeerHandle> peer_index_;
  std::vector<std::unique_ptr<Connection>> retired_;  // broken, waiting for flushes
  // Fenced peers' connections stay (in the error state) until the Domain closes, so that no new
  // queue pair reuses a number the fenced peer still sends to.
  std::vector<std::unique_ptr<Connection>> fenced_connections_;
  std::vector<Peer*> connecting_;
  std::vector<Peer*> broken_peers_;  // outgoing connection broke since the last poll
  std::vector<Connection*> to_ring_;
  std::vector<Peer*> waiting_peers_;  // have queued requests
  std::deque<TxSlot> tx_slots_;
  std::vector<std::uint64_t> free_tx_;
  std::deque<domain::Token> recv_tokens_;  // msg SRQ slot → token
  std::vector<std::uint64_t> free_recv_;
  std::deque<domain::Event> events_;
  std::mt19937_64 rng_;
  std::uint32_t drop_handshakes_ = 0;
  std::uint32_t next_psn_ = 0;
};

}  // namespace fabric::verbs
