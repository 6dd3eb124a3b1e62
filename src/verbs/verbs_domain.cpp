// Opening a VerbsDomain (the port, its queues, its address) and the poll that drives it.

#include "verbs/verbs_domain.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <tuple>
#include <unistd.h>
#include <utility>

#include "common/log.hpp"
#include "verbs/verbs_error.hpp"

namespace fabric::verbs {

namespace {

// Seeded per Domain, not per thread: a forked child must not repeat its
// parent's nonces, PSNs and connection ids.
std::mt19937_64 seeded_rng(const void* self) {
  std::random_device device;
  std::seed_seq seed{device(), device(), static_cast<unsigned>(::getpid()),
                     static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(self)),
                     static_cast<unsigned>(
                         std::chrono::steady_clock::now().time_since_epoch().count())};
  return std::mt19937_64(seed);
}

}  // namespace

Result<std::unique_ptr<VerbsDomain>> VerbsDomain::open(const VerbsConfig& config,
                                                       std::size_t domain_index) {
  std::unique_ptr<VerbsDomain> d(new VerbsDomain());
  if (auto st = d->init(config, domain_index); !st.ok()) return st;
  return d;
}

VerbsDomain::~VerbsDomain() = default;

Status VerbsDomain::init(const VerbsConfig& config, std::size_t domain_index) {
  config_ = config;
  rng_ = seeded_rng(this);
  // Fault injection for tests: lose the first N handshakes that arrive, as a
  // lossy fabric would, so the retry path runs for real.
  if (const char* drop = std::getenv("FABRIC_VERBS_TEST_DROP_HANDSHAKES")) {
    drop_handshakes_ = static_cast<std::uint32_t>(std::strtoul(drop, nullptr, 10));
  }
  if (config.send_queue_depth == 0 || config.imm_recv_depth == 0 || config.recv_depth == 0 ||
      config.tx_depth == 0) {
    return {Errc::invalid_argument, "verbs: queue depths must be positive"};
  }
  auto port = open_port(config, domain_index);
  if (!port) return port.status();
  port_ = std::move(port).value();
  if (config.max_mtu) {
    ibv_mtu cap = IBV_MTU_256;
    switch (*config.max_mtu) {
      case 256: cap = IBV_MTU_256; break;
      case 512: cap = IBV_MTU_512; break;
      case 1024: cap = IBV_MTU_1024; break;
      case 2048: cap = IBV_MTU_2048; break;
      case 4096: cap = IBV_MTU_4096; break;
      default:
        return {Errc::invalid_argument,
                fmt::format("verbs: max_mtu {} is not 256, 512, 1024, 2048 or 4096",
                            *config.max_mtu)};
    }
    port_.mtu = std::min(port_.mtu, cap);
  }
  ibv_context* ctx = port_.context.get();
  const ibv_device_attr& dev = port_.device_attr;
  // Up to 16 READs in flight per queue pair (mlx5's limit), fewer where the device says so.
  const int rd_atomic = std::clamp(std::min(dev.max_qp_rd_atom, dev.max_qp_init_rd_atom), 1, 16);
  local_ = {port_.port, port_.gid_index, port_.mtu, static_cast<std::uint8_t>(rd_atomic)};

  const auto max_wr = static_cast<std::uint32_t>(dev.max_qp_wr);
  const auto max_srq_wr = static_cast<std::uint32_t>(std::max(dev.max_srq_wr, 1));
  config_.send_queue_depth = std::min(config_.send_queue_depth, max_wr);
  config_.imm_recv_depth = std::min(config_.imm_recv_depth, max_srq_wr);
  config_.recv_depth = std::min(config_.recv_depth, max_srq_wr);
  // Every send, write and receive is signalled: the CQ holds them all.
  const auto max_cqe = static_cast<std::uint32_t>(dev.max_cqe);
  const std::uint32_t rx = config_.imm_recv_depth + config_.recv_depth;
  if (rx + 64 >= max_cqe) {
    return {Errc::invalid_argument,
            fmt::format("verbs: receive depths {} exceed the device's CQ size {}", rx, max_cqe)};
  }
  config_.tx_depth = std::min(config_.tx_depth, max_cqe - rx - 64);

  pd_.reset(ibv_alloc_pd(ctx));
  if (!pd_) return verbs_error("ibv_alloc_pd", errno);
  cq_.reset(ibv_create_cq(ctx, static_cast<int>(config_.tx_depth + rx + 64), nullptr, nullptr, 0));
  if (!cq_) return verbs_error("ibv_create_cq", errno);
  for (auto [srq, depth, name] : {std::tuple{&msg_srq_, config_.recv_depth, "messages"},
                                  std::tuple{&imm_srq_, config_.imm_recv_depth, "immediates"}}) {
    ibv_srq_init_attr attr{};
    attr.attr.max_wr = depth;
    attr.attr.max_sge = 1;
    srq->reset(ibv_create_srq(pd_.get(), &attr));
    if (!*srq) return verbs_error(fmt::format("ibv_create_srq({})", name), errno);
  }
  for (std::uint32_t i = 0; i < config_.imm_recv_depth; ++i) {
    if (auto st = post_imm_recv(i); !st.ok()) return st;
  }
  // Asked once here, so that every queue pair asks for what this device grants.
  const std::uint32_t wanted_inline = config_.max_inline_data;
  config_.max_inline_data =
      probe_inline_limit(pd_.get(), cq_.get(), imm_srq_.get(), wanted_inline);
  if (config_.max_inline_data < wanted_inline) {
    log::info("verbs: {} takes {} bytes inline of the {} asked for", port_.info.device,
              config_.max_inline_data, wanted_inline);
  }
  auto channel = HandshakeChannel::open(ctx, pd_.get(), local_);
  if (!channel) return channel.status();
  handshake_ = std::move(channel).value();

  std::memcpy(self_.gid.data(), port_.gid.raw, self_.gid.size());
  self_.lid = port_.info.lid;
  self_.mtu = static_cast<std::uint8_t>(port_.mtu);
  self_.ud_qpn = handshake_->qpn();
  self_.nonce = rng_();
  address_ = self_.encode();
  next_psn_ = static_cast<std::uint32_t>(rng_()) & 0xffffff;

  limits_.tx_depth = config_.tx_depth;
  limits_.rx_depth = config_.recv_depth;
  limits_.inject_size = config_.max_inline_data;
  limits_.needs_local_desc = true;
  limits_.provider = "verbs";
  limits_.reads = true;
  limits_.device = port_.info.device;
  return Status::success();
}

