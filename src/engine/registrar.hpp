#pragma once
// A group's memory registrations: host ranges and GPU allocations on every Domain of the group,
// the GPU allocation cache, and deregistration that waits for the requests still using a region.
// Worker-thread only.

#include <atomic>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/domain_group.hpp"
#include "engine/registration.hpp"
#include "fabric/memory.hpp"

namespace fabric::engine {

class Registrar {
 public:
  Registrar(DomainGroup& domains, std::uint32_t group) : domains_(domains), group_(group) {}
  Registrar(const Registrar&) = delete;
  Registrar& operator=(const Registrar&) = delete;

  // `self` and `engine` name the owner in the descriptor and the handle.
  Result<Registered> register_memory(void* ptr, std::size_t length, Device device, Access access,
                                     const NetAddr& self, const void* engine);
  // Revokes at once, or once the last request using it as a source is done.
  void deregister(std::shared_ptr<detail::Registration> reg, std::promise<Status> done);
  // A request that used `reg` as its source is done with it.
  void release_use(detail::Registration& reg);
  // stop(): every registration is closed and every waiting dereg_mr answered.
  void close_all();

  // Live registrations and their bytes, for metrics() on any thread (the worker keeps them).
  [[nodiscard]] std::uint64_t live() const noexcept { return live_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t live_bytes() const noexcept {
    return live_bytes_.load(std::memory_order_relaxed);
  }

 private:
  void close(detail::Registration& reg);
  // The Domains' regions for device memory at ptr, registering its whole allocation unless it
  // already is; with the offset of ptr in them.
  Result<std::pair<std::vector<std::shared_ptr<domain::MemoryRegion>>, std::uint64_t>>
  device_regions(void* ptr, std::size_t length, Device device, Access access);

  DomainGroup& domains_;
  void publish_gauges() noexcept;

  const std::uint32_t group_;
  std::atomic<std::uint64_t> live_{0};
  std::atomic<std::uint64_t> live_bytes_{0};
  std::vector<std::shared_ptr<detail::Registration>> registrations_;
  std::vector<std::pair<std::shared_ptr<detail::Registration>, std::promise<Status>>> deferred_;
  // GPU allocations registered so far, by (device, base, size, access): later tensors of the
  // same allocation reuse these regions while any is alive.
  std::map<std::tuple<int, std::uintptr_t, std::size_t, std::uint32_t>,
           std::vector<std::weak_ptr<domain::MemoryRegion>>>
      device_regions_;
};

}  // namespace fabric::engine
