#pragma once
// Creating queue pairs and walking them through RESET → INIT → RTR → RTS.

#include <infiniband/verbs.h>

#include <cstdint>

#include "fabric/status.hpp"
#include "fabric/verbs_config.hpp"
#include "verbs/ib_handles.hpp"
#include "verbs/wire_format.hpp"

namespace fabric::verbs {

// Where our side of a queue pair lives.
struct LocalPort {
  std::uint8_t port = 1;
  std::uint32_t gid_index = 0;
  ibv_mtu mtu = IBV_MTU_1024;
  // RDMA READs in flight per queue pair, both as reader (max_rd_atomic) and as responder
  // (max_dest_rd_atomic): one value, so that two engines on one kind of device agree.
  std::uint8_t rd_atomic = 1;
};

// The other end of an RC queue pair.
struct RemoteEnd {
  const VerbsAddress* address = nullptr;
  std::uint32_t qpn = 0;
  std::uint32_t psn = 0;
};

// Fixed for every UD handshake queue pair; not a secret (the nonce in each
// message is what binds it to one Domain).
inline constexpr std::uint32_t kHandshakeQkey = 0x46564831;

// An RC queue pair and the bytes of data its work requests may carry inline (the device may
// grant more than asked for).
struct RcQp {
  QpPtr qp;
  std::uint32_t max_inline = 0;
};
Result<RcQp> create_rc_qp(ibv_pd* pd, ibv_cq* cq, ibv_srq* srq, std::uint32_t send_depth,
                          std::uint32_t max_inline);
// What create_rc_qp grants on this device for `wanted` inline bytes: the device's own value, or
// 0 where it refuses inline data of that size (some refuse any request above their limit
// rather than clamp it).
std::uint32_t probe_inline_limit(ibv_pd* pd, ibv_cq* cq, ibv_srq* srq, std::uint32_t wanted);
// INIT → RTR → RTS in one go: our side is usable once this returns.
Status connect_rc_qp(ibv_qp* qp, const LocalPort& local, const RemoteEnd& remote,
                     std::uint32_t local_psn, const VerbsConfig& config);
// Moves the queue pair to ERR so the device flushes what is posted on it.
Status fail_qp(ibv_qp* qp);

Result<QpPtr> create_ud_qp(ibv_pd* pd, ibv_cq* cq, std::uint32_t depth);
Status activate_ud_qp(ibv_qp* qp, const LocalPort& local);
Result<AhPtr> create_ah(ibv_pd* pd, const LocalPort& local, const VerbsAddress& remote);

}  // namespace fabric::verbs
