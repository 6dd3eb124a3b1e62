#pragma once
// Settings of the verbs backend (ConnectX-class RC NICs, Soft-RoCE).
// Defaults suit a RoCE v2 fabric; docs/verbs.md explains each choice.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace fabric {

struct VerbsConfig {
  // An ibverbs device name ("mlx5_0", "rxe0"); empty: every device with an
  // active port, Domain i on device i mod count.
  std::string device;
  std::uint8_t port = 1;
  // Unset: the first RoCE v2 GID holding an IPv4-mapped address, else the
  // first RoCE v2 GID, else index 0 (InfiniBand). Index 0 on a RoCE port is
  // the link-local RoCE v1 GID, which does not route.
  std::optional<std::uint32_t> gid_index;
  // Cap on the path MTU in bytes (256, 512, 1024, 2048, 4096); unset: the
  // port's active MTU. Both ends use the smaller of their two values.
  std::optional<std::uint32_t> max_mtu;
  // Work requests each RC queue pair may have outstanding.
  std::uint32_t send_queue_depth = 512;
  // WRITEs and SENDs of at most this many bytes from host memory carry their
  // data inside the work request (IBV_SEND_INLINE): the CPU copies it when
  // posting and the device skips a DMA read of the buffer, which is most of a
  // small write's cost. The device may grant more; one that refuses gets 0
  // and every write goes by DMA. GPU memory is never inlined. 0: off.
  std::uint32_t max_inline_data = 128;
  // Receive work requests kept posted for WRITE_WITH_IMM arrivals (shared by
  // every peer). A burst beyond it is held back by the sender's RNR retries,
  // never dropped.
  std::uint32_t imm_recv_depth = 2048;
  // SEND/RECV messages the Domain accepts posted at once.
  std::uint32_t recv_depth = 1024;
  // Writes and sends in flight per Domain; sizes the completion queue.
  std::uint32_t tx_depth = 8192;
  // RC transport: ACK timeout 4.096 us * 2^ack_timeout, retried retry_count
  // times before the queue pair fails (14, 7: about 0.5 s to declare a peer
  // dead). rnr_retry 7 retries a receiver-not-ready forever.
  std::uint8_t ack_timeout = 14;
  std::uint8_t retry_count = 7;
  std::uint8_t rnr_retry = 7;
  // The handshake over the UD queue pair is resent every handshake_retry
  // until connect_timeout, then the requests waiting for it fail.
  std::chrono::milliseconds handshake_retry{100};
  std::chrono::milliseconds connect_timeout{3000};
};

}  // namespace fabric
