#include "verbs/handshake_channel.hpp"

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "common/log.hpp"
#include "verbs/verbs_error.hpp"

namespace fabric::verbs {

Result<std::unique_ptr<HandshakeChannel>> HandshakeChannel::open(ibv_context* context,
                                                                  ibv_pd* pd,
                                                                  const LocalPort& local) {
  std::unique_ptr<HandshakeChannel> ch(new HandshakeChannel());
  ch->buffer_.resize(kDepth * (kRecvSlotBytes + Handshake::kBytes));
  ch->cq_.reset(ibv_create_cq(context, 2 * kDepth, nullptr, nullptr, 0));
  if (!ch->cq_) {
    return verbs_error("ibv_create_cq(UD)", errno);
  }
  ch->mr_.reset(ibv_reg_mr(pd, ch->buffer_.data(), ch->buffer_.size(), IBV_ACCESS_LOCAL_WRITE));
  if (!ch->mr_) {
    return verbs_error("ibv_reg_mr(UD buffers)", errno);
  }
  auto qp = create_ud_qp(pd, ch->cq_.get(), kDepth);
  if (!qp) return qp.status();
  ch->qp_ = std::move(qp).value();
  if (auto st = activate_ud_qp(ch->qp_.get(), local); !st.ok()) return st;
  for (std::uint32_t i = 0; i < kDepth; ++i) {
    if (auto st = ch->post_recv(i); !st.ok()) return st;
    ch->free_send_slots_.push_back(i);
  }
  return ch;
}

Status HandshakeChannel::post_recv(std::uint32_t slot) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<std::uintptr_t>(recv_slot(slot));
  sge.length = static_cast<std::uint32_t>(kRecvSlotBytes);
  sge.lkey = mr_->lkey;
  ibv_recv_wr wr{};
  wr.wr_id = slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_recv(qp_.get(), &wr, &bad); rc != 0) {
    return verbs_error("ibv_post_recv(UD)", rc);
  }
  return Status::success();
}

Status HandshakeChannel::send(const Handshake& message, ibv_ah* ah, std::uint32_t remote_qpn) {
  if (free_send_slots_.empty()) {
    return Status(Errc::again, "handshake send buffers busy");
  }
  const std::uint32_t slot = free_send_slots_.back();
  const auto bytes = message.encode();
  std::memcpy(send_slot(slot), bytes.data(), bytes.size());
  ibv_sge sge{};
  sge.addr = reinterpret_cast<std::uintptr_t>(send_slot(slot));
  sge.length = static_cast<std::uint32_t>(bytes.size());
  sge.lkey = mr_->lkey;
  ibv_send_wr wr{};
  wr.wr_id = kDepth + slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.wr.ud.ah = ah;
  wr.wr.ud.remote_qpn = remote_qpn;
  wr.wr.ud.remote_qkey = kHandshakeQkey;
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qp_.get(), &wr, &bad); rc != 0) {
    return verbs_error("ibv_post_send(UD)", rc);
  }
  free_send_slots_.pop_back();
  return Status::success();
}

std::vector<Handshake> HandshakeChannel::poll() {
  std::vector<Handshake> out;
  std::array<ibv_wc, 16> wcs{};
  for (;;) {
    const int n = ibv_poll_cq(cq_.get(), static_cast<int>(wcs.size()), wcs.data());
    if (n <= 0) break;
    for (int i = 0; i < n; ++i) {
      const ibv_wc& wc = wcs[static_cast<std::size_t>(i)];
      if (wc.wr_id >= kDepth) {
        // A datagram is gone either way; a failed one is resent by its retry.
        if (wc.status != IBV_WC_SUCCESS) {
          log::debug("handshake send: {}", ibv_wc_status_str(wc.status));
        }
        free_send_slots_.push_back(static_cast<std::uint32_t>(wc.wr_id - kDepth));
        continue;
      }
      const auto slot = static_cast<std::uint32_t>(wc.wr_id);
      if (wc.status == IBV_WC_SUCCESS && wc.byte_len >= kGrhBytes) {
        std::span<const std::byte> payload(recv_slot(slot) + kGrhBytes, wc.byte_len - kGrhBytes);
        auto message = Handshake::decode(payload);
        if (message) {
          out.push_back(*message);
        } else {
          log::warn("dropped a handshake datagram: {}", message.status().message());
        }
      }
      if (auto st = post_recv(slot); !st.ok()) log::warn("{}", st.message());
    }
  }
  return out;
}

}  // namespace fabric::verbs
