#pragma once
// Whether a shm peer is still there. libfabric 1.17's shm completes small
// WRITEs, immediate-only WRITEs and SENDs as soon as it has copied them into
// the peer's mapped region, whether or not a process is left to read them; a
// peer that exited would get "ok" for bytes that went nowhere. The engine
// names every shm endpoint "fl-<pid>-<random>" (fi_provider.cpp; shm makes
// the address "fi_shm://fl-<pid>-<random>:<uid>:<index>"), so a peer's
// address tells its process; the peer is alive while that process runs and
// its endpoint's region file (/dev/shm/fl-...) is still linked (shm unlinks
// it when the endpoint closes, as when the peer's engine stops).

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <sys/types.h>

#include "fabric/status.hpp"

namespace fabric::ofi {

class ShmPeerLiveness {
 public:
  // nullptr for an address this library did not name (nothing to watch).
  static std::unique_ptr<ShmPeerLiveness> watch(std::span<const std::byte> address);
  ~ShmPeerLiveness();
  ShmPeerLiveness(const ShmPeerLiveness&) = delete;
  ShmPeerLiveness& operator=(const ShmPeerLiveness&) = delete;

  // ok, or Errc::provider naming the peer and why it is gone. Looks (a poll
  // of the process's pidfd, an fstat of the region file: ~1-3 us on a busy
  // VM) at most once per kRecheck; a clock read otherwise. A peer that dies
  // within kRecheck of a look may still be posted to in that window, as it
  // may be just before it dies (docs/reliability.md).
  [[nodiscard]] Status check();
  // Whether check() has found the peer gone. Its descriptors are closed then: a process that
  // outlives many peers (restarted ones) must not keep a pidfd and a region file of each, the
  // latter holding the dead peer's shared memory allocated (FiDomain sweeps: fi_domain.cpp).
  [[nodiscard]] bool gone() const noexcept { return !gone_.empty(); }
  // "shm peer <name> is gone: <why>", once gone() (for the errors of stale handles to it).
  [[nodiscard]] std::string describe_gone() const;

  static constexpr std::chrono::microseconds kRecheck{100};

  // "fl-<pid>-..." → pid; 0 when the name is not of that form.
  static pid_t pid_of(const std::string& name);

 private:
  ShmPeerLiveness(std::string name, pid_t pid) : name_(std::move(name)), pid_(pid) {}
  void close_fds() noexcept;

  std::string name_;
  pid_t pid_ = 0;
  int pidfd_ = -1;
  int region_fd_ = -1;
  std::chrono::steady_clock::time_point looked_{};
  std::string gone_;  // why, once known: it never comes back
};

}  // namespace fabric::ofi
