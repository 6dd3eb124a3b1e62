#pragma once
// What a VerbsDomain knows of one peer: its two connections (each a pair of RC queue pairs, the
// lanes) and the requests waiting for the outgoing one to be ready (docs/verbs.md).

#include <infiniband/verbs.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "domain/domain.hpp"
#include "verbs/ib_handles.hpp"
#include "verbs/wire_format.hpp"

namespace fabric::verbs {

// WRITEs handed to the device by one doorbell at most.
inline constexpr std::size_t kMaxChain = 4;

struct Peer;

enum class ConnectionState : std::uint8_t { connecting, ready, broken };

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
  ConnectionState state = ConnectionState::connecting;
  Peer* peer = nullptr;
  Lane msg;
  Lane write;
  std::chrono::steady_clock::time_point next_retry;
  std::chrono::steady_clock::time_point deadline;
  std::string failure;  // why it broke, for the requests flushed after
  [[nodiscard]] std::uint32_t outstanding() const { return msg.outstanding + write.outstanding; }
};

// A request accepted while its peer had no usable connection.
struct QueuedRequest {
  enum class Kind : std::uint8_t { write, send, read };
  Kind kind = Kind::write;
  domain::WriteDesc write;    // send: local/length/local_desc/token used; read: all but imm
  void* read_into = nullptr;  // read: the destination (write.local is its const view)

  static QueuedRequest of(const domain::ReadDesc& r) {
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

// Why requests to a fenced peer fail.
inline constexpr const char* kFencedPeer = "the peer was fenced (TransferEngine::fence_peer)";

struct Peer {
  domain::PeerHandle handle = 0;
  VerbsAddress address;
  AhPtr ah;
  std::unique_ptr<Connection> outgoing;  // ours: requests go here once ready
  std::unique_ptr<Connection> incoming;  // the peer's: we only receive on it
  std::deque<QueuedRequest> queued;
  bool waiting = false;  // in VerbsDomain::waiting_peers_
  bool fenced = false;   // fence_peer: no connection with it, either way, ever again
};

}  // namespace fabric::verbs
