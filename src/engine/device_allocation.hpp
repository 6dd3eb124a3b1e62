#pragma once
// GPU registrations cover the whole device allocation around the tensor:
// many tensors of one allocation (a KV-cache arena, a weight buffer) then cost
// one registration per Domain instead of one each.

#include <cstddef>
#include <cstdint>

#include "common/unique_fd.hpp"
#include "fabric/device.hpp"
#include "fabric/status.hpp"

namespace fabric::engine {

struct DeviceAllocation {
  std::uintptr_t base = 0;
  std::size_t size = 0;
  UniqueFd dmabuf;  // invalid where the driver exports none
};

// The allocation holding [ptr, ptr + length) on `device`, with a dma-buf of
// it when the driver can export one. Errc::unsupported without a CUDA driver
// or GPU; Errc::invalid_argument when the range is not device memory or runs
// past the end of its allocation.
Result<DeviceAllocation> find_device_allocation(void* ptr, std::size_t length, Device device);

}  // namespace fabric::engine
