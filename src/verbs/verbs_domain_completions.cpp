// A VerbsDomain's completions into Events; a failed send, WRITE or READ breaks its connection.

#include <arpa/inet.h>
#include <fmt/format.h>

#include <string>
#include <utility>

#include "common/log.hpp"
#include "verbs/verbs_domain.hpp"
#include "verbs/work_request_ids.hpp"

namespace fabric::verbs {

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
  // An unsignalled WRITE completes on its own only in error; the entry ending its chain frees it.
  if (slot.unsignalled) {
    if (!slot.reported) {
      slot.reported = true;
      Lane& lane = slot.connection->write;
      --lane.outstanding;
      emit({domain::Event::Kind::tx_done, slot.token, 0, 0, failure_of(wc, slot)});
    }
    return;
  }
  Connection& conn = *slot.connection;
  Lane& lane = slot.on_msg_lane ? conn.msg : conn.write;
  // Completions of one queue pair come in posting order: the WRITEs this entry covers that did
  // not complete with an error of their own landed before it.
  for (std::size_t i = 0; i < slot.covers; ++i) {
    TxSlot& covered = tx_slots_[slot.covered[i]];
    if (!covered.reported) {
      --lane.outstanding;
      emit({domain::Event::Kind::tx_done, covered.token, 0, 0, Status::success()});
    }
    covered = {};
    free_tx_.push_back(slot.covered[i]);
  }
  --lane.outstanding;
  Status status;
  if (wc.status != IBV_WC_SUCCESS) status = failure_of(wc, slot);
  emit({domain::Event::Kind::tx_done, slot.token, 0, 0, std::move(status)});
  slot = {};
  free_tx_.push_back(wc.wr_id);
}

// A failed send, WRITE or READ: the status its request gets, and its connection breaks.
Status VerbsDomain::failure_of(const ibv_wc& wc, const TxSlot& slot) {
  Connection& conn = *slot.connection;
  std::string text = fmt::format("verbs {}: {} (vendor error {:#x}) with {}",
                                 slot.on_msg_lane ? "SEND" : slot.read ? "READ" : "WRITE",
                                 ibv_wc_status_str(wc.status), wc.vendor_err,
                                 peer_name(*conn.peer));
  if (wc.status == IBV_WC_WR_FLUSH_ERR && !conn.failure.empty()) {
    text += fmt::format(" after: {}", conn.failure);
  }
  break_connection(conn, text);
  return Status(Errc::provider, std::move(text));
}

}  // namespace fabric::verbs
