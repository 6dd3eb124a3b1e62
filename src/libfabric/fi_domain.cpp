#include "libfabric/fi_domain.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <sys/socket.h>

#include <array>
#include <cstring>
#include <string_view>

#include "common/log.hpp"
#include "common/random.hpp"
#include "libfabric/shm_leftovers.hpp"

namespace fabric::ofi {

namespace {

Status provider_error(std::string_view call, int rc) {
  return {Errc::provider, fmt::format("{}: {}", call, fi_strerror(-rc))};
}

Status post_status(std::string_view call, ssize_t rc) {
  if (rc == 0) return Status::success();
  if (rc == -FI_EAGAIN) return {Errc::again, {}};
  return provider_error(call, static_cast<int>(rc));
}

class FiMemoryRegion final : public domain::MemoryRegion {
 public:
  FiMemoryRegion(Fid<fid_mr> mr, RemoteKey key) : mr_(std::move(mr)), key_(key) {}
  [[nodiscard]] void* local_desc() const noexcept override { return fi_mr_desc(mr_.get()); }
  [[nodiscard]] RemoteKey remote_key() const noexcept override { return key_; }

 private:
  Fid<fid_mr> mr_;
  RemoteKey key_;
};

// An IP provider must have bound where it was told: never another interface.
Status check_bound_address(const fi_info& info, std::span<const std::byte> name,
                           const std::string& bind_address) {
  if (info.addr_format != FI_SOCKADDR_IN && info.addr_format != FI_SOCKADDR_IN6) {
    return Status::success();
  }
  char text[INET6_ADDRSTRLEN] = {};
  const auto* sa = reinterpret_cast<const sockaddr*>(name.data());
  if (sa->sa_family == AF_INET && name.size() >= sizeof(sockaddr_in)) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, text, sizeof text);
  } else if (sa->sa_family == AF_INET6 && name.size() >= sizeof(sockaddr_in6)) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, text, sizeof text);
  }
  if (bind_address != text) {
    return {Errc::provider, fmt::format("provider {} bound to {}, not the configured {}",
                                        info.fabric_attr->prov_name, text, bind_address)};
  }
  return Status::success();
}

}  // namespace

Result<std::unique_ptr<FiDomain>> FiDomain::open(const ProviderQuery& query) {
  std::unique_ptr<FiDomain> d(new FiDomain());
  if (auto st = d->init(query); !st.ok()) return st;
  return d;
}

FiDomain::~FiDomain() {
  // Endpoint before the objects bound to it; members would close in reverse
  // declaration order anyway, but spell it out for the shm files' sake.
  ep_.reset();
  av_.reset();
  cq_.reset();
  domain_.reset();
  fabric_.reset();
}

void FiDomain::close_endpoint() noexcept {
  // Regions bound to the endpoint (FI_MR_ENDPOINT) must close before it: there the endpoint
  // closes with the Domain, after the worker has closed them.
  if ((mr_mode_ & FI_MR_ENDPOINT) != 0) return;
  ep_.reset();
}

Status FiDomain::open_cq(const fi_info& info) {
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_DATA;
  // The worker polls and never blocks in the CQ (blocking reads hang on shm). tcp's CQ gets a
  // wait fd all the same: it tells progress_pending() that a socket holds bytes.
  const bool tcp = std::string_view(info.fabric_attr->prov_name).starts_with("tcp");
  cq_attr.wait_obj = tcp ? FI_WAIT_FD : FI_WAIT_NONE;
  cq_attr.size = info.tx_attr->size + info.rx_attr->size;
  int rc = fi_cq_open(domain_.get(), &cq_attr, cq_.out(), nullptr);
  if (rc != 0 && tcp) {
    log::warn("fi_cq_open with a wait fd: {}; the worker may sleep while tcp bytes wait",
              fi_strerror(-rc));
    cq_attr.wait_obj = FI_WAIT_NONE;
    rc = fi_cq_open(domain_.get(), &cq_attr, cq_.out(), nullptr);
  }
  if (rc != 0) return provider_error("fi_cq_open", rc);
  if (cq_attr.wait_obj == FI_WAIT_FD) {
    if (int get = fi_control(&cq_->fid, FI_GETWAIT, &progress_fd_); get != 0) {
      log::warn("fi_control(FI_GETWAIT): {}", fi_strerror(-get));
      progress_fd_ = -1;
    }
  }
  return Status::success();
}

