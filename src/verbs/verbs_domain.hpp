#pragma once
// A Domain on one ibverbs port: RC queue pairs per peer, connected lazily by
// a handshake over a UD queue pair (docs/verbs.md).
//
// Per peer and direction two RC queue pairs: SEND/RECV on one,
// WRITE/WRITE_WITH_IMM on the other. Requests go only on the connection this
// Domain initiated; the peer's connection to us only receives. That keeps
// every queue pair with one owner who decides when it is usable, so neither
// side ever posts to a queue pair the other end has not finished connecting. Both kinds of arrival consume receive work requests in posting
// order, so each kind gets its own shared receive queue: message buffers on
// one, buffer-less receives for immediates on the other.

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

  Result<std::unique_ptr<domain::MemoryRegion>> register_memory(const domain::MemorySpan& span,
                                                                Access access) override;
  Result<domain::PeerHandle> resolve_peer(std::span<const std::byte> address) override;
  Status post_write(const domain::WriteDesc& write) override;
  Status post_read(const domain::ReadDesc& read) override;
  Status post_send(domain::PeerHandle peer, const void* buf, std::size_t length, void* desc,
                   domain::Token token) override;
  Status post_recv(void* buf, std::size_t length, void* desc, domain::Token token) override;
  std::size_t poll(std::span<domain::Event> out) override;
  // Moves both connections with the peer to the error state, fails what is queued or posted to
  // it, and refuses the peer's later handshakes: that peer instance is shut out for good.
  Status fence_peer(std::span<const std::byte> address) override;

  // WRITEs handed to the device by one doorbell at most.
  static constexpr std::size_t kMaxChain = 4;

 private:
  using Clock = std::chrono::steady_clock;
  struct Peer;

  enum class State : std::uint8_t { connecting, ready, broken };

  // One RC queue pair with the WRITEs waiting to be chained onto its doorbell.
  struct Lane {
    QpPtr qp;
    std::uint32_t psn = 0;
    std::uint32_t outstanding = 0;  // posted or chained, not yet completed
    std::array<ibv_send_wr, kMaxChain> chain{};
    std::array<ibv_sge, kMaxChain> sges{};
    std::size_t chained = 0;
  };

  struct Connection {
    std::uint64_t id = 0;
    bool initiator = false;
    State state = State::connecting;
    Peer* peer = nullptr;
    Lane msg;
    Lane write;
    Clock::time_point next_retry;
    Clock::time_point deadline;
    std::string failure;  // why it broke, for the requests flushed after
    [[nodiscard]] std::uint32_t outstanding() const { return msg.outstanding + write.outstanding; }
  };

  // A request accepted while its peer had no usable connection.
  struct Queued {
    enum class Kind : std::uint8_t { write, send, read };
    Kind kind = Kind::write;
    domain::WriteDesc write;  // send: local/length/local_desc/token used; read: all but imm
    void* read_into = nullptr;  // read: the destination (write.local is its const view)

    static Queued of(const domain::ReadDesc& r) {
      domain::WriteDesc w;
      w.local = r.local;
      w.length = r.length;
      w.local_desc = r.local_desc;
      w.peer = r.peer;
      w.remote_addr = r.remote_addr;
      w.rkey = r.rkey;
      w.token = r.token;
      return {Kind::read, w, r.local};
    }
    [[nodiscard]] domain::ReadDesc read() const {
      return {read_into, write.length, write.local_desc, write.peer, write.remote_addr,
              write.rkey, write.token};
    }
  };

  struct Peer {
    domain::PeerHandle handle = 0;
    VerbsAddress address;
    AhPtr ah;
    std::unique_ptr<Connection> outgoing;  // ours: requests go here once ready
    std::unique_ptr<Connection> incoming;  // the peer's: we only receive on it
    std::deque<Queued> queued;
    bool waiting = false;  // in waiting_peers_
    bool fenced = false;   // fence_peer: no connection with it, either way, ever again
  };

  struct TxSlot {
    domain::Token token = 0;
    Connection* connection = nullptr;
    bool on_msg_lane = false;
    bool read = false;  // an RDMA READ (for the error text)
  };

  VerbsDomain() = default;
  Status init(const VerbsConfig& config, std::size_t domain_index);
  std::string peer_name(const Peer& peer) const;

  // Connections.
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
  void fail_queued(Peer& peer, const Status& status);
  Result<Peer*> find_or_add_peer(const VerbsAddress& address);
  void retire(std::unique_ptr<Connection> conn);

  // Posting.
  Status post_queued(Peer& peer, const Queued& request);
  Status post_write_on(Connection& conn, const domain::WriteDesc& write);
  Status post_read_on(Connection& conn, const domain::ReadDesc& read);
  Status post_send_on(Connection& conn, const void* buf, std::size_t length, void* desc,
                      domain::Token token);
  void drain_queues();
  Status ring(Connection& conn, Lane& lane);
  void ring_all();
  std::uint64_t acquire_tx(domain::Token token, Connection* conn, bool msg_lane);
  Status post_imm_recv(std::uint32_t slot);

  // Completions.
  void on_completion(const ibv_wc& wc);
  void emit(domain::Event event) { events_.push_back(std::move(event)); }

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
