// A VerbsDomain's receive work requests: message buffers and buffer-less immediate receives,
// each on its own shared receive queue.

#include <cerrno>

#include "verbs/verbs_domain.hpp"
#include "verbs/verbs_error.hpp"
#include "verbs/work_request_ids.hpp"

namespace fabric::verbs {

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

}  // namespace fabric::verbs
