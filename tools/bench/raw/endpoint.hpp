#pragma once
// The raw baseline: one fabric/domain/CQ/AV/RDM endpoint opened straight on
// libfabric with the same capabilities the engine asks for, so the ratio
// engine/raw isolates the engine's own cost.

#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "raw/fid.hpp"

namespace bench::raw {

// What a peer needs to write into one of our regions.
struct RemoteRegion {
  std::uint64_t addr = 0;  // remote address of offset 0 (0 on offset-addressed providers)
  std::uint64_t key = 0;
};

struct Region {
  Owned<fid_mr> mr;
  void* desc = nullptr;
  RemoteRegion remote;
};

class Endpoint {
 public:
  // `provider` is a libfabric provider string ("shm", "tcp;ofi_rxm").
  // delivery_complete mirrors the engine's per-provider default; IP
  // providers bind to `bind_address`, as the engine does.
  Endpoint(const std::string& provider, bool delivery_complete, const std::string& bind_address);

  std::vector<std::uint8_t> name() const;
  fi_addr_t insert_peer(const std::vector<std::uint8_t>& name);
  Region register_region(void* ptr, std::size_t len);

  // -FI_EAGAIN means "poll, then retry"; other negatives throw.
  bool write(const void* buf, std::size_t len, void* desc, std::uint64_t data, fi_addr_t peer,
             std::uint64_t raddr, std::uint64_t key, void* ctx);
  // An RDMA READ of the peer's [raddr, +len) into buf; as write() otherwise.
  bool read(void* buf, std::size_t len, void* desc, fi_addr_t peer, std::uint64_t raddr,
            std::uint64_t key, void* ctx);
  // Reads up to `max` entries; throws on a CQ error entry.
  std::size_t poll(fi_cq_data_entry* out, std::size_t max);

  std::size_t tx_depth() const noexcept { return tx_depth_; }
  const std::string& provider_name() const noexcept { return prov_name_; }

 private:
  InfoOwner info_;
  Owned<fid_fabric> fabric_;
  Owned<fid_domain> domain_;
  Owned<fid_cq> cq_;
  Owned<fid_av> av_;
  Owned<fid_ep> ep_;
  std::uint64_t mr_mode_ = 0;
  std::uint64_t next_key_ = 1;
  std::size_t tx_depth_ = 0;
  std::string prov_name_;
};

// A context slot per outstanding op, as FI_CONTEXT/FI_CONTEXT2 require.
struct OpSlot {
  fi_context2 ctx;
  std::uint32_t tag = 0;  // what the op belongs to (a batch, a request)
  std::uint64_t t_post_ns = 0;
};

}  // namespace bench::raw
