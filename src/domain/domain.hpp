#pragma once
// The internal interface every backend implements: one Domain is one NIC (or
// one software-provider instance standing in for a NIC). A Domain is used by
// exactly one thread (its group's worker) after creation.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "fabric/device.hpp"
#include "fabric/memory.hpp"
#include "fabric/status.hpp"

namespace fabric::domain {

// A provider-level address handle of a resolved peer.
using PeerHandle = std::uint64_t;

// Opaque to the Domain: the worker's cookie, echoed back in events.
using Token = std::uint64_t;

class MemoryRegion {
 public:
  virtual ~MemoryRegion() = default;
  // Local descriptor to pass with buffers in this region (may be null).
  [[nodiscard]] virtual void* local_desc() const noexcept = 0;
  [[nodiscard]] virtual RemoteKey remote_key() const noexcept = 0;
};

// What a backend registers. Device memory arrives as its whole allocation
// (reg_mr of many tensors in one allocation costs one registration), with a
// dma-buf of it when the CUDA driver exported one.
struct MemorySpan {
  void* ptr = nullptr;
  std::size_t length = 0;
  Device device = Device::host();
  int dmabuf_fd = -1;  // borrowed; valid during register_memory only
  std::uint64_t dmabuf_offset = 0;

  static MemorySpan host(void* ptr, std::size_t length) { return {ptr, length}; }
};

struct Limits {
  std::uint32_t tx_depth = 0;   // posted sends/writes outstanding at most
  std::uint32_t rx_depth = 0;   // posted receives at most
  std::size_t inject_size = 0;  // informational
  bool needs_local_desc = false;  // buffers must be registered (FI_MR_LOCAL)
  std::string provider;         // the provider actually opened
  std::string device;           // its device: libfabric domain name, verbs device
  bool reads = false;           // post_read works (libfabric: FI_READ and FI_REMOTE_READ)
};

struct WriteDesc {
  const void* local = nullptr;
  std::uint64_t length = 0;
  void* local_desc = nullptr;
  PeerHandle peer = 0;
  std::uint64_t remote_addr = 0;
  std::uint64_t rkey = 0;
  std::optional<std::uint32_t> imm;
  Token token = 0;
};

// An RDMA READ: `length` bytes at the peer's remote_addr (key rkey) into `local`. Its
// completion is a tx_done event like a write's; it carries no immediate.
struct ReadDesc {
  void* local = nullptr;
  std::uint64_t length = 0;
  void* local_desc = nullptr;
  PeerHandle peer = 0;
  std::uint64_t remote_addr = 0;
  std::uint64_t rkey = 0;
  Token token = 0;
};

// A completion-queue event, as a tagged value.
struct Event {
  enum class Kind : std::uint8_t {
    tx_done,      // a posted write or send finished (token, status)
    recv_done,    // a posted receive got a message (token, length, status)
    imm_arrived,  // a remote WRITE with immediate fully landed here (imm)
  };
  Kind kind = Kind::tx_done;
  Token token = 0;
  std::uint32_t imm = 0;
  std::size_t length = 0;
  Status status;
};

class Domain {
 public:
  virtual ~Domain() = default;

  // This Domain's provider address, as peers must see it.
  [[nodiscard]] virtual std::span<const std::byte> address() const noexcept = 0;
  [[nodiscard]] virtual const Limits& limits() const noexcept = 0;

  virtual Result<std::unique_ptr<MemoryRegion>> register_memory(const MemorySpan& span,
                                                                Access access) = 0;
  // Resolves (and caches) a peer's Domain address.
  virtual Result<PeerHandle> resolve_peer(std::span<const std::byte> address) = 0;

  // Errc::again means the provider's queue is full: poll, then retry.
  virtual Status post_write(const WriteDesc& write) = 0;
  // As post_write; Errc::unsupported where limits().reads is false.
  virtual Status post_read(const ReadDesc& /*read*/) {
    return {Errc::unsupported, "this backend cannot READ"};
  }
  virtual Status post_send(PeerHandle peer, const void* buf, std::size_t length, void* desc,
                           Token token) = 0;
  virtual Status post_recv(void* buf, std::size_t length, void* desc, Token token) = 0;

  // Reads up to out.size() events; returns how many were written.
  virtual std::size_t poll(std::span<Event> out) = 0;

  // True when bytes are waiting that the provider moves only while this Domain is polled
  // (manual data progress: tcp;ofi_rxm copies a WRITE's payload off its socket inside poll(),
  // and delivers no event until the last byte is in). The worker does not sleep while any of
  // its Domains says so. Asked only when the worker is about to sleep; costs a syscall or two.
  [[nodiscard]] virtual bool progress_pending() noexcept { return false; }
  // A file descriptor that turns readable when this Domain has bytes for poll() to move, valid
  // to wait on once progress_pending() returned false (libfabric: the CQ's wait fd, armed by
  // fi_trywait); -1 where there is none. The worker sleeps on it, so that such bytes wake it.
  [[nodiscard]] virtual int wait_fd() const noexcept { return -1; }

  // After it returns ok, nothing from that peer lands here (TransferEngine::fence_peer).
  virtual Status fence_peer(std::span<const std::byte> /*address*/) {
    return {Errc::unsupported, "this backend cannot fence a peer"};
  }

  // The last call on a Domain before it is destroyed: closes the endpoint, so that the provider
  // no longer reads or writes any buffer it was given (posted receives, staged sends, the
  // sources and targets of operations still queued). The worker calls it at shutdown before it
  // frees those buffers: tcp;ofi_rxm was seen copying into them while its endpoint closed.
  virtual void close_endpoint() noexcept {}
};

}  // namespace fabric::domain