std::string VerbsDomain::peer_name(const Peer& peer) const {
  ibv_gid gid{};
  std::memcpy(gid.raw, peer.address.gid.data(), sizeof gid.raw);
  return fmt::format("peer {} UD QP {:#x}", gid_text(gid), peer.address.ud_qpn);
}

std::size_t VerbsDomain::poll(std::span<domain::Event> out) {
  ring_all();
  if (events_.size() < out.size()) {
    progress_connections(Clock::now());
    drain_queues();
    ring_all();
    std::array<ibv_wc, 32> wcs{};
    const int want = static_cast<int>(std::min(wcs.size(), out.size() - events_.size()));
    const int n = ibv_poll_cq(cq_.get(), want, wcs.data());
    for (int i = 0; i < n; ++i) on_completion(wcs[static_cast<std::size_t>(i)]);
    if (n < 0) log::warn("ibv_poll_cq failed");
  }
  // Broken outgoing connections leave their peer; requests still queued for
  // it reconnect at once (and fail by connect_timeout if the peer is gone).
  for (Peer* peer : std::exchange(broken_peers_, {})) {
    if (!peer->outgoing || peer->outgoing->state != ConnectionState::broken) continue;
    retire(std::move(peer->outgoing));
    if (!peer->queued.empty()) {
      if (auto st = start_connect(*peer); !st.ok()) fail_queued(*peer, st);
    }
  }
  std::erase_if(retired_, [](const auto& conn) { return conn->outstanding() == 0; });

  std::size_t produced = 0;
  while (produced < out.size() && !events_.empty()) {
    out[produced++] = std::move(events_.front());
    events_.pop_front();
  }
  return produced;
}

}  // namespace fabric::verbs
