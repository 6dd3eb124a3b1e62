#include "raw/endpoint.hpp"

#include "libfabric/fi_hints.hpp"

#include <fmt/format.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace bench::raw {

namespace {

[[noreturn]] void fail(const char* call, long rc) {
  throw std::runtime_error(fmt::format("raw {}: {}", call, fi_strerror(static_cast<int>(-rc))));
}

void check(const char* call, long rc) {
  if (rc != 0) fail(call, rc);
}

bool ip_provider(const std::string& p) {
  return p.starts_with("tcp") || p.starts_with("udp") || p.starts_with("sockets") ||
         p.starts_with("verbs");
}

}  // namespace

Endpoint::Endpoint(const std::string& provider, bool delivery_complete,
                   const std::string& bind_address) {
  // The engine's own hints (src/libfabric/fi_hints.hpp): the baseline runs
  // under the same terms, not a copy that could drift.
  const fabric::ofi::InfoPtr hints =
      fabric::ofi::engine_hints(provider, delivery_complete, false, /*reads=*/true);

  // IP providers are asked for the bind address as the source.
  const bool ip = ip_provider(provider);
  fi_info* found = nullptr;
  check("fi_getinfo", fi_getinfo(FI_VERSION(1, 17), ip ? bind_address.c_str() : nullptr, nullptr,
                                 ip ? FI_SOURCE : 0, hints.get(), &found));
  InfoOwner all(found);
  info_.reset(fi_dupinfo(found));
  fi_info* info = info_.get();
  if (info->domain_attr->cq_data_size < 4) {
    throw std::runtime_error("raw: provider carries fewer than 4 bytes of CQ data");
  }
  mr_mode_ = info->domain_attr->mr_mode;
  tx_depth_ = info->tx_attr->size;
  prov_name_ = info->fabric_attr->prov_name;

  check("fi_fabric", fi_fabric(info->fabric_attr, fabric_.out(), nullptr));
  check("fi_domain", fi_domain(fabric_.get(), info, domain_.out(), nullptr));
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_DATA;
  cq_attr.wait_obj = FI_WAIT_NONE;
  cq_attr.size = info->tx_attr->size + info->rx_attr->size;
  check("fi_cq_open", fi_cq_open(domain_.get(), &cq_attr, cq_.out(), nullptr));
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  check("fi_av_open", fi_av_open(domain_.get(), &av_attr, av_.out(), nullptr));
  check("fi_endpoint", fi_endpoint(domain_.get(), info, ep_.out(), nullptr));
  check("fi_ep_bind(av)", fi_ep_bind(ep_.get(), av_.fid(), 0));
  check("fi_ep_bind(cq)", fi_ep_bind(ep_.get(), cq_.fid(), FI_TRANSMIT | FI_RECV));
  check("fi_enable", fi_enable(ep_.get()));
}

std::vector<std::uint8_t> Endpoint::name() const {
  std::vector<std::uint8_t> out(256);
  std::size_t len = out.size();
  check("fi_getname", fi_getname(ep_.fid(), out.data(), &len));
  out.resize(len);
  return out;
}

fi_addr_t Endpoint::insert_peer(const std::vector<std::uint8_t>& name) {
  fi_addr_t addr = FI_ADDR_UNSPEC;
  if (fi_av_insert(av_.get(), name.data(), 1, &addr, 0, nullptr) != 1) {
    throw std::runtime_error("raw fi_av_insert rejected the peer address");
  }
  return addr;
}

Region Endpoint::register_region(void* ptr, std::size_t len) {
  Region r;
  const std::uint64_t key = (mr_mode_ & FI_MR_PROV_KEY) != 0 ? 0 : next_key_++;
  // Readable by the peer: the READ rows read the target's buffer, as the engine's does.
  check("fi_mr_reg", fi_mr_reg(domain_.get(), ptr, len, FI_WRITE | FI_REMOTE_WRITE | FI_READ |
                                                          FI_REMOTE_READ | FI_SEND | FI_RECV,
                               0, key, 0, r.mr.out(), nullptr));
  if ((mr_mode_ & FI_MR_ENDPOINT) != 0) {
    check("fi_mr_bind", fi_mr_bind(r.mr.get(), ep_.fid(), 0));
    check("fi_mr_enable", fi_mr_enable(r.mr.get()));
  }
  r.desc = fi_mr_desc(r.mr.get());
  r.remote.addr = (mr_mode_ & FI_MR_VIRT_ADDR) != 0 ? reinterpret_cast<std::uint64_t>(ptr) : 0;
  r.remote.key = fi_mr_key(r.mr.get());
  return r;
}

bool Endpoint::write(const void* buf, std::size_t len, void* desc, std::uint64_t data,
                     fi_addr_t peer, std::uint64_t raddr, std::uint64_t key, void* ctx) {
  const ssize_t rc = fi_writedata(ep_.get(), buf, len, desc, data, peer, raddr, key, ctx);
  if (rc == 0) return true;
  if (rc == -FI_EAGAIN) return false;
  fail("fi_writedata", rc);
}

bool Endpoint::read(void* buf, std::size_t len, void* desc, fi_addr_t peer, std::uint64_t raddr,
                    std::uint64_t key, void* ctx) {
  const ssize_t rc = fi_read(ep_.get(), buf, len, desc, peer, raddr, key, ctx);
  if (rc == 0) return true;
  if (rc == -FI_EAGAIN) return false;
  fail("fi_read", rc);
}

std::size_t Endpoint::poll(fi_cq_data_entry* out, std::size_t max) {
  const ssize_t n = fi_cq_read(cq_.get(), out, max);
  if (n > 0) return static_cast<std::size_t>(n);
  if (n == -FI_EAGAIN) return 0;
  if (n == -FI_EAVAIL) {
    fi_cq_err_entry err{};
    (void)fi_cq_readerr(cq_.get(), &err, 0);
    char buf[256] = {};
    const char* text = fi_cq_strerror(cq_.get(), err.prov_errno, err.err_data, buf, sizeof buf);
    throw std::runtime_error(fmt::format("raw completion error: {} ({})", fi_strerror(err.err),
                                         text != nullptr ? text : "no detail"));
  }
  fail("fi_cq_read", n);
}

}  // namespace bench::raw
