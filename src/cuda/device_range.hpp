#pragma once
// Queries about device allocations that GPU memory registration needs: the
// whole allocation around a pointer, and a dma-buf of a range for NICs that
// import GPU memory that way.

#include <cstddef>

#include "cuda/driver.hpp"
#include "common/unique_fd.hpp"

namespace fabric::cuda {

struct DeviceRange {
  CUdeviceptr base = 0;
  std::size_t size = 0;
};

// The allocation containing `ptr`; the caller's context must own it.
Result<DeviceRange> address_range(const Driver& driver, CUdeviceptr ptr);

// A dma-buf fd for [base, base+size); both must be host-page aligned.
// Errc::unsupported on drivers without cuMemGetHandleForAddressRange.
Result<UniqueFd> export_dmabuf(const Driver& driver, CUdeviceptr base, std::size_t size);

}  // namespace fabric::cuda
