#pragma once
// The engine-side record behind an MrHandle.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "domain/domain.hpp"
#include "fabric/device.hpp"
#include "fabric/memory.hpp"

namespace fabric::detail {

struct Registration {
  void* ptr = nullptr;
  std::size_t length = 0;
  Device device;
  Access access = Access::remote_write;
  // The engine that registered it; handles of another engine are rejected.
  const void* engine = nullptr;
  // The group whose Domains hold `regions`; requests from it run on that group's worker.
  std::uint32_t group = 0;
  // Cleared by dereg_mr and stop(); submissions check it.
  std::atomic<bool> alive{true};
  // One per Domain, in Domain order, covering at least [ptr, ptr+length):
  // GPU registrations of one allocation share the regions of the whole
  // allocation. Only the worker touches these after registration (it drops
  // them on dereg/stop; the last holder releases the provider registration).
  std::vector<std::shared_ptr<domain::MemoryRegion>> regions;
  // Accepted requests using this registration as a source: counted by the
  // submitting thread before submit_* returns ok, released by the worker when
  // the provider is done with the request, so that a dereg_mr() right after
  // an accepted submission waits for it.
  std::atomic<std::uint32_t> in_flight{0};
};

}  // namespace fabric::detail
