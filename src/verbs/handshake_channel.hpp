#pragma once
// The UD queue pair a Domain exchanges connection handshakes on. Datagrams
// may be lost; the Domain resends requests until answered or timed out.

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "fabric/status.hpp"
#include "verbs/ib_handles.hpp"
#include "verbs/queue_pair.hpp"
#include "verbs/wire_format.hpp"

namespace fabric::verbs {

class HandshakeChannel {
 public:
  static Result<std::unique_ptr<HandshakeChannel>> open(ibv_context* context, ibv_pd* pd,
                                                        const LocalPort& local);
  HandshakeChannel(const HandshakeChannel&) = delete;
  HandshakeChannel& operator=(const HandshakeChannel&) = delete;

  [[nodiscard]] std::uint32_t qpn() const noexcept { return qp_->qp_num; }
  // Errc::again when every send buffer is still in flight.
  Status send(const Handshake& message, ibv_ah* ah, std::uint32_t remote_qpn);
  // Messages received since the last call; malformed datagrams are dropped
  // (logged), never acted on.
  std::vector<Handshake> poll();

 private:
  static constexpr std::uint32_t kDepth = 64;
  static constexpr std::size_t kGrhBytes = 40;  // UD receives start with the GRH
  static constexpr std::size_t kRecvSlotBytes = kGrhBytes + Handshake::kBytes;

  HandshakeChannel() = default;
  std::byte* recv_slot(std::uint32_t i) { return buffer_.data() + i * kRecvSlotBytes; }
  std::byte* send_slot(std::uint32_t i) {
    return buffer_.data() + kDepth * kRecvSlotBytes + i * Handshake::kBytes;
  }
  Status post_recv(std::uint32_t slot);

  std::vector<std::byte> buffer_;
  CqPtr cq_;
  MrPtr mr_;
  QpPtr qp_;
  std::vector<std::uint32_t> free_send_slots_;
};

}  // namespace fabric::verbs
