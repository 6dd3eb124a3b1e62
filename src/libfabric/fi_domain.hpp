#pragma once
// A Domain on one libfabric fabric domain + RDM endpoint.

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <chrono>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "common/unique_fd.hpp"
#include "domain/domain.hpp"
#include "libfabric/av_entries.hpp"
#include "libfabric/fi_handles.hpp"
#include "libfabric/fi_provider.hpp"
#include "libfabric/shm_liveness.hpp"

namespace fabric::ofi {

class FiDomain final : public domain::Domain {
 public:
  static Result<std::unique_ptr<FiDomain>> open(const ProviderQuery& query);
  ~FiDomain() override;

  [[nodiscard]] std::span<const std::byte> address() const noexcept override { return address_; }
  [[nodiscard]] const domain::Limits& limits() const noexcept override { return limits_; }

  Result<std::unique_ptr<domain::MemoryRegion>> register_memory(const domain::MemorySpan& span,
                                                                Access access) override;
  Result<domain::PeerHandle> resolve_peer(std::span<const std::byte> address) override;
  Status post_write(const domain::WriteDesc& write) override;
  Status post_read(const domain::ReadDesc& read) override;
  Status post_send(domain::PeerHandle peer, const void* buf, std::size_t length, void* desc,
                   domain::Token token) override;
  Status post_recv(void* buf, std::size_t length, void* desc, domain::Token token) override;
  std::size_t poll(std::span<domain::Event> out) override;
  bool progress_pending() noexcept override;
  int wait_fd() const noexcept override { return progress_fd_; }
  Status fence_peer(std::span<const std::byte> address) override;
  void close_endpoint() noexcept override;

 private:
  // Providers in FI_CONTEXT mode own the first bytes of each operation context.
  struct OpContext {
    fi_context2 provider_scratch;
    domain::Token token;
    domain::PeerHandle peer;  // AvEntries::kNoPeer for a receive
  };

  FiDomain() = default;
  Status init(const ProviderQuery& query);
  Status open_cq(const fi_info& info);
  OpContext* acquire_context(domain::Token token, domain::PeerHandle peer);
  void release_context(OpContext* ctx);
  // The provider's completion (or error) of ctx's operation: its peer is owed one less.
  void complete_context(OpContext* ctx);
  std::optional<domain::Event> error_event();
  // shm only: about once a second, looks at every watched peer, so that the entry of one that
  // died is released even when nothing is posted to it any more.
  void sweep_gone_peers();
  // Removes the address-vector entry of every peer found gone with nothing posted to it: shm
  // holds 256 entries, and keeps each one's region mapped (docs/reliability.md, finding 9).
  void release_gone_peers();
  Result<fi_addr_t> insert_address(std::span<const std::byte> address);

  InfoPtr info_;
  Fid<fid_fabric> fabric_;
  Fid<fid_domain> domain_;
  Fid<fid_cq> cq_;
  // tcp only: the CQ's wait fd (owned by the CQ), readable while its sockets hold bytes that
  // only polling moves; -1 where the CQ has no wait object.
  int progress_fd_ = -1;
  Fid<fid_av> av_;
  Fid<fid_ep> ep_;
  std::vector<std::byte> address_;
  domain::Limits limits_;
  std::uint64_t mr_mode_ = 0;
  std::uint64_t next_requested_key_ = 1;  // random from init(), see there
  std::uint64_t key_mask_ = ~std::uint64_t{0};  // domain_attr->mr_key_size bytes
  // The peers in av_, their handles' generations and what is posted to each.
  AvEntries av_entries_;
  bool watch_peers_ = false;  // shm: whether each peer's process and endpoint are watched
  std::uint32_t polls_since_sweep_ = 0;
  std::chrono::steady_clock::time_point swept_{};
  // shm: our own region file, share-locked while we live so no sweep removes it
  // (shm_leftovers.hpp).
  UniqueFd own_region_;
  std::deque<OpContext> contexts_;  // deque: stable addresses as it grows
  std::vector<OpContext*> free_contexts_;
};

}  // namespace fabric::ofi
