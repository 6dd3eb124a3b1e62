#include "verbs/queue_pair.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "verbs/verbs_error.hpp"

namespace fabric::verbs {

namespace {

ibv_ah_attr address_handle_attr(const LocalPort& local, const VerbsAddress& remote) {
  ibv_ah_attr ah{};
  ah.is_global = 1;
  std::memcpy(ah.grh.dgid.raw, remote.gid.data(), remote.gid.size());
  ah.grh.sgid_index = static_cast<std::uint8_t>(local.gid_index);
  ah.grh.hop_limit = 64;
  ah.dlid = remote.lid;
  ah.port_num = local.port;
  return ah;
}

Status modify(ibv_qp* qp, ibv_qp_attr& attr, int mask, std::string_view state) {
  if (int rc = ibv_modify_qp(qp, &attr, mask); rc != 0) {
    return verbs_error(fmt::format("ibv_modify_qp(QP {:#x} → {})", qp->qp_num, state), rc);
  }
  return Status::success();
}

}  // namespace

Result<RcQp> create_rc_qp(ibv_pd* pd, ibv_cq* cq, ibv_srq* srq, std::uint32_t send_depth,
                          std::uint32_t max_inline) {
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.srq = srq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = send_depth;
  init.cap.max_send_sge = 1;
  init.cap.max_inline_data = max_inline;
  // Each work request says whether it is signalled: WRITE chains signal their last entry only.
  init.sq_sig_all = 0;
  QpPtr qp(ibv_create_qp(pd, &init));
  if (!qp) return verbs_error("ibv_create_qp(RC)", errno);
  // ibv_create_qp writes back the capabilities it granted.
  return RcQp{std::move(qp), max_inline > 0 ? init.cap.max_inline_data : 0};
}

std::uint32_t probe_inline_limit(ibv_pd* pd, ibv_cq* cq, ibv_srq* srq, std::uint32_t wanted) {
  if (wanted == 0) return 0;
  auto probe = create_rc_qp(pd, cq, srq, 1, wanted);
  return probe ? probe->max_inline : 0;
}

Status connect_rc_qp(ibv_qp* qp, const LocalPort& local, const RemoteEnd& remote,
                     std::uint32_t local_psn, const VerbsConfig& config) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = local.port;
  // The queue pair lets peers WRITE and READ; each region's own access flags decide what they
  // may do to it (IBV_ACCESS_REMOTE_READ only for Access::remote_read registrations).
  attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  if (auto st = modify(qp, attr,
                       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
                       "INIT");
      !st.ok()) {
    return st;
  }
  attr = {};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = std::min(local.mtu, static_cast<ibv_mtu>(remote.address->mtu));
  attr.dest_qp_num = remote.qpn;
  attr.rq_psn = remote.psn;
  attr.max_dest_rd_atomic = local.rd_atomic;
  attr.min_rnr_timer = 1;  // 0.01 ms: an imm burst waits for replenished receives briefly
  attr.ah_attr = address_handle_attr(local, *remote.address);
  if (auto st = modify(qp, attr,
                       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                           IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
                       "RTR");
      !st.ok()) {
    return st;
  }
  attr = {};
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = local_psn;
  attr.timeout = config.ack_timeout;
  attr.retry_cnt = config.retry_count;
  attr.rnr_retry = config.rnr_retry;
  attr.max_rd_atomic = local.rd_atomic;
  return modify(qp, attr,
                IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                    IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC,
                "RTS");
}

Status fail_qp(ibv_qp* qp) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  return modify(qp, attr, IBV_QP_STATE, "ERR");
}

Result<QpPtr> create_ud_qp(ibv_pd* pd, ibv_cq* cq, std::uint32_t depth) {
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.qp_type = IBV_QPT_UD;
  init.cap.max_send_wr = depth;
  init.cap.max_recv_wr = depth;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.sq_sig_all = 1;
  QpPtr qp(ibv_create_qp(pd, &init));
  if (!qp) return verbs_error("ibv_create_qp(UD)", errno);
  return qp;
}

Status activate_ud_qp(ibv_qp* qp, const LocalPort& local) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = local.port;
  attr.qkey = kHandshakeQkey;
  if (auto st = modify(qp, attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY,
                       "INIT");
      !st.ok()) {
    return st;
  }
  attr = {};
  attr.qp_state = IBV_QPS_RTR;
  if (auto st = modify(qp, attr, IBV_QP_STATE, "RTR"); !st.ok()) return st;
  attr = {};
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = 0;
  return modify(qp, attr, IBV_QP_STATE | IBV_QP_SQ_PSN, "RTS");
}

Result<AhPtr> create_ah(ibv_pd* pd, const LocalPort& local, const VerbsAddress& remote) {
  ibv_ah_attr attr = address_handle_attr(local, remote);
  AhPtr ah(ibv_create_ah(pd, &attr));
  if (!ah) return verbs_error("ibv_create_ah", errno);
  return ah;
}

}  // namespace fabric::verbs