bool FiDomain::progress_pending() noexcept {
  if (progress_fd_ < 0) return false;
  fid* cq = &cq_->fid;
  // fi_trywait: -FI_EAGAIN means the provider itself has work (completions, queued data);
  // success re-arms the fd, which then turns readable when a socket gets bytes. Any other
  // error: no answer, and no reason to keep the worker awake.
  const int rc = fi_trywait(fabric_.get(), &cq, 1);
  if (rc == -FI_EAGAIN) return true;
  if (rc != 0) return false;
  pollfd p{progress_fd_, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

Status FiDomain::init(const ProviderQuery& query) {
  auto found = find_provider(query);
  if (!found) return found.status();
  info_ = std::move(found).value();
  fi_info* info = info_.get();
  mr_mode_ = info->domain_attr->mr_mode;
  // Requested keys start at a random value per Domain, not at 1: a peer that restarts and
  // registers in the same order would otherwise hand out its previous incarnation's keys, and
  // a survivor's WRITE or READ still addressed to the old one (tcp: the same IP and a reused
  // port) would land in, or read from, the new one's memory and complete ok.
  key_mask_ = info->domain_attr->mr_key_size >= 8
                  ? ~std::uint64_t{0}
                  : (std::uint64_t{1} << (8 * info->domain_attr->mr_key_size)) - 1;
  next_requested_key_ = random_u64() & key_mask_;

  if (int rc = fi_fabric(info->fabric_attr, fabric_.out(), nullptr)) {
    return provider_error("fi_fabric", rc);
  }
  if (int rc = fi_domain(fabric_.get(), info, domain_.out(), nullptr)) {
    return provider_error("fi_domain", rc);
  }
  if (auto st = open_cq(*info); !st.ok()) return st;
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  if (int rc = fi_av_open(domain_.get(), &av_attr, av_.out(), nullptr)) {
    return provider_error("fi_av_open", rc);
  }
  if (int rc = fi_endpoint(domain_.get(), info, ep_.out(), nullptr)) {
    if (rc == -FI_EADDRNOTAVAIL) return cannot_bind(info->fabric_attr->prov_name, query.bind_address);
    return provider_error("fi_endpoint", rc);
  }
  if (int rc = fi_ep_bind(ep_.get(), &av_->fid, 0)) return provider_error("fi_ep_bind(av)", rc);
  if (int rc = fi_ep_bind(ep_.get(), &cq_->fid, FI_TRANSMIT | FI_RECV)) {
    return provider_error("fi_ep_bind(cq)", rc);
  }
  if (int rc = fi_enable(ep_.get())) {
    if (rc == -FI_EADDRNOTAVAIL) return cannot_bind(info->fabric_attr->prov_name, query.bind_address);
    return provider_error("fi_enable", rc);
  }

  std::array<std::byte, 256> name{};
  std::size_t name_len = name.size();
  if (int rc = fi_getname(&ep_->fid, name.data(), &name_len)) {
    return provider_error("fi_getname", rc);
  }
  address_.assign(name.begin(), name.begin() + static_cast<std::ptrdiff_t>(name_len));
  if (is_ip_provider(info->fabric_attr->prov_name)) {
    if (auto st = check_bound_address(*info, address_, query.bind_address); !st.ok()) return st;
  }

  limits_.tx_depth = static_cast<std::uint32_t>(info->tx_attr->size);
  limits_.rx_depth = static_cast<std::uint32_t>(info->rx_attr->size);
  limits_.inject_size = info->tx_attr->inject_size;
  limits_.needs_local_desc = (mr_mode_ & FI_MR_LOCAL) != 0;
  limits_.provider = info->fabric_attr->prov_name;
  limits_.device = info->domain_attr->name ? info->domain_attr->name : "";
  constexpr std::uint64_t kReadCaps = FI_READ | FI_REMOTE_READ;
  // udp;ofi_rxd 1.17 lists the caps, but its READs of a few MiB stall until request_timeout
  // (ReadTest on udp, 2026-12-03): refused as unsupported rather than offered half working.
  const bool rxd = limits_.provider.find("ofi_rxd") != std::string::npos;
  limits_.reads = (info->caps & kReadCaps) == kReadCaps && !rxd;
  watch_peers_ = limits_.provider == "shm";
  if (watch_peers_) {
    auto held = hold_own_region(address_);
    if (held) {
      own_region_ = std::move(held).value();
    } else {
      log::warn("shm region not held, a sweep after a crash may not know it: {}",
                held.status().to_string());
    }
  }
  log::info("opened libfabric domain: provider={} domain={} mr_mode={:#x} tx={} rx={} inject={}",
            limits_.provider, limits_.device.empty() ? "?" : limits_.device, mr_mode_,
            limits_.tx_depth, limits_.rx_depth, limits_.inject_size);
  return Status::success();
}

Result<std::unique_ptr<domain::MemoryRegion>> FiDomain::register_memory(
    const domain::MemorySpan& span, Access access) {
  void* ptr = span.ptr;
  const std::size_t length = span.length;
  if (!span.device.is_host() && (info_->caps & FI_HMEM) == 0) {
    return Status(Errc::unsupported,
                  fmt::format("provider {} was opened without FI_HMEM: it cannot register {} "
                              "memory (a CUDA-enabled libfabric and provider, e.g. efa, can)",
                              limits_.provider, span.device.to_string()));
  }
  // Local use (a WRITE's or SEND's source, a READ's or receive's destination) is always allowed;
  // what peers may do is `access` alone: FI_REMOTE_READ only when asked for.
  std::uint64_t flags_access = FI_WRITE | FI_READ | FI_SEND | FI_RECV;
  if (has_access(access, Access::remote_write)) flags_access |= FI_REMOTE_WRITE;
  if (has_access(access, Access::remote_read)) flags_access |= FI_REMOTE_READ;
  std::uint64_t requested_key = 0;
  if ((mr_mode_ & FI_MR_PROV_KEY) == 0) {
    do {
      requested_key = next_requested_key_++ & key_mask_;
    } while (requested_key == 0);
  }

  Fid<fid_mr> mr;
  if (span.device.is_host()) {
    if (int rc = fi_mr_reg(domain_.get(), ptr, length, flags_access, 0, requested_key, 0,
                           mr.out(), nullptr)) {
      return provider_error(fmt::format("fi_mr_reg({} bytes)", length), rc);
    }
  } else {
    // libfabric 1.17 has no dma-buf field in fi_mr_attr: the provider imports
    // the CUDA range itself (EFA: through dma-buf or peer memory).
    iovec iov{ptr, length};
    fi_mr_attr attr{};
    attr.mr_iov = &iov;
    attr.iov_count = 1;
    attr.access = flags_access;
    attr.requested_key = requested_key;
    attr.iface = FI_HMEM_CUDA;
    attr.device.cuda = span.device.index;
    if (int rc = fi_mr_regattr(domain_.get(), &attr, 0, mr.out())) {
      if (rc == -FI_ENOSYS || rc == -FI_EOPNOTSUPP) {
        // libfabric without CUDA support (or a provider without it) says so here.
        return Status(Errc::unsupported,
                      fmt::format("provider {} cannot register {} memory: {} (libfabric built "
                                  "without CUDA support?)",
                                  limits_.provider, span.device.to_string(), fi_strerror(-rc)));
      }
      return provider_error(
          fmt::format("fi_mr_regattr({} bytes of {} memory, FI_HMEM_CUDA)", length,
                      span.device.to_string()),
          rc);
    }
    log::info("registered {} bytes of {} memory on {} with FI_HMEM_CUDA", length,
              span.device.to_string(), limits_.provider);
  }
  if ((mr_mode_ & FI_MR_ENDPOINT) != 0) {
    if (int rc = fi_mr_bind(mr.get(), &ep_->fid, 0)) return provider_error("fi_mr_bind", rc);
    if (int rc = fi_mr_enable(mr.get())) return provider_error("fi_mr_enable", rc);
  }
  // Offset-addressed providers take remote addresses relative to the region.
  const std::uint64_t addr_base =
      (mr_mode_ & FI_MR_VIRT_ADDR) != 0 ? reinterpret_cast<std::uint64_t>(ptr) : 0;
  const RemoteKey key{addr_base, fi_mr_key(mr.get())};
  return std::unique_ptr<domain::MemoryRegion>(new FiMemoryRegion(std::move(mr), key));
}

Result<fi_addr_t> FiDomain::insert_address(std::span<const std::byte> address) {
  fi_addr_t fi_addr = FI_ADDR_UNSPEC;
  int n = fi_av_insert(av_.get(), address.data(), 1, &fi_addr, 0, nullptr);
  if (n != 1 && watch_peers_) {
    // shm's vector is full (256): the entries of peers gone since the last sweep make room.
    release_gone_peers();
    n = fi_av_insert(av_.get(), address.data(), 1, &fi_addr, 0, nullptr);
  }
  if (n != 1) {
    return Status(Errc::invalid_argument,
                  fmt::format("fi_av_insert rejected a peer address of {} bytes{} ({} peers held)",
                              address.size(), n < 0 ? fmt::format(": {}", fi_strerror(-n)) : "",
                              av_entries_.in_use()));
  }
  return fi_addr;
}

Result<domain::PeerHandle> FiDomain::resolve_peer(std::span<const std::byte> address) {
  const std::string_view key(reinterpret_cast<const char*>(address.data()), address.size());
  if (const auto known = av_entries_.find(key); known != AvEntries::kNoPeer) return known;
  std::unique_ptr<ShmPeerLiveness> liveness;
  if (watch_peers_) {
    liveness = ShmPeerLiveness::watch(address);
    // Gone already (a restarted peer's old address): no entry to take, and none to release.
    if (liveness && liveness->gone()) {
      return Status(Errc::provider, fmt::format("{}; nothing was sent", liveness->describe_gone()));
    }
  }
  auto fi_addr = insert_address(address);
  if (!fi_addr) return fi_addr.status();
  return av_entries_.adopt(std::string(key), *fi_addr, std::move(liveness));
}

Status FiDomain::fence_peer(std::span<const std::byte> address) {
  // shm moves large payloads with CMA from the writer's own process: nothing here can stop it.
  if (limits_.provider == "shm") {
    return {Errc::unsupported, "shm cannot fence a peer: it writes by CMA from its own process"};
  }
  const std::string_view key(reinterpret_cast<const char*>(address.data()), address.size());
  const domain::PeerHandle known = av_entries_.find(key);
  fi_addr_t fi_addr = AvEntries::index_of(known);
  if (known == AvEntries::kNoPeer) {
    // Never contacted from here, but it may have connected to us: insert to name it, then remove.
    if (fi_av_insert(av_.get(), address.data(), 1, &fi_addr, 0, nullptr) != 1) {
      return {Errc::invalid_argument, "fence_peer: the provider rejected the peer's address"};
    }
  }
  // Connected providers (rxm over tcp/verbs) close the connection with the entry, discarding
  // what of the peer's data has not been read yet.
  if (int rc = fi_av_remove(av_.get(), &fi_addr, 1, 0)) {
    return {Errc::provider, fmt::format("fi_av_remove: {}", fi_strerror(-rc))};
  }
  // Operations queued for it before the fence fail on its handles' generation instead of
  // reaching the provider with a removed address (rxm crashes on those) or, once the provider
  // reuses the entry, another peer.
  if (known != AvEntries::kNoPeer) {
    av_entries_.release(fi_addr, "the peer was fenced (TransferEngine::fence_peer)");
  }
  return Status::success();
}

FiDomain::OpContext* FiDomain::acquire_context(domain::Token token, domain::PeerHandle peer) {
  OpContext* ctx = nullptr;
  if (free_contexts_.empty()) {
    ctx = &contexts_.emplace_back();
  } else {
    ctx = free_contexts_.back();
    free_contexts_.pop_back();
  }
  ctx->token = token;
  ctx->peer = peer;
  return ctx;
}

void FiDomain::release_context(OpContext* ctx) { free_contexts_.push_back(ctx); }

void FiDomain::complete_context(OpContext* ctx) {
  av_entries_.completed(ctx->peer);
  release_context(ctx);
}

Status FiDomain::post_write(const domain::WriteDesc& w) {
  if (auto st = av_entries_.check(w.peer); !st.ok()) return st;
  OpContext* ctx = acquire_context(w.token, w.peer);
  const fi_addr_t to = AvEntries::index_of(w.peer);
  ssize_t rc = 0;
  if (w.imm) {
    rc = fi_writedata(ep_.get(), w.local, w.length, w.local_desc, *w.imm, to, w.remote_addr,
                      w.rkey, ctx);
  } else {
    rc = fi_write(ep_.get(), w.local, w.length, w.local_desc, to, w.remote_addr, w.rkey, ctx);
  }
  if (rc != 0) {
    release_context(ctx);
  } else {
    av_entries_.posted(w.peer);
  }
  return post_status(w.imm ? "fi_writedata" : "fi_write", rc);
}

Status FiDomain::post_read(const domain::ReadDesc& r) {
  if (!limits_.reads) {
    return {Errc::unsupported, fmt::format("provider {} cannot READ", limits_.provider)};
  }
  if (auto st = av_entries_.check(r.peer); !st.ok()) return st;
  OpContext* ctx = acquire_context(r.token, r.peer);
  const ssize_t rc = fi_read(ep_.get(), r.local, r.length, r.local_desc,
                             AvEntries::index_of(r.peer), r.remote_addr, r.rkey, ctx);
  if (rc != 0) {
    release_context(ctx);
  } else {
    av_entries_.posted(r.peer);
  }
  return post_status("fi_read", rc);
}

Status FiDomain::post_send(domain::PeerHandle peer, const void* buf, std::size_t length,
                           void* desc, domain::Token token) {
  if (auto st = av_entries_.check(peer); !st.ok()) return st;
  OpContext* ctx = acquire_context(token, peer);
  ssize_t rc = fi_send(ep_.get(), buf, length, desc, AvEntries::index_of(peer), ctx);
  if (rc != 0) {
    release_context(ctx);
  } else {
    av_entries_.posted(peer);
  }
  return post_status("fi_send", rc);
}

Status FiDomain::post_recv(void* buf, std::size_t length, void* desc, domain::Token token) {
  OpContext* ctx = acquire_context(token, AvEntries::kNoPeer);
  ssize_t rc = fi_recv(ep_.get(), buf, length, desc, FI_ADDR_UNSPEC, ctx);
  if (rc != 0) release_context(ctx);
  return post_status("fi_recv", rc);
}

std::optional<domain::Event> FiDomain::error_event() {
  fi_cq_err_entry err{};
  ssize_t rc = fi_cq_readerr(cq_.get(), &err, 0);
  if (rc < 0) {
    if (rc != -FI_EAGAIN) log::warn("fi_cq_readerr: {}", fi_strerror(static_cast<int>(-rc)));
    return std::nullopt;
  }
  char buf[256] = {};
  const char* text = fi_cq_strerror(cq_.get(), err.prov_errno, err.err_data, buf, sizeof buf);
  Status status(Errc::provider,
                fmt::format("{} (provider: {})", fi_strerror(err.err), text ? text : "no detail"));
  if (err.op_context == nullptr) {
    // Target-side failures of remote operations have no local request to fail.
    log::warn("completion error without a local operation: {}", status.message());
    return std::nullopt;
  }
  auto* ctx = static_cast<OpContext*>(err.op_context);
  domain::Event ev;
  ev.kind = (err.flags & FI_RECV) != 0 ? domain::Event::Kind::recv_done
                                       : domain::Event::Kind::tx_done;
  ev.token = ctx->token;
  ev.status = std::move(status);
  complete_context(ctx);
  return ev;
}

void FiDomain::sweep_gone_peers() {
  // A clock read every 1024 polls, a look at each peer once a second: nothing on the hot path.
  if (++polls_since_sweep_ < 1024) return;
  polls_since_sweep_ = 0;
  const auto now = std::chrono::steady_clock::now();
  if (now - swept_ < std::chrono::seconds(1)) return;
  swept_ = now;
  release_gone_peers();
}

void FiDomain::release_gone_peers() {
  for (auto& gone : av_entries_.gone_and_idle()) {
    if (int rc = fi_av_remove(av_.get(), &gone.index, 1, 0); rc != 0) {
      log::warn("fi_av_remove of a gone peer's entry {}: {} ({})", gone.index, fi_strerror(-rc),
                gone.why);
      continue;
    }
    av_entries_.release(gone.index, gone.why + ", and its address-vector entry was released");
  }
}

std::size_t FiDomain::poll(std::span<domain::Event> out) {
  if (watch_peers_) sweep_gone_peers();
  std::array<fi_cq_data_entry, 32> entries{};
  const std::size_t want = std::min(out.size(), entries.size());
  ssize_t n = fi_cq_read(cq_.get(), entries.data(), want);
  if (n == -FI_EAGAIN) return 0;
  if (n == -FI_EAVAIL) {
    auto ev = error_event();
    if (!ev) return 0;
    out[0] = std::move(*ev);
    return 1;
  }
  if (n < 0) {
    log::warn("fi_cq_read: {}", fi_strerror(static_cast<int>(-n)));
    return 0;
  }
  std::size_t produced = 0;
  for (ssize_t i = 0; i < n; ++i) {
    const fi_cq_data_entry& e = entries[static_cast<std::size_t>(i)];
    // Target-side events: some providers flag FI_REMOTE_WRITE, others only
    // FI_REMOTE_CQ_DATA; some also echo FI_REMOTE_CQ_DATA on the writer's own
    // completion, which carries FI_WRITE and our context.
    constexpr std::uint64_t kLocalOp = FI_RECV | FI_SEND | FI_WRITE | FI_READ;
    // A peer's READ of our memory is never ours to complete (no provider should report it
    // without FI_RMA_EVENT, but one that did would hand us no context).
    const bool remote = (e.flags & (FI_REMOTE_WRITE | FI_REMOTE_READ)) != 0 ||
                        ((e.flags & FI_REMOTE_CQ_DATA) != 0 && (e.flags & kLocalOp) == 0);
    if (remote) {
      // Remote events have no local context; only those with data are immediates.
      if ((e.flags & FI_REMOTE_CQ_DATA) == 0) continue;
      domain::Event& ev = out[produced++];
      ev = domain::Event{};
      ev.kind = domain::Event::Kind::imm_arrived;
      ev.imm = static_cast<std::uint32_t>(e.data);
      continue;
    }
    auto* ctx = static_cast<OpContext*>(e.op_context);
    domain::Event& ev = out[produced++];
    ev = domain::Event{};
    ev.token = ctx->token;
    complete_context(ctx);
    if ((e.flags & FI_RECV) != 0) {
      ev.kind = domain::Event::Kind::recv_done;
      ev.length = e.len;
    } else {
      ev.kind = domain::Event::Kind::tx_done;
    }
  }
  return produced;
}

}  // namespace fabric::ofi
